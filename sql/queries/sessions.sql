-- name: issue
-- Called with the user row locked (users.lock_for_token). Makes room for the new token by
-- dropping expired or idle ones and the least recently active beyond the per-user maximum.
-- last_used_at is stamped at most every touch_seconds: a session used since then may have
-- been active up to touch_seconds later (or until now), one not used since its sign-in was
-- last active exactly then. The latest activity each may have had orders them; sessions
-- that may all be active now go oldest first. The user's last sign-in is now (SPEC 18's
-- agents list). sign_in_method and the sso_ columns: how it was opened (SPEC 19).
WITH signed_in AS (
    UPDATE users
       SET last_sign_in_at = now()
     WHERE id = %(user_id)s
), dropped AS (
    DELETE FROM user_tokens
     WHERE user_id = %(user_id)s
       AND (expires_at <= now()
            OR last_used_at <= now() - make_interval(secs => %(idle_seconds)s)
            OR id IN (SELECT id FROM user_tokens
                       WHERE user_id = %(user_id)s
                       ORDER BY CASE WHEN used
                                     THEN LEAST(last_used_at + make_interval(secs => %(touch_seconds)s), now())
                                     ELSE last_used_at END DESC,
                                id DESC
                      OFFSET %(keep)s))
)
INSERT INTO user_tokens (user_id, client, token_digest, expires_at, ip_address, user_agent,
                         client_name, browser_name, browser_version, platform_name, platform_version,
                         device_name, sign_in_method, sso_account_id, sso_sid, sso_sub)
VALUES (%(user_id)s, %(client)s, %(token_digest)s, now() + make_interval(days => %(lifespan_days)s),
        %(ip_address)s, %(user_agent)s, %(client_name)s, %(browser_name)s, %(browser_version)s,
        %(platform_name)s, %(platform_version)s, %(device_name)s, %(sign_in_method)s,
        %(sso_account_id)s, %(sso_sid)s, %(sso_sub)s)
RETURNING id, expires_at;

-- name: list
-- The user's live sessions, most recently active first, as the JSON array SPEC 13 names;
-- count is how many there are (the sign-in picker compares it with MAX_USER_SESSIONS).
-- The place fields are null: no GeoIP database is configured (SPEC 13).
SELECT COALESCE(json_agg(json_build_object(
           'id', t.id,
           'client_name', t.client_name,
           'browser_name', t.browser_name,
           'browser_version', t.browser_version,
           'platform_name', t.platform_name,
           'platform_version', t.platform_version,
           'device_name', t.device_name,
           'ip_address', t.ip_address,
           'city', NULL,
           'country', NULL,
           'country_code', NULL,
           'created_at', iso8601(t.created_at),
           'last_activity_at', iso8601(t.last_used_at),
           'expires_at', iso8601(t.expires_at),
           'current', t.id IS NOT DISTINCT FROM %(current_id)s,
           'sign_in_method', t.sign_in_method
       ) ORDER BY t.last_used_at DESC, t.id DESC), '[]')::text AS sessions,
       count(*) AS count
  FROM user_tokens t
 WHERE t.user_id = %(user_id)s
   AND t.expires_at > now()
   AND t.last_used_at > now() - make_interval(secs => %(idle_seconds)s);

-- name: known_device
-- Has this user signed in with this browser and platform in the last 90 days (a live
-- session from it, or a sign-in event), and signed in at all before? Checked before the new
-- session is stored.
SELECT EXISTS (SELECT 1 FROM user_tokens
                WHERE user_id = %(user_id)s
                  AND last_used_at > now() - interval '90 days'
                  AND browser_name IS NOT DISTINCT FROM %(browser_name)s
                  AND platform_name IS NOT DISTINCT FROM %(platform_name)s)
       OR EXISTS (SELECT 1 FROM audit_events
                   WHERE subject_id = %(user_id)s
                     AND event = 'sign_in_succeeded'
                     AND created_at > now() - interval '90 days'
                     AND details->>'browser_name' IS NOT DISTINCT FROM %(browser_name)s
                     AND details->>'platform_name' IS NOT DISTINCT FROM %(platform_name)s) AS known,
       EXISTS (SELECT 1 FROM user_tokens WHERE user_id = %(user_id)s)
       OR EXISTS (SELECT 1 FROM audit_events
                   WHERE subject_id = %(user_id)s AND event = 'sign_in_succeeded') AS has_history;

-- name: revoke
DELETE FROM user_tokens
 WHERE user_id = %(user_id)s
   AND client = %(client)s
RETURNING id;

-- name: revoke_by_id
DELETE FROM user_tokens
 WHERE user_id = %(user_id)s
   AND id = %(session_id)s
RETURNING id;

-- name: revoke_others
-- Every session of the user but keep_client's (all of them when it is null).
WITH revoked AS (
    DELETE FROM user_tokens
     WHERE user_id = %(user_id)s
       AND client IS DISTINCT FROM %(keep_client)s
    RETURNING id
)
SELECT count(*) AS revoked, COALESCE(array_agg(id ORDER BY id), '{}') AS ids FROM revoked;

-- name: lock_member
-- The member's user row, before end_member_sessions deletes their sessions and replaces
-- the access token on that row: the user's row first, then their sessions, the order of
-- every path that issues or ends sessions (issue; memberships.set_status). The other
-- order deadlocks with a sign-in that holds the row while it drops an expired session.
-- Only a member's row: an administrator cannot hold a stranger's.
SELECT u.id
  FROM account_users au
  JOIN users u ON u.id = au.user_id
 WHERE au.account_id = %(account_id)s
   AND au.user_id = %(user_id)s
   FOR UPDATE OF u;

-- name: end_member_sessions
-- An administrator ends every session of a member of their account (SPEC 13), and with
-- new_access_token also replaces the member's access token. No row: not a member.
WITH member AS (
    SELECT u.id, u.name, u.email
      FROM account_users au
      JOIN users u ON u.id = au.user_id
     WHERE au.account_id = %(account_id)s
       AND au.user_id = %(user_id)s
), revoked AS (
    DELETE FROM user_tokens t
     USING member m
     WHERE t.user_id = m.id
    RETURNING t.id
), rotated AS (
    UPDATE users u
       SET access_token = %(new_access_token)s::text, updated_at = now()
      FROM member m
     WHERE u.id = m.id
       AND %(new_access_token)s::text IS NOT NULL
    RETURNING u.id
)
SELECT m.id, m.name, m.email, (SELECT count(*) FROM revoked) AS revoked,
       EXISTS (SELECT 1 FROM rotated) AS access_token_reset
  FROM member m;

-- name: recently_authenticated
-- Whether the session checked a password or a second factor within the window (SPEC 3.4).
SELECT authenticated_at > now() - make_interval(mins => %(window_minutes)s) AS recent
  FROM user_tokens
 WHERE id = %(session_id)s;

-- name: kept
-- Whether the caller's session still exists. Asked with the user row locked, in a statement
-- of its own, so it sees what committed while the request waited for that row (a lockout,
-- SPEC 18; a reset; the owner ending sessions).
SELECT EXISTS (SELECT 1
                 FROM user_tokens
                WHERE user_id = %(user_id)s
                  AND client = %(client)s) AS kept;

-- name: mark_authenticated
-- The session has just checked the user's password (or a second factor).
UPDATE user_tokens
   SET authenticated_at = now()
 WHERE id = %(session_id)s
RETURNING id;
