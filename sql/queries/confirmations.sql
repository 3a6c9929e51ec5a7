-- name: confirm
-- Uses up a confirmation token and confirms the address it was mailed to, in one statement:
-- a pending address moves into email, or the current one is stamped confirmed. A token for
-- any other address went stale with a later e-mail change. No row: no usable token; a row
-- without user_id: nothing was confirmed, and already_confirmed says whether that is why.
-- The final SELECT sees users as they were before the UPDATE: first_confirmation, the user
-- had no proven address until now (SPEC 3.4 rule 1's notice); previous_email, the uid the
-- user's sessions carry until this commits (confirming a pending address changes it).
WITH taken AS (
    DELETE FROM one_time_tokens
     WHERE token_digest = %(token_digest)s
       AND purpose = 'confirmation'
       AND expires_at > now()
    RETURNING user_id, email
), confirmed AS (
    UPDATE users u
       SET email = t.email,
           unconfirmed_email = CASE WHEN u.unconfirmed_email = t.email THEN NULL ELSE u.unconfirmed_email END,
           confirmed_at = COALESCE(u.confirmed_at, now()),
           updated_at = now()
      FROM taken t
     WHERE u.id = t.user_id
       AND (u.unconfirmed_email = t.email OR (u.email = t.email AND u.confirmed_at IS NULL))
    RETURNING u.id, u.email
)
SELECT c.id AS user_id, c.email, (u.email = t.email AND u.confirmed_at IS NOT NULL) AS already_confirmed,
       u.unconfirmed_email IS NOT DISTINCT FROM t.email AS changed_address,
       u.confirmed_at IS NULL AS first_confirmation, u.email AS previous_email
  FROM taken t
  JOIN users u ON u.id = t.user_id
  LEFT JOIN confirmed c ON c.id = t.user_id;

-- name: sign_up_origin
-- For the notice of a user's first confirmation (SPEC 3.4 rule 1), read before that
-- confirmation's credential change ends every session: carries_session, whether the request
-- presents a live session of this user (a token with its client and uid, neither expired nor
-- idle: what middleware/auth.py accepted before this confirmation, so %(uid)s is the address
-- before it), and when and from where the account was signed up.
-- The sign-up's session was opened in the sign-up's transaction (the same created_at); an
-- unconfirmed user cannot sign in, so it is the only one, unless it has ended (then the
-- place is unknown).
SELECT u.id, u.name, u.email, u.created_at AS signed_up_at,
       EXISTS (SELECT 1
                 FROM user_tokens t
                 JOIN unnest(%(digests)s::bytea[], %(clients)s::text[], %(uids)s::text[])
                      AS presented (digest, client, uid)
                   ON t.token_digest = presented.digest AND t.client = presented.client
                WHERE t.user_id = u.id
                  AND presented.uid = %(uid)s
                  AND t.expires_at > now()
                  AND t.last_used_at > now() - make_interval(secs => %(idle_seconds)s))
       AS carries_session,
       s.ip_address, s.browser_name, s.browser_version, s.platform_name, s.device_name
  FROM users u
  LEFT JOIN user_tokens s ON s.user_id = u.id AND s.created_at = u.created_at
 WHERE u.id = %(user_id)s
 ORDER BY s.id
 LIMIT 1;

-- name: take_reset_token
-- Single use, and only for the address the link was mailed to: after an e-mail change the
-- old mailbox no longer controls the account.
DELETE FROM one_time_tokens t
 USING users u
 WHERE t.token_digest = %(token_digest)s
   AND t.purpose = 'reset_password'
   AND t.expires_at > now()
   AND u.id = t.user_id
   AND u.email = t.email
RETURNING u.id, u.email, u.name, u.encrypted_password;

-- name: user_by_email
-- For a reset link (POST /auth/password). The user's row before their links, as every
-- path that replaces or uses one takes it (one_time_tokens.lock_user): the link's INSERT
-- would take this lock on the row anyway (its foreign key), but only after the statement
-- had deleted the user's earlier link and counted the address, and a use of that link or
-- a resend holding the row would each wait for what the other held. KEY SHARE: it waits
-- for those, not for a profile edit (a NO KEY UPDATE of the row).
SELECT id, name, email
  FROM users
 WHERE email = %(email)s
   FOR KEY SHARE;

-- name: reset_link_user
-- The user a live reset link is for, read without using it up or locking anything: the
-- new password is checked against them (bcrypt, the breached-password lookup: up to
-- seconds) before the transaction that takes the link locks the user's row. The same
-- conditions as take_reset_token, which decides.
SELECT u.id, u.email, u.name, u.encrypted_password
  FROM one_time_tokens t
  JOIN users u ON u.id = t.user_id
 WHERE t.token_digest = %(token_digest)s
   AND t.purpose = 'reset_password'
   AND t.expires_at > now()
   AND u.email = t.email;

-- name: address_to_confirm
-- The user by id (signed in) or by current address (POST /resend_confirmation): a pending
-- e-mail change first, else the unconfirmed sign-up address; no row when there is nothing
-- to confirm. The lock orders this against a concurrent e-mail change, so the newest
-- token always goes to the newest address.
-- A pending address another user has meanwhile (or had: uniqueness answers without an
-- oracle, SPEC 3.3) gets no link: ``taken``, so that the caller can spend what a free one
-- spends (resources/confirmations.py). So does one another user's live revert link
-- reserves (SPEC 3.4), as profile.lock_user counts it for the change itself: else a
-- resend mails the owner's mailbox a genuine link whose use takes the address and makes
-- the owner's revert fail. revert_until: until when the old address can undo it.
SELECT u.id, u.name, COALESCE(u.unconfirmed_email, u.email) AS to_address,
       u.unconfirmed_email IS NOT NULL AS new_address,
       EXISTS (SELECT 1 FROM users other WHERE other.email = u.unconfirmed_email)
       OR EXISTS (SELECT 1
                    FROM one_time_tokens r
                   WHERE r.email = u.unconfirmed_email
                     AND r.purpose = 'email_revert'
                     AND r.expires_at > now()
                     AND r.user_id <> u.id) AS taken,
       (SELECT max(r.expires_at)
          FROM one_time_tokens r
         WHERE r.user_id = u.id
           AND r.purpose = 'email_revert'
           AND r.expires_at > now()) AS revert_until
  FROM users u
 WHERE (u.id = %(user_id)s OR u.email = %(email)s)
   AND (u.unconfirmed_email IS NOT NULL OR u.confirmed_at IS NULL)
   FOR UPDATE OF u;

-- name: take_revert_token
-- Uses up an e-mail revert link: the address it was mailed to becomes the user's again, a
-- pending change is cancelled and the password cleared (whoever made the change may know
-- it). Revert links issued after this one go too: they were mailed from the states being
-- undone, perhaps to the taker's own mailbox. Two-factor sign-in goes too when it was
-- turned on after the link was issued (an authenticator the taker enrolled would otherwise
-- stand in front of the owner's reset), and only then: the owner's own, older second
-- factor stays, so the reset still asks for it (SPEC 3.4). A pending enrolment goes.
WITH taken AS (
    DELETE FROM one_time_tokens
     WHERE token_digest = %(token_digest)s
       AND purpose = 'email_revert'
       AND expires_at > now()
    RETURNING id, user_id, email, created_at
), later AS (
    DELETE FROM one_time_tokens o
     USING taken t
     WHERE o.user_id = t.user_id
       AND o.purpose = 'email_revert'
       AND o.id > t.id
), codes AS (
    DELETE FROM mfa_recovery_codes c
     USING taken t, users u
     WHERE c.user_id = t.user_id
       AND u.id = t.user_id
       AND u.mfa_enabled_at > t.created_at
)
UPDATE users u
   SET email = t.email,
       unconfirmed_email = NULL,
       encrypted_password = NULL,
       otp_secret = CASE WHEN u.mfa_enabled_at <= t.created_at THEN u.otp_secret END,
       otp_last_step = CASE WHEN u.mfa_enabled_at <= t.created_at THEN u.otp_last_step END,
       mfa_enabled_at = CASE WHEN u.mfa_enabled_at <= t.created_at THEN u.mfa_enabled_at END,
       updated_at = now()
  FROM taken t
 WHERE u.id = t.user_id
RETURNING u.id, u.name, u.email;
