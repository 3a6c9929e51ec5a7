"""The audit log (SPEC 14): the events written, the two read endpoints, prune, and the
database role that may only read and append."""

import json
import re
import subprocess
import sys
import urllib.parse
import uuid

import psycopg
import pytest

import db
from services import audit
from services import passwords
from tests.support import ROOT
from tests.support.database import ADMIN_URL
from tests.support.database import database_url_for
from tests.support.users import PASSWORD
from tests.support.users import unique_email
from tests.support.users import unique_ip

FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0'
NEW_PASSWORD = 'a brand new secret 9'


def events_of(conn, user_id):
    return conn.execute(
        'SELECT * FROM audit_events WHERE subject_id = %s ORDER BY id', (user_id,)
    ).fetchall()


def names(rows):
    return [row['event'] for row in rows]


def sign_in(app, email, password, status=200, agent=FIREFOX, ip='198.51.100.4'):
    return app.post_json(
        '/auth/sign_in',
        {'email': email, 'password': password},
        headers={'User-Agent': agent, 'X-Real-IP': ip},
        status=status,
    )


def headers_of(resp):
    return {name: resp.headers[name] for name in ('access-token', 'client', 'uid')}


def test_sign_ins_and_sign_out_are_recorded_with_where_they_came_from(
    testapp, make_user, conn
):
    user = make_user()
    signed_in = headers_of(sign_in(testapp, user.email, PASSWORD))
    sign_in(testapp, user.email, 'wrong password', status=401)
    testapp.delete('/auth/sign_out', headers={**signed_in, 'User-Agent': FIREFOX})

    rows = events_of(conn, user.id)

    assert names(rows) == ['sign_in_succeeded', 'sign_in_failed', 'signed_out']
    succeeded, failed, signed_out = rows
    session = succeeded['session_id']
    assert session is not None and signed_out['session_id'] == session
    assert (
        succeeded['actor_id'] == user.id and succeeded['ip_address'] == '198.51.100.4'
    )
    assert succeeded['user_agent'] == FIREFOX
    assert succeeded['details'] == {
        'browser_name': 'Firefox',
        'browser_version': '120.0',
        'platform_name': 'Linux',
        'device_name': None,
    }
    assert failed['details'] == {'reason': 'password'} and failed['actor_id'] is None
    assert signed_out['actor_id'] == user.id


