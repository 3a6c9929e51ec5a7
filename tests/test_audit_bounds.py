"""What the audit log holds (SPEC 14, 3.4): unauthenticated traffic cannot grow it
without bound, and a member's own feed never shows another user's address or device."""

import urllib.parse
import uuid

import pytest

from services import audit
from tests.support.users import PASSWORD
from tests.support.users import unique_email
from tests.support.users import unique_ip
from tests.test_audit import sign_in


def rows_from(conn, ip):
    return conn.execute(
        'SELECT subject_id, details FROM audit_events'
        ' WHERE ip_address = %s ORDER BY id',
        (ip,),
    ).fetchall()


def counted(conn, ip, reason):
    row = conn.execute(
        'SELECT sum(hits) AS n FROM rate_limit_counters WHERE bucket LIKE %s',
        (f'audit sign_in_failed|ip={ip}|reason={reason}|%',),
    ).fetchone()
    return row['n']


def test_forty_refused_sign_ins_are_one_row_and_a_count(make_testapp, make_user, conn):
    app = make_testapp(RATE_LIMITS='on')
    user, ip = make_user(), unique_ip()
    conn.execute('DELETE FROM audit_events WHERE ip_address = %s', (ip,))
    for _ in range(5):
        sign_in(app, user.email, 'wrong password', status=401, ip=ip)
    for _ in range(40):
        sign_in(app, user.email, 'wrong password', status=429, ip=ip)
    reasons = [row['details']['reason'] for row in rows_from(conn, ip)]
    assert reasons == ['password'] * 5 + ['rate_limited']
    assert counted(conn, ip, 'rate_limited') == 40


def test_failed_sign_ins_for_unknown_addresses_are_one_row_per_ip_and_hour(
    testapp, conn
):
    ip = unique_ip()
    conn.execute('DELETE FROM audit_events WHERE ip_address = %s', (ip,))
    for _ in range(30):
        sign_in(testapp, unique_email('nobody'), 'a password', status=401, ip=ip)
    assert [(row['subject_id'], row['details']) for row in rows_from(conn, ip)] == [
        (None, {'reason': 'password'})
    ]
    assert counted(conn, ip, 'password') == 30


def test_refused_sign_ins_are_bounded_per_address_not_per_spelling(testapp, conn):
    """Every address of one IPv6 /64, and every spelling of an IPv4 address, is one
    client to the one-row-per-hour bound, as to the rate limits."""
    prefix = '2001:db8:%x:%x' % (
        uuid.uuid4().int % 0xFFFF + 1,
        uuid.uuid4().int % 0xFFFF,
    )
    ip = unique_ip()
    spellings = [f'{prefix}::{host:x}' for host in range(1, 6)] + [
        f'{prefix.upper()}:0:0:0:ffff',
        ip,
        f'::ffff:{ip}',
        f'::FFFF:{ip}',
        f'0:0:0:0:0:ffff:{ip}',
    ]
    conn.execute('DELETE FROM audit_events WHERE ip_address = ANY(%s)', (spellings,))
    for spelling in spellings:
        sign_in(testapp, unique_email('nobody'), 'a password', status=401, ip=spelling)
    rows = conn.execute(
        'SELECT ip_address FROM audit_events WHERE ip_address = ANY(%s)', (spellings,)
    ).fetchall()
    assert [row['ip_address'] for row in rows] == [f'{prefix}::1', ip]


