-- The whole Frontdesk model: accounts, users and memberships, sign-in and one-time tokens,
-- the mail outbox and rate-limit counters. Constraints live here so that no code path can
-- store what the contract forbids.

CREATE TABLE accounts (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                  text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    locale                text        NOT NULL DEFAULT 'en' CHECK (locale IN (
        'en', 'ar', 'nl', 'fr', 'de', 'it', 'ja', 'ko', 'pt', 'ru', 'es', 'ml', 'ca', 'el',
        'pt_BR', 'ro', 'ta', 'fa', 'zh_TW', 'vi', 'da', 'tr', 'cs', 'fi', 'id', 'sv', 'hu',
        'no', 'zh_CN', 'pl', 'sk', 'uk', 'th', 'lv', 'is', 'he', 'lt', 'sr', 'bg', 'et')),
    domain                text        CHECK (char_length(domain) <= 100),
    support_email         text        CHECK (char_length(support_email) <= 100),
    auto_resolve_duration integer     CHECK (auto_resolve_duration BETWEEN 1 AND 999),
    custom_attributes     jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(custom_attributes) = 'object'),
    status                text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    -- Cache keys are epoch seconds as strings, as the dashboard compares them verbatim.
    label_cache_key       text        NOT NULL DEFAULT '0000000000' CHECK (label_cache_key ~ '^[0-9]{10,}$'),
    inbox_cache_key       text        NOT NULL DEFAULT '0000000000' CHECK (inbox_cache_key ~ '^[0-9]{10,}$'),
    team_cache_key        text        NOT NULL DEFAULT '0000000000' CHECK (team_cache_key ~ '^[0-9]{10,}$'),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name               text        NOT NULL CHECK (char_length(name) <= 255),
    display_name       text        CHECK (char_length(display_name) <= 255),
    -- Stored normalised, so the plain unique constraint is unique regardless of case.
    email              text        NOT NULL CHECK (email = lower(btrim(email)) AND char_length(email) BETWEEN 3 AND 255),
    unconfirmed_email  text        CHECK (unconfirmed_email = lower(btrim(unconfirmed_email))),
    encrypted_password text        NOT NULL CHECK (encrypted_password LIKE '$2%'),
    confirmed_at       timestamptz,
    custom_attributes  jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(custom_attributes) = 'object'),
    ui_settings        jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(ui_settings) = 'object'),
    message_signature  text        CHECK (char_length(message_signature) <= 20000),
    avatar             text        CHECK (avatar ~ '^[A-Za-z0-9_-]+\.(jpg|png|gif|webp)$'),
    -- The profile shows this token, so it is kept as issued (see docs/security.md).
    access_token       text        NOT NULL CHECK (char_length(access_token) >= 32),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_email_key UNIQUE (email),
    CONSTRAINT users_access_token_key UNIQUE (access_token)
);

CREATE TABLE account_users (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id   bigint      NOT NULL REFERENCES accounts ON DELETE CASCADE,
    user_id      bigint      NOT NULL REFERENCES users ON DELETE CASCADE,
    role         text        NOT NULL DEFAULT 'agent' CHECK (role IN ('agent', 'administrator')),
    availability text        NOT NULL DEFAULT 'online' CHECK (availability IN ('online', 'offline', 'busy')),
    auto_offline boolean     NOT NULL DEFAULT true,
    active_at    timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT account_users_user_account_key UNIQUE (user_id, account_id)
);
CREATE INDEX account_users_account_id_idx ON account_users (account_id);

-- One row per signed-in client (device). Only the SHA-256 of the token is kept.
CREATE TABLE user_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users ON DELETE CASCADE,
    client       text        NOT NULL,
    token_digest bytea       NOT NULL CHECK (octet_length(token_digest) = 32),
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT user_tokens_token_digest_key UNIQUE (token_digest),
    CONSTRAINT user_tokens_user_client_key UNIQUE (user_id, client)
);

-- Confirmation and password-reset tokens: digested, single use, bound to the address they
-- were sent to so a later e-mail change cannot be confirmed with an old link.
CREATE TABLE one_time_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users ON DELETE CASCADE,
    purpose      text        NOT NULL CHECK (purpose IN ('confirmation', 'reset_password')),
    email        text        NOT NULL,
    token_digest bytea       NOT NULL CHECK (octet_length(token_digest) = 32),
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT one_time_tokens_token_digest_key UNIQUE (token_digest)
);
CREATE INDEX one_time_tokens_user_id_idx ON one_time_tokens (user_id, purpose);

-- Mail is written here in the transaction that causes it and sent by `manage.py deliver-mail`.
CREATE TABLE mail_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text        NOT NULL,
    to_address      text        NOT NULL,
    subject         text        NOT NULL,
    -- Bodies carry one-time links; they are cleared once the message is sent.
    text_body       text,
    html_body       text,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    message_id      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);
CREATE INDEX mail_outbox_pending_idx ON mail_outbox (next_attempt_at) WHERE status = 'pending';

-- Fixed-window counters for section 7; rows past their window are deleted as new ones come in.
CREATE TABLE rate_limit_counters (
    bucket       text        NOT NULL,
    window_start timestamptz NOT NULL,
    hits         integer     NOT NULL CHECK (hits > 0),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (bucket, window_start)
);
CREATE INDEX rate_limit_counters_expires_at_idx ON rate_limit_counters (expires_at);

-- JSON documents are rendered in the database, in one place, so that a read is one round
-- trip and Python passes the text through (see resources/profile.py).
CREATE FUNCTION iso8601(ts timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

CREATE FUNCTION account_json(a accounts) RETURNS json
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
            'label', a.label_cache_key, 'inbox', a.inbox_cache_key, 'team', a.team_cache_key))
$$;

-- plpgsql, not sql: its query plan is cached per session instead of planned per call.
CREATE FUNCTION user_json(p_user_id bigint, p_avatar_url_prefix text) RETURNS json
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   a.name, a.status, a.locale
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
                  FROM memberships m), '[]'::json))
          FROM users u
         WHERE u.id = p_user_id);
END
$$;
