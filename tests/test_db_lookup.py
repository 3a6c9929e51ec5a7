"""db.Lookup: the hot statements sent through libpq directly behave as conn.execute
would: prepared once per connection, correct inside and after transactions, after the
session is reset, and with psycopg's exceptions (a lost connection is the 503's); rows
come back named and typed as declared, and a statement whose columns are not its row's
is refused."""

from typing import NamedTuple

import psycopg
from psycopg.rows import dict_row
import pytest

import config as config_module
import db

SQL = 'SELECT $1::bigint + 1 AS next, $2::text AS text'


class Row(NamedTuple):
    next: int
    text: str


class One(NamedTuple):
    one: int


@pytest.fixture
def lookup(base_env):
    return db.Lookup('test_lookup', SQL, config_module.load(base_env), Row)


@pytest.fixture
def own(direct_database_url):
    with psycopg.connect(direct_database_url, autocommit=True) as conn:
        yield conn


def test_a_row_of_text(lookup, own):
    assert lookup.fetchone(own, 41, 'x') == (42, 'x')
    assert lookup.fetchone(own, 1, 'y') == (2, 'y')  # prepared now


class Typed(NamedTuple):
    raw: bytes
    yes: bool
    no: bool
    ratio: float
    items: list
    absent: list | None
    present: list | None


def test_each_column_is_read_as_its_row_declares(base_env, own):
    typed = db.Lookup(
        'test_typed',
        "SELECT 'ab'::text AS raw, $1::bool AS yes, NOT $1::bool AS no,"
        ' 1.5 AS ratio, \'[1, "a"]\'::json AS items, NULL::json AS absent,'
        " '[2]'::json AS present",
        config_module.load(base_env),
        Typed,
    )
    row = typed.fetchone(own, True)
    assert row == (b'ab', True, False, 1.5, [1, 'a'], None, [2])
    assert (row.yes, row.no, row.absent) == (True, False, None)


def test_columns_that_are_not_the_rows_are_refused(base_env, own):
    swapped = db.Lookup(
        'test_swapped',
        'SELECT $2::text AS text, $1::bigint + 1 AS next',
        config_module.load(base_env),
        Row,
    )
    with pytest.raises(RuntimeError, match=r"\('text', 'next'\)"):
        swapped.fetchone(own, 1, 'a')


def test_no_row(base_env, own):
    none = db.Lookup(
        'test_none',
        'SELECT 1 AS one WHERE $1::int = 0',
        config_module.load(base_env),
        One,
    )
    assert none.fetchone(own, 1) is None


def test_a_transaction_that_fails_takes_nothing_with_it(lookup, own):
    with pytest.raises(psycopg.errors.DivisionByZero):
        with own.transaction():
            assert lookup.fetchone(own, 1, 'in') == (2, 'in')
            own.execute('SELECT 1 / 0')
    assert lookup.fetchone(own, 2, 'after') == (3, 'after')


def test_a_reset_session_is_prepared_again(lookup, own):
    assert lookup.fetchone(own, 1, 'a') == (2, 'a')
    own.execute('DISCARD ALL')
    assert lookup.fetchone(own, 1, 'b') == (2, 'b')


def test_errors_are_psycopgs(base_env, own):
    check = db.Lookup(
        'test_check',
        'SELECT CASE WHEN $1::int > 0 THEN 1 / 0 END AS one',
        config_module.load(base_env),
        One,
    )
    with pytest.raises(psycopg.errors.DivisionByZero) as raised:
        check.fetchone(own, 1)
    assert raised.value.diag.sqlstate == '22012'


def test_a_lost_connection_is_an_operational_error(lookup, direct_database_url):
    conn = psycopg.connect(direct_database_url, autocommit=True, row_factory=dict_row)
    assert lookup.fetchone(conn, 1, 'a') == (2, 'a')
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
        Row,
    )
    assert plain.fetchone(own, 1, 'p') == (2, 'p')
    assert (
        own.execute(
            'SELECT count(*) FROM pg_prepared_statements WHERE name = %s',
            ('frontdesk_test_plain',),
        ).fetchone()[0]
        == 0
    )
