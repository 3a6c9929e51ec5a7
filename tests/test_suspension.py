"""Suspending a member (SPEC 18): the account answers 403 to them, a member
with no active membership left is locked out, reactivation lets them sign in again and
brings no token back; the agents list; every route of the table refuses a suspended
member; a suspension racing a sign-in."""

import json
import re
import threading

import psycopg
from psycopg.rows import dict_row
import pytest

import apidoc
import app as app_module
from services import memberships
from tests.smtp_server import deliver
from tests.smtp_server import smtp_server
from tests.support.database import waiting_for
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.users import PASSWORD
from tests.support.users import unique_email
from tests.test_mfa import challenge
from tests.test_mfa import enable
from tests.test_mfa import second_step
from tests.test_user_document import assert_same
from validators import load_validators

SUSPENDED = {
    'error': 'Your access to this account is suspended',
    'error_code': 'membership_suspended',
}
LOCKED_OUT = {
    'success': False,
    'error_code': 'account_suspended',
    'errors': [
        'Your access has been suspended by an administrator of every account you '
        'belong to'
    ],
}
INVALID_LOGIN = {
    'success': False,
    'errors': ['Invalid login credentials. Please try again.'],
}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
ROLE = {'error': 'You are not authorized to do this action'}
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
NOT_FOUND = {'error': 'Resource could not be found'}
TOKEN_HEADERS = ('access-token', 'client', 'uid')
AGENT_FIELDS = {
    'id',
    'account_id',
    'name',
    'available_name',
    'email',
    'role',
    'confirmed',
    'availability_status',
    'auto_offline',
    'thumbnail',
    'membership_status',
    'mfa_enabled',
    'last_sign_in_at',
}


def url(account_id, user_id, action):
    return f'/api/v1/accounts/{account_id}/agents/{user_id}/{action}'


def suspend(testapp, admin, user_id, status=200, account_id=None):
    return testapp.post(
        url(account_id or admin.account_id, user_id, 'suspend'),
        headers=admin.headers,
        status=status,
    )


def reactivate(testapp, admin, user_id, status=200, account_id=None):
    return testapp.post(
        url(account_id or admin.account_id, user_id, 'reactivate'),
        headers=admin.headers,
        status=status,
    )


def sign_in(testapp, user, status=200, password=None):
    return testapp.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': password or user.password},
        status=status,
    )


def headers_of(answer):
    return {name: answer.headers[name] for name in TOKEN_HEADERS}


def api(user):
    return {'api_access_token': user.access_token}


def add_member(conn, account_id, user_id, role='agent'):
    """A membership (Frontdesk has no invitations yet: the tests insert it)."""
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s, %s)',
        (account_id, user_id, role),
    )


def entry(doc, account_id):
    [found] = [item for item in doc['accounts'] if item['id'] == account_id]
    return found


def events(conn, user_id, event):
    return conn.execute(
        'SELECT actor_id, subject_id, account_id, details FROM audit_events'
        ' WHERE subject_id = %s AND event = %s ORDER BY id',
        (user_id, event),
    ).fetchall()


def mails(conn, address, subject):
    return conn.execute(
        'SELECT text_body, html_body FROM mail_outbox'
        ' WHERE to_address = %s AND subject = %s ORDER BY id',
        (address, subject),
    ).fetchall()


@pytest.fixture
def team(admin, make_user, make_account, conn):
    """``admin``'s account, whose member ``agent`` also belongs to another account
    (``agent.elsewhere``), where they were active last."""
    agent = make_user(account_id=admin.account_id)
    agent.elsewhere = make_account('Elsewhere')
    add_member(conn, agent.elsewhere, agent.id)
    conn.execute(
        'UPDATE account_users SET active_at = now() - make_interval(mins => %s)'
        ' WHERE user_id = %s AND account_id = %s',
        (1, agent.id, admin.account_id),
    )
    return agent


# --- suspending a member of one account -----------------------------------------------


def test_a_suspended_member_gets_403_from_that_account_and_keeps_the_others(
    testapp, admin, team, conn
):
    agent = team
    account = f'/api/v1/accounts/{admin.account_id}'
    testapp.get(account, headers=agent.headers, status=200)
    testapp.put_json(
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': admin.account_id}},
        headers=agent.headers,
    )
    before = testapp.get('/api/v1/profile', headers=agent.headers).json
    assert before['account_id'] == admin.account_id
    assert entry(before, admin.account_id)['membership_status'] == 'active'

    answer = suspend(testapp, admin, agent.id)

    assert answer.json['membership_status'] == 'suspended'
    assert answer.json['id'] == agent.id
    assert answer.json['account_id'] == admin.account_id
    for headers in (agent.headers, api(agent)):
        for path in (account, account + '/cache_keys'):
            assert testapp.get(path, headers=headers, status=403).json == SUSPENDED
        assert (
            testapp.post(
                account + '/update_active_at', headers=headers, status=403
            ).json
            == SUSPENDED
        )
        # The other account, and the profile, answer as before.
        testapp.get(f'/api/v1/accounts/{agent.elsewhere}', headers=headers, status=200)
    after = testapp.get('/api/v1/profile', headers=agent.headers).json
    # Still listed, marked; never the current account, even though it was.
    assert entry(after, admin.account_id)['membership_status'] == 'suspended'
    assert entry(after, agent.elsewhere)['membership_status'] == 'active'
    assert after['account_id'] == agent.elsewhere
    assert after['role'] == 'agent'
    # Not locked out: the sessions and the access token still work, sign-in too.
    assert after['access_token'] == agent.access_token
    sign_in(testapp, agent)
    assert conn.execute(
        'SELECT status FROM account_users WHERE user_id = %s AND account_id = %s',
        (agent.id, admin.account_id),
    ).fetchone() == {'status': 'suspended'}