def test_failed_sign_ins_of_unknown_and_unconfirmed_addresses(testapp, make_user, conn):
    unconfirmed = make_user(confirmed=False)
    unknown = unique_email('nobody')
    sign_in(testapp, unconfirmed.email, PASSWORD, status=401)
    sign_in(testapp, unknown, PASSWORD, status=401, ip='198.51.100.99')
    assert [row['details'] for row in events_of(conn, unconfirmed.id)] == [
        {'reason': 'unconfirmed'}
    ]
    row = conn.execute(
        'SELECT * FROM audit_events WHERE subject_id IS NULL'
        " AND ip_address = '198.51.100.99' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert row['event'] == 'sign_in_failed' and row['details'] == {'reason': 'password'}
    # The address typed is not kept: it may be a password typed in the wrong field.
    assert unknown not in json.dumps(row, default=str)


def test_a_rate_limited_sign_in_is_recorded(make_testapp, make_user, conn):
    app = make_testapp(RATE_LIMITS='on')
    user = make_user()
    ip = unique_ip()
    for _ in range(5):
        sign_in(app, user.email, 'wrong password', status=401, ip=ip)
    sign_in(app, user.email, PASSWORD, status=429, ip=ip)
    assert [row['details']['reason'] for row in events_of(conn, user.id)] == [
        'password'
    ] * 5 + ['rate_limited']


def test_known_and_unknown_addresses_fail_through_the_same_statement(
    testapp, make_user, conn
):
    """Item 4: the failed-sign-in row costs the same for both (one INSERT, subject
    looked up in it)."""
    user = make_user()
    statements = []
    original = audit.record_sign_in_failure

    def spy(conn_, queries, email, reason, request):
        statements.append((queries['audit.insert_sign_in_failure'], reason))
        return original(conn_, queries, email, reason, request)

    audit.record_sign_in_failure = spy
    try:
        sign_in(testapp, user.email, 'wrong password', status=401)
        sign_in(testapp, unique_email('nobody'), 'wrong password', status=401)
    finally:
        audit.record_sign_in_failure = original
    assert len(statements) == 2 and statements[0] == statements[1]


def test_known_and_unknown_addresses_cost_one_password_check_each(
    testapp, make_user, monkeypatch
):
    """Timing tells nothing: an address nobody has is checked against a hash of the
    same cost as a user's own."""
    checked = []
    original = passwords.check_password

    def spy(password, hashed):
        checked.append(hashed)
        return original(password, hashed)

    monkeypatch.setattr(passwords, 'check_password', spy)
    user = make_user()
    sign_in(testapp, user.email, 'wrong password', status=401)
    sign_in(testapp, unique_email('nobody'), 'wrong password', status=401)
    assert len(checked) == 2
    assert [hashed.split('$')[2] for hashed in checked] == [
        checked[0].split('$')[2]
    ] * 2


def test_credential_and_account_events(testapp, admin, make_user, conn):
    agent = make_user(account_id=admin.account_id)
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'current_password': PASSWORD, 'password': NEW_PASSWORD}},
        headers=admin.headers,
    )
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': unique_email('moved')}},
        headers=admin.headers,
    )
    testapp.post('/api/v1/profile/reset_access_token', headers=admin.headers)
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'name': 'Renamed', 'domain': 'example.org'},
        headers=admin.headers,
    )
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'name': 'Nope'},
        headers=agent.headers,
        status=401,
    )

    rows = events_of(conn, admin.id)
    assert names(rows) == [
        'password_changed',
        'email_change_requested',
        'access_token_reset',
        'account_settings_changed',
    ]
    settings = rows[-1]
    assert settings['account_id'] == admin.account_id
    assert settings['details'] == {'fields': ['domain', 'name']}
    assert 'Renamed' not in json.dumps(settings['details'])
    assert all(
        row['session_id'] is not None and row['actor_id'] == admin.id for row in rows
    )
    refused = events_of(conn, agent.id)[-1]
    assert (
        refused['event'] == 'access_refused'
        and refused['account_id'] == admin.account_id
    )
    assert refused['details'] == {
        'method': 'PUT',
        'route': '/api/v1/accounts/{account_id:id}',
        'role': 'agent',
    }


def test_sessions_revoked_are_recorded(testapp, admin, make_user, conn):
    member = make_user(account_id=admin.account_id)
    other = headers_of(sign_in(testapp, admin.email, PASSWORD))
    other_id = conn.execute(
        'SELECT id FROM user_tokens WHERE client = %s', (other['client'],)
    ).fetchone()['id']
    testapp.delete(f'/api/v1/profile/sessions/{other_id}', headers=admin.headers)
    testapp.delete(
        f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/sessions',
        headers=admin.headers,
    )

    revoked = events_of(conn, admin.id)[-1]
    assert revoked['event'] == 'session_revoked' and revoked['details'] == {
        'session_ids': [other_id]
    }
    ended = events_of(conn, member.id)[-1]
    assert ended['event'] == 'sessions_ended_by_administrator'
    assert ended['actor_id'] == admin.id and ended['account_id'] == admin.account_id
    assert ended['details'] == {'revoked': 1, 'access_token_replaced': False}


def test_password_reset_and_confirmation_are_recorded(testapp, make_user, conn):
    user = make_user(confirmed=False)
    testapp.post_json('/api/v1/profile/resend_confirmation', {}, headers=user.headers)
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'confirmation' ORDER BY id DESC LIMIT 1",
        (user.email,),
    ).fetchone()['text_body']
    token = re.search(r'confirmation_token=([A-Za-z0-9_-]+)', body).group(1)
    testapp.post_json('/auth/confirmation', {'confirmation_token': token})
    testapp.post_json('/auth/password', {'email': user.email})
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'reset_password'",
        (user.email,),
    ).fetchone()['text_body']
    token = re.search(r'reset_password_token=([A-Za-z0-9_-]+)', body).group(1)
    testapp.put_json(
        '/auth/password', {'reset_password_token': token, 'password': NEW_PASSWORD}
    )
    assert names(events_of(conn, user.id)) == ['email_confirmed', 'password_reset']


