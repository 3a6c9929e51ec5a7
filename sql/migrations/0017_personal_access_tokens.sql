-- Personal access tokens (SPEC 17): narrower, expiring, self-service tokens for
-- integrations, and the account setting that retires the profile's access_token there.

-- One row per token; the token itself is shown once and stored only as its SHA-256.
-- scopes: what it may do (write includes read, middleware/auth.py); account_ids: the
-- accounts it may reach, null for every account of its user, present and future. Which
-- of them it reaches is decided at each request by the same membership look-up a session
-- gets (the stored user document's accounts, migration 0014), so a membership that ends
-- ends for its tokens too.
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

-- The stored document carries, beside _mfa_required, the accounts that retired the
-- profile's access_token (_legacy_refused, for the access rules; userdoc.py drops it from
-- what is sent), so checking the api_access_token stays one lookup with no join. Only
-- active memberships count: a suspended one answers membership_suspended first (SPEC 18).
-- membership_doc is 0016's with that key; user_doc is 0015's passing it through. A document
-- stored before this migration lacks the key: no account had set it then.
CREATE OR REPLACE FUNCTION membership_doc(p_user_id bigint) RETURNS json
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   au.status AS membership_status, a.name, a.status, a.locale, a.enforce_mfa,
                   a.restrict_legacy_access_token
              FROM account_users au
              JOIN accounts a ON a.id = au.account_id
             WHERE au.user_id = p_user_id
        ), active AS (
            SELECT m.account_id, m.role
              FROM memberships m
             WHERE m.membership_status = 'active'
             ORDER BY m.active_at DESC NULLS LAST, m.account_id
             LIMIT 1
        )
        SELECT json_build_object(
            'account_id', (SELECT account_id FROM active),
            'role', (SELECT role FROM active),
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
                    'availability_status', NULL,
                    'auto_offline', m.auto_offline,
                    'membership_status', m.membership_status) ORDER BY m.account_id)
                  FROM memberships m), '[]'::json),
            '_mfa_required', EXISTS (SELECT 1
                                       FROM memberships m
                                      WHERE m.enforce_mfa
                                        AND m.membership_status = 'active'),
            '_legacy_refused', COALESCE((
                SELECT json_agg(m.account_id ORDER BY m.account_id)
                  FROM memberships m
                 WHERE m.restrict_legacy_access_token
                   AND m.membership_status = 'active'), '[]'::json)));
END
$$;

CREATE OR REPLACE FUNCTION user_doc(u users, m json) RETURNS json
    LANGUAGE sql STABLE
    AS $$
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
        'account_id', m->'account_id',
        'role', m->'role',
        'avatar_url', u.avatar,
        'custom_attributes', u.custom_attributes,
        'ui_settings', u.ui_settings,
        'message_signature', u.message_signature,
        'created_at', iso8601(u.created_at),
        'type', NULL,
        'inviter_id', NULL,
        'pubsub_token', u.pubsub_token,
        'mfa_enabled', u.mfa_enabled_at IS NOT NULL,
        'accounts', m->'accounts',
        '_mfa_required', m->'_mfa_required',
        '_legacy_refused', m->'_legacy_refused')
$$;

-- Turning the setting on or off refreshes the documents of the account's members.
DROP TRIGGER accounts_refresh_docs ON accounts;
CREATE TRIGGER accounts_refresh_docs AFTER UPDATE ON accounts
    FOR EACH ROW
    WHEN ((OLD.name, OLD.status, OLD.locale, OLD.enforce_mfa, OLD.restrict_legacy_access_token)
          IS DISTINCT FROM
          (NEW.name, NEW.status, NEW.locale, NEW.enforce_mfa, NEW.restrict_legacy_access_token))
    EXECUTE FUNCTION accounts_refresh_docs();
