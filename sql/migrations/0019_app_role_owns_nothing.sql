-- The application's database role owns nothing (SPEC 3.4).
--
-- Migrations run as the role that owns the schema (MIGRATE_DATABASE_URL); gunicorn and the
-- mail worker connect as another role (DATABASE_URL), which may only read and write rows.
-- Nothing here names that role: the operator makes it (docs/operations.md, "Database
-- roles"), and `manage.py migrate --app-role NAME` calls grant_app_role(NAME) below as the
-- owner. Its default privileges give the role the rows of every table a later migration
-- creates; a later append-only table revokes UPDATE and DELETE in its own migration, as 0008
-- does for audit_events.

-- What the application's role may do, and nothing more: SELECT, INSERT, UPDATE, DELETE on
-- the service's tables (now and, by default privileges, those the caller creates later),
-- the sequences' nextval; audit_events append-only, schema_migrations read-only; no
-- temporary tables (PUBLIC's TEMPORARY on the database goes when the caller owns it). Run
-- by the migration role; idempotent. A superuser, a role that may create roles or
-- databases, the caller itself, a member of it and a role owning a table are refused:
-- PostgreSQL checks no privilege of a superuser or of an owner.
CREATE FUNCTION grant_app_role(app regrole) RETURNS void
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
    EXECUTE format('REVOKE ALL ON FUNCTION prune_audit_events(integer),'
                   ' grant_app_role(regrole) FROM %s', app);
    IF pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') THEN
        EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    END IF;
END
$$;

-- The retention purge of the audit log (manage.py prune): the one way rows leave
-- audit_events. It runs as its owner, the migration role (SECURITY DEFINER, with a fixed
-- search_path so no caller's schema can stand in for audit_events). EXECUTE is nobody's
-- but the owner's: the application's role cannot call it. An operator may grant it to a
-- maintenance role that owns nothing, which then prunes without any DELETE of its own.
CREATE FUNCTION prune_audit_events(retention_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
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

REVOKE ALL ON FUNCTION grant_app_role(regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION prune_audit_events(integer) FROM PUBLIC;