def test_an_email_change_is_recorded_when_asked_and_when_confirmed(
    testapp, make_user, conn
):
    user = make_user()
    new_address = unique_email('moved')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': new_address}}, headers=user.headers
    )
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'confirmation'",
        (new_address,),
    ).fetchone()['text_body']
    token = re.search(r'confirmation_token=([A-Za-z0-9_-]+)', body).group(1)
    confirmed = testapp.post_json('/auth/confirmation', {'confirmation_token': token})
    rows = events_of(conn, user.id)
    assert names(rows) == ['email_change_requested', 'email_change_confirmed']
    opened = conn.execute(
        'SELECT id FROM user_tokens WHERE client = %s', (confirmed.headers['client'],)
    ).fetchone()
    assert rows[1]['session_id'] == opened['id']


def test_no_secret_appears_in_any_event(testapp, admin, make_user, conn):
    """Every password and token this test uses, searched for in the whole audit
    table."""
    member = make_user(account_id=admin.account_id)
    fresh = sign_in(testapp, admin.email, PASSWORD)
    sign_in(testapp, admin.email, 'wrong ' + PASSWORD, status=401)
    sign_in(testapp, 'not-an-address-but-a-' + NEW_PASSWORD, PASSWORD, status=401)
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'current_password': PASSWORD, 'password': NEW_PASSWORD}},
        headers=admin.headers,
    )
    reset = testapp.post(
        '/api/v1/profile/reset_access_token', headers=admin.headers
    ).json['access_token']
    testapp.delete(
        f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/sessions?include_access_token=true',
        headers=admin.headers,
    )
    new_member_token = conn.execute(
        'SELECT access_token FROM users WHERE id = %s', (member.id,)
    ).fetchone()
    secrets = [
        PASSWORD,
        NEW_PASSWORD,
        admin.token,
        admin.access_token,
        reset,
        fresh.headers['access-token'],
        member.token,
        member.access_token,
        new_member_token['access_token'],
    ]
    text = conn.execute(
        'SELECT string_agg(a::text, chr(10)) AS all FROM audit_events a'
    ).fetchone()['all']
    assert len(text) > 0
    for secret in secrets:
        assert secret not in text


def test_details_refuse_secret_looking_keys(conn, queries):
    with pytest.raises(ValueError):
        audit.record(
            conn, queries, 'password_changed', subject_id=1, details={'password': 'x'}
        )
    with pytest.raises(ValueError):
        audit.record(conn, queries, 'no_such_event', subject_id=1)


def test_the_schema_lists_every_event():
    schema = json.loads(
        (ROOT / 'schemas' / 'account_audit_events_query.json').read_text()
    )
    assert schema['properties']['event']['enum'] == list(audit.EVENTS)


# The read endpoints.


def test_own_events_newest_first_with_keyset_paging(testapp, make_user):
    user = make_user()
    for _ in range(5):
        sign_in(testapp, user.email, 'wrong password', status=401)
    sign_in(testapp, user.email, PASSWORD)

    first = testapp.get(
        '/api/v1/profile/audit_events?limit=4', headers=user.headers, status=200
    ).json
    second = testapp.get(
        f'/api/v1/profile/audit_events?limit=4&before={first["next_before"]}',
        headers=user.headers,
    ).json

    assert [event['event'] for event in first['events']] == ['sign_in_succeeded'] + [
        'sign_in_failed'
    ] * 3
    ids = [event['id'] for event in first['events'] + second['events']]
    assert ids == sorted(ids, reverse=True) and len(ids) == 6
    assert first['next_before'] == first['events'][-1]['id']
    assert second['next_before'] is None
    event = first['events'][0]
    assert set(event) == {
        'id',
        'created_at',
        'event',
        'actor_id',
        'subject_id',
        'account_id',
        'ip_address',
        'user_agent',
        'session_id',
        'details',
    }
    assert event['created_at'].endswith('Z') and event['subject_id'] == user.id
    whole = testapp.get('/api/v1/profile/audit_events', headers=user.headers).json
    assert len(whole['events']) == 6 and whole['next_before'] is None


