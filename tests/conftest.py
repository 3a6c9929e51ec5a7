"""Fixtures: a throwaway database on a real PostgreSQL, the app, users, gunicorn.

Tests commit for real (the house style's per-test rollback cannot serve the tests
that run gunicorn in another process), so every test makes its own users and
accounts with unique addresses and asserts only on those.
"""

import contextlib
import dataclasses
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import psycopg
import pytest
import webtest
from psycopg.rows import dict_row

import app as app_module
import config as config_module
import db
from services import passwords
from services import sessions
from services import users
from tests import contract
from tests.pgbouncer import PgBouncer

ROOT = pathlib.Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get('TEST_DATABASE_URL', 'postgresql://postgres@127.0.0.1:5432/postgres')
PASSWORD = 'correct horse 1'
TEST_SECRET_KEY = 'ZnJvbnRkZXNrIHRlc3RzIGtleSBvZiAzMiBieXRlcyE='
_unchecked_do_request = webtest.TestApp.do_request


def _checked_do_request(self, req, status=None, expect_errors=None):
    """Every WebTest response must be one /api/v1/openapi.json documents."""
    resp = _unchecked_do_request(self, req, status=status, expect_errors=expect_errors)
    contract.check(req.method, req.path_info, req.headers, resp.status_int, resp.headers, resp.body)
    return resp


# NOTE: on the class, not a subclass, so that the apps tests build themselves with
# webtest.TestApp(create_app(...)) are checked too. Routes the document does not know
# (a test's own /boom) are left alone; see tests/contract.py.
webtest.TestApp.do_request = _checked_do_request


def database_url_for(admin_url, name):
    return psycopg.conninfo.make_conninfo(admin_url, dbname=name)


@contextlib.contextmanager
def new_database(prefix='frontdesk_test', migrate=True):
    """A database of its own on TEST_DATABASE_URL's server; dropped afterwards."""
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


@pytest.fixture(scope='session')
def direct_database_url():
    """The session's database on the tests' PostgreSQL, migrated over a direct connection."""
    with new_database() as url:
        yield url


# --- issue 14: the suite through PgBouncer in transaction mode ---------------------------
# FRONTDESK_VIA_PGBOUNCER=1 (scripts/test's second pass): the app, the CLI and the mail
# worker reach the database through a private PgBouncer (tests/pgbouncer.py) with
# DB_PREPARED_STATEMENTS=off, as SPEC 16 deploys it; migrations and the tests' own
# look-ups (``conn``) stay direct.
VIA_PGBOUNCER = os.environ.get('FRONTDESK_VIA_PGBOUNCER') == '1'


@pytest.fixture(scope='session')
def pgbouncer():
    """A private PgBouncer in transaction mode in front of the tests' PostgreSQL."""
    bouncer = PgBouncer(ADMIN_URL, free_port()).start()
    yield bouncer
    bouncer.destroy()


@pytest.fixture(scope='session')
def database_url(request, direct_database_url):
    """The database as the service is given it: direct, or through PgBouncer."""
    if not VIA_PGBOUNCER:
        return direct_database_url
    dbname = psycopg.conninfo.conninfo_to_dict(direct_database_url)['dbname']
    return request.getfixturevalue('pgbouncer').url(dbname)


def pooler_env(direct_database_url):
    return {'DB_PREPARED_STATEMENTS': 'off', 'MIGRATE_DATABASE_URL': direct_database_url} if VIA_PGBOUNCER else {}
# --- end issue 14 ---------------------------------------------------------------------------


@pytest.fixture(scope='session')
def avatar_dir(tmp_path_factory):
    return tmp_path_factory.mktemp('avatars')


@pytest.fixture(scope='session')
def base_env(database_url, direct_database_url, avatar_dir):
    """The environment every app and gunicorn in the tests starts from."""
    return {
        'DATABASE_URL': database_url,
        'BCRYPT_ROUNDS': '4',
        'RATE_LIMITS': 'off',
        'AVATAR_DIR': str(avatar_dir),
        'FRONTEND_URL': 'http://frontdesk.test',
        **pooler_env(direct_database_url),
        # 32 bytes, so MFA is available (SPEC 12); tests of its absence drop it.
        'SECRET_KEY': TEST_SECRET_KEY,
    }


@pytest.fixture(scope='session')
def config(base_env):
    return config_module.load(base_env)


@pytest.fixture(scope='session')
def pool(config):
    pool = db.create_pool(config)
    yield pool
    pool.close()


@pytest.fixture(scope='session')
def queries():
    return db.load_queries()


