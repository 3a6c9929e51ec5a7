"""A password chosen before the address was proven stays, and the mailbox can still end
it (SPEC 3.4 rule 1): a first confirmation without a live session of the user mails the
address a notice with a password-reset link.

The end-to-end path runs against gunicorn with mail delivered to a real SMTP server;
the others in process, reading what the outbox delivered.
"""

import datetime
import json
import urllib.parse

import pytest

from tests.smtp_server import deliver
from tests.support.users import unique_email
from tests.test_credentials import ATTACKER_PASSWORD
from tests.test_credentials import Client
from tests.test_credentials import INVALID_TOKEN
from tests.test_credentials import OWNER_PASSWORD
from tests.test_credentials import received
from tests.test_credentials import token_headers
from tests.test_mfa import Authenticator
from tests.test_request_text_in_mail import AGENT

NOTICE = 'Your e-mail address is confirmed'
RESET = ('/app/auth/password/edit', 'reset_password_token')
BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'


@pytest.fixture
def client(gunicorn_url):
    return Client(gunicorn_url)


def subjects(inbox, address):
    return [item.message['Subject'] for item in inbox.to(address)]


def confirmation_token(base_env, inbox, address):
    deliver(base_env, inbox.port)
    return received(inbox, address, 'Confirmation Instructions').link(
        '/app/auth/confirmation', 'confirmation_token'
    )[1]


def session_cookie(answer):
    """The reference dashboard's cw_d_session_info after ``answer``: every response
    header, as JSON, written as js-cookie writes a value."""
    headers = json.dumps(
        {name.lower(): value for name, value in answer.headers.items()}
    )
    return 'cw_d_session_info=' + urllib.parse.quote(
        headers, safe="-_.!~*'()#$&+/:<=>?@[]^`{|}"
    )


# End to end: the squatter keeps nothing once the owner has used the mailbox.


def test_the_mailbox_ends_a_squatter_who_enabled_mfa_and_minted_a_token(
    client, base_env, inbox
):
    address = unique_email('owner')
    client.sign_up(address, ATTACKER_PASSWORD)
    # The owner opens the mail on a phone: no session.
    token = confirmation_token(base_env, inbox, address)
    assert (
        client('POST', '/auth/confirmation', {'confirmation_token': token}).status
        == 200
    )
    # The password chosen at sign-up keeps working (the reference clients need it).
    signed_in = client(
        'POST', '/auth/sign_in', {'email': address, 'password': ATTACKER_PASSWORD}
    )
    assert signed_in.status == 200
    squatter = token_headers(signed_in)
    started = client(
        'POST',
        '/api/v1/profile/mfa',
        {'password': ATTACKER_PASSWORD},
        headers=squatter,
    ).json
    authenticator = Authenticator(started['provisioning_url'])
    enabled = client(
        'POST',
        '/api/v1/profile/mfa/verify',
        {'otp_code': authenticator.code(-1)},
        headers=squatter,
    )
    assert enabled.status == 200
    personal = client(
        'POST',
        '/api/v1/profile/access_tokens',
        {'name': 'Sync', 'scopes': ['profile:read'], 'expires_in_days': 30},
        headers=squatter,
    )
    assert personal.status == 201
    api = client('GET', '/api/v1/profile', headers=squatter).json['access_token']
    holds = [
        squatter,
        {'api_access_token': api},
        {'Authorization': f'Bearer {personal.json["token"]}'},
    ]
    assert [client('GET', '/api/v1/profile', headers=h).status for h in holds] == [
        200
    ] * 3

    # The owner's mailbox: the notice, and the MFA-enabled mail's "this was not me".
    deliver(base_env, inbox.port)
    assert subjects(inbox, address) == [
        'Confirmation Instructions',
        NOTICE,
        'Two-factor sign-in was turned on',
        'A personal access token was created',
    ]
    _, notice_reset = received(inbox, address, NOTICE).link(*RESET)
    # Turning MFA on was a credential change: it voided the notice's link, and a new
    # reset would stop at a second factor only the squatter has (SPEC 12). The
    # enablement's own link undoes it (SPEC 3.4: a mailbox link undoes what came
    # after it), ends everything and mails a reset.
    voided = client(
        'PUT',
        '/auth/password',
        {'reset_password_token': notice_reset, 'password': OWNER_PASSWORD},
    )
    assert (voided.status, voided.json) == (422, INVALID_TOKEN)
    _, not_me = received(inbox, address, 'Two-factor sign-in was turned on').link(
        '/app/auth/mfa_revert', 'token'
    )
    assert client('POST', '/auth/mfa_revert', {'token': not_me}).status == 200
    deliver(base_env, inbox.port)
    _, reset = received(inbox, address, 'Reset password instructions').link(*RESET)
    owner = client(
        'PUT',
        '/auth/password',
        {'reset_password_token': reset, 'password': OWNER_PASSWORD},
    )
    assert owner.status == 200 and 'access-token' in owner.headers

    assert [client('GET', '/api/v1/profile', headers=h).status for h in holds] == [
        401
    ] * 3
    again = client(
        'POST', '/auth/sign_in', {'email': address, 'password': ATTACKER_PASSWORD}
    )
    assert again.status == 401
    owner_again = client(
        'POST', '/auth/sign_in', {'email': address, 'password': OWNER_PASSWORD}
    )
    assert owner_again.status == 200
    assert client('GET', '/api/v1/profile', headers=token_headers(owner)).status == 200