def test_an_administrator_suspended_is_refused_their_administrator_routes(
    testapp, admin, make_user, make_account, conn
):
    other = make_user(account_id=admin.account_id, role='administrator')
    add_member(conn, make_account(), other.id)  # not locked out
    suspend(testapp, admin, other.id)
    account = f'/api/v1/accounts/{admin.account_id}'
    for method, path in (
        ('PUT', account),
        ('GET', account + '/agents'),
        ('GET', account + '/audit_events'),
        ('POST', url(admin.account_id, admin.id, 'suspend')),
        ('DELETE', url(admin.account_id, admin.id, 'sessions')),
    ):
        answer = testapp.request(
            path,
            method=method,
            headers=other.headers,
            body=b'{"name": "Taken"}',
            content_type='application/json',
            expect_errors=True,
        )
        assert (answer.status_int, answer.json) == (403, SUSPENDED), (method, path)
    assert testapp.get(account, headers=admin.headers).json['name'] == 'Acme'
    testapp.get('/api/v1/profile', headers=admin.headers, status=200)


def test_profile_endpoints_that_name_a_suspended_account_answer_403(
    testapp, admin, team, conn
):
    agent = team
    suspend(testapp, admin, agent.id)
    for path, profile in (
        ('/api/v1/profile/availability', {'availability': 'busy'}),
        ('/api/v1/profile/auto_offline', {'auto_offline': False}),
    ):
        body = {'profile': {**profile, 'account_id': admin.account_id}}
        for headers in (agent.headers, api(agent)):
            answer = testapp.post_json(path, body, headers=headers, status=403)
            assert answer.json == SUSPENDED
        # The active one still takes it.
        body['profile']['account_id'] = agent.elsewhere
        testapp.post_json(path, body, headers=agent.headers, status=200)
    answer = testapp.put_json(
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': admin.account_id}},
        headers=agent.headers,
        status=403,
    )
    assert answer.json == SUSPENDED
    row = conn.execute(
        'SELECT availability, auto_offline FROM account_users'
        ' WHERE user_id = %s AND account_id = %s',
        (agent.id, admin.account_id),
    ).fetchone()
    assert row == {'availability': 'online', 'auto_offline': True}
    profile = testapp.get('/api/v1/profile', headers=agent.headers).json
    assert profile['account_id'] == agent.elsewhere
    # A non-member still gets the 404 of before.
    testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'availability': 'busy', 'account_id': 2**62}},
        headers=agent.headers,
        status=404,
    )


def test_an_accounts_mfa_requirement_binds_only_its_active_members(
    testapp, admin, team
):
    agent = team
    enable(testapp, admin)
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'enforce_mfa': True},
        headers=admin.headers,
    )
    elsewhere = f'/api/v1/accounts/{agent.elsewhere}'
    refused = testapp.get(elsewhere, headers=agent.headers, status=403).json
    assert refused['error_code'] == 'mfa_enrollment_required'
    assert 'mfa_setup_required' in sign_in(testapp, agent, status=206).json

    suspend(testapp, admin, agent.id)

    testapp.get(elsewhere, headers=agent.headers, status=200)
    assert sign_in(testapp, agent).json['data']['account_id'] == agent.elsewhere


def test_the_stored_document_follows_suspension_and_reactivation(
    testapp, conn, config, admin, team, make_user
):
    """users.doc (migration 0014) is kept by triggers: a status change reaches it, and
    it stays what user_json() builds."""
    agent = team
    suspend(testapp, admin, agent.id)
    served = assert_same(testapp, conn, config, agent)
    assert entry(served, admin.account_id)['membership_status'] == 'suspended'
    reactivate(testapp, admin, agent.id)
    served = assert_same(testapp, conn, config, agent)
    assert entry(served, admin.account_id)['membership_status'] == 'active'
    # Suspended everywhere: no current account, and the account is still listed.
    lone = make_user(account_id=admin.account_id)
    suspend(testapp, admin, lone.id)
    stored = conn.execute('SELECT doc FROM users WHERE id = %s', (lone.id,)).fetchone()
    doc = stored['doc']
    assert (doc['account_id'], doc['role']) == (None, None)
    assert [item['membership_status'] for item in doc['accounts']] == ['suspended']


def test_every_accounts_entry_carries_membership_status(testapp, admin):
    doc = testapp.get('/api/v1/profile', headers=admin.headers).json
    assert [item['membership_status'] for item in doc['accounts']] == ['active']
    signed = sign_in(testapp, admin).json['data']
    assert signed['accounts'][0]['membership_status'] == 'active'


def test_reactivation_gives_the_account_back(testapp, admin, team):
    agent = team
    suspend(testapp, admin, agent.id)
    answer = reactivate(testapp, admin, agent.id)
    assert answer.json['membership_status'] == 'active'
    testapp.get(
        f'/api/v1/accounts/{admin.account_id}', headers=agent.headers, status=200
    )
    doc = testapp.get('/api/v1/profile', headers=agent.headers).json
    assert entry(doc, admin.account_id)['membership_status'] == 'active'


# --- the lockout ----------------------------------------------------------------------


def test_a_member_suspended_everywhere_is_locked_out(testapp, admin, make_user, conn):
    member = make_user(account_id=admin.account_id)
    second = headers_of(sign_in(testapp, member))

    suspend(testapp, admin, member.id)

    for headers in (member.headers, second, api(member)):
        assert (
            testapp.get('/api/v1/profile', headers=headers, status=401).json
            == UNAUTHENTICATED
        )
    assert sign_in(testapp, member, status=401).json == LOCKED_OUT
    # A wrong password learns nothing about the suspension.
    assert sign_in(testapp, member, status=401, password='not it at all').json == (
        INVALID_LOGIN
    )
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (member.id,)
        ).fetchone()['n']
        == 0
    )
    [failure] = [
        row['details']
        for row in events(conn, member.id, 'sign_in_failed')
        if row['details']['reason'] == 'suspended'
    ]
    assert failure == {'reason': 'suspended'}


