-- name: user_for_token
-- One indexed lookup (user_tokens_token_digest_key). With with_doc it also renders the
-- caller's user JSON, so GET /api/v1/profile needs no second round trip; without, just
-- the roles the access rules need, which costs the database a third as much.
SELECT u.id, u.email, t.id AS token_id, t.client, t.expires_at, t.last_used_at, now() AS now,
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
       CASE WHEN %(with_doc)s THEN user_json(u, %(avatar_url_prefix)s)::text END AS doc,
       CASE WHEN NOT %(with_doc)s THEN (SELECT json_object_agg(au.account_id, au.role)
                                         FROM account_users au
                                        WHERE au.user_id = u.id)::text END AS roles
  FROM users u
 WHERE u.access_token = %(access_token)s;

-- name: touch_token
-- The session's last activity, written at most every 5 minutes per token (middleware/auth.py),
-- so reads stay reads.
UPDATE user_tokens
   SET last_used_at = now()
 WHERE id = %(token_id)s;
