-- Personal access tokens (SPEC 17): narrower, expiring, self-service tokens for
-- integrations, and the account setting that retires the profile's access_token there.

-- One row per token; the token itself is shown once and stored only as its SHA-256.
-- scopes: what it may do (write includes read, middleware/auth.py); account_ids: the
-- accounts it may reach, null for every account of its user, present and future. Which
-- of them it reaches is decided at each request by the same membership look-up a session
-- gets (sql/queries/auth.sql), so a membership that ends ends for its tokens too.
-- Revoking deletes the row; expired rows are dropped when the user next creates one.
CREATE TABLE personal_access_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    token_digest bytea       NOT NULL UNIQUE CHECK (octet_length(token_digest) = 32),
    scopes       text[]      NOT NULL CHECK (cardinality(scopes) >= 1
                                             AND scopes <@ ARRAY['profile:read', 'profile:write',
                                                                 'account:read', 'account:write']),
    account_ids  bigint[],
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    last_used_ip text        CHECK (char_length(last_used_ip) <= 64)
);
-- A user's tokens (the list, the cap of 50 live ones, revocation on a password reset).
CREATE INDEX personal_access_tokens_user_idx ON personal_access_tokens (user_id);

-- A token as its owner sees it: never the token, nor its digest.
CREATE FUNCTION personal_access_token_json(p personal_access_tokens) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'id', p.id,
        'name', p.name,
        'scopes', p.scopes,
        'account_ids', p.account_ids,
        'expires_at', iso8601(p.expires_at),
        'created_at', iso8601(p.created_at),
        'last_used_at', iso8601(p.last_used_at),
        'last_used_ip', p.last_used_ip)
$$;

-- SPEC 17: administrators may stop the profile access_token of their members from reaching
-- the account's routes (personal access tokens still do).
ALTER TABLE accounts ADD COLUMN restrict_legacy_access_token boolean NOT NULL DEFAULT false;

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
        'enforce_mfa', a.enforce_mfa,
        'restrict_legacy_access_token', a.restrict_legacy_access_token)
$$;