def test_reactivation_restores_sign_in_but_no_token(testapp, admin, make_user, conn):
    member = make_user(account_id=admin.account_id)
    pubsub = testapp.get('/api/v1/profile', headers=member.headers).json['pubsub_token']
    suspend(testapp, admin, member.id)
    reactivate(testapp, admin, member.id)

    for headers in (member.headers, api(member)):
        testapp.get('/api/v1/profile', headers=headers, status=401)
    answer = sign_in(testapp, member)
    fresh = answer.json['data']
    assert fresh['accounts'][0]['membership_status'] == 'active'
    assert fresh['account_id'] == admin.account_id
    assert fresh['access_token'] != member.access_token
    assert fresh['pubsub_token'] != pubsub
    testapp.get('/api/v1/profile', headers=headers_of(answer), status=200)
    testapp.get('/api/v1/profile', headers=member.headers, status=401)


def test_an_mfa_user_locked_out_gets_no_challenge_and_no_session(
    testapp, admin, make_user
):
    member = make_user(account_id=admin.account_id)
    app, codes = enable(testapp, member)
    pending = challenge(testapp, member)

    suspend(testapp, admin, member.id)

    # The password step answers the lockout, not a challenge.
    assert sign_in(testapp, member, status=401).json == LOCKED_OUT
    # The challenge issued before is void, with a right code or a recovery code.
    for factor in ({'otp_code': app.code()}, {'backup_code': codes[0]}):
        answer = second_step(testapp, pending, status=401, **factor)
        assert not any(name in answer.headers for name in TOKEN_HEADERS)
    reactivate(testapp, admin, member.id)
    # Nor does it come back with the reactivation.
    second_step(testapp, pending, status=401, backup_code=codes[1])
    fresh = challenge(testapp, member)
    second_step(testapp, fresh, backup_code=codes[2])


def test_the_second_step_of_a_locked_out_member_signs_nobody_in(
    testapp, admin, make_user, conn
):
    """A challenge that outlived the lockout (as one issued while the suspension was
    committing could): its right code still opens no session."""
    member = make_user(account_id=admin.account_id)
    _, codes = enable(testapp, member)
    pending = challenge(testapp, member)
    kept = conn.execute(
        'SELECT * FROM one_time_tokens WHERE user_id = %s'
        " AND purpose = 'mfa_challenge'",
        (member.id,),
    ).fetchone()
    suspend(testapp, admin, member.id)
    columns = ', '.join(name for name in kept if name != 'id')
    conn.execute(
        f'INSERT INTO one_time_tokens ({columns}) VALUES '
        f'({", ".join(["%s"] * (len(kept) - 1))})',
        [value for name, value in kept.items() if name != 'id'],
    )

    answer = second_step(testapp, pending, status=401, backup_code=codes[0])

    assert answer.json == LOCKED_OUT
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (member.id,)
        ).fetchone()['n']
        == 0
    )
    # A failed sign-in (SPEC 14), though the step itself is rolled back.
    assert [row['details'] for row in events(conn, member.id, 'sign_in_failed')] == [
        {'reason': 'suspended'}
    ]


def test_a_password_reset_does_not_let_a_locked_out_member_in(
    testapp, admin, make_user, conn
):
    member = make_user(account_id=admin.account_id)
    testapp.post_json('/auth/password', {'email': member.email})
    [mail] = mails(conn, member.email, 'Reset password instructions')
    token = re.search(r'reset_password_token=([\w-]+)', mail['text_body']).group(1)
    suspend(testapp, admin, member.id)
    new = 'a brand new secret 9'
    body = {
        'reset_password_token': token,
        'password': new,
        'password_confirmation': new,
    }

    answer = testapp.put_json('/auth/password', body, status=401)

    assert answer.json == LOCKED_OUT
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    # Nothing changed: the old password is still the one, and the link still works
    # once the member is back.
    reactivate(testapp, admin, member.id)
    sign_in(testapp, member)
    answer = testapp.put_json('/auth/password', body, status=200)
    testapp.get('/api/v1/profile', headers=headers_of(answer), status=200)


def test_a_password_reset_of_a_locked_out_mfa_member_changes_nothing(
    testapp, admin, make_user, conn
):
    member = make_user(account_id=admin.account_id)
    enable(testapp, member)
    testapp.post_json('/auth/password', {'email': member.email})
    [mail] = mails(conn, member.email, 'Reset password instructions')
    token = re.search(r'reset_password_token=([\w-]+)', mail['text_body']).group(1)
    suspend(testapp, admin, member.id)
    hashed = conn.execute(
        'SELECT encrypted_password FROM users WHERE id = %s', (member.id,)
    ).fetchone()
    new = 'a brand new secret 9'
    answer = testapp.put_json(
        '/auth/password',
        {'reset_password_token': token, 'password': new, 'password_confirmation': new},
        status=401,
    )
    assert answer.json == LOCKED_OUT
    assert 'mfa_token' not in answer.json
    assert (
        conn.execute(
            'SELECT encrypted_password FROM users WHERE id = %s', (member.id,)
        ).fetchone()
        == hashed
    )


def test_a_confirmation_link_does_not_let_a_locked_out_member_in(
    testapp, admin, make_user, conn
):
    member = make_user(account_id=admin.account_id)
    new_address = unique_email('moved')
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': new_address, 'current_password': PASSWORD}},
        headers=member.headers,
    )
    [mail] = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s', (new_address,)
    ).fetchall()
    token = re.search(r'confirmation_token=([\w-]+)', mail['text_body']).group(1)
    suspend(testapp, admin, member.id)

    answer = testapp.post_json(
        '/auth/confirmation', {'confirmation_token': token}, status=401
    )

    assert answer.json == LOCKED_OUT
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    row = conn.execute(
        'SELECT email, unconfirmed_email FROM users WHERE id = %s', (member.id,)
    ).fetchone()
    assert row == {'email': member.email, 'unconfirmed_email': new_address}


