-- Suspending a member (SPEC 18, issue 21): an administrator stops a member from reaching the
-- account without deleting them, and a member whose every membership is suspended cannot
-- sign in at all.

-- A membership is active or suspended. The stored user document carries it, and the access
-- rules read it from there (middleware/auth.py). Only services/memberships.py writes it,
-- with the account row locked, so two administrators cannot suspend each other and leave
-- the account without an active one.
ALTER TABLE account_users
    ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended'));

-- When a session was last issued to the user (a sign-in, its second step, a reset or a
-- confirmation): the agents list shows it. Until now it was only in the audit log and in the
-- live sessions (filled in below). Not an input of the stored document.
ALTER TABLE users ADD COLUMN last_sign_in_at timestamptz;

-- Locked out: the user has memberships and every one is suspended (SPEC 18). No session and
-- no sign-in challenge is issued to such a user (services/sessions.refuse_locked_out); a user
-- without memberships is not locked out.
CREATE FUNCTION user_locked_out(p_user_id bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(bool_and(au.status = 'suspended'), false)
      FROM account_users au
     WHERE au.user_id = p_user_id
$$;

-- An account's MFA requirement binds its active members; a suspended member is bound by the
-- accounts they can still reach.
CREATE OR REPLACE FUNCTION mfa_enrollment_required(u users) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN u.mfa_enabled_at IS NOT NULL THEN false
                ELSE EXISTS (SELECT 1
                               FROM account_users au
                               JOIN accounts a ON a.id = au.account_id
                              WHERE au.user_id = u.id
                                AND au.status = 'active'
                                AND a.enforce_mfa) END
$$;

-- The stored user document (0014, in two parts since 0015) carries membership_status on
-- every entry of accounts, and takes account_id / role from the active memberships only: a
-- suspended one is never the user's current account (null when none is active). An
-- account's MFA requirement (_mfa_required) binds its active members only. These are the
-- memberships part, membership_doc: 0015's with those three changes; user_json (still in the
-- schema for the previous release, and what tests/test_user_document.py compares the stored
-- document with) gets the same ones.
CREATE OR REPLACE FUNCTION membership_doc(p_user_id bigint) RETURNS json
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN (
        WITH memberships AS (
            SELECT au.account_id, au.role, au.availability, au.auto_offline, au.active_at,
                   au.status AS membership_status, a.name, a.status, a.locale, a.enforce_mfa
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
                                        AND m.membership_status = 'active')));
END
$$;

-- user_json: the body of 0009 with the same changes as membership_doc.
CREATE OR REPLACE FUNCTION user_json(u users, p_avatar_url_prefix text) RETURNS json
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
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

-- A membership's status feeds its user's document: the trigger of 0014 on account_users
-- updates fires for it too.
DROP TRIGGER account_users_refresh_doc_on_change ON account_users;
CREATE TRIGGER account_users_refresh_doc_on_change AFTER UPDATE ON account_users
    FOR EACH ROW
    WHEN ((OLD.user_id, OLD.account_id, OLD.role, OLD.availability, OLD.auto_offline, OLD.active_at,
           OLD.status)
          IS DISTINCT FROM
          (NEW.user_id, NEW.account_id, NEW.role, NEW.availability, NEW.auto_offline, NEW.active_at,
           NEW.status))
    EXECUTE FUNCTION account_users_refresh_doc();

-- Every stored document gains membership_status (the users trigger recomputes a NULL doc
-- whole), in the same pass as the last sign-ins.
UPDATE users u
   SET doc = NULL,
       last_sign_in_at = GREATEST((SELECT max(t.created_at) FROM user_tokens t WHERE t.user_id = u.id),
                                  (SELECT max(e.created_at)
                                     FROM audit_events e
                                    WHERE e.subject_id = u.id
                                      AND e.event = 'sign_in_succeeded'));

-- One member of an account as its administrators see it (SPEC 18): the reference system's
-- agent shape, plus membership_status, mfa_enabled and last_sign_in_at.
CREATE FUNCTION agent_json(au account_users, u users, p_avatar_url_prefix text) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
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
