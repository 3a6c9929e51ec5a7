-- name: change
-- SPEC 3.3 "credential change", in one statement inside the caller's transaction: every
-- sign-in token but the caller's is revoked, every one-time link but an e-mail revert link
-- is void, a pending address is dropped, and the access token (and the pubsub token unless
-- it is null here) is replaced. Revert links survive: they undo a takeover that may have
-- included a credential change.
WITH revoked AS (
    DELETE FROM user_tokens
     WHERE user_id = %(user_id)s
       AND client IS DISTINCT FROM %(keep_client)s
), voided AS (
    DELETE FROM one_time_tokens
     WHERE user_id = %(user_id)s
       AND purpose <> 'email_revert'
)
UPDATE users
   SET access_token = %(access_token)s,
       pubsub_token = COALESCE(%(pubsub_token)s, pubsub_token),
       unconfirmed_email = NULL,
       updated_at = now()
 WHERE id = %(user_id)s
RETURNING id;
