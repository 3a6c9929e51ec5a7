-- A write to a user's own columns (a profile update, the commonest write) recomputed
-- the whole stored document (0014), memberships join included, though no membership
-- changed: 158 µs of PostgreSQL CPU per UPDATE, where keeping the memberships part of
-- the old document costs 92 (issue 19, docs/performance.md). The document is now made
-- of two parts:
--   membership_doc(user_id): account_id, role, accounts, _mfa_required, from the
--     memberships and their accounts (VOLATILE: a fresh snapshot per query, see 0014);
--   user_doc(u, m): the user's columns around the membership part m, which is either
--     membership_doc() or the old document itself (it carries the same keys).

CREATE FUNCTION membership_doc(p_user_id bigint) RETURNS json
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   a.name, a.status, a.locale, a.enforce_mfa
              FROM account_users au
              JOIN accounts a ON a.id = au.account_id
             WHERE au.user_id = p_user_id
        ), active AS (
            SELECT m.account_id, m.role
              FROM memberships m
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
                    'auto_offline', m.auto_offline) ORDER BY m.account_id)
                  FROM memberships m), '[]'::json),
            '_mfa_required', EXISTS (SELECT 1 FROM memberships m WHERE m.enforce_mfa)));
END
$$;

CREATE FUNCTION user_doc(u users, m json) RETURNS json
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
        '_mfa_required', m->'_mfa_required')
$$;

CREATE OR REPLACE FUNCTION users_keep_doc() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.doc IS NULL THEN
        NEW.doc := user_doc(NEW, membership_doc(NEW.id));
    ELSIF (NEW.name, NEW.display_name, NEW.email, NEW.unconfirmed_email, NEW.confirmed_at,
           NEW.access_token, NEW.avatar, NEW.custom_attributes, NEW.ui_settings,
           NEW.message_signature, NEW.created_at, NEW.pubsub_token, NEW.mfa_enabled_at)
          IS DISTINCT FROM
          (OLD.name, OLD.display_name, OLD.email, OLD.unconfirmed_email, OLD.confirmed_at,
           OLD.access_token, OLD.avatar, OLD.custom_attributes, OLD.ui_settings,
           OLD.message_signature, OLD.created_at, OLD.pubsub_token, OLD.mfa_enabled_at) THEN
        NEW.doc := user_doc(NEW, OLD.doc);
    END IF;
    RETURN NEW;
END
$$;

DROP FUNCTION user_doc(users);
