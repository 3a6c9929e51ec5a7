-- Fields the reference system's dashboard and mobile app read (SPEC 11): the user JSON gains
-- created_at, type, inviter_id, pubsub_token and mfa_enabled (false until MFA exists); the
-- account JSON gains features and latest_chatwoot_version. pubsub_token is random per user
-- and rotated with every credential change (SPEC 3.3); gen_random_uuid() draws from the
-- server's strong random source, two of them give 244 random bits.

ALTER TABLE users ADD COLUMN pubsub_token text;
UPDATE users
   SET pubsub_token = replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
ALTER TABLE users
    ALTER COLUMN pubsub_token SET DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''),
    ALTER COLUMN pubsub_token SET NOT NULL,
    ADD CONSTRAINT users_pubsub_token_key UNIQUE (pubsub_token);

-- Enabled feature flags of the account, {"flag": true, ...}; none by default.
ALTER TABLE accounts ADD COLUMN features jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(features) = 'object');

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
            'mfa_enabled', false,
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
        'latest_chatwoot_version', NULL)
$$;
