-- name: status
SELECT u.mfa_enabled_at IS NOT NULL AS enabled,
       EXISTS (SELECT 1 FROM mfa_recovery_codes c WHERE c.user_id = u.id) AS backup_codes_generated,
       (SELECT count(*) FROM mfa_recovery_codes c WHERE c.user_id = u.id AND c.used_at IS NULL)::integer
           AS backup_codes_remaining
  FROM users u
 WHERE u.id = %(user_id)s;

-- name: lock_user
-- Every check of a code holds this lock until its transaction ends, so the replay guard
-- (otp_last_step) and single-use recovery codes hold against concurrent requests.
SELECT id, email, name, encrypted_password, otp_secret, otp_last_step, mfa_enabled_at IS NOT NULL AS enabled,
       confirmed_at IS NOT NULL AS confirmed
  FROM users
 WHERE id = %(user_id)s
   FOR UPDATE;

-- name: start_enrolment
-- A new pending secret replaces an earlier one; MFA stays off until a code proves it.
UPDATE users
   SET otp_secret = %(otp_secret)s,
       otp_last_step = NULL,
       updated_at = now()
 WHERE id = %(user_id)s
   AND mfa_enabled_at IS NULL
RETURNING id;

-- name: enable
UPDATE users
   SET mfa_enabled_at = now(),
       updated_at = now()
 WHERE id = %(user_id)s
   AND otp_secret IS NOT NULL
RETURNING id;

-- name: disable
WITH codes AS (
    DELETE FROM mfa_recovery_codes
     WHERE user_id = %(user_id)s
)
UPDATE users
   SET otp_secret = NULL,
       otp_last_step = NULL,
       mfa_enabled_at = NULL,
       updated_at = now()
 WHERE id = %(user_id)s
RETURNING id;

-- name: use_step
-- The replay guard: a step is used once, and never one older than the last.
UPDATE users
   SET otp_last_step = %(step)s
 WHERE id = %(user_id)s
   AND (otp_last_step IS NULL OR otp_last_step < %(step)s)
RETURNING id;

-- name: replace_recovery_codes
-- One salt for the batch: checking a code then costs one key derivation, not ten.
WITH dropped AS (
    DELETE FROM mfa_recovery_codes
     WHERE user_id = %(user_id)s
)
INSERT INTO mfa_recovery_codes (user_id, code_digest, salt)
SELECT %(user_id)s, digest, %(salt)s
  FROM unnest(%(digests)s::bytea[]) AS d(digest)
RETURNING id;

-- name: unused_recovery_codes
-- salt is NULL for the 24-character codes of before migration 0013 (SHA-256 digests).
SELECT id, code_digest, salt
  FROM mfa_recovery_codes
 WHERE user_id = %(user_id)s
   AND used_at IS NULL;

-- name: use_recovery_code
UPDATE mfa_recovery_codes
   SET used_at = now()
 WHERE id = %(id)s
   AND used_at IS NULL
RETURNING id;

-- name: sign_in_state
-- Whether a session may be issued now: not when MFA is on (a code first), nor when an
-- account of the user requires MFA and it is off (enrolment first).
SELECT u.mfa_enabled_at IS NOT NULL AS mfa_enabled, mfa_enrollment_required(u) AS setup_required
  FROM users u
 WHERE u.id = %(user_id)s;

-- name: find_challenge
-- Which user a challenge belongs to, without a lock: the user row is locked first.
SELECT user_id
  FROM one_time_tokens
 WHERE token_digest = %(token_digest)s
   AND purpose = 'mfa_challenge';

-- name: lock_challenge
SELECT id
  FROM one_time_tokens
 WHERE token_digest = %(token_digest)s
   AND purpose = 'mfa_challenge'
   AND expires_at > now()
   AND failed_attempts < %(max_wrong)s
   FOR UPDATE;

-- name: count_wrong_code
UPDATE one_time_tokens
   SET failed_attempts = failed_attempts + 1
 WHERE id = %(id)s
RETURNING failed_attempts;

-- name: use_challenge
DELETE FROM one_time_tokens
 WHERE id = %(id)s
RETURNING id;

-- name: issue_revert_link
-- The "this was not me" link of the MFA-enabled e-mail, bound to that enablement and to the
-- address it is mailed to. It replaces an earlier one, whose enablement has ended.
WITH dropped AS (
    DELETE FROM one_time_tokens
     WHERE user_id = %(user_id)s
       AND purpose = 'mfa_revert'
)
INSERT INTO one_time_tokens (user_id, purpose, email, token_digest, expires_at, mfa_enabled_at)
SELECT u.id, 'mfa_revert', u.email, %(token_digest)s, now() + %(lifespan)s, u.mfa_enabled_at
  FROM users u
 WHERE u.id = %(user_id)s
   AND u.mfa_enabled_at IS NOT NULL
RETURNING id;

-- name: take_revert_link
-- Uses up a "this was not me" link: MFA goes off, with its recovery codes, and the password
-- is cleared (whoever turned MFA on held a session, and may know it). Only while the
-- enablement the link was mailed for is still the user's (a later one is not this link's
-- to undo) and the address is still the one it was mailed to (after an e-mail change the
-- old mailbox controls the account only through its e-mail revert link). No row: nothing
-- was done; the UPDATE re-checks the enablement under the row lock.
WITH taken AS (
    DELETE FROM one_time_tokens t
     USING users u
     WHERE t.token_digest = %(token_digest)s
       AND t.purpose = 'mfa_revert'
       AND t.expires_at > now()
       AND u.id = t.user_id
       AND u.email = t.email
       AND u.mfa_enabled_at = t.mfa_enabled_at
    RETURNING t.user_id, t.mfa_enabled_at
), codes AS (
    DELETE FROM mfa_recovery_codes c
     USING taken t
     WHERE c.user_id = t.user_id
)
UPDATE users u
   SET encrypted_password = NULL,
       otp_secret = NULL,
       otp_last_step = NULL,
       mfa_enabled_at = NULL,
       updated_at = now()
  FROM taken t
 WHERE u.id = t.user_id
   AND u.mfa_enabled_at = t.mfa_enabled_at
RETURNING u.id, u.name, u.email;
