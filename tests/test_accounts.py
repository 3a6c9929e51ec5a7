"""/api/v1/accounts/{account_id}, cache_keys and update_active_at (SPEC 4.2-4.5,
3.2)."""

import json

import pytest

from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.users import PASSWORD
from tests.test_suspension import add_member
from tests.test_suspension import interleave

ROLE_REFUSED = {'error': 'You are not authorized to do this action'}
NOT_FOUND = {'error': 'Resource could not be found'}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}


def account_row(conn, account_id):
    return conn.execute(
        'SELECT * FROM accounts WHERE id = %s', (account_id,)
    ).fetchone()


def test_member_reads_the_account_json(testapp, admin, make_user):
    agent = make_user(account_id=admin.account_id, role='agent')
    for user in (admin, agent):
        resp = testapp.get(
            f'/api/v1/accounts/{admin.account_id}', headers=user.headers, status=200
        )
        assert resp.content_type == 'application/json'
        body = resp.json
        assert set(body) == {
            'id',
            'name',
            'locale',
            'domain',
            'support_email',
            'auto_resolve_duration',
            'status',
            'custom_attributes',
            'created_at',
            'cache_keys',
            'features',
            'latest_chatwoot_version',
            'enforce_mfa',
            'restrict_legacy_access_token',
        }
        assert body['features'] == {}
        assert body['enforce_mfa'] is False
        assert body['latest_chatwoot_version'] is None
        assert body['id'] == admin.account_id
        assert body['name'] == 'Acme'
        assert body['status'] == 'active'
        assert body['custom_attributes'] == {}
        assert body['created_at'].endswith('Z')
        assert body['cache_keys'] == {
            'label': '0000000000',
            'inbox': '0000000000',
            'team': '0000000000',
        }


@pytest.mark.parametrize('path', ['', '/cache_keys'])
def test_reads_refuse_strangers_with_404_and_anonymous_with_401(
    testapp, admin, make_user, make_account, path
):
    stranger = make_user(account_id=make_account('Other'), role='administrator')
    url = f'/api/v1/accounts/{admin.account_id}{path}'
    assert testapp.get(url, headers=stranger.headers, status=404).json == NOT_FOUND
    assert testapp.get(url, status=401).json == UNAUTHENTICATED
    assert (
        testapp.get(
            f'/api/v1/accounts/999999999{path}', headers=admin.headers, status=404
        ).json
        == NOT_FOUND
    )


def test_cache_keys_body_and_exact_cache_header(testapp, admin, make_user):
    agent = make_user(account_id=admin.account_id)
    resp = testapp.get(
        f'/api/v1/accounts/{admin.account_id}/cache_keys',
        headers=agent.headers,
        status=200,
    )
    assert resp.json == {
        'cache_keys': {
            'label': '0000000000',
            'inbox': '0000000000',
            'team': '0000000000',
        }
    }
    assert (
        resp.headers['Cache-Control']
        == 'max-age=10, private, stale-while-revalidate=300'
    )


def test_administrator_updates_the_account(testapp, admin, conn):
    conn.execute(
        'UPDATE accounts SET custom_attributes = \'{"plan": "pro"}\' WHERE id = %s',
        (admin.account_id,),
    )
    body = {
        'name': 'New Name',
        'locale': 'pt_BR',
        'domain': 'example.com',
        'support_email': 'care@example.com',
        'auto_resolve_duration': 40,
        'timezone': 'Asia/Kolkata',
        'industry': 'Technology',
        'company_size': '1-10',
        'status': 'suspended',
        'id': 1,
        'cache_keys': {'label': '9999999999'},
    }
    resp = testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}', body, headers=admin.headers, status=200
    )
    assert resp.json['name'] == 'New Name'
    assert resp.json['locale'] == 'pt_BR'
    assert resp.json['auto_resolve_duration'] == 40
    stored = account_row(conn, admin.account_id)
    assert (
        stored['name'],
        stored['locale'],
        stored['domain'],
        stored['support_email'],
    ) == ('New Name', 'pt_BR', 'example.com', 'care@example.com')
    assert stored['custom_attributes'] == {
        'plan': 'pro',
        'timezone': 'Asia/Kolkata',
        'industry': 'Technology',
        'company_size': '1-10',
    }
    # Unknown and read-only fields are ignored, never applied.
    assert stored['status'] == 'active'
    assert stored['label_cache_key'] == '0000000000'


def test_patch_changes_only_what_was_sent(testapp, admin, conn):
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'domain': 'a.io', 'auto_resolve_duration': 5},
        headers=admin.headers,
        status=200,
    )
    testapp.patch_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'name': 'Renamed'},
        headers=admin.headers,
        status=200,
    )
    stored = account_row(conn, admin.account_id)
    assert (stored['name'], stored['domain'], stored['auto_resolve_duration']) == (
        'Renamed',
        'a.io',
        5,
    )
    testapp.patch_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'auto_resolve_duration': None, 'domain': None},
        headers=admin.headers,
        status=200,
    )
    stored = account_row(conn, admin.account_id)
    assert (stored['domain'], stored['auto_resolve_duration']) == (None, None)


