-- name: change
-- SPEC 3.3 "credential change", in one statement inside the caller's transaction: every
-- sign-in token but the caller's is revoked, every one-time link but a revert link (of an
-- e-mail change, or of MFA turned on) is void, a pending address is dropped, and the access
-- token (and the pubsub token unless it is null here) is replaced. Revert links survive:
-- they undo a takeover that may have included a credential change. So does the link that confirms a still unconfirmed user's
-- own address: it went to that address, can confirm nothing else, and its use is itself a
-- credential change that ends every other hold (voiding it would only help whoever signed
-- up with someone else's address; docs/security.md). With revoke_personal_tokens (a reset, a
-- confirmation, a revert: the mailbox taking the account back) every personal access token
-- goes too (SPEC 17); personal_tokens_revoked says how many.
WITH revoked AS (
    DELETE FROM user_tokens
     WHERE user_id = %(user_id)s
       AND client IS DISTINCT FROM %(keep_client)s
), voided AS (
    DELETE FROM one_time_tokens o
     USING users u
     WHERE o.user_id = %(user_id)s
       AND u.id = o.user_id
       AND o.purpose NOT IN ('email_revert', 'mfa_revert')
       AND NOT (o.purpose = 'confirmation' AND o.email = u.email AND u.confirmed_at IS NULL)
), personal AS (
    DELETE FROM personal_access_tokens
     WHERE user_id = %(user_id)s
       AND %(revoke_personal_tokens)s
    RETURNING id
)
UPDATE users
   SET access_token = %(access_token)s,
       pubsub_token = COALESCE(%(pubsub_token)s, pubsub_token),
       unconfirmed_email = NULL,
       updated_at = now()
 WHERE id = %(user_id)s
RETURNING id, (SELECT count(*) FROM personal) AS personal_tokens_revoked;

-- name: lock_out
-- A member whose every membership is suspended is locked out (SPEC 18), in the suspension's
-- transaction, after its membership UPDATE and with the user row locked: every sign-in token
-- is revoked, the access token and pubsub token are replaced (no token comes back on
-- reactivation), and the one-time tokens that lead to a session without the mailbox (an MFA
-- sign-in's second step, an enrolment an account requires) are void. Links to the mailbox
-- (confirmation, reset, revert) stay: their owner may use them again once reactivated, and
-- until then none of them signs in (services/sessions.refuse_locked_out). Every personal
-- access token (SPEC 17) is revoked too. No row: the user still has an active membership,
-- nothing is done.
WITH locked_out AS (
    SELECT u.id
      FROM users u
     WHERE u.id = %(user_id)s
       AND user_locked_out(u.id)
), revoked AS (
    DELETE FROM user_tokens t
     USING locked_out l
     WHERE t.user_id = l.id
    RETURNING t.id
), voided AS (
    DELETE FROM one_time_tokens o
     USING locked_out l
     WHERE o.user_id = l.id
       AND o.purpose IN ('mfa_challenge', 'mfa_setup')
), personal AS (
    DELETE FROM personal_access_tokens p
     USING locked_out l
     WHERE p.user_id = l.id
)
UPDATE users u
   SET access_token = %(access_token)s,
       pubsub_token = %(pubsub_token)s,
       updated_at = now()
  FROM locked_out l
 WHERE u.id = l.id
RETURNING (SELECT count(*) FROM revoked) AS revoked;

-- name: replace_access_token
-- The owner's DELETE /api/v1/profile/sessions with include_access_token (SPEC 3.4): the
-- access token is replaced, nothing else, as the administrators' route does. First in its
-- transaction: the user's row before their sessions, the order of every path that ends them.
UPDATE users
   SET access_token = %(access_token)s, updated_at = now()
 WHERE id = %(user_id)s;
