-- The schema a fresh `manage.py migrate` produces, for reading and reviewing: pg_dump
-- --schema-only --no-owner --no-privileges of the machine's PostgreSQL, without the lines
-- that vary between runs and versions (its comments, SET lines, \restrict tokens, blank runs).
-- Generated, never edited, and never run: migrations build databases. After adding a
-- migration, regenerate it (a throwaway cluster, migrated from nothing) and commit both:
--     .venv/bin/python manage.py schema-dump
-- tests/test_migrations.py fails while this file and a fresh migrate disagree.

CREATE TABLE public.accounts (
    id bigint NOT NULL,
    name text NOT NULL,
    locale text DEFAULT 'en'::text NOT NULL,
    domain text,
    support_email text,
    auto_resolve_duration integer,
    custom_attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    label_cache_key text DEFAULT '0000000000'::text NOT NULL,
    inbox_cache_key text DEFAULT '0000000000'::text NOT NULL,
    team_cache_key text DEFAULT '0000000000'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    features jsonb DEFAULT '{}'::jsonb NOT NULL,
    enforce_mfa boolean DEFAULT false NOT NULL,
    restrict_legacy_access_token boolean DEFAULT false NOT NULL,
    deletion_due_at timestamp with time zone,
    deletion_requested_at timestamp with time zone,
    deletion_requested_by bigint,
    CONSTRAINT accounts_auto_resolve_duration_check CHECK (((auto_resolve_duration >= 1) AND (auto_resolve_duration <= 999))),
    CONSTRAINT accounts_custom_attributes_check CHECK ((jsonb_typeof(custom_attributes) = 'object'::text)),
    CONSTRAINT accounts_deletion_scheduled CHECK ((((deletion_due_at IS NULL) = (deletion_requested_at IS NULL)) AND ((deletion_requested_by IS NULL) OR (deletion_due_at IS NOT NULL)))),
    CONSTRAINT accounts_domain_check CHECK ((char_length(domain) <= 100)),
    CONSTRAINT accounts_features_check CHECK ((jsonb_typeof(features) = 'object'::text)),
    CONSTRAINT accounts_inbox_cache_key_check CHECK ((inbox_cache_key ~ '^[0-9]{10,}$'::text)),
    CONSTRAINT accounts_label_cache_key_check CHECK ((label_cache_key ~ '^[0-9]{10,}$'::text)),
    CONSTRAINT accounts_locale_check CHECK ((locale = ANY (ARRAY['en'::text, 'ar'::text, 'nl'::text, 'fr'::text, 'de'::text, 'it'::text, 'ja'::text, 'ko'::text, 'pt'::text, 'ru'::text, 'es'::text, 'ml'::text, 'ca'::text, 'el'::text, 'pt_BR'::text, 'ro'::text, 'ta'::text, 'fa'::text, 'zh_TW'::text, 'vi'::text, 'da'::text, 'tr'::text, 'cs'::text, 'fi'::text, 'id'::text, 'sv'::text, 'hu'::text, 'no'::text, 'zh_CN'::text, 'pl'::text, 'sk'::text, 'uk'::text, 'th'::text, 'lv'::text, 'is'::text, 'he'::text, 'lt'::text, 'sr'::text, 'bg'::text, 'et'::text]))),
    CONSTRAINT accounts_name_check CHECK (((char_length(name) >= 1) AND (char_length(name) <= 255))),
    CONSTRAINT accounts_status_check CHECK ((status = ANY (ARRAY['active'::text, 'suspended'::text]))),
    CONSTRAINT accounts_support_email_check CHECK ((char_length(support_email) <= 100)),
    CONSTRAINT accounts_team_cache_key_check CHECK ((team_cache_key ~ '^[0-9]{10,}$'::text))
);

CREATE FUNCTION public.account_json(a public.accounts) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
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