def test_a_locked_out_member_can_still_undo_a_takeover_from_the_mailbox(
    testapp, admin, make_user, conn
):
    """The revert link of SPEC 3.3 is the owner's, and signs nobody in: it works."""
    member = make_user(account_id=admin.account_id)
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': unique_email('thief'), 'current_password': PASSWORD}},
        headers=member.headers,
    )
    [mail] = mails(conn, member.email, 'Your e-mail address is being changed')
    token = re.search(r'email_revert\?token=([\w-]+)', mail['text_body']).group(1)
    suspend(testapp, admin, member.id)
    answer = testapp.post_json('/auth/email_revert', {'token': token}, status=200)
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    assert conn.execute(
        'SELECT unconfirmed_email FROM users WHERE id = %s', (member.id,)
    ).fetchone() == {'unconfirmed_email': None}


# --- who may suspend whom -------------------------------------------------------------


def test_an_administrator_cannot_suspend_themselves(testapp, admin, make_user, conn):
    make_user(account_id=admin.account_id, role='administrator')
    answer = suspend(testapp, admin, admin.id, status=422)
    assert answer.json == {
        'message': memberships.CANNOT_SUSPEND_SELF,
        'attributes': ['user_id'],
    }
    testapp.get('/api/v1/profile', headers=admin.headers, status=200)
    assert events(conn, admin.id, 'member_suspended') == []


def test_the_last_active_administrator_cannot_be_suspended(
    testapp, admin, make_user, conn
):
    answer = suspend(testapp, admin, admin.id, status=422)
    last = {'message': memberships.LAST_ADMINISTRATOR, 'attributes': ['user_id']}
    assert answer.json == last
    # A suspended administrator does not count: the one left is the last active one.
    other = make_user(account_id=admin.account_id, role='administrator')
    suspend(testapp, admin, other.id)
    assert suspend(testapp, admin, admin.id, status=422).json == last
    assert (
        testapp.get(
            f'/api/v1/accounts/{admin.account_id}', headers=admin.headers, status=200
        ).json['id']
        == admin.account_id
    )


def test_suspending_is_for_administrators_of_that_account_with_a_session(
    testapp, admin, make_user, make_account
):
    member = make_user(account_id=admin.account_id)
    agent = make_user(account_id=admin.account_id)
    stranger = make_user(account_id=make_account())
    for action in ('suspend', 'reactivate'):
        path = url(admin.account_id, member.id, action)
        assert testapp.post(path, headers=agent.headers, status=401).json == ROLE
        assert testapp.post(path, headers=api(admin), status=403).json == NEEDS_SESSION
        assert testapp.post(path, headers=stranger.headers, status=404).json == (
            NOT_FOUND
        )
        assert testapp.post(path, status=401).json == UNAUTHENTICATED
        # Not a member of the account, or nobody at all.
        for user_id in (stranger.id, 2**62):
            assert (
                testapp.post(
                    url(admin.account_id, user_id, action),
                    headers=admin.headers,
                    status=404,
                ).json
                == NOT_FOUND
            )
    testapp.get(
        f'/api/v1/accounts/{admin.account_id}', headers=member.headers, status=200
    )
    testapp.get('/api/v1/profile', headers=stranger.headers, status=200)


# --- idempotence, audit, mail ---------------------------------------------------------


def test_suspending_twice_changes_and_announces_once(testapp, admin, make_user, conn):
    member = make_user(account_id=admin.account_id)
    suspend(testapp, admin, member.id)
    again = suspend(testapp, admin, member.id)
    assert again.json['membership_status'] == 'suspended'
    reactivate(testapp, admin, member.id)
    reactivate(testapp, admin, member.id)
    assert len(events(conn, member.id, 'member_suspended')) == 1
    assert len(events(conn, member.id, 'member_reactivated')) == 1
    assert (
        len(mails(conn, member.email, 'Your access to an account was suspended')) == 1
    )
    assert len(mails(conn, member.email, 'Your access to an account is back')) == 1


def test_suspension_and_reactivation_are_audited(testapp, admin, team, make_user, conn):
    agent = team
    suspend(testapp, admin, agent.id)
    reactivate(testapp, admin, agent.id)
    lone = make_user(account_id=admin.account_id)
    suspend(testapp, admin, lone.id)
    [suspended] = events(conn, agent.id, 'member_suspended')
    assert suspended == {
        'actor_id': admin.id,
        'subject_id': agent.id,
        'account_id': admin.account_id,
        'details': {'locked_out': False, 'sessions_ended': 0},
    }
    [back] = events(conn, agent.id, 'member_reactivated')
    assert back['actor_id'] == admin.id and back['account_id'] == admin.account_id
    [locked] = events(conn, lone.id, 'member_suspended')
    assert locked['details'] == {'locked_out': True, 'sessions_ended': 1}
    # The administrators' feed has them; the member's own shows the administrator only
    # by id.
    feed = testapp.get(
        f'/api/v1/accounts/{admin.account_id}/audit_events?event=member_suspended',
        headers=admin.headers,
    ).json['events']
    assert {item['subject_id'] for item in feed} == {agent.id, lone.id}
    own = testapp.get('/api/v1/profile/audit_events', headers=agent.headers).json
    [mine] = [item for item in own['events'] if item['event'] == 'member_suspended']
    assert mine['actor_id'] == admin.id and mine['ip_address'] is None


def test_the_member_is_mailed_both_with_an_inert_account_name(
    testapp, admin, make_user, conn, base_env
):
    conn.execute(
        'UPDATE accounts SET name = %s WHERE id = %s',
        ('Visit evil.example/login\u202e now', admin.account_id),
    )
    member = make_user(account_id=admin.account_id)
    with smtp_server() as inbox:
        suspend(testapp, admin, member.id)
        reactivate(testapp, admin, member.id)
        deliver(base_env, inbox.port)
        got = {item.message['Subject']: item for item in inbox.to(member.email)}
    suspended = got['Your access to an account was suspended']
    back = got['Your access to an account is back']
    for message in (suspended, back):
        assert 'Account: Visit evil.example/login now' in message.text
        assert 'evil.example/login' not in message.html
        assert '\u202e' not in message.text + message.html
        assert f'By: {admin.email}' in message.text
    assert 'you were signed out everywhere' in suspended.text
    assert 'stay ended' in back.text


