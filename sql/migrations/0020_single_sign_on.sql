-- Single sign-on with OpenID Connect (SPEC 19): an account's provider, the e-mail domains
-- it speaks for, the flows in flight, the one-time token that ends a flow, the sessions
-- it opens, and the logout tokens already seen.

-- One provider per account. The client secret is encrypted as the TOTP secrets are
-- (services/mfa.py: AES-GCM under a key derived from SECRET_KEY). The discovery document
-- is the one checked on save, kept so a sign-in needs no extra round trip; the JWKS is
-- fetched when a token names a key not in it, at most once a minute (jwks_fetched_at),
-- across every worker and host.
CREATE TABLE sso_providers (
    account_id              bigint      PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    issuer                  text        NOT NULL CHECK (char_length(issuer) BETWEEN 1 AND 2048),
    client_id               text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    client_secret_encrypted bytea       NOT NULL,
    jit_provisioning        boolean     NOT NULL DEFAULT false,
    enforce                 boolean     NOT NULL DEFAULT false,
    trust_idp_mfa           boolean     NOT NULL DEFAULT false,
    discovery               jsonb       NOT NULL CHECK (jsonb_typeof(discovery) = 'object'),
    discovery_fetched_at    timestamptz NOT NULL DEFAULT now(),
    jwks                    jsonb       CHECK (jsonb_typeof(jwks) = 'object'),
    jwks_fetched_at         timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);
-- A back-channel logout token names its issuer: the providers with that issuer.
CREATE INDEX sso_providers_issuer_idx ON sso_providers (issuer);

-- allowed_domains: a domain belongs to at most one account's provider (the primary key
-- says so for every writer at once, which no check of an array column could).
CREATE TABLE sso_domains (
    domain     text   PRIMARY KEY CHECK (domain ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'),
    account_id bigint NOT NULL REFERENCES sso_providers (account_id) ON DELETE CASCADE
);
CREATE INDEX sso_domains_account_idx ON sso_domains (account_id);

-- A flow between its start and its callback, found by the digest of the random id in
-- the fd_sso cookie and, at the callback, by the digest of its state (single use: the
-- callback deletes the row it uses). Any worker on any host can answer the callback.
CREATE TABLE sso_flows (
    id_digest     bytea       PRIMARY KEY CHECK (octet_length(id_digest) = 32),
    state_digest  bytea       NOT NULL UNIQUE CHECK (octet_length(state_digest) = 32),
    nonce         text        NOT NULL CHECK (char_length(nonce) BETWEEN 22 AND 128),
    code_verifier text        NOT NULL CHECK (char_length(code_verifier) BETWEEN 43 AND 128),
    account_id    bigint      NOT NULL REFERENCES sso_providers (account_id) ON DELETE CASCADE,
    email         text        NOT NULL CHECK (char_length(email) <= 254),
    target        text        NOT NULL CHECK (target IN ('web', 'mobile')),
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sso_flows_expires_idx ON sso_flows (expires_at);

-- The one-time sso_auth_token (purpose 'sso', 5 minutes) and the MFA challenge that may
-- follow it carry what the session they end in records: the provider (its account), the
-- provider's session (sid) and subject (sub), and whether the provider's amr named a
-- second factor the account trusts (idp_second_factor).
ALTER TABLE one_time_tokens DROP CONSTRAINT one_time_tokens_purpose_check;
ALTER TABLE one_time_tokens
    ADD CONSTRAINT one_time_tokens_purpose_check
    CHECK (purpose IN ('confirmation', 'reset_password', 'email_revert', 'mfa_challenge',
                       'mfa_setup', 'mfa_revert', 'sso'));
ALTER TABLE one_time_tokens
    ADD COLUMN sso_account_id    bigint REFERENCES accounts (id) ON DELETE CASCADE,
    ADD COLUMN sso_sid           text   CHECK (char_length(sso_sid) <= 255),
    ADD COLUMN sso_sub           text   CHECK (char_length(sso_sub) <= 255),
    ADD COLUMN idp_second_factor boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT one_time_tokens_sso_provider
        CHECK (purpose <> 'sso' OR (sso_account_id IS NOT NULL AND sso_sub IS NOT NULL));

-- How a session was opened (GET /api/v1/profile/sessions: sign_in_method), and for
-- single sign-on the provider session it belongs to (back-channel logout by sid, or by
-- sub for every single-sign-on session of that subject).
ALTER TABLE user_tokens
    ADD COLUMN sign_in_method text NOT NULL DEFAULT 'password'
        CHECK (sign_in_method IN ('password', 'link', 'sso')),
    ADD COLUMN sso_account_id bigint REFERENCES accounts (id) ON DELETE SET NULL,
    ADD COLUMN sso_sid        text   CHECK (char_length(sso_sid) <= 255),
    ADD COLUMN sso_sub        text   CHECK (char_length(sso_sub) <= 255);
CREATE INDEX user_tokens_sso_sid_idx ON user_tokens (sso_account_id, sso_sid)
    WHERE sso_sid IS NOT NULL;
CREATE INDEX user_tokens_sso_sub_idx ON user_tokens (sso_account_id, sso_sub)
    WHERE sso_sub IS NOT NULL;

-- Back-channel logout tokens already used (their jti), kept until they could no longer
-- pass the iat check anyway.
CREATE TABLE sso_logout_tokens (
    account_id bigint      NOT NULL REFERENCES sso_providers (account_id) ON DELETE CASCADE,
    jti        text        NOT NULL CHECK (char_length(jti) BETWEEN 1 AND 255),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, jti)
);