def test_own_events_are_only_the_callers(testapp, make_user):
    user, other = make_user(), make_user()
    sign_in(testapp, other.email, 'wrong password', status=401)
    assert testapp.get('/api/v1/profile/audit_events', headers=user.headers).json == {
        'events': [],
        'next_before': None,
    }
    testapp.get('/api/v1/profile/audit_events', status=401)


@pytest.mark.parametrize(
    'query, message, attribute',
    [
        ('limit=0', 'Limit must be greater than or equal to 1', 'limit'),
        ('limit=101', 'Limit must be less than or equal to 100', 'limit'),
        ('limit=ten', 'Limit must be an integer', 'limit'),
        ('limit=', "Limit can't be blank", 'limit'),
        ('limit=1&limit=2', 'Limit must be an integer', 'limit'),
        ('before=-1', 'Before must be greater than or equal to 1', 'before'),
        (
            'before=99999999999999999999',
            'Before must be less than or equal to 9223372036854775807',
            'before',
        ),
        ('before=1e3', 'Before must be an integer', 'before'),
    ],
)
def test_bad_paging_is_a_422(testapp, make_user, query, message, attribute):
    user = make_user()
    resp = testapp.get(
        f'/api/v1/profile/audit_events?{query}', headers=user.headers, status=422
    )
    assert resp.json == {'message': message, 'attributes': [attribute]}


def account_events(testapp, admin, query='', status=200):
    return testapp.get(
        f'/api/v1/accounts/{admin.account_id}/audit_events?{query}',
        headers=admin.headers,
        status=status,
    ).json


def test_account_events_for_administrators(
    testapp, admin, make_user, make_account, conn
):
    agent = make_user(account_id=admin.account_id)
    outsider = make_user(account_id=make_account())
    sign_in(testapp, agent.email, PASSWORD)
    sign_in(testapp, outsider.email, PASSWORD)
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'current_password': PASSWORD, 'password': NEW_PASSWORD}},
        headers=agent.headers,
    )
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'name': 'Renamed'},
        headers=admin.headers,
    )

    events = account_events(testapp, admin)['events']

    # The account's settings and the members' sign-ins; not a member's own password
    # change, nor anything of another account's members.
    assert [(event['event'], event['subject_id']) for event in events] == [
        ('account_settings_changed', admin.id),
        ('sign_in_succeeded', agent.id),
    ]
    assert account_events(testapp, admin, f'user_id={agent.id}')['events'] == events[1:]
    assert (
        account_events(testapp, admin, 'event=account_settings_changed')['events']
        == events[:1]
    )
    assert account_events(testapp, admin, 'limit=1')['next_before'] == events[0]['id']
    assert (
        account_events(testapp, admin, f'before={events[0]["id"]}')['events']
        == events[1:]
    )
    now = conn.execute('SELECT now() AS now').fetchone()['now']
    assert (
        account_events(testapp, admin, 'since=2000-01-01T00:00:00Z')['events'] == events
    )
    later = urllib.parse.quote(now.replace(year=now.year + 1).isoformat())
    assert account_events(testapp, admin, f'since={later}')['events'] == []
    assert account_events(testapp, admin, 'until=2000-01-01')['events'] == []
    assert (
        account_events(testapp, admin, 'until=2999-01-01T00:00:00%2B02:00')['events']
        == events
    )


def test_account_events_are_for_its_administrators(
    testapp, admin, make_user, make_account
):
    agent = make_user(account_id=admin.account_id)
    other = make_user(account_id=make_account(), role='administrator')
    url = f'/api/v1/accounts/{admin.account_id}/audit_events'
    assert testapp.get(url, headers=agent.headers, status=401).json == {
        'error': 'You are not authorized to do this action'
    }
    assert testapp.get(url, headers=other.headers, status=404).json == {
        'error': 'Resource could not be found'
    }
    testapp.get(url, status=401)


