"""Fixtures: a throwaway database on a real PostgreSQL, the app, users, gunicorn.

Tests commit for real (the house style's per-test rollback cannot serve the tests
that run gunicorn in another process), so every test makes its own users and
accounts with unique addresses and asserts only on those.

scripts/test runs the suite in several pytest-xdist workers at once. Each is a pytest
session of its own, so each has its own of every session fixture here: database, role,
PgBouncer, gunicorn, OpenID provider, temporary directories; every port is one the
system gave as free. Nothing a test makes may have a fixed name or place.
"""

import os

import hypothesis
import psycopg
from psycopg.rows import dict_row
import pytest
import webtest

import app as app_module
import config as config_module
import db
from services import passwords
from services import sessions
from services import users
from tests import contract
from tests.pgbouncer import PgBouncer
from tests.smtp_server import smtp_server
from tests.support.database import app_role
from tests.support.database import new_database
from tests.support.database import pooler_env
from tests.support.database import VIA_PGBOUNCER
from tests.support.oidc_provider import run_oidc_provider
from tests.support.rate_windows import start_clear_of_a_window_boundary
from tests.support.servers import free_port
from tests.support.servers import run_gunicorn
from tests.support.users import PASSWORD
from tests.support.users import TEST_SECRET_KEY
from tests.support.users import unique_email
from tests.support.users import User

# The long run of the attack machine (tests/test_attack_model.py, docs/security.md):
# scripts/test tests/test_attack_model.py --hypothesis-profile=attack
hypothesis.settings.register_profile(
    'attack',
    max_examples=60,  # per capability: 360 in all, about 19 minutes
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)


# Run in scripts/test's PgBouncer pass only, when both passes run (scripts/pytest-passes
# sets FRONTDESK_TEST_PASS=direct in the other): the property tests. Their subject is
# the answer to generated input, which issue 14 wants checked through PgBouncer (no
# response >= 500 there); the statements they reach, prepared on a direct connection,
# are every other test's in the direct pass. Run in both they were a sixth of the
# suite's CPU. Left out of collection, not deselected: schemathesis builds their cases
# as pytest collects them, 4 CPU-seconds in each worker. A run of one pass (arguments
# to scripts/test, or TEST_DATABASE_URL set) runs them straight on PostgreSQL.
if os.environ.get('FRONTDESK_TEST_PASS') == 'direct':
    collect_ignore = ['test_properties.py']


@pytest.hookimpl(tryfirst=True)  # before -m pgbouncer selects by it
def pytest_collection_modifyitems(items):
    """Mark pgbouncer every test given the service's database (``database_url``, also
    behind ``base_env``, ``pool``, ``testapp``, ``make_user``, ``gunicorn_url``...):
    scripts/test runs the marked tests a second time with that URL at PgBouncer in
    transaction mode. The app in process, gunicorn, manage.py and the mail worker all
    reach the database through it, so a new test of any of them is in that pass without
    anyone listing it, and a test it would not change (no service database: validators,
    style, a cluster or database of the test's own) is not run twice. A test that
    reaches the service's database some other way carries @pytest.mark.pgbouncer
    itself. One marked direct_only is not, when its subject is something PgBouncer
    does not change and the statements it reaches are other tests' in that pass, each
    module saying so: the attack machine (requests in generated orders), the contract
    tools and the docs page (clients made from the document, a browser), the
    reference dashboard's deletion code."""
    for item in items:
        if 'database_url' in getattr(
            item, 'fixturenames', ()
        ) and not item.get_closest_marker('direct_only'):
            item.add_marker(pytest.mark.pgbouncer)
    # The longest first (a stable sort: the rest keep their order, a module's tests
    # together). A run is as long as its last test's end: a 40 s test taken last keeps
    # the other workers idle, taken first it overlaps everything else. scripts/
    # pytest-passes hands tests out one at a time (--maxschedchunk 1), so the long ones
    # go to different workers.
    items.sort(key=lambda item: -_seconds(item.get_closest_marker('long')))


def _seconds(long):
    return long.args[0] if long else 0


_unchecked_do_request = webtest.TestApp.do_request


def _checked_do_request(self, req, status=None, expect_errors=None):
    """Every WebTest response must be one /api/v1/openapi.json documents."""
    resp = _unchecked_do_request(self, req, status=status, expect_errors=expect_errors)
    contract.check(
        req.method, req.path_info, req.headers, resp.status_int, resp.headers, resp.body
    )
    return resp


# NOTE: on the class, not a subclass, so that the apps tests build themselves with
# webtest.TestApp(create_app(...)) are checked too. Routes the document does not know
# (a test's own /boom) are left alone; see tests/contract.py.
webtest.TestApp.do_request = _checked_do_request


@pytest.fixture(scope='session')
def direct_database_url():
    """The session's database on the tests' PostgreSQL, migrated over a direct
    connection, as the role that owns it (TEST_DATABASE_URL's)."""
    with new_database() as url:
        yield url