CREATE FUNCTION public.account_users_refresh_doc() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM 1 FROM accounts WHERE id = NEW.account_id FOR SHARE;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE users SET doc = NULL WHERE id = OLD.user_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND (TG_OP = 'INSERT' OR NEW.user_id <> OLD.user_id) THEN
        UPDATE users SET doc = NULL WHERE id = NEW.user_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.accounts_refresh_docs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM 1
       FROM users
      WHERE id IN (SELECT user_id FROM account_users WHERE account_id = NEW.id)
      ORDER BY id
        FOR NO KEY UPDATE;
    UPDATE users SET doc = NULL
     WHERE id IN (SELECT user_id FROM account_users WHERE account_id = NEW.id);
    RETURN NULL;
END
$$;

CREATE TABLE public.account_users (
    id bigint NOT NULL,
    account_id bigint NOT NULL,
    user_id bigint NOT NULL,
    role text DEFAULT 'agent'::text NOT NULL,
    availability text DEFAULT 'online'::text NOT NULL,
    auto_offline boolean DEFAULT true NOT NULL,
    active_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    CONSTRAINT account_users_availability_check CHECK ((availability = ANY (ARRAY['online'::text, 'offline'::text, 'busy'::text]))),
    CONSTRAINT account_users_role_check CHECK ((role = ANY (ARRAY['agent'::text, 'administrator'::text]))),
    CONSTRAINT account_users_status_check CHECK ((status = ANY (ARRAY['active'::text, 'suspended'::text])))
);

CREATE TABLE public.users (
    id bigint NOT NULL,
    name text NOT NULL,
    display_name text,
    email text NOT NULL,
    unconfirmed_email text,
    encrypted_password text,
    confirmed_at timestamp with time zone,
    custom_attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    ui_settings jsonb DEFAULT '{}'::jsonb NOT NULL,
    message_signature text,
    avatar text,
    access_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    pubsub_token text DEFAULT replace(((gen_random_uuid())::text || (gen_random_uuid())::text), '-'::text, ''::text) NOT NULL,
    otp_secret bytea,
    otp_last_step bigint,
    mfa_enabled_at timestamp with time zone,
    doc json NOT NULL,
    last_sign_in_at timestamp with time zone,
    CONSTRAINT users_access_token_check CHECK ((char_length(access_token) >= 32)),
    CONSTRAINT users_avatar_check CHECK ((avatar ~ '^[A-Za-z0-9_-]+\.(jpg|png|gif|webp)$'::text)),
    CONSTRAINT users_custom_attributes_check CHECK ((jsonb_typeof(custom_attributes) = 'object'::text)),
    CONSTRAINT users_display_name_check CHECK ((char_length(display_name) <= 255)),
    CONSTRAINT users_email_check CHECK (((email = lower((btrim(email) COLLATE "C"))) AND ((char_length(email) >= 3) AND (char_length(email) <= 255)))),
    CONSTRAINT users_encrypted_password_check CHECK ((encrypted_password ~~ '$2%'::text)),
    CONSTRAINT users_message_signature_check CHECK ((char_length(message_signature) <= 20000)),
    CONSTRAINT users_mfa_needs_secret CHECK (((mfa_enabled_at IS NULL) OR (otp_secret IS NOT NULL))),
    CONSTRAINT users_name_check CHECK ((char_length(name) <= 255)),
    CONSTRAINT users_otp_secret_check CHECK (((octet_length(otp_secret) >= 29) AND (octet_length(otp_secret) <= 200))),
    CONSTRAINT users_ui_settings_check CHECK ((jsonb_typeof(ui_settings) = 'object'::text)),
    CONSTRAINT users_ui_settings_size CHECK ((octet_length((ui_settings)::text) <= 65536)),
    CONSTRAINT users_unconfirmed_email_check CHECK ((unconfirmed_email = lower((btrim(unconfirmed_email) COLLATE "C"))))
);

