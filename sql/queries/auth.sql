-- name: user_for_token
-- One indexed lookup (user_tokens_token_digest_key) and the user's stored document
-- (users.doc, kept up to date on write: migration 0014), which holds what the access
-- rules need (roles, MFA flags) and, finished by userdoc.py, the user JSON: no join or
-- function runs per read. A session idle past SESSION_IDLE_TIMEOUT_MINUTES is found
-- here too and recorded as expired by expire_idle (middleware/auth.py), so the common
-- case stays a read.
-- Run through db.Lookup (libpq directly, $1 placeholders): the columns arrive as text,
-- times as seconds since the epoch.
SELECT t.id, t.client, extract(epoch FROM t.expires_at),
       extract(epoch FROM now() - t.last_used_at), t.used, extract(epoch FROM now()),
       u.doc
  FROM user_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = $1
   AND t.expires_at > now();

-- name: expire_idle
-- A session found idle past SESSION_IDLE_TIMEOUT_MINUTES is recorded as expired (SPEC
-- 3.4): raising or removing the timeout later brings it not back. It writes only if the
-- session is still idle then (a request that stamped it meanwhile came first).
UPDATE user_tokens
   SET expires_at = now()
 WHERE id = %(token_id)s
   AND expires_at > now()
   AND last_used_at <= now() - make_interval(secs => %(idle_seconds)s);

-- name: user_for_access_token
-- An integration credential, in one statement: the profile's access_token ($1, by value,
-- users_access_token_key) or a personal access token (SPEC 17: $2, its digest,
-- personal_access_tokens_token_digest_key; live only). The one not sent is empty, which
-- matches nothing. Like user_for_token it returns the user's stored document, which
-- holds the roles (so an account the user no longer belongs to is one the token no
-- longer reaches; the token's scopes and account_ids narrow that, middleware/auth.py),
-- the MFA flags and the accounts that retired the profile's token. A personal token's
-- last use ($3, the client's address) is written at most every 5 minutes, here.
-- Run through db.Lookup: the columns arrive as text (scopes and account_ids as JSON).
WITH personal AS (
    SELECT p.id, p.user_id, p.scopes, p.account_ids, p.last_used_at
      FROM personal_access_tokens p
     WHERE p.token_digest = $2
       AND p.expires_at > now()
), touched AS (
    UPDATE personal_access_tokens p
       SET last_used_at = now(), last_used_ip = NULLIF($3::text, '')
      FROM personal
     WHERE p.id = personal.id
       AND (personal.last_used_at IS NULL OR personal.last_used_at <= now() - interval '5 minutes')
)
SELECT personal.id, array_to_json(personal.scopes), array_to_json(personal.account_ids),
       extract(epoch FROM now()), u.doc
  FROM users u
  LEFT JOIN personal ON personal.user_id = u.id
 WHERE u.id = COALESCE((SELECT user_id FROM personal),
                       (SELECT v.id FROM users v WHERE v.access_token = $1::text));

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
SELECT u.id, u.email
  FROM one_time_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = %(digest)s
   AND t.purpose = 'mfa_setup'
   AND t.expires_at > now()
   AND u.mfa_enabled_at IS NULL;
