"""Who owns an account (SPEC 3.4): the holder of its confirmed mailbox.

Each test is the reproduction of a path the security review found, end to end over
HTTP; the takeover scenarios run against gunicorn with mail delivered to a real SMTP
server (tests/test_credentials.py's helpers), the links taken from the messages.
"""

import datetime
import re

import pytest

import config as config_module
from tests.smtp_server import deliver
from tests.support.users import unique_email
from tests.test_credentials import ATTACKER_PASSWORD
from tests.test_credentials import Client
from tests.test_credentials import OWNER_PASSWORD
from tests.test_credentials import received
from tests.test_credentials import token_headers
from tests.test_mfa import Authenticator

NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
# Any 29..200 bytes satisfy the column's CHECK; the tests never ask for a code.
SOME_SECRET = b'\x01' + b'\x00' * 40


def member_sessions(account_id, user_id):
    return f'/api/v1/accounts/{account_id}/agents/{user_id}/sessions'


# Integration credentials never touch account security.


def test_an_administrators_api_token_cannot_end_members_sessions_or_replace_their_tokens(  # noqa: E501
    testapp, admin, make_user
):
    member = make_user(account_id=admin.account_id)
    api = {'api_access_token': admin.access_token}
    url = member_sessions(admin.account_id, member.id)

    assert testapp.delete(url, headers=api, status=403).json == NEEDS_SESSION
    assert (
        testapp.delete(url + '?include_access_token=true', headers=api, status=403).json
        == NEEDS_SESSION
    )

    testapp.get('/api/v1/profile', headers=member.headers, status=200)
    testapp.get(
        '/api/v1/profile', headers={'api_access_token': member.access_token}, status=200
    )
    # The administrator's own session still may (SPEC 13).
    assert testapp.delete(url, headers=admin.headers, status=200).json == {'revoked': 1}


def test_an_administrators_api_token_cannot_turn_enforce_mfa_off(testapp, admin, conn):
    # An administrator with MFA on, in an account that requires it.
    conn.execute(
        'UPDATE users SET otp_secret = %s, mfa_enabled_at = now() WHERE id = %s',
        (SOME_SECRET, admin.id),
    )
    conn.execute(
        'UPDATE accounts SET enforce_mfa = true WHERE id = %s', (admin.account_id,)
    )
    api = {'api_access_token': admin.access_token}
    url = f'/api/v1/accounts/{admin.account_id}'

    assert (
        testapp.put_json(url, {'enforce_mfa': False}, headers=api, status=403).json
        == NEEDS_SESSION
    )
    assert (
        testapp.patch_json(
            url, {'name': 'Renamed', 'enforce_mfa': False}, headers=api, status=403
        ).json
        == NEEDS_SESSION
    )
    account = testapp.get(url, headers=api).json
    assert (account['enforce_mfa'], account['name']) == (True, 'Acme')

    # Other settings still may, with the api token; the setting itself with a session.
    assert (
        testapp.patch_json(url, {'name': 'Renamed'}, headers=api).json['name']
        == 'Renamed'
    )
    assert (
        testapp.put_json(url, {'enforce_mfa': False}, headers=admin.headers).json[
            'enforce_mfa'
        ]
        is False
    )


@pytest.mark.parametrize(
    'route',
    ['/api/v1/profile/audit_events', '/api/v1/accounts/{account_id}/audit_events'],
)
def test_the_audit_log_is_not_for_api_tokens(testapp, admin, route):
    url = route.format(account_id=admin.account_id)
    assert (
        testapp.get(
            url, headers={'api_access_token': admin.access_token}, status=403
        ).json
        == NEEDS_SESSION
    )
    testapp.get(url, headers=admin.headers, status=200)


