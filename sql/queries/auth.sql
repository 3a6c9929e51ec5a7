-- name: user_for_token
-- One indexed lookup (user_tokens_token_digest_key) that also renders the caller's user
-- JSON, so GET /api/v1/profile needs no second round trip.
SELECT u.id, u.email, t.id AS token_id, t.client, t.expires_at, t.last_used_at, now() AS now,
       user_json(u.id, %(avatar_url_prefix)s)::text AS doc
  FROM user_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = %(digest)s
   AND t.expires_at > now();

-- name: user_for_access_token
SELECT u.id, u.email, user_json(u.id, %(avatar_url_prefix)s)::text AS doc
  FROM users u
 WHERE u.access_token = %(access_token)s;

-- name: touch_token
-- Written at most every few minutes per token, so reads stay reads.
UPDATE user_tokens
   SET last_used_at = now()
 WHERE id = %(token_id)s;