CREATE FUNCTION public.agent_json(au public.account_users, u public.users, p_avatar_url_prefix text) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT json_build_object(
        'id', u.id,
        'account_id', au.account_id,
        'name', u.name,
        'available_name', COALESCE(NULLIF(u.display_name, ''), u.name),
        'email', u.email,
        'role', au.role,
        'confirmed', u.confirmed_at IS NOT NULL,
        'availability_status', CASE
            WHEN NOT au.auto_offline THEN au.availability
            WHEN au.active_at > now() - interval '5 minutes' THEN au.availability
            ELSE 'offline' END,
        'auto_offline', au.auto_offline,
        'thumbnail', CASE WHEN u.avatar IS NULL THEN '' ELSE p_avatar_url_prefix || u.avatar END,
        'membership_status', au.status,
        'mfa_enabled', u.mfa_enabled_at IS NOT NULL,
        'last_sign_in_at', iso8601(u.last_sign_in_at))
$$;

CREATE TABLE public.audit_events (
    id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    event text NOT NULL,
    actor_id bigint,
    subject_id bigint,
    account_id bigint,
    ip_address text,
    user_agent text,
    session_id bigint,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT audit_events_details_check CHECK ((jsonb_typeof(details) = 'object'::text)),
    CONSTRAINT audit_events_event_check CHECK ((event ~ '^[a-z_]{1,64}$'::text)),
    CONSTRAINT audit_events_ip_address_check CHECK ((char_length(ip_address) <= 64)),
    CONSTRAINT audit_events_user_agent_check CHECK ((char_length(user_agent) <= 512))
);

CREATE FUNCTION public.audit_event_json(e public.audit_events) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT json_build_object(
        'id', e.id,
        'created_at', iso8601(e.created_at),
        'event', e.event,
        'actor_id', e.actor_id,
        'subject_id', e.subject_id,
        'account_id', e.account_id,
        'ip_address', e.ip_address,
        'user_agent', e.user_agent,
        'session_id', e.session_id,
        'details', e.details)
$$;

CREATE FUNCTION public.audit_events_page(page public.audit_events[], page_size integer) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT json_build_object(
        'events', COALESCE((SELECT json_agg(audit_event_json(e) ORDER BY e.id DESC)
                              FROM unnest(page[1:page_size]) e), '[]'),
        'next_before', CASE WHEN cardinality(page) > page_size THEN (page[page_size]).id END)
$$;

CREATE FUNCTION public.erase_account_trail(p_account_id bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    erased bigint;
BEGIN
    IF EXISTS (SELECT FROM accounts WHERE id = p_account_id)
       OR NOT EXISTS (SELECT FROM account_deletions WHERE account_id = p_account_id) THEN
        RAISE EXCEPTION 'account % is not purged: its audit rows stay', p_account_id;
    END IF;
    DELETE FROM audit_events WHERE account_id = p_account_id;
    GET DIAGNOSTICS erased = ROW_COUNT;
    RETURN erased;
END
$$;

CREATE FUNCTION public.erase_user_trail(p_user_id bigint, p_addresses text[]) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $_$
DECLARE
    erased bigint;
    cleared bigint;
    addresses text[];
BEGIN
    IF EXISTS (SELECT FROM users WHERE id = p_user_id) THEN
        RAISE EXCEPTION 'user % is not erased: their audit rows stay', p_user_id;
    END IF;
    SELECT coalesce(array_agg(DISTINCT a), '{}') INTO addresses
      FROM unnest(p_addresses) AS given(address),
           lower(given.address) AS a
     WHERE a ~ '^[^@[:space:]]+@[^@[:space:]]+$'
       AND NOT EXISTS (SELECT FROM users u
                        WHERE u.email = a OR u.unconfirmed_email = a);
    DELETE FROM audit_events e
     WHERE e.subject_id = p_user_id
        OR (cardinality(addresses) > 0
            AND EXISTS (SELECT FROM jsonb_each_text(e.details) d
                         WHERE lower(d.value) = ANY (addresses)));
    GET DIAGNOSTICS erased = ROW_COUNT;
    UPDATE audit_events
       SET actor_id = NULL, session_id = NULL, ip_address = NULL, user_agent = NULL
     WHERE actor_id = p_user_id;
    GET DIAGNOSTICS cleared = ROW_COUNT;
    UPDATE account_deletions SET scheduled_by = NULL WHERE scheduled_by = p_user_id;
    RETURN erased + cleared;
END
$_$;

CREATE FUNCTION public.grant_app_role(app regrole) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
    AS $$
BEGIN
    IF app = current_user::regrole THEN
        RAISE EXCEPTION 'the application''s role % is the role migrations run as; it must be another', app;
    END IF;
    IF EXISTS (SELECT FROM pg_roles r
                WHERE r.oid = app AND (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb)) THEN
        RAISE EXCEPTION 'the application''s role % may not be a superuser nor create roles or databases', app;
    END IF;
    IF EXISTS (SELECT FROM pg_class c WHERE c.relowner = app) THEN
        RAISE EXCEPTION 'the application''s role % owns tables; it must own nothing', app;
    END IF;
    IF pg_has_role(app, current_user, 'MEMBER')
       OR pg_has_role(app, 'pg_execute_server_program', 'MEMBER')
       OR pg_has_role(app, 'pg_write_server_files', 'MEMBER')
       OR pg_has_role(app, 'pg_read_server_files', 'MEMBER') THEN
        RAISE EXCEPTION 'the application''s role % may not be a member of % nor reach the server''s files or programs', app, current_user;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA public TO %s', app);
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %s', app);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %s', app);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %s', app);
    EXECUTE format('GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO %s', app);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM %s', app);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public'
                   ' GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s', app);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM %s', app);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO %s', app);
    EXECUTE format('REVOKE UPDATE, DELETE ON audit_events FROM %s', app);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON schema_migrations FROM %s', app);
    EXECUTE format('REVOKE UPDATE, DELETE ON account_deletions FROM %s', app);
    EXECUTE format('REVOKE ALL ON FUNCTION prune_audit_events(integer),'
                   ' grant_app_role(regrole) FROM %s', app);
    EXECUTE format('GRANT EXECUTE ON FUNCTION erase_account_trail(bigint),'
                   ' erase_user_trail(bigint, text[]) TO %s', app);
    IF pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') THEN
        EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    END IF;