def security_routes(account, user_id):
    """(method, url) of the routes integration credentials never reach (SPEC 3.4)."""
    tokens = '/api/v1/profile/access_tokens'
    return [
        ('get', '/api/v1/profile/sessions'),
        ('delete', '/api/v1/profile/sessions'),
        ('delete', '/api/v1/profile/sessions/1'),
        ('post', '/api/v1/profile/reset_access_token'),
        ('get', '/api/v1/profile/mfa'),
        ('post', '/api/v1/profile/mfa'),
        ('get', '/api/v1/profile/audit_events'),
        ('get', '/api/v1/profile/export'),
        ('delete', '/api/v1/profile'),
        ('get', tokens),
        ('post', tokens),
        ('delete', f'{tokens}/1'),
        ('get', f'/api/v1/accounts/{account}/audit_events'),
        ('get', f'/api/v1/accounts/{account}/access_tokens'),
        ('delete', f'/api/v1/accounts/{account}/access_tokens/1'),
        ('delete', member_sessions(account, user_id)),
        ('post', f'/api/v1/accounts/{account}/agents/{user_id}/suspend'),
        ('post', f'/api/v1/accounts/{account}/agents/{user_id}/reactivate'),
        ('post', f'/enterprise/api/v1/accounts/{account}/toggle_deletion'),
    ]


@pytest.mark.parametrize('stale', [False, True], ids=['fresh', 'stale'])
def test_a_stolen_session_alone_cannot_erase_the_owner(testapp, make_user, conn, stale):
    """SPEC 20, 3.4: erasing needs the password (and the second factor) in the body,
    whatever the session's age; a session without them erases nobody, and its guesses
    spend the owner's password budget."""
    owner = make_user()
    if stale:
        conn.execute(
            'UPDATE user_tokens SET authenticated_at = now() - %s WHERE client = %s',
            (datetime.timedelta(hours=1), owner.client),
        )
    for body in ({}, {'password': ''}, {'password': ATTACKER_PASSWORD}):
        testapp.delete_json('/api/v1/profile', body, headers=owner.headers, status=422)
    assert (
        conn.execute(
            'SELECT hits FROM rate_limit_counters WHERE bucket = %s',
            (f'password|user={owner.id}',),
        ).fetchone()['hits']
        == 1
    )
    testapp.get('/api/v1/profile', headers=owner.headers, status=200)


def test_every_security_route_refuses_the_api_token(testapp, admin):
    api = {'api_access_token': admin.access_token}
    for method, url in security_routes(admin.account_id, admin.id):
        answer = getattr(testapp, method)(url, headers=api, status=403)
        assert answer.json == NEEDS_SESSION, (method, url)
    testapp.get('/api/v1/profile', headers=api, status=200)


# A mailbox link undoes only what came after it.


@pytest.fixture
def client(gunicorn_url):
    return Client(gunicorn_url)


def enable_mfa(client, user):
    """Enrol ``user`` over HTTP with its session; its authenticator."""
    started = client(
        'POST', '/api/v1/profile/mfa', {'password': user.password}, headers=user.headers
    ).json
    app = Authenticator(started['provisioning_url'])
    enabled = client(
        'POST',
        '/api/v1/profile/mfa/verify',
        {'otp_code': app.code(-1)},
        headers=user.headers,
    )
    assert enabled.status == 200 and enabled.json['enabled'] is True
    return app


def move_with_stolen_session(client, base_env, inbox, owner, address=None):
    """Move ``owner``'s account to ``address`` with the owner's session; the revert
    link the owner's address then receives."""
    address = address or unique_email('attacker')
    moved = client(
        'PUT', '/api/v1/profile', {'profile': {'email': address}}, headers=owner.headers
    )
    assert moved.status == 200
    deliver(base_env, inbox.port)
    _, revert = received(
        inbox, owner.email, 'Your e-mail address is being changed'
    ).link('/app/auth/email_revert', 'token')
    return revert


