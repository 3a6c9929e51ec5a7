-- Sessions you can see (SPEC 13) and the audit log (SPEC 14).
--
-- A session is one row of user_tokens. It now remembers where it was opened (the address
-- and the User-Agent, cut to 512 characters, and what the parser read from it);
-- last_used_at is its last activity, stamped at most every 5 minutes.

ALTER TABLE user_tokens
    ADD COLUMN ip_address      text CHECK (char_length(ip_address) <= 64),
    ADD COLUMN user_agent      text CHECK (char_length(user_agent) <= 512),
    ADD COLUMN client_name     text CHECK (char_length(client_name) <= 255),
    ADD COLUMN browser_name    text CHECK (char_length(browser_name) <= 100),
    ADD COLUMN browser_version text CHECK (char_length(browser_version) <= 100),
    ADD COLUMN platform_name   text CHECK (char_length(platform_name) <= 100),
    ADD COLUMN device_name     text CHECK (char_length(device_name) <= 100);

-- Append-only: rows are written in the transaction of the event they record and never
-- changed. No foreign keys: a row outlives the user or account it names (a cascade would
-- be a DELETE the service's role may not do), and ids are never reused.
CREATE TABLE audit_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    event       text        NOT NULL CHECK (event ~ '^[a-z_]{1,64}$'),
    actor_id    bigint,
    subject_id  bigint,
    account_id  bigint,
    ip_address  text        CHECK (char_length(ip_address) <= 64),
    user_agent  text        CHECK (char_length(user_agent) <= 512),
    session_id  bigint,
    details     jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(details) = 'object')
);
-- GET /api/v1/profile/audit_events and the new-device check (a user's events, newest first).
CREATE INDEX audit_events_subject_idx ON audit_events (subject_id, id);
-- GET /api/v1/accounts/{id}/audit_events.
CREATE INDEX audit_events_account_idx ON audit_events (account_id, id) WHERE account_id IS NOT NULL;
-- manage.py prune.
CREATE INDEX audit_events_created_at_idx ON audit_events (created_at);

-- Nobody but the owner (the role migrations run as) may change or remove a row. Default
-- privileges (ALTER DEFAULT PRIVILEGES ... GRANT ALL ON TABLES TO <app role>) may have
-- granted more at CREATE TABLE: every other role keeps only SELECT and INSERT. Roles the
-- operator already granted the app's tables to (those that may INSERT into users) get
-- exactly those two. docs/security.md "The audit log" describes the setup.
REVOKE ALL ON audit_events FROM PUBLIC;
DO $$
DECLARE
    grantee_name text;
BEGIN
    FOR grantee_name IN
        SELECT DISTINCT acl.grantee::regrole::text
          FROM pg_class c, aclexplode(c.relacl) acl
         WHERE c.oid IN ('audit_events'::regclass, 'users'::regclass)
           AND acl.grantee <> 0
           AND acl.grantee <> c.relowner
           AND (c.oid = 'audit_events'::regclass OR acl.privilege_type = 'INSERT')
    LOOP
        EXECUTE format('REVOKE ALL ON audit_events FROM %s', grantee_name);
        EXECUTE format('GRANT SELECT, INSERT ON audit_events TO %s', grantee_name);
    END LOOP;
END
$$;

-- One event as the audit endpoints show it.
CREATE FUNCTION audit_event_json(e audit_events) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
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

-- One page of the audit endpoints from up to page_size + 1 rows, newest first: the extra
-- row only tells that a next page exists; next_before is then the lowest id shown.
CREATE FUNCTION audit_events_page(page audit_events[], page_size integer) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'events', COALESCE((SELECT json_agg(audit_event_json(e) ORDER BY e.id DESC)
                              FROM unnest(page[1:page_size]) e), '[]'),
        'next_before', CASE WHEN cardinality(page) > page_size THEN (page[page_size]).id END)
$$;