# --- the agents list ------------------------------------------------------------------


def test_the_agents_list_shows_every_member_for_administrators(
    testapp, admin, make_user, make_account, conn
):
    member = make_user(account_id=admin.account_id, name='Zed Agent')
    enable(testapp, member)
    conn.execute(
        'UPDATE users SET last_sign_in_at = NULL, display_name = %s WHERE id = %s',
        ('Zed', member.id),
    )
    suspend(testapp, admin, member.id)
    sign_in(testapp, admin)
    stranger = make_user(account_id=make_account())

    for headers in (admin.headers, api(admin)):
        listed = testapp.get(
            f'/api/v1/accounts/{admin.account_id}/agents', headers=headers
        ).json
        assert [item['id'] for item in listed] == [admin.id, member.id]
        mine, theirs = listed
        assert all(set(item) == AGENT_FIELDS for item in listed)
        assert mine['role'] == 'administrator'
        assert mine['membership_status'] == 'active'
        assert mine['mfa_enabled'] is False
        assert re.fullmatch(r'\d{4}-\d\d-\d\dT[\d:.]+Z', mine['last_sign_in_at'])
        assert theirs == {
            'id': member.id,
            'account_id': admin.account_id,
            'name': 'Zed Agent',
            'available_name': 'Zed',
            'email': member.email,
            'role': 'agent',
            'confirmed': True,
            'availability_status': 'offline',
            'auto_offline': True,
            'thumbnail': '',
            'membership_status': 'suspended',
            'mfa_enabled': True,
            'last_sign_in_at': None,
        }
    agent = make_user(account_id=admin.account_id)
    path = f'/api/v1/accounts/{admin.account_id}/agents'
    assert testapp.get(path, headers=agent.headers, status=401).json == ROLE
    assert testapp.get(path, headers=stranger.headers, status=404).json == NOT_FOUND
    assert testapp.get(path, status=401).json == UNAUTHENTICATED


def test_last_sign_in_at_follows_sign_ins(testapp, admin, conn):
    conn.execute(
        "UPDATE users SET last_sign_in_at = now() - interval '3 days' WHERE id = %s",
        (admin.id,),
    )
    sign_in(testapp, admin)
    fresh = conn.execute(
        "SELECT last_sign_in_at > now() - interval '1 minute' AS recent FROM users"
        ' WHERE id = %s',
        (admin.id,),
    ).fetchone()
    assert fresh['recent'] is True


# --- a suspended member at every route of the table -----------------------------------


def route_table(config, pool, queries):
    return app_module.routes(pool, queries, config, load_validators())


def concrete(template, ids):
    return re.sub(
        r'\{(\w+)(:[^}]*)?\}', lambda match: str(ids[match.group(1)]), template
    )


def body_naming(resource, method, account_id):
    """A valid body for an endpoint that names its account in the body (the schema's
    example, with ``account_id``)."""
    doc = dict(apidoc.REQUEST_EXAMPLES[resource.schemas[method]])
    path = resource.account_in_body[method]
    node = doc
    for key in path[:-1]:
        node[key] = dict(node[key])
        node = node[key]
    node[path[-1]] = account_id
    return doc


def call(testapp, method, path, headers, body=None):
    return testapp.request(
        path,
        method=method,
        headers=headers,
        body=b'{}' if body is None else json.dumps(body).encode(),
        content_type='application/json',
        expect_errors=True,
    )


def test_a_suspended_member_is_refused_at_every_route_of_the_account(
    testapp, config, pool, queries, admin, make_user, make_account, conn
):
    """Generated from the route table: every method of every route that names an
    account (in the path or, declared, in the body), with the token headers and with
    api_access_token; the member is an administrator there, so only the suspension
    refuses. Routes of the member's other account, and the rest, never answer the
    suspension."""
    checked = set()
    for template, resource in route_table(config, pool, queries):
        for method in sorted(getattr(resource, 'access', {})):
            in_path = '{account_id' in template
            in_body = method in getattr(resource, 'account_in_body', {})
            for credential in ('session', 'api'):
                member = make_user(account_id=admin.account_id, role='administrator')
                elsewhere = make_account()
                add_member(conn, elsewhere, member.id, role='administrator')
                suspend(testapp, admin, member.id)
                headers = member.headers if credential == 'session' else api(member)
                session = conn.execute(
                    'SELECT id FROM user_tokens WHERE client = %s', (member.client,)
                ).fetchone()['id']
                ids = {
                    'account_id': admin.account_id,
                    'user_id': admin.id,
                    'session_id': session,
                    'token_id': 1,
                    'name': 'x',
                }
                where = f'{method} {template} ({credential})'
                body = (
                    body_naming(resource, method, admin.account_id) if in_body else None
                )
                answer = call(testapp, method, concrete(template, ids), headers, body)
                if in_path or in_body:
                    assert (answer.status_int, answer.json) == (403, SUSPENDED), where
                    checked.add((method, template))
                    # The same route of the account where the member is active.
                    ids['account_id'] = elsewhere
                    body = body_naming(resource, method, elsewhere) if in_body else None
                    answer = call(
                        testapp, method, concrete(template, ids), headers, body
                    )
                assert answer.status_int < 500, where
                if answer.content_type == 'application/json':
                    assert not (
                        isinstance(answer.json, dict)
                        and answer.json.get('error_code') == 'membership_suspended'
                    ), where
    # Every route of an account, and the profile endpoints that name one.
    assert len(checked) >= 13, sorted(checked)