def test_a_revert_keeps_the_second_factor_the_owner_had_before_the_link(
    client, base_env, inbox, conn, make_user
):
    owner = make_user(name='Olive Owner')
    enable_mfa(client, owner)
    # With the owner's stolen session, someone moves the account to their own address.
    revert = move_with_stolen_session(client, base_env, inbox, owner)

    assert client('POST', '/auth/email_revert', {'token': revert}).status == 200

    row = conn.execute(
        'SELECT mfa_enabled_at IS NOT NULL AS on, (SELECT count(*)'
        ' FROM mfa_recovery_codes c WHERE c.user_id = u.id) AS codes FROM users u'
        ' WHERE id = %s',
        (owner.id,),
    ).fetchone()
    assert row == {'on': True, 'codes': 10}
    # The reset the revert mails still asks for the owner's second factor.
    deliver(base_env, inbox.port)
    _, reset = received(inbox, owner.email, 'Reset password instructions').link(
        '/app/auth/password/edit', 'reset_password_token'
    )
    answer = client(
        'PUT',
        '/auth/password',
        {'reset_password_token': reset, 'password': OWNER_PASSWORD},
    )
    assert answer.status == 206 and answer.json['mfa_required'] is True
    assert 'access-token' not in answer.headers


# Revert links belong to confirmed addresses, and reserve them.


def test_a_stolen_session_cannot_keep_the_owners_address_from_the_revert(
    client, base_env, inbox, conn, make_user
):
    owner = make_user(name='Olive Owner')
    attacker = unique_email('attacker')
    # With the owner's session: move the account, confirm from the attacker's mailbox.
    revert = move_with_stolen_session(client, base_env, inbox, owner, attacker)
    _, confirm = received(inbox, attacker, 'Confirm your new email address').link(
        '/app/auth/confirmation', 'confirmation_token'
    )
    taker = token_headers(
        client('POST', '/auth/confirmation', {'confirmation_token': confirm})
    )
    # Then re-register the owner's freed address, and try to move another account to it.
    squat = client(
        'POST',
        '/api/v1/accounts',
        {
            'account_name': 'Trap',
            'email': owner.email,
            'user_full_name': 'Mallory',
            'password': ATTACKER_PASSWORD,
        },
    )
    assert (squat.status, squat.json) == (
        403,
        {'message': f'You have already signed up for an account with {owner.email}'},
    )
    other = make_user()
    moved = client(
        'PUT',
        '/api/v1/profile',
        {'profile': {'email': owner.email}},
        headers=other.headers,
    )
    assert moved.status == 200 and moved.json['unconfirmed_email'] == owner.email
    deliver(base_env, inbox.port)
    assert [item.message['Subject'] for item in inbox.to(owner.email)] == [
        'Your e-mail address is being changed',
        'Someone tried to use your e-mail address',
    ]

    answer = client('POST', '/auth/email_revert', {'token': revert})

    assert (answer.status, answer.json) == (200, {})
    assert (
        conn.execute('SELECT email FROM users WHERE id = %s', (owner.id,)).fetchone()[
            'email'
        ]
        == owner.email
    )
    assert client('GET', '/api/v1/profile', headers=taker).status == 401


def test_an_unconfirmed_address_gets_no_revert_link(testapp, conn, make_user):
    squatter = make_user(confirmed=False)
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': unique_email('moved')}},
        headers=squatter.headers,
    )

    links = conn.execute(
        'SELECT count(*) AS n FROM one_time_tokens WHERE user_id = %s'
        " AND purpose = 'email_revert'",
        (squatter.id,),
    ).fetchone()['n']
    mailed = conn.execute(
        'SELECT count(*) AS n FROM mail_outbox WHERE to_address = %s', (squatter.email,)
    ).fetchone()['n']
    assert (links, mailed) == (0, 0)


# An address change transfers ownership only when the revert window closes.