@pytest.fixture(scope='session')
def testapp(config, pool):
    return webtest.TestApp(app_module.create_app(config, pool))


@pytest.fixture
def make_testapp(base_env, pool):
    """A TestApp whose config has ``overrides`` (e.g. ENABLE_ACCOUNT_SIGNUP='false')."""

    def make(**overrides):
        return webtest.TestApp(app_module.create_app(config_module.load({**base_env, **overrides}), pool))

    return make


@pytest.fixture
def conn(direct_database_url):
    """A connection of the test's own, for looking at what the service stored."""
    with psycopg.connect(direct_database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def unique_email(prefix='user'):
    return f'{prefix}-{uuid.uuid4().hex[:10]}@example.com'


@dataclasses.dataclass
class User:
    id: int
    email: str
    password: str
    token: str
    client: str
    access_token: str

    @property
    def headers(self):
        """The devise_token_auth headers a signed-in client sends."""
        return {'access-token': self.token, 'client': self.client, 'uid': self.email}


@pytest.fixture
def make_account(pool, queries):
    def make(name='Acme'):
        with pool.connection() as conn:
            return conn.execute(queries['accounts.insert'], {'name': name, 'locale': 'en'}).fetchone()['id']

    return make


@pytest.fixture
def make_user(pool, queries, config):
    """Create a confirmed user, its membership and a sign-in token, without HTTP."""

    def make(account_id=None, role='agent', confirmed=True, password=PASSWORD, name='Agent Smith'):
        email = unique_email()
        hashed = passwords.hash_password(password, config.bcrypt_rounds)
        with pool.connection() as conn, conn.transaction():
            user_id = users.create_user(conn, queries, name=name, email=email, encrypted_password=hashed,
                                        confirmed=confirmed)
            if account_id is not None:
                conn.execute(queries['memberships.insert'],
                             {'account_id': account_id, 'user_id': user_id, 'role': role, 'stamp_active': False})
            token, client, _ = sessions.issue(conn, queries, config, user_id)
            access_token = conn.execute('SELECT access_token FROM users WHERE id = %s', (user_id,)).fetchone()
        return User(user_id, email, password, token, client, access_token['access_token'])

    return make


@pytest.fixture
def admin(make_account, make_user):
    """An administrator of a fresh account; ``admin.account_id`` is that account."""
    account_id = make_account()
    user = make_user(account_id=account_id, role='administrator')
    user.account_id = account_id
    return user


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def wait_for(url, timeout=20.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f'process exited with {proc.returncode} before {url} answered')
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f'{url} did not answer within {timeout} s')


@contextlib.contextmanager
def run_gunicorn(env, workers=2, port=None, log_path=None):
    """Start real gunicorn from gunicorn.conf.py; yield its base URL; stop it."""
    port = port or free_port()
    full_env = {**os.environ, **env, 'BIND': f'127.0.0.1:{port}', 'WEB_CONCURRENCY': str(workers)}
    log = open(log_path, 'wb') if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, '-m', 'gunicorn', '-c', 'gunicorn.conf.py'],
        cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f'http://127.0.0.1:{port}'
    try:
        wait_for(base + '/healthz', proc=proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log_path:
            log.close()


@pytest.fixture(scope='session')
def gunicorn_url(base_env, tmp_path_factory):
    """One real gunicorn (2 workers) for the whole session."""
    log_path = tmp_path_factory.mktemp('gunicorn') / 'gunicorn.log'
    with run_gunicorn(base_env, workers=2, log_path=log_path) as base:
        yield base


@dataclasses.dataclass
class Answer:
    status: int
    headers: dict
    body: bytes

    @property
    def json(self):
        import json
        return json.loads(self.body)


def http(method, url, json_body=None, headers=None, data=None, timeout=30):
    """One real HTTP request with urllib; errors are answers, not exceptions."""
    import json
    headers = dict(headers or {})
    if json_body is not None:
        data = json.dumps(json_body).encode()
        headers.setdefault('Content-Type', 'application/json')
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            result = Answer(answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read())
    except urllib.error.HTTPError as ex:
        result = Answer(ex.code, {k.lower(): v for k, v in ex.headers.items()}, ex.read())
    contract.check(method, url, headers, result.status, result.headers, result.body)
    return result


def raw_request(base, data, timeout=10):
    """Send ``data`` as is on a new connection; return (status, headers, body)."""
    parts = urllib.parse.urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(data)
        answer = b''
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b'\r\n\r\n')
    lines = head.decode('latin-1').split('\r\n')
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(':') for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body
