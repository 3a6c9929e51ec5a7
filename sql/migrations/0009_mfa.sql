-- Two-factor sign-in (SPEC 12, issue 13).
--
-- users.otp_secret holds the TOTP secret encrypted with AES-GCM under a key derived from
-- SECRET_KEY (services/mfa.py): version byte, 12-byte nonce, ciphertext and tag, bound to
-- the user id as associated data, so a value copied onto another row does not decrypt.
-- With mfa_enabled_at null it is an enrolment waiting for its first code. otp_last_step
-- is the 30-second step of the last code accepted: no code is accepted twice.
ALTER TABLE users
    ADD COLUMN otp_secret     bytea CHECK (octet_length(otp_secret) BETWEEN 29 AND 200),
    ADD COLUMN otp_last_step  bigint,
    ADD COLUMN mfa_enabled_at timestamptz,
    ADD CONSTRAINT users_mfa_needs_secret CHECK (mfa_enabled_at IS NULL OR otp_secret IS NOT NULL);

-- Recovery codes: 120 random bits each, only their SHA-256 kept; used_at makes them single use.
CREATE TABLE mfa_recovery_codes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     bigint      NOT NULL REFERENCES users ON DELETE CASCADE,
    code_digest bytea       NOT NULL CHECK (octet_length(code_digest) = 32),
    used_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT mfa_recovery_codes_user_digest_key UNIQUE (user_id, code_digest)
);

-- The sign-in challenge (mfa_challenge) and the enrolment token of an account that requires
-- MFA (mfa_setup) are one-time tokens: digested, short-lived, and void after every credential
-- change like the others. failed_attempts counts wrong codes against a challenge.
-- 'email_revert' is the purpose issue 10a (0005) adds; it is repeated here so this list is whole.
ALTER TABLE one_time_tokens DROP CONSTRAINT one_time_tokens_purpose_check;
ALTER TABLE one_time_tokens
    ADD CONSTRAINT one_time_tokens_purpose_check
        CHECK (purpose IN ('confirmation', 'reset_password', 'email_revert', 'mfa_challenge', 'mfa_setup')),
    ADD COLUMN failed_attempts integer NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0);

-- Administrators may require MFA of every member (SPEC 12).
ALTER TABLE accounts ADD COLUMN enforce_mfa boolean NOT NULL DEFAULT false;

-- Whether an account of the user requires MFA and the user has not turned it on (SPEC 12):
-- one definition for the access rules (auth.sql) and for sign-in (mfa.sql).
CREATE FUNCTION mfa_enrollment_required(u users) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN u.mfa_enabled_at IS NOT NULL THEN false
                ELSE EXISTS (SELECT 1
                               FROM account_users au
                               JOIN accounts a ON a.id = au.account_id
                              WHERE au.user_id = u.id
                                AND a.enforce_mfa) END
$$;

-- user_json: the body of 0004 with mfa_enabled made real; account_json gains enforce_mfa.
CREATE OR REPLACE FUNCTION user_json(u users, p_avatar_url_prefix text) RETURNS json
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   a.name, a.status, a.locale
              FROM account_users au
              JOIN accounts a ON a.id = au.account_id
             WHERE au.user_id = u.id
        ), active AS (
            SELECT m.account_id, m.role
              FROM memberships m
             ORDER BY m.active_at DESC NULLS LAST, m.account_id
             LIMIT 1
        )
        SELECT json_build_object(
            'id', u.id,
            'name', u.name,
            'display_name', u.display_name,
            'available_name', COALESCE(NULLIF(u.display_name, ''), u.name),
            'email', u.email,
            'unconfirmed_email', u.unconfirmed_email,
            'uid', u.email,
            'provider', 'email',
            'confirmed', u.confirmed_at IS NOT NULL,
            'access_token', u.access_token,
            'account_id', (SELECT account_id FROM active),
            'role', (SELECT role FROM active),
            'avatar_url', CASE WHEN u.avatar IS NULL THEN '' ELSE p_avatar_url_prefix || u.avatar END,
            'custom_attributes', u.custom_attributes,
            'ui_settings', u.ui_settings,
            'message_signature', u.message_signature,
            'created_at', iso8601(u.created_at),
            'type', NULL,
            'inviter_id', NULL,
            'pubsub_token', u.pubsub_token,
            'mfa_enabled', u.mfa_enabled_at IS NOT NULL,
            'accounts', COALESCE((
                SELECT json_agg(json_build_object(
                    'id', m.account_id,
                    'name', m.name,
                    'status', m.status,
                    'locale', m.locale,
                    'active_at', iso8601(m.active_at),
                    'role', m.role,
                    'permissions', json_build_array(m.role),
                    'availability', m.availability,
                    'availability_status', CASE
                        WHEN NOT m.auto_offline THEN m.availability
                        WHEN m.active_at > now() - interval '5 minutes' THEN m.availability
                        ELSE 'offline' END,
                    'auto_offline', m.auto_offline) ORDER BY m.account_id)
                  FROM memberships m), '[]'::json)));
END
$$;

CREATE OR REPLACE FUNCTION account_json(a accounts) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'id', a.id,
        'name', a.name,
        'locale', a.locale,
        'domain', a.domain,
        'support_email', a.support_email,
        'auto_resolve_duration', a.auto_resolve_duration,
        'status', a.status,
        'custom_attributes', a.custom_attributes,
        'created_at', iso8601(a.created_at),
        'cache_keys', json_build_object(
            'label', a.label_cache_key, 'inbox', a.inbox_cache_key, 'team', a.team_cache_key),
        'features', a.features,
        'latest_chatwoot_version', NULL,
        'enforce_mfa', a.enforce_mfa)
$$;
