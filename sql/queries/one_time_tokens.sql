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

-- name: lock_user
-- The user row of a one-time link, locked before the statement that uses the link up
-- deletes it (confirmations.take_reset_token, confirmations.confirm,
-- confirmations.take_revert_token, mfa.take_revert_link): the user's row first, then
-- their sessions and tokens, one-time links among them. That is the order of every
-- credential change (credentials.change voids the user's links with the row held), of a
-- resend (confirmations.address_to_confirm, then the link it replaces) and of a revert
-- (its link, then the user's later ones). The other order deadlocks with such a request
-- for the same user: each holds what the other waits for.
-- Only a live link of the purpose the route takes locks anything: an expired link, or one
-- of another purpose, is the 422 it was before, without holding a row of its user. No
-- row: no such link, and the statement that uses it finds none either.
SELECT u.id
  FROM one_time_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = %(token_digest)s
   AND t.purpose = %(purpose)s
   AND t.expires_at > now()
   FOR UPDATE OF u;