END
$$;

CREATE FUNCTION public.iso8601(ts timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

CREATE FUNCTION public.membership_doc(p_user_id bigint) RETURNS json
    LANGUAGE plpgsql
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

CREATE FUNCTION public.mfa_enrollment_required(u public.users) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN u.mfa_enabled_at IS NOT NULL THEN false
                ELSE EXISTS (SELECT 1
                               FROM account_users au
                               JOIN accounts a ON a.id = au.account_id
                              WHERE au.user_id = u.id
                                AND au.status = 'active'
                                AND a.enforce_mfa) END
$$;

CREATE TABLE public.personal_access_tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    name text NOT NULL,
    token_digest bytea NOT NULL,
    scopes text[] NOT NULL,
    account_ids bigint[],
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    last_used_ip text,
    CONSTRAINT personal_access_tokens_last_used_ip_check CHECK ((char_length(last_used_ip) <= 64)),
    CONSTRAINT personal_access_tokens_name_check CHECK (((char_length(name) >= 1) AND (char_length(name) <= 100))),
    CONSTRAINT personal_access_tokens_scopes_check CHECK (((cardinality(scopes) >= 1) AND (scopes <@ ARRAY['profile:read'::text, 'profile:write'::text, 'account:read'::text, 'account:write'::text]))),
    CONSTRAINT personal_access_tokens_token_digest_check CHECK ((octet_length(token_digest) = 32))
);

CREATE FUNCTION public.personal_access_token_json(p public.personal_access_tokens) RETURNS json
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
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

CREATE FUNCTION public.prune_audit_events(retention_days integer) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
DECLARE
    deleted bigint;
BEGIN
    IF retention_days IS NULL OR retention_days < 1 THEN
        RAISE EXCEPTION 'retention_days must be at least 1, got %', retention_days;
    END IF;
    DELETE FROM audit_events WHERE created_at < now() - make_interval(days => retention_days);
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;

CREATE FUNCTION public.user_doc(u public.users, m json) RETURNS json
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

CREATE FUNCTION public.user_json(p_user_id bigint, p_avatar_url_prefix text) RETURNS json
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN (SELECT user_json(u, p_avatar_url_prefix) FROM users u WHERE u.id = p_user_id);
END
$$;

