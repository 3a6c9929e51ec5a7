-- The credential lifecycle of SPEC 3.3: e-mail revert links, a password that can be
-- cleared, and the per-user count of e-mail changes that caps confirmation mails.

-- An e-mail revert link (sent to the old address on every e-mail change) is a one-time
-- token too; unlike the others it survives credential changes (services/credentials.py).
ALTER TABLE one_time_tokens DROP CONSTRAINT one_time_tokens_purpose_check;
ALTER TABLE one_time_tokens ADD CONSTRAINT one_time_tokens_purpose_check
    CHECK (purpose IN ('confirmation', 'reset_password', 'email_revert'));

-- NULL means "no password": an e-mail revert clears it, since whoever changed the address
-- may know or have set it. Nothing signs in with a NULL password until a reset link sets
-- one; any stored value is still a bcrypt hash (the CHECK stands as it was).
ALTER TABLE users ALTER COLUMN encrypted_password DROP NOT NULL;

-- One row per e-mail change a user asked for, free or taken address alike (the answer must
-- not tell them apart), so at most 5 a day can send mail whatever RATE_LIMITS says.
CREATE TABLE email_change_requests (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_change_requests_user_idx ON email_change_requests (user_id, created_at);
