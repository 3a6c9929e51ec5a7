"""The application's database role owns nothing (SPEC 3.4).

The whole suite's app, gunicorn and mail worker connect as a role of the session's own,
given its rows by ``manage.py migrate --app-role`` (tests/conftest.py,
``app_database_url``); migrations and prune run as the owner. These tests pin what that
role may and may not do.
"""

import shutil
import uuid

import psycopg
import pytest

import db
from tests.support.database import app_role
from tests.support.database import new_database
from tests.support.users import PASSWORD
from tests.test_cli import manage

ROWS = {'SELECT', 'INSERT', 'UPDATE', 'DELETE'}
# What the role has beyond nothing, where it is not ROWS.
NARROWER = {
    'audit_events': {'SELECT', 'INSERT'},
    'schema_migrations': {'SELECT'},
    # SPEC 20: the compliance row of a purged account is written once and kept.
    'account_deletions': {'SELECT', 'INSERT'},
}
PRIVILEGES = (*sorted(ROWS), 'TRUNCATE', 'REFERENCES', 'TRIGGER')


@pytest.fixture
def service_role(pool):
    """The role the service's connections sign in as."""
    with pool.connection() as service:
        return service.execute('SELECT current_user AS name').fetchone()['name']


def test_the_service_signs_in_and_records_it_as_a_role_that_owns_nothing(
    testapp, pool, conn, make_user, service_role
):
    user = make_user()
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, status=200
    )
    assert signed_in.json['data']['email'] == user.email
    assert [
        row['event']
        for row in conn.execute(
            'SELECT event FROM audit_events WHERE subject_id = %s', (user.id,)
        )
    ] == ['sign_in_succeeded']
    assert conn.execute(
        'SELECT rolsuper, rolcreaterole, rolcreatedb,'
        ' (SELECT count(*) FROM pg_class WHERE relowner = r.oid) AS owned'
        ' FROM pg_roles r WHERE rolname = %s',
        (service_role,),
    ).fetchone() == {
        'rolsuper': False,
        'rolcreaterole': False,
        'rolcreatedb': False,
        'owned': 0,
    }


@pytest.mark.parametrize(
    'statement',
    [
        "UPDATE audit_events SET event = 'signed_out'",
        'DELETE FROM audit_events',
        'TRUNCATE audit_events',
        'SELECT prune_audit_events(1)',
        "COPY (SELECT 1) TO PROGRAM 'true'",
        'CREATE TABLE intruder (id int)',
        'CREATE TEMPORARY TABLE intruder (id int)',
        'ALTER TABLE users ADD COLUMN intruder int',
        'DROP TABLE users',
        "DELETE FROM schema_migrations WHERE version = '0001_initial'",
        'SELECT grant_app_role(current_user::regrole)',
    ],
)
def test_the_apps_role_cannot_rewrite_history_run_programs_or_change_the_schema(
    database_url, statement
):
    with psycopg.connect(database_url, autocommit=True) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute(statement)


def test_the_apps_role_appends_to_the_audit_log_and_reads_it(database_url, conn):
    with psycopg.connect(database_url, autocommit=True) as app:
        (event_id,) = app.execute(
            "INSERT INTO audit_events (event, subject_id) VALUES ('signed_out', -1)"
            ' RETURNING id'
        ).fetchone()
        assert app.execute(
            'SELECT event FROM audit_events WHERE id = %s', (event_id,)
        ).fetchone() == ('signed_out',)
    conn.execute('DELETE FROM audit_events WHERE id = %s', (event_id,))


def test_the_apps_role_has_the_rows_of_every_table_and_nothing_more(conn, service_role):
    tables = [
        row['relname']
        for row in conn.execute(
            "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p')"
            " AND relnamespace = 'public'::regnamespace ORDER BY relname"
        )
    ]
    assert {'users', 'audit_events', 'mail_outbox', 'schema_migrations'} <= set(tables)
    granted = {
        table: {
            privilege
            for privilege in PRIVILEGES
            if conn.execute(
                'SELECT has_table_privilege(%s, %s, %s) AS yes',
                (service_role, f'public.{table}', privilege),
            ).fetchone()['yes']
        }
        for table in tables
    }
    assert granted == {table: NARROWER.get(table, ROWS) for table in tables}


def test_a_later_migrations_table_and_sequence_are_the_apps_without_a_grant(
    tmp_path,
):
    """Default privileges: a table a later migration creates (with a serial column, so
    a sequence of its own) is the app role's to use, with no grant of its own."""
    for path in db.migration_files():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / '9999_later.sql').write_text(
        'CREATE TABLE later (id serial PRIMARY KEY, note text);\n'
    )
    with new_database('frontdesk_later') as owner_url, app_role(owner_url) as app_url:
        db.migrate(owner_url, directory=tmp_path)
        with psycopg.connect(app_url, autocommit=True) as app:
            app.execute("INSERT INTO later (note) VALUES ('a')")
            app.execute("UPDATE later SET note = 'b'")
            assert app.execute('SELECT note FROM later').fetchall() == [('b',)]
            app.execute('DELETE FROM later')
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute('DROP TABLE later')


def test_prune_is_the_owners_the_apps_role_alone_deletes_nothing(
    base_env, conn, make_user
):
    user = make_user()
    conn.execute(
        'INSERT INTO audit_events (event, subject_id, created_at)'
        " VALUES ('signed_out', %s, now() - interval '400 days')",
        (user.id,),
    )
    only_the_app = {**base_env, 'MIGRATE_DATABASE_URL': ''}
    refused = manage(only_the_app, 'prune')
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'prune: this role may not delete audit events; run it as the owner of '
        'audit_events (the role migrations run as, MIGRATE_DATABASE_URL)'
    )
    assert conn.execute(
        'SELECT count(*) AS n FROM audit_events WHERE subject_id = %s', (user.id,)
    ).fetchone() == {'n': 1}
    # The purge runs as its owner, whoever calls it, with a search_path of its own.
    assert conn.execute(
        'SELECT prosecdef, proconfig FROM pg_proc'
        " WHERE oid = 'prune_audit_events(integer)'::regprocedure"
    ).fetchone() == {'prosecdef': True, 'proconfig': ['search_path=public, pg_temp']}


def test_migrate_refuses_the_owner_or_a_superuser_as_the_apps_role(base_env, conn):
    owner = conn.execute('SELECT current_user AS name').fetchone()['name']
    refused = manage(base_env, 'migrate', '--app-role', owner)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"manage.py migrate: the application's role {owner} is the role migrations "
        'run as; it must be another'
    )
    superuser = f'frontdesk_super_{uuid.uuid4().hex[:12]}'
    conn.execute(f'CREATE ROLE {superuser} SUPERUSER')
    try:
        refused = manage(base_env, 'migrate', '--app-role', superuser)
    finally:
        conn.execute(f'DROP ROLE {superuser}')
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"manage.py migrate: the application's role {superuser} may not be a "
        'superuser nor create roles or databases'
    )
    missing = manage(base_env, 'migrate', '--app-role', 'no_such_role_here')
    assert missing.returncode == 1
    assert 'role "no_such_role_here" does not exist' in missing.stderr