def test_the_new_address_is_told_when_the_account_becomes_its_for_good(
    client, base_env, inbox, conn, make_user
):
    owner = make_user()
    new = unique_email('new')
    assert (
        client(
            'PUT', '/api/v1/profile', {'profile': {'email': new}}, headers=owner.headers
        ).status
        == 200
    )
    until = (
        conn.execute(
            'SELECT expires_at FROM one_time_tokens WHERE user_id = %s'
            " AND purpose = 'email_revert'",
            (owner.id,),
        )
        .fetchone()['expires_at']
        .astimezone(datetime.timezone.utc)
    )
    # A resend of the link says the same.
    assert (
        client(
            'POST', '/api/v1/profile/resend_confirmation', headers=owner.headers
        ).status
        == 200
    )
    deliver(base_env, inbox.port)

    mails = [
        item
        for item in inbox.to(new)
        if item.message['Subject'] == 'Confirm your new email address'
    ]
    assert len(mails) == 2
    for item in mails:
        text = ' '.join(item.text.split())
        assert "The account becomes this address's for good on " in text
        stated = re.search(r'for good on (\d{4}-\d\d-\d\d \d\d:\d\d) UTC', text).group(
            1
        )
        stated = datetime.datetime.strptime(stated, '%Y-%m-%d %H:%M').replace(
            tzinfo=datetime.timezone.utc
        )
        assert abs(stated - until) < datetime.timedelta(minutes=2)
        assert 'until then the previous address can undo the change' in text


# Recent authentication.

REAUTHENTICATE = {
    'error': 'Sign in again to change this',
    'error_code': 'reauthentication_required',
}


def age_session(conn, headers, minutes):
    conn.execute(
        'UPDATE user_tokens SET authenticated_at = now() - make_interval(mins => %s)'
        ' WHERE client = %s',
        (minutes, headers['client']),
    )


def test_a_stale_session_cannot_change_the_address_without_the_password(
    testapp, conn, make_user
):
    owner = make_user()
    age_session(conn, owner.headers, 16)  # a session stolen a while after its sign-in
    new = unique_email('new')

    refused = testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': new}},
        headers=owner.headers,
        status=403,
    )

    assert refused.json == REAUTHENTICATE
    assert (
        testapp.get('/api/v1/profile', headers=owner.headers).json['unconfirmed_email']
        is None
    )
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM mail_outbox WHERE to_address IN (%s, %s)',
            (new, owner.email),
        ).fetchone()['n']
        == 0
    )
    # Other fields need no recent sign-in; a wrong current password is the 422 of
    # SPEC 5.4.
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'name': 'Still Me'}},
        headers=owner.headers,
        status=200,
    )
    wrong = testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': new, 'current_password': 'not it at all'}},
        headers=owner.headers,
        status=422,
    )
    assert wrong.json == {'message': 'Invalid current password'}
    # With the current password it works.
    moved = testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': new, 'current_password': owner.password}},
        headers=owner.headers,
        status=200,
    )
    assert moved.json['unconfirmed_email'] == new


def test_a_fresh_sign_in_may_change_the_address(testapp, conn, make_user):
    owner = make_user()
    age_session(conn, owner.headers, 16)
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': owner.email, 'password': owner.password}
    )
    fresh = token_headers(signed_in)
    new = unique_email('new')
    # Fourteen minutes on, the sign-in is still recent enough
    # (REAUTH_WINDOW_MINUTES=15).
    age_session(conn, fresh, 14)
    assert (
        testapp.put_json(
            '/api/v1/profile', {'profile': {'email': new}}, headers=fresh, status=200
        ).json['unconfirmed_email']
        == new
    )


def test_the_reauthentication_window_is_configurable(make_testapp, conn, make_user):
    owner = make_user()
    age_session(conn, owner.headers, 16)
    app = make_testapp(REAUTH_WINDOW_MINUTES='30')
    app.put_json(
        '/api/v1/profile',
        {'profile': {'email': unique_email('new')}},
        headers=owner.headers,
        status=200,
    )
    for bad in ('0', 'soon', '1441'):
        with pytest.raises(config_module.ConfigError, match='REAUTH_WINDOW_MINUTES'):
            config_module.load(
                {'DATABASE_URL': 'postgresql:///x', 'REAUTH_WINDOW_MINUTES': bad}
            )