def test_a_locked_out_member_gets_401_at_every_route(
    testapp, config, pool, queries, admin, make_user
):
    """Generated from the route table: no credential of a locked-out member reaches
    anything; only the routes without credentials answer."""
    member = make_user(account_id=admin.account_id, role='administrator')
    sign_in(testapp, member)
    other = make_user(account_id=admin.account_id, role='administrator')
    suspend(testapp, other, member.id, account_id=admin.account_id)
    ids = {
        'account_id': admin.account_id,
        'user_id': member.id,
        'session_id': 1,
        'token_id': 1,
    }
    ids['name'] = 'x'
    checked = 0
    for template, resource in route_table(config, pool, queries):
        for method, level in sorted(getattr(resource, 'access', {}).items()):
            if level == 'public':
                continue
            for headers in (member.headers, api(member)):
                answer = call(testapp, method, concrete(template, ids), headers)
                where = f'{method} {template}'
                assert not any(name in answer.headers for name in TOKEN_HEADERS), where
                if level == 'optional':
                    # Sign-up and validate_token take no credential to be optional
                    # about: treated as anonymous.
                    assert answer.status_int in (401, 403), where
                else:
                    assert answer.status_int == 401, where
                checked += 1
    assert checked >= 40, checked


# --- a suspension racing a sign-in ----------------------------------------------------


@pytest.fixture(scope='module')
def service(base_env):
    with run_gunicorn(base_env, workers=3) as base:
        yield base


def wait_for_lock(conn, marker, blocker):
    """The pid of the backend that waits for a lock backend ``blocker`` holds (or
    waits for ahead of it) in a statement containing ``marker`` (the interleaving is
    set by row locks; this only watches for it)."""
    for _ in range(2000):
        pids = waiting_for(conn, blocker, marker)
        if pids:
            return pids[0]
        conn.execute('SELECT pg_sleep(0.01)')
    raise AssertionError(f'nothing waits for {blocker} in {marker!r}')


def interleave(database_url, conn, hold, first, second):
    """Two requests in a set order, met at row locks.

    The test takes ``hold`` (SQL, args: rows it locks FOR UPDATE); ``first`` and
    ``second`` are (request, the statement text it is to wait in): ``first`` is sent
    and waits there for the test, then ``second``, which waits for ``first``, then the
    test lets go. Returns both answers.
    """
    answers = [None, None]
    threads = []
    with psycopg.connect(database_url, row_factory=dict_row) as holder:
        holder.execute(*hold)
        blocker = holder.info.backend_pid
        for index, (request, waits_in) in enumerate((first, second)):

            def run(index=index, request=request):
                answers[index] = request()

            threads.append(threading.Thread(target=run))
            threads[-1].start()
            blocker = wait_for_lock(conn, waits_in, blocker)
        holder.rollback()
    for thread in threads:
        thread.join()
    return answers


def suspending(service, admin, member):
    """The request of ``admin`` suspending ``member`` in ``admin``'s account."""
    return lambda: http(
        'POST',
        service + url(admin.account_id, member.id, 'suspend'),
        headers=admin.headers,
    )


def signing_in(service, member):
    return lambda: http(
        'POST',
        service + '/auth/sign_in',
        {'email': member.email, 'password': PASSWORD},
    )


def sessions_of(conn, user):
    return conn.execute(
        'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
    ).fetchone()['n']


def test_a_sign_in_waiting_for_a_suspension_gets_no_session(
    service, admin, make_user, conn, direct_database_url
):
    """The suspension holds the member's row and is about to commit (it waits for the
    member's session row, which the test holds); the sign-in's password is right and
    waits for the member's row; then it is refused."""
    member = make_user(account_id=admin.account_id)
    suspended, signed_in = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM user_tokens WHERE user_id = %s FOR UPDATE', (member.id,)),
        (
            suspending(service, admin, member),
            'user_locked_out(u.id)',
        ),
        (
            signing_in(service, member),
            'Serialises token issuance',
        ),
    )
    assert suspended.status == 200
    assert (signed_in.status, signed_in.json) == (401, LOCKED_OUT)
    assert 'access-token' not in signed_in.headers
    assert sessions_of(conn, member) == 0


def test_a_session_issued_while_a_suspension_waits_dies_with_it(
    service, admin, make_user, conn, direct_database_url
):
    """The sign-in holds the member's row and is about to commit its session (it
    drops an expired one, whose row the test holds); the suspension waits for the
    member's row, then revokes the session the sign-in answered."""
    member = make_user(account_id=admin.account_id)
    conn.execute(
        "UPDATE user_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE user_id = %s',
        (member.id,),
    )
    signed_in, suspended = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM user_tokens WHERE user_id = %s FOR UPDATE', (member.id,)),
        (
            signing_in(service, member),
            'last_sign_in_at = now()',
        ),
        (
            suspending(service, admin, member),
            'Serialises token issuance',
        ),
    )
    assert (signed_in.status, suspended.status) == (200, 200)
    headers = {name: signed_in.headers[name] for name in TOKEN_HEADERS}
    assert http('GET', service + '/api/v1/profile', headers=headers).status == 401
    assert sessions_of(conn, member) == 0


def test_two_administrators_suspending_each_other_leave_one_active(
    service, admin, make_user, conn, direct_database_url
):
    """Both pass the access rules while the other is still active, then meet at the
    account row (which the test holds): the second sees the first's suspension and is
    refused."""
    other = make_user(account_id=admin.account_id, role='administrator')
    other.account_id = admin.account_id
    answers = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM accounts WHERE id = %s FOR UPDATE', (admin.account_id,)),
        (suspending(service, admin, other), 'Serialises the suspensions'),
        (suspending(service, other, admin), 'Serialises the suspensions'),
    )
    assert [answer.status for answer in answers] == [200, 403]
    assert answers[1].json == SUSPENDED
    active = conn.execute(
        'SELECT count(*) AS n FROM account_users WHERE account_id = %s AND role ='
        " 'administrator' AND status = 'active'",
        (admin.account_id,),
    ).fetchone()['n']
    assert active == 1