CREATE FUNCTION public.user_json(u public.users, p_avatar_url_prefix text) RETURNS json
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   au.status AS membership_status, a.name, a.status, a.locale
              FROM account_users au
              JOIN accounts a ON a.id = au.account_id
             WHERE au.user_id = u.id
        ), active AS (
            SELECT m.account_id, m.role
              FROM memberships m
             WHERE m.membership_status = 'active'
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
                    'auto_offline', m.auto_offline,
                    'membership_status', m.membership_status) ORDER BY m.account_id)
                  FROM memberships m), '[]'::json)));
END
$$;

CREATE FUNCTION public.user_locked_out(p_user_id bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT COALESCE(bool_and(au.status = 'suspended'), false)
      FROM account_users au
     WHERE au.user_id = p_user_id
$$;

CREATE FUNCTION public.users_keep_doc() RETURNS trigger
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

CREATE TABLE public.account_deletions (
    account_id bigint NOT NULL,
    deleted_at timestamp with time zone DEFAULT now() NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    scheduled_by bigint,
    reason text NOT NULL,
    CONSTRAINT account_deletions_reason_check CHECK ((reason = ANY (ARRAY['manual_deletion'::text, 'last_member_erased'::text])))
);

ALTER TABLE public.account_users ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.account_users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE public.accounts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.accounts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE public.audit_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.email_change_requests (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE public.email_change_requests ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.email_change_requests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.mail_outbox (
    id bigint NOT NULL,
    kind text NOT NULL,
    to_address text NOT NULL,
    subject text NOT NULL,
    text_body text,
    html_body text,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    message_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    user_id bigint,
    CONSTRAINT mail_outbox_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT mail_outbox_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'sent'::text, 'failed'::text, 'suppressed'::text])))
);

ALTER TABLE public.mail_outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.mail_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.mfa_recovery_codes (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    code_digest bytea NOT NULL,
    used_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    salt bytea,
    CONSTRAINT mfa_recovery_codes_code_digest_check CHECK ((octet_length(code_digest) = 32)),
    CONSTRAINT mfa_recovery_codes_salt_check CHECK ((octet_length(salt) = 16))
);

ALTER TABLE public.mfa_recovery_codes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.mfa_recovery_codes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.one_time_tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    purpose text NOT NULL,
    email text NOT NULL,
    token_digest bytea NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    failed_attempts integer DEFAULT 0 NOT NULL,
    mfa_enabled_at timestamp with time zone,
    sso_account_id bigint,
    sso_sid text,
    sso_sub text,
    idp_second_factor boolean DEFAULT false NOT NULL,
    CONSTRAINT one_time_tokens_failed_attempts_check CHECK ((failed_attempts >= 0)),
    CONSTRAINT one_time_tokens_mfa_revert_enablement CHECK (((purpose = 'mfa_revert'::text) = (mfa_enabled_at IS NOT NULL))),
    CONSTRAINT one_time_tokens_purpose_check CHECK ((purpose = ANY (ARRAY['confirmation'::text, 'reset_password'::text, 'email_revert'::text, 'mfa_challenge'::text, 'mfa_setup'::text, 'mfa_revert'::text, 'sso'::text]))),
    CONSTRAINT one_time_tokens_sso_provider CHECK (((purpose <> 'sso'::text) OR ((sso_account_id IS NOT NULL) AND (sso_sub IS NOT NULL)))),
    CONSTRAINT one_time_tokens_sso_sid_check CHECK ((char_length(sso_sid) <= 255)),
    CONSTRAINT one_time_tokens_sso_sub_check CHECK ((char_length(sso_sub) <= 255)),
    CONSTRAINT one_time_tokens_token_digest_check CHECK ((octet_length(token_digest) = 32))
);

ALTER TABLE public.one_time_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.one_time_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE public.personal_access_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.personal_access_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.rate_limit_counters (
    bucket text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    hits integer NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT rate_limit_counters_hits_check CHECK ((hits > 0))
);

CREATE TABLE public.schema_migrations (
    version text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    checksum text
);