def test_onboarding_step_moves_from_account_update_to_invite_team(testapp, admin, conn):
    url = f'/api/v1/accounts/{admin.account_id}'
    testapp.put_json(url, {'name': 'x'}, headers=admin.headers, status=200)
    assert (
        'onboarding_step'
        not in account_row(conn, admin.account_id)['custom_attributes']
    )
    conn.execute(
        'UPDATE accounts SET custom_attributes = \'{"onboarding_step": '
        '"account_update"}\' WHERE id = %s',
        (admin.account_id,),
    )
    resp = testapp.put_json(url, {'name': 'y'}, headers=admin.headers, status=200)
    assert resp.json['custom_attributes'] == {'onboarding_step': 'invite_team'}


def test_every_failing_field_is_reported_together_and_nothing_is_written(
    testapp, admin, conn
):
    before = account_row(conn, admin.account_id)
    body = {
        'name': 'test' * 999,
        'locale': 'xx',
        'domain': 'd' * 101,
        'support_email': 'not-an-address',
        'auto_resolve_duration': 1000,
        'timezone': 'Mars/Olympus_Mons',
        'industry': 7,
    }
    resp = testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}', body, headers=admin.headers, status=422
    )
    assert resp.json == {
        'message': 'Name is too long (maximum is 255 characters), '
        'Locale is not included in the list, '
        'Domain is too long (maximum is 100 characters), Support email is invalid, '
        'Auto resolve duration must be less than or equal to 999, Timezone is invalid, '
        'Industry must be a string',
        'attributes': [
            'name',
            'locale',
            'domain',
            'support_email',
            'auto_resolve_duration',
            'timezone',
            'industry',
        ],
    }
    assert account_row(conn, admin.account_id) == before


@pytest.mark.parametrize(
    'body, message',
    [
        ({'name': 'test' * 999}, 'Name is too long (maximum is 255 characters)'),
        ({'name': '   '}, "Name can't be blank"),
        ({'name': None}, "Name can't be blank"),
        (
            {'auto_resolve_duration': 0},
            'Auto resolve duration must be greater than or equal to 1',
        ),
        ({'auto_resolve_duration': '40'}, 'Auto resolve duration must be an integer'),
        ({'auto_resolve_duration': 4.5}, 'Auto resolve duration must be an integer'),
        ({'support_email': 'a' * 95 + '@x.io1'}, 'Support email is invalid'),
        (
            {'support_email': 'a' * 95 + '@xy.io'},
            'Support email is too long (maximum is 100 characters)',
        ),
        ({'locale': None}, 'Locale is not included in the list'),
    ],
)
def test_single_field_messages(testapp, admin, body, message):
    resp = testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}', body, headers=admin.headers, status=422
    )
    assert resp.json['message'] == message
    assert resp.json['attributes'] == list(body)


def test_update_access_matrix(testapp, admin, make_user, make_account, conn, caplog):
    url = f'/api/v1/accounts/{admin.account_id}'
    agent = make_user(account_id=admin.account_id, role='agent')
    stranger = make_user(account_id=make_account('Elsewhere'), role='administrator')
    for method in ('put_json', 'patch_json'):
        assert (
            getattr(testapp, method)(url, {'name': 'Hijack'}, status=401).json
            == UNAUTHENTICATED
        )
        assert (
            getattr(testapp, method)(
                url, {'name': 'Hijack'}, headers=agent.headers, status=401
            ).json
            == ROLE_REFUSED
        )
        assert (
            getattr(testapp, method)(
                url, {'name': 'Hijack'}, headers=stranger.headers, status=404
            ).json
            == NOT_FOUND
        )
    assert account_row(conn, admin.account_id)['name'] == 'Acme'
    # A role refusal is logged (who, what), without any credential.
    refusals = [
        record.getMessage()
        for record in caplog.records
        if record.getMessage().startswith('refused')
    ]
    assert len(refusals) == 2 and f'to user {agent.id} (role agent)' in refusals[0]
    assert agent.token not in caplog.text


def test_update_active_at_stamps_only_the_callers_membership(
    testapp, admin, make_user, conn
):
    agent = make_user(account_id=admin.account_id)
    url = f'/api/v1/accounts/{admin.account_id}/update_active_at'
    resp = testapp.post(url, headers=agent.headers, status=200)
    assert resp.json == {}
    rows = {
        row['user_id']: row['active_at']
        for row in conn.execute(
            'SELECT user_id, active_at FROM account_users WHERE account_id = %s',
            (admin.account_id,),
        )
    }
    assert rows[agent.id] is not None
    assert rows[admin.id] is None
    profile = testapp.get('/api/v1/profile', headers=agent.headers).json
    assert profile['account_id'] == admin.account_id
    assert profile['accounts'][0]['availability_status'] == 'online'


