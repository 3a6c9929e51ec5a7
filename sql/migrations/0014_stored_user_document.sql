-- The user JSON is stored, not built per read (issue 19). Every authenticated request
-- read it through user_json(), whose memberships join, plpgsql call and date formatting
-- cost PostgreSQL more than the rest of the request; mfa_enrollment_required() joined
-- the memberships again. Now users.doc holds the document, kept up to date on write by
-- the triggers below, and the read is one index lookup that returns it.
--
-- Two parts of the document depend on the reader, not on the row, so doc holds what
-- they are made of and the app finishes them (userdoc.py, the one renderer):
--   avatar_url: the stored file name (or null); the app prefixes AVATAR_URL_PREFIX;
--   accounts[].availability_status: null; the app derives it from availability,
--     auto_offline and active_at against the time of the read (SPEC 6.2).
-- "_mfa_required" (an account of the user enforces MFA, SPEC 12) rides along for the
-- access rules and is dropped from what is sent.
--
-- Concurrency: every write that changes an input of the document also updates the
-- user's row (the triggers on account_users and accounts set doc to NULL, which the
-- users trigger recomputes), so writers of one user's document queue on that row's
-- lock, and user_doc() is VOLATILE: under READ COMMITTED each of its queries takes a new
-- snapshot after the lock is granted and sees what the writer before it committed.
-- A new membership locks its account row FOR SHARE first, so it cannot interleave
-- with a rename of that account (the rename's update of the members' rows would miss
-- the uncommitted member, and the member's document the uncommitted name).
--
-- Expand only: user_json() stays for app servers of the previous release during a
-- rolling deploy (docs/operations.md); a later migration drops it.

ALTER TABLE users ADD COLUMN doc json;

CREATE FUNCTION user_doc(u users) RETURNS json
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   a.name, a.status, a.locale, a.enforce_mfa
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
            'avatar_url', u.avatar,
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
                    'availability_status', NULL,
                    'auto_offline', m.auto_offline) ORDER BY m.account_id)
                  FROM memberships m), '[]'::json),
            '_mfa_required', EXISTS (SELECT 1 FROM memberships m WHERE m.enforce_mfa)));
END
$$;

-- Recompute when an input of the document changed, or when a trigger below asked for
-- it by setting doc to NULL; other writes (sign-in bookkeeping, password hashes, MFA
-- step counters) leave it alone.
CREATE FUNCTION users_keep_doc() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.doc IS NULL
       OR (NEW.name, NEW.display_name, NEW.email, NEW.unconfirmed_email, NEW.confirmed_at,
           NEW.access_token, NEW.avatar, NEW.custom_attributes, NEW.ui_settings,
           NEW.message_signature, NEW.created_at, NEW.pubsub_token, NEW.mfa_enabled_at)
          IS DISTINCT FROM
          (OLD.name, OLD.display_name, OLD.email, OLD.unconfirmed_email, OLD.confirmed_at,
           OLD.access_token, OLD.avatar, OLD.custom_attributes, OLD.ui_settings,
           OLD.message_signature, OLD.created_at, OLD.pubsub_token, OLD.mfa_enabled_at) THEN
        NEW.doc := user_doc(NEW);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER users_keep_doc BEFORE INSERT OR UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION users_keep_doc();

CREATE FUNCTION account_users_refresh_doc() RETURNS trigger
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

CREATE TRIGGER account_users_refresh_doc AFTER INSERT OR DELETE ON account_users
    FOR EACH ROW EXECUTE FUNCTION account_users_refresh_doc();

CREATE TRIGGER account_users_refresh_doc_on_change AFTER UPDATE ON account_users
    FOR EACH ROW
    WHEN ((OLD.user_id, OLD.account_id, OLD.role, OLD.availability, OLD.auto_offline, OLD.active_at)
          IS DISTINCT FROM
          (NEW.user_id, NEW.account_id, NEW.role, NEW.availability, NEW.auto_offline, NEW.active_at))
    EXECUTE FUNCTION account_users_refresh_doc();

CREATE FUNCTION accounts_refresh_docs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE users SET doc = NULL
     WHERE id IN (SELECT user_id FROM account_users WHERE account_id = NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER accounts_refresh_docs AFTER UPDATE ON accounts
    FOR EACH ROW
    WHEN ((OLD.name, OLD.status, OLD.locale, OLD.enforce_mfa)
          IS DISTINCT FROM (NEW.name, NEW.status, NEW.locale, NEW.enforce_mfa))
    EXECUTE FUNCTION accounts_refresh_docs();

UPDATE users SET doc = NULL;
ALTER TABLE users ALTER COLUMN doc SET NOT NULL;