def test_the_notices_reset_link_ends_the_squatters_password_and_session(
    client, base_env, inbox
):
    address = unique_email('owner')
    client.sign_up(address, ATTACKER_PASSWORD)
    token = confirmation_token(base_env, inbox, address)
    client('POST', '/auth/confirmation', {'confirmation_token': token})
    squatter = token_headers(
        client(
            'POST', '/auth/sign_in', {'email': address, 'password': ATTACKER_PASSWORD}
        )
    )
    deliver(base_env, inbox.port)
    _, reset = received(inbox, address, NOTICE).link(*RESET)

    owner = client(
        'PUT',
        '/auth/password',
        {'reset_password_token': reset, 'password': OWNER_PASSWORD},
    )

    assert owner.status == 200
    assert client('GET', '/api/v1/profile', headers=squatter).status == 401
    assert (
        client(
            'POST', '/auth/sign_in', {'email': address, 'password': ATTACKER_PASSWORD}
        ).status
        == 401
    )
    # Single use.
    assert (
        client(
            'PUT',
            '/auth/password',
            {'reset_password_token': reset, 'password': OWNER_PASSWORD},
        ).status
        == 422
    )


# Which confirmations mail it.


def sign_up(testapp, address, agent=BROWSER):
    return testapp.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Acme',
            'email': address,
            'user_full_name': 'Ada',
            'password': OWNER_PASSWORD,
        },
        headers={'User-Agent': agent},
    )


def confirm_with(testapp, base_env, inbox, address, headers):
    token = confirmation_token(base_env, inbox, address)
    answer = testapp.post_json(
        '/auth/confirmation', {'confirmation_token': token}, headers=headers
    )
    assert answer.json['data']['confirmed'] is True
    deliver(base_env, inbox.port)
    return subjects(inbox, address)


def test_the_sign_ups_own_session_mails_no_notice(testapp, base_env, inbox):
    address = unique_email('ada')
    signup = sign_up(testapp, address)

    mailed = confirm_with(testapp, base_env, inbox, address, token_headers(signup))

    assert mailed == ['Confirmation Instructions']


def test_the_dashboards_session_cookie_of_the_user_mails_no_notice(
    testapp, base_env, inbox
):
    address = unique_email('ada')
    signup = sign_up(testapp, address)

    mailed = confirm_with(
        testapp, base_env, inbox, address, {'Cookie': session_cookie(signup)}
    )

    assert mailed == ['Confirmation Instructions']


def moved_before_confirming(testapp, base_env, inbox):
    """Signed up with one address, moved to another before confirming either: the
    sign-up, both addresses, and the new one's confirmation token."""
    first, address = unique_email('first'), unique_email('ada')
    signup = sign_up(testapp, first)
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': address}},
        headers=token_headers(signup),
    )
    deliver(base_env, inbox.port)
    token = received(inbox, address, 'Confirm your new email address').link(
        '/app/auth/confirmation', 'confirmation_token'
    )[1]
    return signup, first, address, token


@pytest.mark.parametrize('carried', ['token headers', 'cookie'])
def test_the_sign_ups_own_session_confirming_a_new_address_mails_no_notice(
    testapp, base_env, inbox, carried
):
    """Moved to another address before confirming any: the sign-up's session carries
    the first address as its uid until the confirmation commits."""
    signup, _, address, token = moved_before_confirming(testapp, base_env, inbox)
    headers = (
        token_headers(signup)
        if carried == 'token headers'
        else {'Cookie': session_cookie(signup)}
    )

    answer = testapp.post_json(
        '/auth/confirmation', {'confirmation_token': token}, headers=headers
    )

    assert answer.json['data']['email'] == address
    deliver(base_env, inbox.port)
    assert subjects(inbox, address) == ['Confirm your new email address']


