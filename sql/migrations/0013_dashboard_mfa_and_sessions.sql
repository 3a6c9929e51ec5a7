-- Chatwoot 4.15's own MFA and session pages (issue 18, SPEC 12 and 13 as amended): short
-- recovery codes behind a key derivation function, the "this was not me" link of the
-- MFA-enabled e-mail, the platform version of a session, and whether it has been used.

-- Recovery codes are now 8 Crockford base32 characters (40 bits): too few for a bare hash
-- (NIST SP 800-63B 5.1.2), so code_digest is scrypt(code, salt) (services/mfa.py). The 10
-- codes of one batch share one random salt, so checking a code costs one derivation. Rows
-- of the 24-character codes of 0009 (120 bits) keep salt NULL and their SHA-256 digest:
-- they stay valid until used or replaced.
ALTER TABLE mfa_recovery_codes
    ADD COLUMN salt bytea CHECK (octet_length(salt) = 16);

-- mfa_revert: the link of the MFA-enabled e-mail. mfa_enabled_at names the enablement it
-- undoes (users.mfa_enabled_at when it was issued), so it never turns off a later one.
ALTER TABLE one_time_tokens DROP CONSTRAINT one_time_tokens_purpose_check;
ALTER TABLE one_time_tokens
    ADD CONSTRAINT one_time_tokens_purpose_check
        CHECK (purpose IN ('confirmation', 'reset_password', 'email_revert', 'mfa_challenge', 'mfa_setup',
                           'mfa_revert')),
    ADD COLUMN mfa_enabled_at timestamptz,
    ADD CONSTRAINT one_time_tokens_mfa_revert_enablement
        CHECK ((purpose = 'mfa_revert') = (mfa_enabled_at IS NOT NULL));

-- The dashboard's Active Sessions page shows the operating system's version too.
ALTER TABLE user_tokens
    ADD COLUMN platform_version text CHECK (char_length(platform_version) <= 100);

-- last_used_at is written at most every 5 minutes, so a session used since it was stamped
-- may have been active any time up to 5 minutes later; one never used since its sign-in was
-- last active exactly then. used tells them apart (one write per session, on its first
-- request), so the session ended at the cap is the least recently active one (services/
-- sessions.py). Sessions from before this migration may have been used: true.
ALTER TABLE user_tokens ADD COLUMN used boolean NOT NULL DEFAULT true;
ALTER TABLE user_tokens ALTER COLUMN used SET DEFAULT false;
