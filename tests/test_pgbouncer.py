"""Through PgBouncer in transaction mode (SPEC 16): why DB_PREPARED_STATEMENTS exists,
and that migrations go direct. Every test given the service's database runs through
PgBouncer in scripts/test's second pass (FRONTDESK_VIA_PGBOUNCER=1, the pgbouncer mark
of tests/conftest.py)."""

import uuid

import psycopg
import pytest

import config as config_module
import db
from tests.pgbouncer import PgBouncer
from tests.support.database import ADMIN_URL
from tests.support.database import database_url_for
from tests.support.servers import free_port
from tests.test_cli import manage


def run_twice_ten_times(pool, sql):
    """The same query 10 times on each of two pooled connections: psycopg prepares it
    on its 5th run on a connection. Returns the errors."""
    errors = []
    with pool.connection() as first, pool.connection() as second:
        for _ in range(10):
            for conn in (first, second):
                try:
                    conn.execute(sql).fetchall()
                except psycopg.Error as ex:
                    errors.append(ex)
    return errors


@pytest.mark.parametrize('setting', ['on', 'off'])
def test_prepared_statements_break_behind_a_transaction_pooler_unless_off(
    pgbouncer, direct_database_url, base_env, queries, setting
):
    dbname = psycopg.conninfo.conninfo_to_dict(direct_database_url)['dbname']
    config = config_module.load(
        {
            **base_env,
            'DATABASE_URL': pgbouncer.url(dbname),
            'DB_POOL_MAX_SIZE': '2',
            'DB_PREPARED_STATEMENTS': setting,
        }
    )
    pool = db.create_pool(config)
    try:
        errors = run_twice_ten_times(pool, queries['health.applied_migrations'])
    finally:
        pool.close()
    if setting == 'off':
        assert errors == []
    else:
        # Both clients' "_pg3_0" land on one server session (or one's name on
        # another's).
        assert errors, (
            'prepared statements survived transaction pooling: the test proves nothing'
        )
        assert {type(ex) for ex in errors} <= {
            psycopg.errors.DuplicatePreparedStatement,
            psycopg.errors.InvalidSqlStatementName,
        }, errors


def test_every_connection_of_the_service_is_unprepared_when_off(base_env):
    on = config_module.load({**base_env, 'DB_PREPARED_STATEMENTS': 'on'})
    off = config_module.load({**base_env, 'DB_PREPARED_STATEMENTS': 'off'})
    assert db.session_options(on) == {}
    assert db.session_options(off) == {'prepare_threshold': None}
    with db.connect(off) as conn:
        assert conn.prepare_threshold is None
    pool = db.create_pool(off)
    try:
        with pool.connection() as conn:
            assert conn.prepare_threshold is None
    finally:
        pool.close()
    with pytest.raises(config_module.ConfigError, match='DB_PREPARED_STATEMENTS'):
        config_module.load({**base_env, 'DB_PREPARED_STATEMENTS': 'no'})


def test_migrate_uses_migrate_database_url_when_set(pgbouncer):
    """DATABASE_URL at PgBouncer, MIGRATE_DATABASE_URL direct: migrate takes the latter
    (a closed port as DATABASE_URL proves it does not even look at the former)."""
    name = f'frontdesk_migrate_direct_{pgbouncer.port}'
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE {name}')
    direct = database_url_for(ADMIN_URL, name)
    try:
        done = manage(
            {
                'DATABASE_URL': 'postgresql://nobody@127.0.0.1:1/nothing',
                'MIGRATE_DATABASE_URL': direct,
            },
            'migrate',
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(
            f'applied {len(db.migration_files())} migration(s)'
        )
        done = manage(
            {
                'DATABASE_URL': pgbouncer.url(name),
                'MIGRATE_DATABASE_URL': direct,
                'DB_PREPARED_STATEMENTS': 'off',
            },
            'migrate',
        )
        assert (done.returncode, done.stdout.strip()) == (
            0,
            'applied 0 migration(s): none pending',
        ), done.stderr
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE {name} WITH (FORCE)')


def test_migrate_through_a_transaction_pooler_stops_instead_of_running_unlocked():
    """Without MIGRATE_DATABASE_URL, migrate through PgBouncer must not apply anything
    outside the server session that holds its lock. server_round_robin and two warm
    server connections make PgBouncer move every statement to the other session."""
    name = f'frontdesk_migrate_pooled_{uuid.uuid4().hex[:8]}'
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE {name}')
    bouncer = PgBouncer(ADMIN_URL, free_port(), server_round_robin='1').start()
    try:
        first, second = (
            psycopg.connect(bouncer.url(name), prepare_threshold=None) for _ in range(2)
        )
        with first, second:
            for conn in (
                first,
                second,
            ):  # two transactions at once: two server connections
                conn.execute('SELECT 1')
        with pytest.raises(RuntimeError, match='MIGRATE_DATABASE_URL'):
            db.migrate(bouncer.url(name))
        with psycopg.connect(database_url_for(ADMIN_URL, name)) as conn:
            # The check runs before the bookkeeping too, so even schema_migrations may
            # not exist.
            assert conn.execute("SELECT to_regclass('accounts')").fetchone()[0] is None
            if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0]:
                assert (
                    conn.execute('SELECT count(*) FROM schema_migrations').fetchone()[0]
                    == 0
                )
    finally:
        bouncer.destroy()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE {name} WITH (FORCE)')


def test_a_test_given_the_services_database_is_in_the_pgbouncer_pass(request, testapp):
    """scripts/test's second pass takes the tests marked pgbouncer: one that drives the
    app on the service's database is among them without being listed anywhere."""
    assert request.node.get_closest_marker('pgbouncer') is not None


def test_a_test_without_the_services_database_runs_once(request, tmp_path):
    assert request.node.get_closest_marker('pgbouncer') is None
