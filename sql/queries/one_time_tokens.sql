-- name: issue
-- A new link replaces any earlier one of the same purpose.
WITH dropped AS (
    DELETE FROM one_time_tokens
     WHERE user_id = %(user_id)s
       AND purpose = %(purpose)s
)
INSERT INTO one_time_tokens (user_id, purpose, email, token_digest, expires_at)
VALUES (%(user_id)s, %(purpose)s, %(email)s, %(token_digest)s, now() + %(lifespan)s)
RETURNING id;

-- name: add
-- E-mail revert links do not replace each other: each undoes its own change, and a later
-- change (perhaps by whoever took the account) must not void the owner's earlier link.
INSERT INTO one_time_tokens (user_id, purpose, email, token_digest, expires_at)
VALUES (%(user_id)s, %(purpose)s, %(email)s, %(token_digest)s, now() + %(lifespan)s)
RETURNING id;
