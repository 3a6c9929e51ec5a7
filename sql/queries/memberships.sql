-- name: insert
INSERT INTO account_users (account_id, user_id, role, active_at)
VALUES (%(account_id)s, %(user_id)s, %(role)s, CASE WHEN %(stamp_active)s THEN now() END)
RETURNING id;

-- name: stamp_active
UPDATE account_users
   SET active_at = now(), updated_at = now()
 WHERE user_id = %(user_id)s
   AND account_id = %(account_id)s
RETURNING id;
