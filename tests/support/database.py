"""The tests' databases: one of their own on TEST_DATABASE_URL's server, the service's
own role on it, PgBouncer."""

import contextlib
import os
import secrets
import uuid

import psycopg

import db

ADMIN_URL = os.environ.get(
    'TEST_DATABASE_URL', 'postgresql://postgres@127.0.0.1:5432/postgres'
)


def database_url_for(admin_url, name):
    return psycopg.conninfo.make_conninfo(admin_url, dbname=name)


@contextlib.contextmanager
def new_database(prefix='frontdesk_test', migrate=True):
    """A database of its own on TEST_DATABASE_URL's server; dropped afterwards. Named
    at random: the pytest-xdist workers of scripts/test share the server."""
    name = f'{prefix}_{uuid.uuid4().hex[:12]}'
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE {name}')
    url = database_url_for(ADMIN_URL, name)
    try:
        if migrate:
            db.migrate(url)
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS {name} WITH (FORCE)')


@contextlib.contextmanager
def app_role(owner_url):
    """A role for the service on ``owner_url``'s database (which that URL's role
    migrated), given its rows as ``manage.py migrate --app-role`` does (SPEC 3.4);
    yields its URL. Roles belong to the whole server: the name is this one's own, and
    the role is dropped afterwards."""
    name = f'frontdesk_app_{uuid.uuid4().hex[:12]}'
    password = secrets.token_hex(16)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
    try:
        db.grant_app_role(owner_url, name)
        yield psycopg.conninfo.make_conninfo(owner_url, user=name, password=password)
    finally:
        with psycopg.connect(owner_url, autocommit=True) as owner:
            owner.execute(f'DROP OWNED BY {name}')
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP ROLE {name}')


# FRONTDESK_VIA_PGBOUNCER=1 (scripts/test's second pass): the app, the CLI and the mail
# worker reach the database through a private PgBouncer (tests/pgbouncer.py) with
# DB_PREPARED_STATEMENTS=off, as SPEC 16 deploys it; migrations and the tests' own
# look-ups (``conn``) stay direct.
VIA_PGBOUNCER = os.environ.get('FRONTDESK_VIA_PGBOUNCER') == '1'


def pooler_env():
    return {'DB_PREPARED_STATEMENTS': 'off'} if VIA_PGBOUNCER else {}


def waiting_for(conn, blocker, marker=''):
    """The pids of the backends held up by backend ``blocker`` (it holds a lock they
    wait for, or waits for it ahead of them) in a statement whose text contains
    ``marker``. ``conn``: the test's ``conn`` (dict rows).

    pg_stat_activity lists every database of the server, the other test sessions'
    too, and their waits carry the same statement texts: only what ``blocker`` holds
    up is this test's, and at the lock the test means.
    """
    return [
        row['pid']
        for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ' AND datname = current_database() AND position(%s in query) > 0'
            ' AND %s = ANY(pg_blocking_pids(pid))',
            (marker, blocker),
        )
    ]
