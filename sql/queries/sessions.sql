-- name: issue
-- Called with the user row locked (users.lock_for_token). Makes room for the new token by
-- dropping expired ones and those that expire first beyond the per-user maximum.
WITH dropped AS (
    DELETE FROM user_tokens
     WHERE user_id = %(user_id)s
       AND (expires_at <= now()
            OR id IN (SELECT id FROM user_tokens
                       WHERE user_id = %(user_id)s
                       ORDER BY expires_at DESC, id DESC
                      OFFSET %(keep)s))
)
INSERT INTO user_tokens (user_id, client, token_digest, expires_at)
VALUES (%(user_id)s, %(client)s, %(token_digest)s, now() + make_interval(days => %(lifespan_days)s))
RETURNING expires_at;

-- name: revoke
DELETE FROM user_tokens
 WHERE user_id = %(user_id)s
   AND client = %(client)s
RETURNING id;

-- name: revoke_others
DELETE FROM user_tokens
 WHERE user_id = %(user_id)s
   AND client IS DISTINCT FROM %(keep_client)s;
