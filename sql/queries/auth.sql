-- name: user_for_token
-- One indexed lookup (user_tokens_token_digest_key) and the user's stored document
-- (users.doc, kept up to date on write: migration 0014), which holds what the access
-- rules need (roles, MFA flags) and, finished by userdoc.py, the user JSON: no join or
-- function runs per read. A session idle past SESSION_IDLE_TIMEOUT_MINUTES is found
-- here too and recorded as expired by expire_idle (middleware/auth.py), so the common
-- case stays a read.
-- Run through db.Lookup (libpq directly, $1 placeholders) into middleware/auth.py's
-- TokenRow, which names these columns in this order: times as seconds since the epoch.
SELECT t.id, t.client, extract(epoch FROM t.expires_at) AS expires_at,
       extract(epoch FROM now() - t.last_used_at) AS idle_for, t.used,
       extract(epoch FROM now()) AS now, u.doc
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
-- The profile's access_token (api_access_token), by value (users_access_token_key): the
-- user's stored document (migration 0014), as user_for_token returns it; it also carries
-- the accounts that retired this token (_legacy_refused, SPEC 17).
-- Run through db.Lookup into middleware/auth.py's AccessTokenRow.
SELECT extract(epoch FROM now()) AS now, u.doc
  FROM users u
 WHERE u.access_token = $1;

-- name: user_for_personal_token
-- A personal access token (SPEC 17), by digest (personal_access_tokens_token_digest_key),
-- live only, and its user's stored document: the roles in it are the ones a session gets,
-- so an account the user no longer belongs to is one the token no longer reaches (its
-- scopes and account_ids narrow that, middleware/access.py). stale: its last use is due to
-- be written (touch_personal_token), at most every 5 minutes, so reads stay reads.
-- Run through db.Lookup into middleware/auth.py's PersonalTokenRow (scopes and
-- account_ids as JSON).
SELECT p.id, array_to_json(p.scopes) AS scopes, array_to_json(p.account_ids) AS account_ids,
       p.last_used_at IS NULL OR p.last_used_at <= now() - interval '5 minutes' AS stale,
       extract(epoch FROM now()) AS now, u.doc
  FROM personal_access_tokens p
  JOIN users u ON u.id = p.user_id
 WHERE p.token_digest = $1
   AND p.expires_at > now();

-- name: touch_personal_token
-- A personal access token's last use and the address it came from (SPEC 17); only if
-- still due, so that requests racing here write once.
UPDATE personal_access_tokens
   SET last_used_at = now(), last_used_ip = %(ip_address)s
 WHERE id = %(token_id)s
   AND (last_used_at IS NULL OR last_used_at <= now() - interval '5 minutes');

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
