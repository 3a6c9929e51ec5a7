"""How much of audit_events and mail_outbox the export and the eraser read (SPEC 20,
migration 0024): a person's rows through indexes, not the whole of each table.

On a database of its own with enough rows that reading a whole table costs the planner
far more than the indexes (the numbers: docs/performance-log.md, 2026-11-27), the
statements run as the service runs them, and the transaction's own counters
(pg_stat_xact_user_tables) say how often each table was read from end to end. ANALYZE
reads every row of tables this small, so the statistics, and the plans, are the same on
every run.
"""

import orjson
import psycopg
from psycopg.rows import dict_row
import pytest

from services import deletion
from services import export
from tests.support.database import new_database

USERS = 2_000
EVENTS = 20_000
MAILS = 20_000
SEED = (
    f"""INSERT INTO users (name, email, access_token)
    SELECT 'User ' || i, 'user' || i || '@example.com', md5(i::text) || md5('t' || i)
      FROM generate_series(1, {USERS}) AS i""",
    # Each user the subject of some events, the actor of some of their own and of
    # some of another's; a fifth without an actor (failed sign-ins).
    f"""INSERT INTO audit_events (event, actor_id, subject_id, ip_address, details)
    SELECT 'sign_in_succeeded',
           CASE i % 10 WHEN 0 THEN NULL WHEN 1 THEN NULL
                       WHEN 2 THEN 1 + (i * 7) % {USERS} ELSE 1 + i % {USERS} END,
           1 + i % {USERS}, '203.0.113.1', '{{"browser_name": "Firefox"}}'
      FROM generate_series(1, {EVENTS}) AS i""",
    # A fifth of the mail is nobody's account's (written before 0022), to an address.
    f"""INSERT INTO mail_outbox (kind, user_id, to_address, subject, status)
    SELECT 'reset_password', CASE WHEN i % 5 = 0 THEN NULL ELSE u END,
           'user' || u || '@example.com', 'Reset your password', 'sent'
      FROM generate_series(1, {MAILS}) AS i,
           LATERAL (SELECT 1 + i / 5 % {USERS}) AS owner(u)""",
)


@pytest.fixture(scope='module')
def filled():
    with new_database('frontdesk_reads') as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in SEED:
                conn.execute(statement)
            conn.execute('ANALYZE')
        yield url


def full_reads(conn):
    """How many times this transaction read each table from end to end (a parallel
    worker's reads would not be counted here: the caller turns them off)."""
    return {
        row['relname']: row['seq_scan']
        for row in conn.execute(
            'SELECT relname, seq_scan FROM pg_stat_xact_user_tables'
            " WHERE relname IN ('audit_events', 'mail_outbox')"
        )
    }


def user_with_every_kind_of_row(conn):
    """A user who is the actor of another's event and has mail of nobody's account to
    their address: both index arms of each part have rows to find."""
    return conn.execute(
        'SELECT e.actor_id AS id FROM audit_events e'
        ' WHERE e.actor_id <> e.subject_id'
        '   AND EXISTS (SELECT FROM mail_outbox m WHERE m.user_id IS NULL'
        "               AND m.to_address = 'user' || e.actor_id || '@example.com')"
        ' ORDER BY e.actor_id LIMIT 1'
    ).fetchone()['id']


def test_the_export_reads_neither_table_whole(filled, queries):
    with psycopg.connect(filled, row_factory=dict_row) as conn:
        user_id = user_with_every_kind_of_row(conn)
        conn.commit()
        conn.execute('SET LOCAL max_parallel_workers_per_gather = 0')
        doc = conn.execute(
            queries['export.document'],
            {
                'user_id': user_id,
                'session_id': None,
                'retention_days': 365,
                'max_rows': export.MAX_ROWS,
                'withheld': '{}',
            },
        ).fetchone()['doc']
        assert full_reads(conn) == {'audit_events': 0, 'mail_outbox': 0}
        conn.rollback()
        expected = conn.execute(
            'SELECT (SELECT count(*) FROM audit_events'
            '         WHERE subject_id = %(id)s OR actor_id = %(id)s) AS events,'
            '       (SELECT count(*) FROM mail_outbox'
            '         WHERE user_id = %(id)s OR (user_id IS NULL AND to_address ='
            "               'user' || %(id)s || '@example.com')) AS mails",
            {'id': user_id},
        ).fetchone()
    exported = orjson.loads(doc)
    assert len(exported['audit_events']) == expected['events']
    assert any(
        event['actor_id'] == user_id != event['subject_id']
        for event in exported['audit_events']
    )
    assert len(exported['mails']) == expected['mails']


def test_an_erasure_reads_each_table_once_for_what_no_index_serves(filled, queries):
    """Once: audit_events for the addresses in details (erase_user_trail's DELETE),
    mail_outbox for them in subjects and bodies (deletion.erase_user's); the actor's
    rows (erase_user_trail's UPDATE) through audit_events_actor_idx."""
    with psycopg.connect(filled, row_factory=dict_row) as conn:
        user_id = user_with_every_kind_of_row(conn)
        conn.commit()
        conn.execute('SET LOCAL max_parallel_workers_per_gather = 0')
        # config=None: the eraser reads nothing of it.
        assert deletion.erase_user(conn, queries, None, user_id) is not None
        reads = full_reads(conn)
        actor_rows = conn.execute(
            'SELECT count(*) AS n FROM audit_events WHERE actor_id = %s', (user_id,)
        ).fetchone()['n']
        conn.rollback()
    assert reads == {'audit_events': 1, 'mail_outbox': 1}
    assert actor_rows == 0
