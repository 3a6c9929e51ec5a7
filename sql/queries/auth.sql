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
SELECT u.id, u.email,
       u.mfa_enabled_at IS NOT NULL AS mfa_enabled, mfa_enrollment_required(u) AS enrollment_required,
       CASE WHEN %(with_doc)s THEN user_json(u, %(avatar_url_prefix)s)::text END AS doc,
       CASE WHEN NOT %(with_doc)s THEN (SELECT json_object_agg(au.account_id, au.role)
                                         FROM account_users au
                                        WHERE au.user_id = u.id)::text END AS roles
  FROM users u
 WHERE u.access_token = %(access_token)s;

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
