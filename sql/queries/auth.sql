-- name: user_for_token
-- One indexed lookup (user_tokens_token_digest_key). With with_doc it also renders the
-- caller's user JSON, so GET /api/v1/profile needs no second round trip; without, just
-- the roles the access rules need, which costs the database a third as much.
-- enrollment_required: an account of the user requires MFA and it is off (SPEC 12).
-- A session found idle past SESSION_IDLE_TIMEOUT_MINUTES is recorded as expired in the
-- same statement (SPEC 3.4): raising or removing the timeout later brings it not back.
-- It writes only then; the SELECT's snapshot does not see the write, and needs not.
WITH idle AS (
    UPDATE user_tokens
       SET expires_at = now()
     WHERE token_digest = %(digest)s
       AND expires_at > now()
       AND last_used_at <= now() - make_interval(secs => %(idle_seconds)s)
    RETURNING id
)
SELECT u.id, u.email, t.id AS token_id, t.client, t.expires_at, t.last_used_at, t.used, now() AS now,
       u.mfa_enabled_at IS NOT NULL AS mfa_enabled, mfa_enrollment_required(u) AS enrollment_required,
       CASE WHEN %(with_doc)s THEN user_json(u, %(avatar_url_prefix)s)::text END AS doc,
       CASE WHEN NOT %(with_doc)s THEN (SELECT json_object_agg(au.account_id, au.role)
                                         FROM account_users au
                                        WHERE au.user_id = u.id)::text END AS roles
  FROM user_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = %(digest)s
   AND t.expires_at > now()
   -- SESSION_IDLE_TIMEOUT_MINUTES (a century when off): idle expiry costs no round trip.
   AND t.last_used_at > now() - make_interval(secs => %(idle_seconds)s);

-- name: user_for_access_token
-- An integration credential, in one statement: the profile's access_token (by value,
-- users_access_token_key) or a personal access token (SPEC 17: by digest,
-- personal_access_tokens_token_digest_key; live only). One of access_token and digest is
-- null. The roles (or the user JSON) come from the same membership look-up a session's
-- do, so an account the user no longer reaches is one the token no longer reaches; the
-- token's scopes and account_ids narrow that (middleware/auth.py). A personal token's
-- last use is written at most every 5 minutes, in this statement; legacy_refused lists
-- the accounts whose administrators retired the profile's access_token
-- (restrict_legacy_access_token).
WITH personal AS (
    SELECT p.id, p.user_id, p.scopes, p.account_ids, p.last_used_at
      FROM personal_access_tokens p
     WHERE p.token_digest = %(digest)s
       AND p.expires_at > now()
), touched AS (
    UPDATE personal_access_tokens p
       SET last_used_at = now(), last_used_ip = %(ip_address)s
      FROM personal
     WHERE p.id = personal.id
       AND (personal.last_used_at IS NULL OR personal.last_used_at <= now() - interval '5 minutes')
)
SELECT u.id, u.email,
       u.mfa_enabled_at IS NOT NULL AS mfa_enabled, mfa_enrollment_required(u) AS enrollment_required,
       CASE WHEN %(with_doc)s THEN user_json(u, %(avatar_url_prefix)s)::text END AS doc,
       CASE WHEN NOT %(with_doc)s THEN (SELECT json_object_agg(au.account_id, au.role)
                                         FROM account_users au
                                        WHERE au.user_id = u.id)::text END AS roles,
       personal.id AS personal_token_id, personal.scopes, personal.account_ids,
       CASE WHEN personal.id IS NULL THEN ARRAY(SELECT au.account_id
                                                 FROM account_users au
                                                 JOIN accounts a ON a.id = au.account_id
                                                WHERE au.user_id = u.id
                                                  AND a.restrict_legacy_access_token) END AS legacy_refused
  FROM users u
  LEFT JOIN personal ON personal.user_id = u.id
 WHERE u.id = COALESCE((SELECT user_id FROM personal),
                       (SELECT v.id FROM users v WHERE v.access_token = %(access_token)s));

-- name: touch_token
-- The session's last activity, written at most every 5 minutes per token (middleware/auth.py),
-- so reads stay reads; and, once, that it has been used since its sign-in.
UPDATE user_tokens
   SET last_used_at = CASE WHEN %(refresh)s THEN now() ELSE last_used_at END,
       used = true
 WHERE id = %(token_id)s;

-- name: user_for_setup_token
-- The mfa_token of an account's enrolment requirement (SPEC 12): it reaches only the
-- /api/v1/profile/mfa endpoints, as that user, until MFA is on.
SELECT u.id, u.email, NULL::text AS doc, '{}' AS roles, false AS mfa_enabled, false AS enrollment_required
  FROM one_time_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = %(digest)s
   AND t.purpose = 'mfa_setup'
   AND t.expires_at > now()
   AND u.mfa_enabled_at IS NULL;