CREATE TABLE public.sso_domains (
    domain text NOT NULL,
    account_id bigint NOT NULL,
    CONSTRAINT sso_domains_domain_check CHECK ((domain ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'::text))
);

CREATE TABLE public.sso_flows (
    id_digest bytea NOT NULL,
    state_digest bytea NOT NULL,
    nonce text NOT NULL,
    code_verifier text NOT NULL,
    account_id bigint NOT NULL,
    email text NOT NULL,
    target text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sso_flows_code_verifier_check CHECK (((char_length(code_verifier) >= 43) AND (char_length(code_verifier) <= 128))),
    CONSTRAINT sso_flows_email_check CHECK ((char_length(email) <= 254)),
    CONSTRAINT sso_flows_id_digest_check CHECK ((octet_length(id_digest) = 32)),
    CONSTRAINT sso_flows_nonce_check CHECK (((char_length(nonce) >= 22) AND (char_length(nonce) <= 128))),
    CONSTRAINT sso_flows_state_digest_check CHECK ((octet_length(state_digest) = 32)),
    CONSTRAINT sso_flows_target_check CHECK ((target = ANY (ARRAY['web'::text, 'mobile'::text])))
);

CREATE TABLE public.sso_logout_tokens (
    account_id bigint NOT NULL,
    jti text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT sso_logout_tokens_jti_check CHECK (((char_length(jti) >= 1) AND (char_length(jti) <= 255)))
);

CREATE TABLE public.sso_providers (
    account_id bigint NOT NULL,
    issuer text NOT NULL,
    client_id text NOT NULL,
    client_secret_encrypted bytea NOT NULL,
    jit_provisioning boolean DEFAULT false NOT NULL,
    enforce boolean DEFAULT false NOT NULL,
    trust_idp_mfa boolean DEFAULT false NOT NULL,
    discovery jsonb NOT NULL,
    discovery_fetched_at timestamp with time zone DEFAULT now() NOT NULL,
    jwks jsonb,
    jwks_fetched_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sso_providers_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT sso_providers_discovery_check CHECK ((jsonb_typeof(discovery) = 'object'::text)),
    CONSTRAINT sso_providers_issuer_check CHECK (((char_length(issuer) >= 1) AND (char_length(issuer) <= 2048))),
    CONSTRAINT sso_providers_jwks_check CHECK ((jsonb_typeof(jwks) = 'object'::text))
);

CREATE TABLE public.user_tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    client text NOT NULL,
    token_digest bytea NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone DEFAULT now() NOT NULL,
    ip_address text,
    user_agent text,
    client_name text,
    browser_name text,
    browser_version text,
    platform_name text,
    device_name text,
    authenticated_at timestamp with time zone DEFAULT now() NOT NULL,
    platform_version text,
    used boolean DEFAULT false NOT NULL,
    sign_in_method text DEFAULT 'password'::text NOT NULL,
    sso_account_id bigint,
    sso_sid text,
    sso_sub text,
    CONSTRAINT user_tokens_browser_name_check CHECK ((char_length(browser_name) <= 100)),
    CONSTRAINT user_tokens_browser_version_check CHECK ((char_length(browser_version) <= 100)),
    CONSTRAINT user_tokens_client_name_check CHECK ((char_length(client_name) <= 255)),
    CONSTRAINT user_tokens_device_name_check CHECK ((char_length(device_name) <= 100)),
    CONSTRAINT user_tokens_ip_address_check CHECK ((char_length(ip_address) <= 64)),
    CONSTRAINT user_tokens_platform_name_check CHECK ((char_length(platform_name) <= 100)),
    CONSTRAINT user_tokens_platform_version_check CHECK ((char_length(platform_version) <= 100)),
    CONSTRAINT user_tokens_sign_in_method_check CHECK ((sign_in_method = ANY (ARRAY['password'::text, 'link'::text, 'sso'::text]))),
    CONSTRAINT user_tokens_sso_sid_check CHECK ((char_length(sso_sid) <= 255)),
    CONSTRAINT user_tokens_sso_sub_check CHECK ((char_length(sso_sub) <= 255)),
    CONSTRAINT user_tokens_token_digest_check CHECK ((octet_length(token_digest) = 32)),
    CONSTRAINT user_tokens_user_agent_check CHECK ((char_length(user_agent) <= 512))
);

ALTER TABLE public.user_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.user_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE public.users ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY public.account_deletions
    ADD CONSTRAINT account_deletions_pkey PRIMARY KEY (account_id);

ALTER TABLE ONLY public.account_users
    ADD CONSTRAINT account_users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.account_users
    ADD CONSTRAINT account_users_user_account_key UNIQUE (user_id, account_id);

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audit_events
    ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.email_change_requests
    ADD CONSTRAINT email_change_requests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.mail_outbox
    ADD CONSTRAINT mail_outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.mfa_recovery_codes
    ADD CONSTRAINT mfa_recovery_codes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.mfa_recovery_codes
    ADD CONSTRAINT mfa_recovery_codes_user_digest_key UNIQUE (user_id, code_digest);

ALTER TABLE ONLY public.one_time_tokens
    ADD CONSTRAINT one_time_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.one_time_tokens
    ADD CONSTRAINT one_time_tokens_token_digest_key UNIQUE (token_digest);

ALTER TABLE ONLY public.personal_access_tokens
    ADD CONSTRAINT personal_access_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.personal_access_tokens
    ADD CONSTRAINT personal_access_tokens_token_digest_key UNIQUE (token_digest);

ALTER TABLE ONLY public.rate_limit_counters
    ADD CONSTRAINT rate_limit_counters_pkey PRIMARY KEY (bucket, window_start);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.sso_domains
    ADD CONSTRAINT sso_domains_pkey PRIMARY KEY (domain);

ALTER TABLE ONLY public.sso_flows
    ADD CONSTRAINT sso_flows_pkey PRIMARY KEY (id_digest);

ALTER TABLE ONLY public.sso_flows
    ADD CONSTRAINT sso_flows_state_digest_key UNIQUE (state_digest);

ALTER TABLE ONLY public.sso_logout_tokens
    ADD CONSTRAINT sso_logout_tokens_pkey PRIMARY KEY (account_id, jti);

ALTER TABLE ONLY public.sso_providers
    ADD CONSTRAINT sso_providers_pkey PRIMARY KEY (account_id);

ALTER TABLE ONLY public.user_tokens
    ADD CONSTRAINT user_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.user_tokens
    ADD CONSTRAINT user_tokens_token_digest_key UNIQUE (token_digest);

ALTER TABLE ONLY public.user_tokens
    ADD CONSTRAINT user_tokens_user_client_key UNIQUE (user_id, client);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_access_token_key UNIQUE (access_token);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_email_key UNIQUE (email);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pubsub_token_key UNIQUE (pubsub_token);

CREATE INDEX account_deletions_scheduled_by_idx ON public.account_deletions USING btree (scheduled_by) WHERE (scheduled_by IS NOT NULL);

CREATE INDEX account_users_account_id_idx ON public.account_users USING btree (account_id);

CREATE INDEX accounts_deletion_due_idx ON public.accounts USING btree (deletion_due_at) WHERE (deletion_due_at IS NOT NULL);

CREATE INDEX audit_events_account_idx ON public.audit_events USING btree (account_id, id) WHERE (account_id IS NOT NULL);

CREATE INDEX audit_events_actor_idx ON public.audit_events USING btree (actor_id) WHERE (actor_id IS NOT NULL);

CREATE INDEX audit_events_created_at_idx ON public.audit_events USING btree (created_at);

CREATE INDEX audit_events_subject_idx ON public.audit_events USING btree (subject_id, id);

CREATE INDEX email_change_requests_user_idx ON public.email_change_requests USING btree (user_id, created_at);

CREATE INDEX mail_outbox_pending_idx ON public.mail_outbox USING btree (next_attempt_at) WHERE (status = 'pending'::text);

CREATE INDEX mail_outbox_unowned_to_address_idx ON public.mail_outbox USING btree (to_address) WHERE (user_id IS NULL);

CREATE INDEX mail_outbox_user_id_idx ON public.mail_outbox USING btree (user_id) WHERE (user_id IS NOT NULL);

CREATE INDEX one_time_tokens_revert_email_idx ON public.one_time_tokens USING btree (email) WHERE (purpose = 'email_revert'::text);

CREATE INDEX one_time_tokens_user_id_idx ON public.one_time_tokens USING btree (user_id, purpose);

CREATE INDEX personal_access_tokens_user_idx ON public.personal_access_tokens USING btree (user_id);

CREATE INDEX rate_limit_counters_expires_at_idx ON public.rate_limit_counters USING btree (expires_at);

CREATE INDEX sso_domains_account_idx ON public.sso_domains USING btree (account_id);

CREATE INDEX sso_flows_expires_idx ON public.sso_flows USING btree (expires_at);

CREATE INDEX sso_providers_issuer_idx ON public.sso_providers USING btree (issuer);

CREATE INDEX user_tokens_sso_sid_idx ON public.user_tokens USING btree (sso_account_id, sso_sid) WHERE (sso_sid IS NOT NULL);

CREATE INDEX user_tokens_sso_sub_idx ON public.user_tokens USING btree (sso_account_id, sso_sub) WHERE (sso_sub IS NOT NULL);

CREATE TRIGGER account_users_refresh_doc AFTER INSERT OR DELETE ON public.account_users FOR EACH ROW EXECUTE FUNCTION public.account_users_refresh_doc();

CREATE TRIGGER account_users_refresh_doc_on_change AFTER UPDATE ON public.account_users FOR EACH ROW WHEN ((((((((old.user_id IS DISTINCT FROM new.user_id) OR (old.account_id IS DISTINCT FROM new.account_id)) OR (old.role IS DISTINCT FROM new.role)) OR (old.availability IS DISTINCT FROM new.availability)) OR (old.auto_offline IS DISTINCT FROM new.auto_offline)) OR (old.active_at IS DISTINCT FROM new.active_at)) OR (old.status IS DISTINCT FROM new.status))) EXECUTE FUNCTION public.account_users_refresh_doc();

CREATE TRIGGER accounts_refresh_docs AFTER UPDATE ON public.accounts FOR EACH ROW WHEN ((((((old.name IS DISTINCT FROM new.name) OR (old.status IS DISTINCT FROM new.status)) OR (old.locale IS DISTINCT FROM new.locale)) OR (old.enforce_mfa IS DISTINCT FROM new.enforce_mfa)) OR (old.restrict_legacy_access_token IS DISTINCT FROM new.restrict_legacy_access_token))) EXECUTE FUNCTION public.accounts_refresh_docs();

CREATE TRIGGER users_keep_doc BEFORE INSERT OR UPDATE ON public.users FOR EACH ROW EXECUTE FUNCTION public.users_keep_doc();

ALTER TABLE ONLY public.account_users
    ADD CONSTRAINT account_users_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.account_users
    ADD CONSTRAINT account_users_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.email_change_requests
    ADD CONSTRAINT email_change_requests_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.mail_outbox
    ADD CONSTRAINT mail_outbox_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.mfa_recovery_codes
    ADD CONSTRAINT mfa_recovery_codes_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.one_time_tokens
    ADD CONSTRAINT one_time_tokens_sso_account_id_fkey FOREIGN KEY (sso_account_id) REFERENCES public.accounts(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.one_time_tokens
    ADD CONSTRAINT one_time_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.personal_access_tokens
    ADD CONSTRAINT personal_access_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.sso_domains
    ADD CONSTRAINT sso_domains_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.sso_providers(account_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.sso_flows
    ADD CONSTRAINT sso_flows_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.sso_providers(account_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.sso_logout_tokens
    ADD CONSTRAINT sso_logout_tokens_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.sso_providers(account_id) ON DELETE CASCADE;

ALTER TABLE ONLY public.sso_providers
    ADD CONSTRAINT sso_providers_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.user_tokens
    ADD CONSTRAINT user_tokens_sso_account_id_fkey FOREIGN KEY (sso_account_id) REFERENCES public.accounts(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.user_tokens
    ADD CONSTRAINT user_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;