def test_update_active_at_refuses_strangers_and_anonymous(
    testapp, admin, make_user, make_account, conn
):
    stranger = make_user(account_id=make_account('Other'))
    url = f'/api/v1/accounts/{admin.account_id}/update_active_at'
    assert testapp.post(url, status=401).json == UNAUTHENTICATED
    assert testapp.post(url, headers=stranger.headers, status=404).json == NOT_FOUND
    stamped = conn.execute(
        'SELECT count(*) AS n FROM account_users WHERE account_id = %s'
        ' AND active_at IS NOT NULL',
        (admin.account_id,),
    ).fetchone()['n']
    assert stamped == 0


def test_api_access_token_authenticates_without_echoing_headers(testapp, admin):
    resp = testapp.get(
        f'/api/v1/accounts/{admin.account_id}',
        headers={'api_access_token': admin.access_token},
        status=200,
    )
    assert resp.json['id'] == admin.account_id
    assert 'access-token' not in resp.headers
    assert PASSWORD not in resp.text


# --- two account updates that share members (the trigger of migration 0014) -----------


@pytest.fixture(scope='module')
def service(base_env):
    with run_gunicorn(base_env, workers=3) as base:
        yield base


@pytest.fixture
def many_users(conn):
    """Enough users before the test's own that the account trigger's UPDATE of the
    members' rows is planned as in production, once analysed (analyse_users): driven
    by the account's memberships, one users_pkey look-up each. With a handful of users
    PostgreSQL scans users; with members at low ids it merges along users_pkey."""
    conn.execute(
        "INSERT INTO users (name, email, access_token) SELECT 'Filler', 'filler-' || g"
        " || '@example.com', md5(g::text) FROM generate_series(1, 1000) g"
    )
    yield
    conn.execute("DELETE FROM users WHERE email LIKE 'filler-%@example.com'")


def analyse_users(conn):
    conn.execute('ANALYZE users')
    conn.execute('ANALYZE account_users')


def members_in_scan_order(conn, account_id, user_ids):
    """``user_ids`` in the order the trigger meets them in ``account_id``: the order of
    its membership rows on disk, which the plan's scan of account_users follows."""
    plan = '\n'.join(
        row['QUERY PLAN']
        for row in conn.execute(
            'EXPLAIN UPDATE users SET doc = NULL WHERE id IN'
            ' (SELECT user_id FROM account_users WHERE account_id = %s)',
            (account_id,),
        )
    )
    scans = [line for line in plan.splitlines() if 'Scan' in line]
    assert 'Nested Loop' in plan and 'account_users' in scans[0], plan
    return [
        row['user_id']
        for row in conn.execute(
            'SELECT user_id FROM account_users WHERE account_id = %s'
            ' AND user_id = ANY(%s) ORDER BY ctid',
            (account_id, list(user_ids)),
        )
    ]


def renaming(service, administrator, account_id, name):
    return lambda: http(
        'PUT',
        service + f'/api/v1/accounts/{account_id}',
        {'name': name},
        headers=administrator.headers,
    )


def test_two_account_updates_sharing_members_both_succeed(
    service, admin, make_user, make_account, conn, direct_database_url, many_users
):
    """Renaming an account rewrites the stored document of every member (the trigger
    of migration 0014), so it locks their user rows. Accounts A and B share u1 and u2;
    A's memberships meet u1 first, B's u2 first. The test holds u1's row: A's rename
    waits for it, B's takes u2 and waits for u1 too. Once let go, A takes u1 and needs
    u2: in the members' own order the two would each hold a row the other waits for,
    PostgreSQL would end one as a deadlock and its administrator get a 503. Locked in
    id order, the second waits for the first and both renames are kept."""
    # Rows go where a backend finds room: into a gap earlier tests of this worker left,
    # or, for another pool connection, at the end. Rewritten without gaps, the table
    # takes the memberships below in the order they are made.
    conn.execute('VACUUM FULL account_users')
    first = admin.account_id
    second = make_account('Second')
    other = make_user(account_id=second, role='administrator')
    u1 = make_user(account_id=first)
    u2 = make_user(account_id=first)
    add_member(conn, second, u2.id)
    add_member(conn, second, u1.id)
    analyse_users(conn)
    pair = (u1.id, u2.id)
    assert members_in_scan_order(conn, first, pair) == [u1.id, u2.id]
    assert members_in_scan_order(conn, second, pair) == [u2.id, u1.id]
    answers = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (u1.id,)),
        (
            renaming(service, admin, first, 'First renamed'),
            'Only the keys present in the patch change',
        ),
        (
            renaming(service, other, second, 'Second renamed'),
            'Only the keys present in the patch change',
        ),
    )
    assert [answer.status for answer in answers] == [200, 200], [
        answer.body for answer in answers
    ]
    assert [json.loads(answer.body)['name'] for answer in answers] == [
        'First renamed',
        'Second renamed',
    ]
    names = {
        row['id']: row['name']
        for row in conn.execute(
            'SELECT id, name FROM accounts WHERE id = ANY(%s)', ([first, second],)
        )
    }
    assert names == {first: 'First renamed', second: 'Second renamed'}
    for user in (u1, u2):
        doc = conn.execute(
            'SELECT doc FROM users WHERE id = %s', (user.id,)
        ).fetchone()['doc']
        assert {item['id']: item['name'] for item in doc['accounts']} == names
