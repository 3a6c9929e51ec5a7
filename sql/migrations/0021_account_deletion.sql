-- Deleting an account, and a person's data (SPEC 20).

-- A scheduled deletion. The reference dashboard reads the date and the reason from the
-- account's custom_attributes (marked_for_deletion_at, marked_for_deletion_reason), which
-- the same UPDATE writes; these columns are what the purge and the compliance row use, so
-- nothing depends on parsing that JSON. All three are set together or none is; the
-- requester is NULL when nobody asked (the last member erased themselves, SPEC 20).
ALTER TABLE accounts
    ADD COLUMN deletion_due_at       timestamptz,
    ADD COLUMN deletion_requested_at timestamptz,
    ADD COLUMN deletion_requested_by bigint,
    ADD CONSTRAINT accounts_deletion_scheduled CHECK (
        (deletion_due_at IS NULL) = (deletion_requested_at IS NULL)
        AND (deletion_requested_by IS NULL OR deletion_due_at IS NOT NULL));
-- The purge's scan: only scheduled accounts are in it.
CREATE INDEX accounts_deletion_due_idx ON accounts (deletion_due_at)
    WHERE deletion_due_at IS NOT NULL;

-- The one row that stays of a purged account (SPEC 20): its id, when it went, and who asked
-- for it and when. No names, no addresses. scheduled_by is a user id while that user
-- exists; erasing the user clears it (nothing that names an erased person survives).
CREATE TABLE account_deletions (
    account_id   bigint      PRIMARY KEY,
    deleted_at   timestamptz NOT NULL DEFAULT now(),
    scheduled_at timestamptz NOT NULL,
    scheduled_by bigint,
    reason       text        NOT NULL
                 CHECK (reason IN ('manual_deletion', 'last_member_erased'))
);
CREATE INDEX account_deletions_scheduled_by_idx ON account_deletions (scheduled_by)
    WHERE scheduled_by IS NOT NULL;

-- audit_events is append-only for the application's role (0008, 0019). A purge and an
-- erasure must still remove the rows of what they delete, so these two functions run as
-- the owner (SECURITY DEFINER, fixed search_path) and each refuses to touch the trail of
-- anything that still exists: an account only once its row is gone and its compliance row
-- written (in the caller's transaction), a user only once their row is gone. A thief of
-- the application's role can therefore not erase the trail of a live account or person.

-- A purged account's trail: every audit row of it.
CREATE FUNCTION erase_account_trail(p_account_id bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
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

-- An erased user's trail. Their audit rows: those about them go; on those about someone
-- else that they did (an administrator's action on a member), who did it, from where and
-- with which session are cleared, so the member's trail keeps the event but not the
-- erased person.
-- Rows whose details name one of their addresses go too; an address that now belongs to
-- a user who exists is left alone. A compliance row they scheduled keeps its date and
-- reason but no longer names them (the application's role may not update those rows).
CREATE FUNCTION erase_user_trail(p_user_id bigint, p_addresses text[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    erased bigint;
    cleared bigint;
    addresses text[];
BEGIN
    IF EXISTS (SELECT FROM users WHERE id = p_user_id) THEN
        RAISE EXCEPTION 'user % is not erased: their audit rows stay', p_user_id;
    END IF;
    SELECT coalesce(array_agg(a), '{}') INTO addresses
      FROM unnest(p_addresses) AS a
     WHERE a IS NOT NULL
       AND NOT EXISTS (SELECT FROM users u WHERE u.email = a OR u.unconfirmed_email = a);
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
$$;

REVOKE ALL ON FUNCTION erase_account_trail(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION erase_user_trail(bigint, text[]) FROM PUBLIC;

-- grant_app_role (0019) gives the application's role the two functions above as well,
-- and keeps account_deletions append-only. Migrations never change once on main, so this
-- is its new version.
CREATE OR REPLACE FUNCTION grant_app_role(app regrole) RETURNS void
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
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
REVOKE ALL ON FUNCTION grant_app_role(regrole) FROM PUBLIC;

-- The roles grant_app_role already ran for (they may insert audit rows and own nothing)
-- get what its new version gives, here, so an upgrade needs no second
-- `manage.py migrate --app-role`: the two functions, and account_deletions append-only.
DO $$
DECLARE
    app regrole;
BEGIN
    FOR app IN
        SELECT DISTINCT g.grantee::regrole
          FROM information_schema.role_table_grants g
         WHERE g.table_schema = 'public' AND g.table_name = 'audit_events'
           AND g.privilege_type = 'INSERT' AND g.grantee <> current_user
    LOOP
        EXECUTE format('REVOKE UPDATE, DELETE ON account_deletions FROM %s', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION erase_account_trail(bigint),'
                       ' erase_user_trail(bigint, text[]) TO %s', app);
    END LOOP;
END
$$;