# --- a lockout racing a request that mints a credential -------------------------------


def minting(service, member, path, body=None):
    """``member``'s request (with a session) to ``path``, which hands out a
    credential."""
    return lambda: http('POST', service + path, body, headers=member.headers)


def lockout_racing(
    service, admin, member, conn, direct_database_url, request, waits_in
):
    """The suspension that locks ``member`` out holds their row and is about to revoke
    their sessions (it waits for the session row, which the test holds); ``request``,
    authenticated a moment before, waits for the member's row in ``waits_in``; then
    both go on. Returns the answer to ``request``."""
    # Used once, so the request's authentication writes nothing to the held row.
    assert (
        http('GET', service + '/api/v1/profile', headers=member.headers).status == 200
    )
    suspended, answer = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM user_tokens WHERE user_id = %s FOR UPDATE', (member.id,)),
        (suspending(service, admin, member), 'user_locked_out(u.id)'),
        (request, waits_in),
    )
    assert suspended.status == 200
    assert sessions_of(conn, member) == 0
    return answer


def refused_without_a_working_token(service, answer, field, headers):
    """``answer`` is the 401 of a revoked session; had it handed out a credential (in
    ``field``), that credential must not read the profile (``headers`` sends it)."""
    if answer.status < 300:
        token = json.loads(answer.body)[field]
        reads = http('GET', service + '/api/v1/profile', headers=headers(token))
        assert reads.status == 401, 'the locked-out member holds a working token'
    assert answer.status == 401, answer.body


def test_a_personal_token_minted_while_a_lockout_waits_is_refused(
    service, admin, make_user, conn, direct_database_url
):
    """SPEC 18: a member locked out has no token left. The token request passed the
    access rules and the recent-authentication check with the session the lockout is
    about to end, and waits for the member's row: it must not mint a token that
    outlives the lockout (and comes back on reactivation)."""
    member = make_user(account_id=admin.account_id)
    answer = lockout_racing(
        service,
        admin,
        member,
        conn,
        direct_database_url,
        minting(
            service,
            member,
            '/api/v1/profile/access_tokens',
            {'name': 'CI', 'scopes': ['profile:read'], 'expires_in_days': 30},
        ),
        'Serialises token issuance',
    )
    refused_without_a_working_token(
        service, answer, 'token', lambda token: {'Authorization': f'Bearer {token}'}
    )
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM personal_access_tokens WHERE user_id = %s',
            (member.id,),
        ).fetchone()['n']
        == 0
    )


def test_an_access_token_reset_while_a_lockout_waits_is_refused(
    service, admin, make_user, conn, direct_database_url
):
    """As above for reset_access_token: the new access token must not reach the
    locked-out member, nor act as them once an administrator reactivates them."""
    member = make_user(account_id=admin.account_id)
    answer = lockout_racing(
        service,
        admin,
        member,
        conn,
        direct_database_url,
        minting(service, member, '/api/v1/profile/reset_access_token'),
        # Recent authentication is asked under the user row's lock (SPEC 3.4).
        'Serialises token issuance',
    )
    refused_without_a_working_token(
        service, answer, 'access_token', lambda token: {'api_access_token': token}
    )
    assert b'access_token' not in answer.body
    assert events(conn, member.id, 'access_token_reset') == []


@pytest.fixture
def refused_once_suspended(service, admin, make_user, conn, direct_database_url):
    """Run ``request``, a request of ``admin`` that passed the access rules while they
    were active and waits for the account row behind the suspension of ``admin`` by
    another administrator (the test holds the row first, so the suspension queues
    ahead); assert it answers the 403 of SPEC 18 (SPEC 3.4: it must do nothing)."""
    other = make_user(account_id=admin.account_id, role='administrator')
    other.account_id = admin.account_id

    def run(request):
        suspended, answer = interleave(
            direct_database_url,
            conn,
            ('SELECT id FROM accounts WHERE id = %s FOR UPDATE', (admin.account_id,)),
            (suspending(service, other, admin), 'Serialises the suspensions'),
            (request, 'Serialises the suspensions'),
        )
        assert suspended.status == 200
        assert (answer.status, json.loads(answer.body)) == (403, SUSPENDED)

    return run


def test_an_account_change_waiting_for_the_changers_suspension_is_refused(
    service, admin, conn, refused_once_suspended
):
    refused_once_suspended(
        lambda: http(
            'PUT',
            service + f'/api/v1/accounts/{admin.account_id}',
            {'name': 'Renamed by the suspended'},
            headers=admin.headers,
        )
    )
    name = conn.execute(
        'SELECT name FROM accounts WHERE id = %s', (admin.account_id,)
    ).fetchone()['name']
    assert name != 'Renamed by the suspended'


def test_ending_a_members_sessions_waiting_for_the_callers_suspension_is_refused(
    service, admin, make_user, conn, refused_once_suspended
):
    member = make_user(account_id=admin.account_id)
    refused_once_suspended(
        lambda: http(
            'DELETE',
            service + url(admin.account_id, member.id, 'sessions'),
            headers=admin.headers,
        )
    )
    assert sessions_of(conn, member) == 1
    assert events(conn, member.id, 'sessions_ended_by_administrator') == []


def test_revoking_a_members_token_waiting_for_the_callers_suspension_is_refused(
    service, admin, make_user, refused_once_suspended
):
    member = make_user(account_id=admin.account_id)
    token = json.loads(
        minting(
            service,
            member,
            '/api/v1/profile/access_tokens',
            {'name': 'CI', 'scopes': ['profile:read'], 'expires_in_days': 30},
        )().body
    )
    path = f'/api/v1/accounts/{admin.account_id}/access_tokens/{token["id"]}'
    refused_once_suspended(
        lambda: http('DELETE', service + path, headers=admin.headers)
    )
    reads = http(
        'GET',
        service + '/api/v1/profile',
        headers={'Authorization': f'Bearer {token["token"]}'},
    )
    assert reads.status == 200


