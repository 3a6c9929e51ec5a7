"""db.Lookup: the hot statements sent through libpq directly behave as conn.execute
would: prepared once per connection, correct inside and after transactions, after the
session is reset, and with psycopg's exceptions (a lost connection is the 503's)."""

import psycopg
from psycopg.rows import dict_row
import pytest

import config as config_module
import db

SQL = 'SELECT $1::bigint + 1, $2::text'


@pytest.fixture
def lookup(base_env):
    return db.Lookup('test_lookup', SQL, config_module.load(base_env))


@pytest.fixture
def own(direct_database_url):
    with psycopg.connect(direct_database_url, autocommit=True) as conn:
        yield conn


def test_a_row_of_text(lookup, own):
    assert lookup.fetchone(own, 41, 'x') == [b'42', b'x']
    assert lookup.fetchone(own, 1, 'y') == [b'2', b'y']  # prepared now


def test_no_row(base_env, own):
    none = db.Lookup(
        'test_none', 'SELECT 1 WHERE $1::int = 0', config_module.load(base_env)
    )
    assert none.fetchone(own, 1) is None


def test_a_transaction_that_fails_takes_nothing_with_it(lookup, own):
    with pytest.raises(psycopg.errors.DivisionByZero):
        with own.transaction():
            assert lookup.fetchone(own, 1, 'in') == [b'2', b'in']
            own.execute('SELECT 1 / 0')
    assert lookup.fetchone(own, 2, 'after') == [b'3', b'after']


def test_a_reset_session_is_prepared_again(lookup, own):
    assert lookup.fetchone(own, 1, 'a') == [b'2', b'a']
    own.execute('DISCARD ALL')
    assert lookup.fetchone(own, 1, 'b') == [b'2', b'b']


def test_errors_are_psycopgs(base_env, own):
    check = db.Lookup(
        'test_check',
        'SELECT CASE WHEN $1::int > 0 THEN 1 / 0 END',
        config_module.load(base_env),
    )
    with pytest.raises(psycopg.errors.DivisionByZero) as raised:
        check.fetchone(own, 1)
    assert raised.value.diag.sqlstate == '22012'


def test_a_lost_connection_is_an_operational_error(lookup, direct_database_url):
    conn = psycopg.connect(direct_database_url, autocommit=True, row_factory=dict_row)
    assert lookup.fetchone(conn, 1, 'a') == [b'2', b'a']
    pid = conn.info.backend_pid
    with psycopg.connect(direct_database_url, autocommit=True) as other:
        other.execute('SELECT pg_terminate_backend(%s)', (pid,))
    with pytest.raises(psycopg.OperationalError):
        lookup.fetchone(conn, 1, 'b')
    conn.close()


def test_unprepared_behind_a_pooler(base_env, own):
    plain = db.Lookup(
        'test_plain',
        SQL,
        config_module.load({**base_env, 'DB_PREPARED_STATEMENTS': 'off'}),
    )
    assert plain.fetchone(own, 1, 'p') == [b'2', b'p']
    assert (
        own.execute(
            'SELECT count(*) FROM pg_prepared_statements WHERE name = %s',
            ('frontdesk_test_plain',),
        ).fetchone()[0]
        == 0
    )