def test_a_members_feed_names_the_administrator_not_their_address_or_device(
    testapp, admin, make_user
):
    member = make_user(account_id=admin.account_id)
    testapp.delete(
        f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/sessions',
        headers={
            **admin.headers,
            'User-Agent': 'Admin Browser 1.0',
            'X-Real-IP': '192.0.2.200',
        },
    )
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': member.email, 'password': member.password}
    )
    headers = {
        name: signed_in.headers[name] for name in ('access-token', 'client', 'uid')
    }
    events = testapp.get('/api/v1/profile/audit_events', headers=headers).json['events']
    ended = next(
        event for event in events if event['event'] == 'sessions_ended_by_administrator'
    )
    assert ended['actor_id'] == admin.id
    assert (
        ended['ip_address'] is None
        and ended['user_agent'] is None
        and ended['session_id'] is None
    )
    # The member's own events keep theirs.
    own = next(event for event in events if event['event'] == 'sign_in_succeeded')
    assert own['ip_address'] is not None
    # The administrator's own feed and the account's keep the administrator's facts.
    account = testapp.get(
        f'/api/v1/accounts/{admin.account_id}/audit_events', headers=admin.headers
    ).json
    by_admin = next(
        event
        for event in account['events']
        if event['event'] == 'sessions_ended_by_administrator'
    )
    assert (
        by_admin['ip_address'] == '192.0.2.200'
        and by_admin['user_agent'] == 'Admin Browser 1.0'
    )


# Subject ids of the unrelated users' events: no user of the test has one this high.
UNRELATED = 10**12


def rows_read(plan):
    """Rows every scan of ``audit_events`` in an EXPLAIN (ANALYZE, FORMAT JSON) plan
    looked at: those it returned and those its filter threw away."""
    read = 0
    if plan.get('Relation Name') == 'audit_events':
        loops = plan.get('Actual Loops', 1)
        read += (plan['Actual Rows'] + plan.get('Rows Removed by Filter', 0)) * loops
    for child in plan.get('Plans', ()):
        read += rows_read(child)
    return read


@pytest.mark.parametrize('query', ['', 'event=sign_in_succeeded', 'user_id={other}'])
def test_an_accounts_feed_reads_its_own_events_not_the_whole_log(
    testapp, admin, make_user, conn, queries, query
):
    """Attack: anyone signs up (administrator of a new, empty account) and asks for its
    audit feed again and again; each request scanned the whole audit log (every user's
    events, kept a year) for the account's few, with no rate limit: a database
    denial of service for the price of a sign-up."""
    agent = make_user(account_id=admin.account_id)
    sign_in(testapp, agent.email, PASSWORD, ip=unique_ip())
    other = make_user()
    # A log as it grows: 100,000 events of 5,000 other users (``other`` one of them),
    # so the statistics the planner reads after ANALYZE look like a real one's. All on
    # one user, they told it every user has thousands of events, and it sometimes chose
    # a sequential scan per member instead of the subject index.
    conn.execute(
        'INSERT INTO audit_events (event, subject_id, ip_address)'
        " SELECT 'sign_in_failed',"
        ' CASE WHEN i %% 5000 = 0 THEN %s ELSE %s + i %% 5000 END,'
        " '192.0.2.1' FROM generate_series(1, 100000) AS i",
        (other.id, UNRELATED),
    )
    try:
        conn.execute('ANALYZE audit_events')
        query = query.format(other=other.id)
        events = testapp.get(
            f'/api/v1/accounts/{admin.account_id}/audit_events?{query}',
            headers=admin.headers,
        ).json['events']
        assert [event['subject_id'] for event in events] == (
            [] if 'user_id' in query else [agent.id]
        )
        params = dict(urllib.parse.parse_qsl(query))
        plan = conn.execute(
            'EXPLAIN (ANALYZE, FORMAT JSON) ' + queries['audit.for_account'],
            {
                'account_id': admin.account_id,
                'sign_in_events': list(audit.SIGN_IN_EVENTS),
                'before': 2**63 - 1,
                'limit': 25,
                'event': params.get('event'),
                'user_id': int(params['user_id']) if 'user_id' in params else None,
                'since': None,
                'until': None,
            },
        ).fetchone()['QUERY PLAN']
        assert rows_read(plan[0]['Plan']) < 1000
    finally:
        conn.execute(
            'DELETE FROM audit_events WHERE subject_id = %s OR subject_id > %s',
            (other.id, UNRELATED),
        )