def test_a_suspension_waiting_for_the_suspenders_own_suspension_is_refused(
    service, admin, make_user, conn, refused_once_suspended
):
    member = make_user(account_id=admin.account_id)
    refused_once_suspended(suspending(service, admin, member))
    status = conn.execute(
        'SELECT status FROM account_users WHERE account_id = %s AND user_id = %s',
        (admin.account_id, member.id),
    ).fetchone()['status']
    assert status == 'active'
    assert events(conn, member.id, 'member_suspended') == []


# --- a suspension racing the member's own write of that membership --------------------

# The member's requests that write their membership row: (method, path, body, a text of
# the statement that does it). The UPDATE takes the membership row, then its trigger the
# member's user row (migration 0014 keeps users.doc): the suspension must not take them
# the other way round.
MEMBERSHIP_WRITES = {
    'heartbeat': (
        'POST',
        '/api/v1/accounts/{account_id}/update_active_at',
        None,
        'A suspended membership is not stamped',
    ),
    'set_active_account': (
        'PUT',
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': '{account_id}'}},
        'A suspended membership is not stamped',
    ),
    'availability': (
        'POST',
        '/api/v1/profile/availability',
        {'profile': {'availability': 'busy', 'account_id': '{account_id}'}},
        'SET availability',
    ),
    'auto_offline': (
        'POST',
        '/api/v1/profile/auto_offline',
        {'profile': {'auto_offline': False, 'account_id': '{account_id}'}},
        'SET auto_offline',
    ),
}


def membership_write(service, member, account_id, kind):
    """``member``'s request of ``kind`` (MEMBERSHIP_WRITES) naming ``account_id``, and
    the text of the statement it writes the membership in."""
    method, path, body, statement = MEMBERSHIP_WRITES[kind]
    if body is not None:
        body = {'profile': {**body['profile'], 'account_id': account_id}}
    path = service + path.format(account_id=account_id)
    return (
        lambda: http(method, path, body, headers=member.headers),
        statement,
    )


def membership(conn, account_id, user):
    return conn.execute(
        'SELECT status, availability, auto_offline, active_at IS NOT NULL AS stamped'
        ' FROM account_users WHERE account_id = %s AND user_id = %s',
        (account_id, user.id),
    ).fetchone()


@pytest.mark.parametrize('kind', sorted(MEMBERSHIP_WRITES))
def test_a_suspension_waiting_for_the_members_own_membership_write_completes(
    service, admin, make_user, conn, direct_database_url, kind
):
    """The member's write has taken their membership row and waits for their user row
    (its trigger updates users.doc; the test holds the users table in SHARE mode, which
    only that UPDATE needs); the suspension of that member comes next and waits
    wherever it meets the member's write. Had the suspension taken the user row before
    the membership row, each would hold a row the other waits for: PostgreSQL ends one
    as a deadlock, and its client gets a 5xx. Both answer as SPEC 18 says instead: the
    write came first and is kept, then the suspension locks the member out."""
    member = make_user(account_id=admin.account_id)
    write, statement = membership_write(service, member, admin.account_id, kind)
    written, suspended = interleave(
        direct_database_url,
        conn,
        ('LOCK TABLE users IN SHARE MODE', ()),
        (write, statement),
        # '': wherever the suspension waits for the member's write.
        (suspending(service, admin, member), ''),
    )
    assert (written.status, suspended.status) == (200, 200), (
        written.body,
        suspended.body,
    )
    assert json.loads(suspended.body)['membership_status'] == 'suspended'
    row = membership(conn, admin.account_id, member)
    assert row['status'] == 'suspended'
    assert {
        'heartbeat': row['stamped'],
        'set_active_account': row['stamped'],
        'availability': row['availability'] == 'busy',
        'auto_offline': row['auto_offline'] is False,
    }[kind]
    # The suspension left the member without an active membership: locked out.
    assert sessions_of(conn, member) == 0
    answer = http(
        'POST',
        service + '/auth/sign_in',
        {'email': member.email, 'password': PASSWORD},
    )
    assert (answer.status, answer.json) == (401, LOCKED_OUT)
    doc = conn.execute('SELECT doc FROM users WHERE id = %s', (member.id,)).fetchone()
    assert [item['membership_status'] for item in doc['doc']['accounts']] == [
        'suspended'
    ]


@pytest.mark.parametrize('locked_out', [False, True], ids=['elsewhere', 'locked_out'])
@pytest.mark.parametrize('kind', sorted(MEMBERSHIP_WRITES))
def test_a_members_own_membership_write_waiting_for_their_suspension_is_refused(
    service, admin, make_user, make_account, conn, direct_database_url, kind, locked_out
):
    """The other order: the suspension has taken the membership row and waits for the
    member's user row (which the test holds); the member's write, which passed the
    access rules while the membership was active, waits for the membership row. Once
    the suspension commits, the write's UPDATE finds no active membership: that is the
    403 of SPEC 18 (membership_suspended), as the access rules answer a moment later,
    not the 404 of a stranger nor a 200 that wrote nothing."""
    member = make_user(account_id=admin.account_id)
    if not locked_out:
        add_member(conn, make_account('Elsewhere'), member.id)
    # Used once, so the request's authentication writes nothing to the held row.
    assert (
        http('GET', service + '/api/v1/profile', headers=member.headers).status == 200
    )
    before = membership(conn, admin.account_id, member)
    write, statement = membership_write(service, member, admin.account_id, kind)
    suspended, written = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (member.id,)),
        (suspending(service, admin, member), 'Serialises token issuance'),
        (write, statement),
    )
    assert suspended.status == 200, suspended.body
    assert (written.status, json.loads(written.body)) == (403, SUSPENDED)
    assert membership(conn, admin.account_id, member) == {
        **before,
        'status': 'suspended',
    }