@pytest.mark.parametrize(
    'session',
    [
        'another user',
        'another user, as the cookie',
        'signed out',
        'signed out, as the cookie',
        'expired',
        'malformed cookie',
        'no uid',
    ],
)
def test_a_confirmation_without_a_live_session_of_the_user_mails_the_notice(
    testapp, conn, base_env, inbox, make_user, session
):
    address = unique_email('ada')
    signup = sign_up(testapp, address)
    headers = token_headers(signup)
    if session.startswith('another user'):
        headers = make_user().headers
    elif session.startswith('signed out'):
        testapp.delete('/auth/sign_out', headers=headers)
    elif session == 'expired':
        conn.execute(
            "UPDATE user_tokens SET expires_at = now() - interval '1 second'"
            ' WHERE client = %s',
            (headers['client'],),
        )
    elif session == 'no uid':
        headers = {**headers, 'uid': ''}
    if session.endswith('as the cookie'):
        cookie = json.dumps(headers)
        headers = {'Cookie': 'cw_d_session_info=' + urllib.parse.quote(cookie)}
    elif session == 'malformed cookie':
        headers = {'Cookie': 'cw_d_session_info={%22access-token%22:[[[[' + '[' * 2000}

    mailed = confirm_with(testapp, base_env, inbox, address, headers)

    assert mailed == ['Confirmation Instructions', NOTICE]


def test_the_notice_says_when_and_from_what_the_account_was_signed_up_inertly(
    testapp, conn, base_env, inbox
):
    address = unique_email('ada')
    signup = sign_up(testapp, address, agent=AGENT)
    signed_up_at = (
        conn.execute(
            'SELECT created_at FROM users WHERE id = %s', (signup.json['data']['id'],)
        )
        .fetchone()['created_at']
        .astimezone(datetime.timezone.utc)
    )

    confirm_with(testapp, base_env, inbox, address, {'User-Agent': BROWSER})

    message = received(inbox, address, NOTICE)
    lines = message.text.splitlines()
    assert f'Time: {signed_up_at:%Y-%m-%d %H:%M:%S} UTC' in lines
    device = next(line for line in lines if line.startswith('Device: '))
    # The sign-up's device, not the confirming browser's.
    assert device.startswith('Device: Chrome 1.0 on Android (evil.example/login[31mxxx')
    assert (
        len(device) == len('Device: ') + 100
        and '\x1b' not in message.text + message.html
    )
    assert (
        "If you did not sign up, or did not choose this account's password"
        in message.text
    )
    body, link = message.html.split('<p><a ')
    for linkable in ('evil.example', 'example/login'):
        assert linkable not in body, linkable
    assert link.startswith('href="http://frontdesk.test/app/auth/password/edit?')
    assert message.html.count('<a ') == 1


def test_confirming_a_confirmed_users_new_address_mails_no_notice(
    testapp, base_env, inbox, make_user
):
    user = make_user()
    address = unique_email('new')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': address}}, headers=user.headers
    )
    deliver(base_env, inbox.port)
    token = received(inbox, address, 'Confirm your new email address').link(
        '/app/auth/confirmation', 'confirmation_token'
    )[1]

    testapp.post_json('/auth/confirmation', {'confirmation_token': token})

    deliver(base_env, inbox.port)
    assert subjects(inbox, address) == ['Confirm your new email address']


def test_a_spent_mail_hour_does_not_keep_the_notice_from_the_owner(
    testapp, conn, base_env, inbox
):
    """Whoever signed up spends the address's 5 mails of the hour before the owner
    confirms; the notice and its link still come (SPEC 3.4: the owner has just proved
    the mailbox)."""
    address = unique_email('ada')
    sign_up(testapp, address)
    for _ in range(6):
        testapp.post_json('/auth/password', {'email': address})
    token = confirmation_token(base_env, inbox, address)
    testapp.post_json('/auth/confirmation', {'confirmation_token': token})

    deliver(base_env, inbox.port)
    _, reset = received(inbox, address, NOTICE).link(*RESET)
    answer = testapp.put_json(
        '/auth/password',
        {'reset_password_token': reset, 'password': 'a brand new secret'},
    )
    assert answer.status_int == 200


def test_the_first_confirmation_of_a_new_address_before_any_mails_the_notice(
    testapp, base_env, inbox
):
    """Signed up with one address, never confirmed, moved to another: confirming that
    one is still the user's first, and the password was chosen before either was
    proven."""
    _, first, address, token = moved_before_confirming(testapp, base_env, inbox)

    testapp.post_json('/auth/confirmation', {'confirmation_token': token})

    deliver(base_env, inbox.port)
    assert subjects(inbox, address) == ['Confirm your new email address', NOTICE]
    assert subjects(inbox, first) == ['Confirmation Instructions']