@pytest.fixture(scope='session')
def app_database_url(direct_database_url):
    """The same database as the service's own role (SPEC 3.4): it owns nothing and may
    only read and write rows, so every test that goes through the app exercises its
    grants."""
    with app_role(direct_database_url) as url:
        yield url


@pytest.fixture(scope='session')
def pgbouncer(app_database_url):
    """A private PgBouncer in transaction mode in front of the tests' PostgreSQL, for
    the service's role."""
    bouncer = PgBouncer(app_database_url, free_port()).start()
    yield bouncer
    bouncer.destroy()


@pytest.fixture(scope='session')
def database_url(request, direct_database_url, app_database_url):
    """The database as the service is given it: direct, or, in scripts/test's second
    pass (FRONTDESK_VIA_PGBOUNCER=1), through PgBouncer in transaction mode. Every test
    that depends on it is in that pass (pytest_collection_modifyitems above)."""
    if not VIA_PGBOUNCER:
        return app_database_url
    dbname = psycopg.conninfo.conninfo_to_dict(direct_database_url)['dbname']
    return request.getfixturevalue('pgbouncer').url(dbname)


@pytest.fixture
def inbox():
    """A real SMTP server of the test's own (tests/smtp_server.py): what was mailed."""
    with smtp_server() as inbox:
        yield inbox


@pytest.fixture(scope='session')
def avatar_dir(tmp_path_factory):
    return tmp_path_factory.mktemp('avatars')


@pytest.fixture(scope='session')
def service_env(avatar_dir):
    """The service's settings besides its database, for the tests that give it a
    database of their own (so they are not in the PgBouncer pass for nothing)."""
    return {
        'BCRYPT_ROUNDS': '4',
        'RATE_LIMITS': 'off',
        'AVATAR_DIR': str(avatar_dir),
        'FRONTEND_URL': 'http://frontdesk.test',
        # 32 bytes, so MFA is available (SPEC 12); tests of its absence drop it.
        'SECRET_KEY': TEST_SECRET_KEY,
    }


@pytest.fixture(scope='session')
def base_env(service_env, database_url, direct_database_url):
    """The environment every app and gunicorn in the tests starts from."""
    return {
        **service_env,
        'DATABASE_URL': database_url,
        # Migrations and manage.py prune: the owner, directly.
        'MIGRATE_DATABASE_URL': direct_database_url,
        **pooler_env(),
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
        if overrides.get('RATE_LIMITS') == 'on':
            start_clear_of_a_window_boundary()
        return webtest.TestApp(
            app_module.create_app(config_module.load({**base_env, **overrides}), pool)
        )

    return make


@pytest.fixture
def conn(direct_database_url):
    """A connection of the test's own, for looking at what the service stored."""
    with psycopg.connect(
        direct_database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        yield conn


@pytest.fixture
def make_account(pool, queries):
    def make(name='Acme'):
        with pool.connection() as conn:
            return conn.execute(
                queries['accounts.insert'], {'name': name, 'locale': 'en'}
            ).fetchone()['id']

    return make


@pytest.fixture
def make_user(pool, queries, config):
    """Create a confirmed user, its membership and a sign-in token, without HTTP."""

    def make(
        account_id=None,
        role='agent',
        confirmed=True,
        password=PASSWORD,
        name='Agent Smith',
    ):
        email = unique_email()
        hashed = passwords.hash_password(password, config.bcrypt_rounds)
        with pool.connection() as conn, conn.transaction():
            user_id = users.create_user(
                conn,
                queries,
                name=name,
                email=email,
                encrypted_password=hashed,
                confirmed=confirmed,
            )
            if account_id is not None:
                conn.execute(
                    queries['memberships.insert'],
                    {
                        'account_id': account_id,
                        'user_id': user_id,
                        'role': role,
                        'stamp_active': False,
                    },
                )
            token, client, _ = sessions.issue(conn, queries, config, user_id)
            access_token = conn.execute(
                'SELECT access_token FROM users WHERE id = %s', (user_id,)
            ).fetchone()
        return User(
            user_id, email, password, token, client, access_token['access_token']
        )

    return make


@pytest.fixture
def admin(make_account, make_user):
    """An administrator of a fresh account; ``admin.account_id`` is that account."""
    account_id = make_account()
    user = make_user(account_id=account_id, role='administrator')
    user.account_id = account_id
    return user


@pytest.fixture(scope='session')
def gunicorn_url(base_env, tmp_path_factory):
    """One real gunicorn (2 workers) for the whole session."""
    log_path = tmp_path_factory.mktemp('gunicorn') / 'gunicorn.log'
    with run_gunicorn(base_env, workers=2, log_path=log_path) as base:
        yield base


@pytest.fixture(scope='session')
def oidc_provider(tmp_path_factory):
    """A real OpenID Connect provider on loopback for the session (SPEC 19): each test
    registers its own client and people (tests/support/oidc_provider.py)."""
    log_path = tmp_path_factory.mktemp('oidc_provider') / 'oidc_provider.log'
    with run_oidc_provider(log_path) as provider:
        yield provider
