-- name: insert
-- No row back means the address is taken; the unique constraint decides, so two
-- concurrent sign-ups with one address cannot both pass. An address a live e-mail revert
-- link reserves for its user counts as taken (SPEC 3.4).
INSERT INTO users (name, email, encrypted_password, access_token, confirmed_at)
SELECT %(name)s, %(email)s, %(encrypted_password)s, %(access_token)s, CASE WHEN %(confirmed)s THEN now() END
 WHERE NOT EXISTS (SELECT 1
                     FROM one_time_tokens r
                    WHERE r.email = %(email)s
                      AND r.purpose = 'email_revert'
                      AND r.expires_at > now())
ON CONFLICT (email) DO NOTHING
RETURNING id;

-- name: email_taken
-- A user's address, or one a live e-mail revert link reserves for its user (SPEC 3.4).
SELECT EXISTS (SELECT 1 FROM users WHERE email = %(email)s)
       OR EXISTS (SELECT 1
                    FROM one_time_tokens r
                   WHERE r.email = %(email)s
                     AND r.purpose = 'email_revert'
                     AND r.expires_at > now()) AS taken;

-- name: lock_for_token
-- Serialises token issuance per user (the max-tokens rule) and lets sign-in check that
-- the password it verified is still the current one, and that MFA was not turned on since.
SELECT id, encrypted_password, mfa_enabled_at IS NOT NULL AS mfa_enabled
  FROM users
 WHERE id = %(user_id)s
   FOR UPDATE;

-- name: locked_out
-- Every membership of the user suspended (SPEC 18). Asked with the user row locked
-- (lock_for_token), in a statement of its own: it must see a suspension that committed
-- while this transaction waited for that lock.
SELECT user_locked_out(%(user_id)s) AS locked_out;

-- name: document
-- The stored user document (migration 0014), for userdoc.render.
SELECT doc::text AS doc, now() AS now FROM users WHERE id = %(user_id)s;

-- name: set_password
-- Setting a password also confirms the address: only its owner could have got here
-- through a reset link, and a signed-in change already proved the old password.
UPDATE users
   SET encrypted_password = %(encrypted_password)s,
       confirmed_at = COALESCE(confirmed_at, CASE WHEN %(confirm)s THEN now() END),
       updated_at = now()
 WHERE id = %(user_id)s
RETURNING id;

-- name: contact
-- Whom a security e-mail goes to.
SELECT id, name, email
  FROM users
 WHERE id = %(user_id)s;