@pytest.mark.parametrize(
    'query, message, attribute',
    [
        ('event=dance', 'Event is not included in the list', 'event'),
        ('user_id=x', 'User id must be an integer', 'user_id'),
        ('since=yesterday', 'Since is invalid', 'since'),
        ('until=2026-13-01', 'Until is invalid', 'until'),
        ('limit=1000', 'Limit must be less than or equal to 100', 'limit'),
    ],
)
def test_bad_account_filters_are_a_422(testapp, admin, query, message, attribute):
    assert account_events(testapp, admin, query, status=422) == {
        'message': message,
        'attributes': [attribute],
    }


# Retention and the database role.


def test_prune_deletes_events_older_than_the_retention(base_env, conn, make_user):
    user = make_user()
    for age in (400, 100, 0):
        conn.execute(
            'INSERT INTO audit_events (event, subject_id, created_at)'
            " VALUES ('signed_out', %s, now() - make_interval(days => %s))",
            (user.id, age),
        )
    done = subprocess.run(
        [sys.executable, 'manage.py', 'prune'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**base_env, 'PATH': '/usr/bin:/bin', 'AUDIT_RETENTION_DAYS': '200'},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert 'deleted' in done.stdout
    ages = conn.execute(
        'SELECT extract(day FROM now() - created_at)::int AS age FROM audit_events'
        ' WHERE subject_id = %s ORDER BY age',
        (user.id,),
    ).fetchall()
    assert [row['age'] for row in ages] == [0, 100]


@pytest.fixture
def operator_database():
    """A database set up as docs/security.md tells operators: an app role that is not
    the owner, given everything on every table by default privileges, before
    migrating."""
    suffix = uuid.uuid4().hex[:10]
    name, role, password = (
        f'frontdesk_roles_{suffix}',
        f'frontdesk_app_{suffix}',
        uuid.uuid4().hex,
    )
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE {name}')
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    url = database_url_for(ADMIN_URL, name)
    try:
        with psycopg.connect(url, autocommit=True) as owner:
            owner.execute(f'GRANT USAGE ON SCHEMA public TO {role}')
            owner.execute(
                'ALTER DEFAULT PRIVILEGES IN SCHEMA public'
                f' GRANT ALL ON TABLES TO {role}'
            )
            owner.execute(
                'ALTER DEFAULT PRIVILEGES IN SCHEMA public'
                f' GRANT ALL ON SEQUENCES TO {role}'
            )
        db.migrate(url)
        yield url, psycopg.conninfo.make_conninfo(url, user=role, password=password)
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS {name} WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS {role}')


def test_the_apps_role_may_append_and_read_but_not_change_audit_rows(operator_database):
    owner_url, app_url = operator_database
    try:
        app = psycopg.connect(app_url, autocommit=True)
    except (
        psycopg.OperationalError
    ) as ex:  # the cluster must let a password role in over TCP
        pytest.skip(f'cannot connect as a second role here: {ex}')
    with app:
        row = app.execute(
            "INSERT INTO audit_events (event, subject_id) VALUES ('signed_out', 1)"
            ' RETURNING id'
        ).fetchone()
        assert app.execute(
            'SELECT event FROM audit_events WHERE id = %s', row
        ).fetchone() == ('signed_out',)
        for statement in (
            "UPDATE audit_events SET event = 'sign_in_succeeded'",
            'DELETE FROM audit_events',
            'TRUNCATE audit_events',
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(statement)
        # The rest of the service's tables are the app's as before.
        app.execute('UPDATE users SET name = name WHERE false')
    with psycopg.connect(owner_url, autocommit=True) as owner:
        assert owner.execute('DELETE FROM audit_events').rowcount == 1


def test_an_email_change_revert_is_recorded(testapp, make_user, conn):
    user = make_user()
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': unique_email('taker')}},
        headers=user.headers,
    )
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'email_change_notice'",
        (user.email,),
    ).fetchone()['text_body']
    token = re.search(r'email_revert\?token=([A-Za-z0-9_-]+)', body).group(1)
    testapp.post_json(
        '/auth/email_revert', {'token': token}, headers={'X-Real-IP': '192.0.2.200'}
    )
    rows = events_of(conn, user.id)
    assert names(rows) == ['email_change_requested', 'email_change_reverted']
    assert rows[1]['ip_address'] == '192.0.2.200'
