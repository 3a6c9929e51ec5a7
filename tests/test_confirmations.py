"""/auth/confirmation, /auth/password and /api/v1/profile/resend_confirmation, end to
end."""

import logging
import re

import pytest

from tests.smtp_server import deliver
from tests.support.users import PASSWORD
from tests.support.users import unique_email

INVALID_TOKEN = {'message': 'Invalid token'}
RESET_REQUESTED = {
    'message': 'Request for password reset is successful. '
    'A email with instructions will be sent to your email if it exists.'
}
NEW_PASSWORD = 'a brand new secret'


def state(conn):
    """A fingerprint of every table these endpoints may write."""
    return conn.execute(
        "SELECT (SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY id), ''))"
        ' FROM users t) AS users,'
        " (SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY id), ''))"
        ' FROM user_tokens t) AS user_tokens,'
        " (SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY id), ''))"
        ' FROM one_time_tokens t) AS one_time,'
        " (SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY id), ''))"
        ' FROM mail_outbox t) AS outbox'
    ).fetchone()


def queued_token(conn, address, param):
    """The token in the newest queued mail to ``address`` (where the link itself is not
    the point)."""
    row = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s AND status = %s'
        ' ORDER BY id DESC LIMIT 1',
        (address, 'pending'),
    ).fetchone()
    return re.search(rf'\?{param}=([A-Za-z0-9_-]+)', row['text_body']).group(1)


def queued_count(conn, address):
    return conn.execute(
        'SELECT count(*) AS n FROM mail_outbox WHERE to_address = %s', (address,)
    ).fetchone()['n']


def token_headers(answer):
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


def user_row(conn, user_id):
    return conn.execute(
        'SELECT email, unconfirmed_email, confirmed_at, encrypted_password FROM users'
        ' WHERE id = %s',
        (user_id,),
    ).fetchone()


def resend(testapp, user):
    answer = testapp.post('/api/v1/profile/resend_confirmation', headers=user.headers)
    assert answer.json == {}
    return answer


def confirm(testapp, token, status=200):
    return testapp.post_json(
        '/auth/confirmation', {'confirmation_token': token}, status=status
    )


def reset(testapp, token, password=NEW_PASSWORD, status=200, **extra):
    body = {
        'reset_password_token': token,
        'password': password,
        'password_confirmation': password,
        **extra,
    }
    return testapp.put_json('/auth/password', body, status=status)


def service_log(caplog):
    """What the service logged; aiosmtpd's own debug log of the test server is not
    ours."""
    return '\n'.join(
        record.getMessage()
        for record in caplog.records
        if not record.name.startswith('mail.log')
    )


def signed_in(testapp, headers):
    return (
        testapp.get('/api/v1/profile', headers=headers, expect_errors=True).status_int
        == 200
    )


# Confirmation.


def test_sign_up_confirm_from_the_mailed_link_sign_out_and_sign_in(
    testapp, conn, base_env, inbox, caplog
):
    caplog.set_level(logging.DEBUG)
    address = unique_email('loop')
    signup = testapp.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Acme',
            'email': address,
            'user_full_name': 'Ada',
            'password': PASSWORD,
        },
    )
    refused = testapp.post_json(
        '/auth/sign_in', {'email': address, 'password': PASSWORD}, status=401
    )
    assert refused.json['error_code'] == 'user_not_confirmed'

    deliver(base_env, inbox.port)
    received = inbox.one_to(address)
    assert received.message['Subject'] == 'Confirmation Instructions'
    link, token = received.link('/app/auth/confirmation', 'confirmation_token')
    assert link.startswith('http://frontdesk.test/app/auth/confirmation?')
    answer = confirm(testapp, token)

    assert (
        answer.json['data']['email'] == address
        and answer.json['data']['confirmed'] is True
    )
    assert answer.headers['uid'] == address and answer.headers['token-type'] == 'Bearer'
    assert answer.headers['client'] != signup.headers['client']
    assert int(answer.headers['expiry']) > 0
    headers = token_headers(answer)
    # The first confirmation keeps only its own session: the sign-up one may have been
    # opened by someone who used another person's address.
    assert signed_in(testapp, headers) and not signed_in(testapp, token_headers(signup))
    assert testapp.delete('/auth/sign_out', headers=headers).json == {'success': True}
    assert not signed_in(testapp, headers)
    again = testapp.post_json('/auth/sign_in', {'email': address, 'password': PASSWORD})
    assert again.json['data']['confirmed'] is True
    assert 'sent' in service_log(caplog), 'the log was not captured'
    assert token not in service_log(caplog) and PASSWORD not in service_log(caplog)


def test_a_confirmation_token_works_once(testapp, conn, make_user):
    user = make_user(confirmed=False)
    resend(testapp, user)
    token = queued_token(conn, user.email, 'confirmation_token')
    confirm(testapp, token)
    before = state(conn)

    assert confirm(testapp, token, status=422).json == INVALID_TOKEN
    assert state(conn) == before


def test_an_expired_confirmation_token_is_invalid(testapp, conn, make_user):
    user = make_user(confirmed=False)
    resend(testapp, user)
    token = queued_token(conn, user.email, 'confirmation_token')
    conn.execute(
        "UPDATE one_time_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE user_id = %s',
        (user.id,),
    )
    before = state(conn)

    assert confirm(testapp, token, status=422).json == INVALID_TOKEN
    assert state(conn) == before
    assert user_row(conn, user.id)['confirmed_at'] is None


@pytest.mark.parametrize(
    'body',
    [
        {},
        {'confirmation_token': ''},
        {'confirmation_token': None},
        {'confirmation_token': 12345},
        {'confirmation_token': ['x']},
        {'confirmation_token': {'a': 1}},
        {'confirmation_token': 'not-a-token'},
        {'confirmation_token': 'x' * 100_000},
    ],
)
def test_a_missing_or_unknown_confirmation_token_is_invalid(testapp, conn, body):
    before = state(conn)
    assert (
        testapp.post_json('/auth/confirmation', body, status=422).json == INVALID_TOKEN
    )
    assert state(conn) == before


def test_a_body_that_is_not_an_object_is_refused(testapp):
    answer = testapp.post_json('/auth/confirmation', ['token'], status=422)
    assert answer.json == {'message': 'Request body must be a JSON object'}


def test_confirming_an_already_confirmed_address_says_so(testapp, conn, make_user):
    user = make_user(confirmed=False)
    resend(testapp, user)
    token = queued_token(conn, user.email, 'confirmation_token')
    conn.execute('UPDATE users SET confirmed_at = now() WHERE id = %s', (user.id,))
    before = state(conn)

    assert confirm(testapp, token, status=422).json == {'message': 'Already confirmed'}
    assert state(conn) == before


def test_confirming_a_pending_address_makes_it_the_email_and_uid_follows(
    testapp, conn, make_user
):
    user = make_user()
    new_address = unique_email('moved')
    conn.execute(
        'UPDATE users SET unconfirmed_email = %s WHERE id = %s', (new_address, user.id)
    )
    resend(testapp, user)
    token = queued_token(conn, new_address, 'confirmation_token')

    answer = confirm(testapp, token)

    data = answer.json['data']
    assert (data['email'], data['uid'], data['unconfirmed_email']) == (
        new_address,
        new_address,
        None,
    )
    assert answer.headers['uid'] == new_address
    assert signed_in(testapp, token_headers(answer))
    # A credential change (SPEC 3.3): every earlier token is revoked, whatever uid it is
    # sent with.
    assert not signed_in(testapp, {**user.headers, 'uid': new_address})
    assert not signed_in(testapp, user.headers)


def test_a_token_for_an_address_given_up_since_is_invalid(testapp, conn, make_user):
    user = make_user()
    first, second = unique_email('first'), unique_email('second')
    conn.execute(
        'UPDATE users SET unconfirmed_email = %s WHERE id = %s', (first, user.id)
    )
    resend(testapp, user)
    token = queued_token(conn, first, 'confirmation_token')
    conn.execute(
        'UPDATE users SET unconfirmed_email = %s WHERE id = %s', (second, user.id)
    )
    before = state(conn)

    assert confirm(testapp, token, status=422).json == INVALID_TOKEN
    assert state(conn) == before


def test_a_pending_address_taken_by_someone_else_meanwhile_is_a_422(
    testapp, conn, make_user
):
    user = make_user()
    wanted = unique_email('wanted')
    conn.execute(
        'UPDATE users SET unconfirmed_email = %s WHERE id = %s', (wanted, user.id)
    )
    resend(testapp, user)
    token = queued_token(conn, wanted, 'confirmation_token')
    testapp.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Rival',
            'email': wanted,
            'user_full_name': 'Rival',
            'password': PASSWORD,
        },
    )
    before = state(conn)

    answer = confirm(testapp, token, status=422)

    assert answer.json == {
        'message': 'Email has already been taken',
        'attributes': ['email'],
    }
    assert state(conn) == before
    assert user_row(conn, user.id)['unconfirmed_email'] == wanted


# Resending the confirmation.


def test_resend_mails_an_unconfirmed_user_a_fresh_link_that_replaces_the_old_one(
    testapp, conn, make_user
):
    user = make_user(confirmed=False)
    resend(testapp, user)
    old = queued_token(conn, user.email, 'confirmation_token')
    answer = resend(testapp, user)

    assert answer.headers['access-token'] == user.token
    subjects = conn.execute(
        'SELECT subject FROM mail_outbox WHERE to_address = %s', (user.email,)
    ).fetchall()
    assert subjects == [{'subject': 'Confirmation Instructions'}] * 2
    fresh = queued_token(conn, user.email, 'confirmation_token')
    assert confirm(testapp, old, status=422).json == INVALID_TOKEN
    assert confirm(testapp, fresh).json['data']['confirmed'] is True


def test_resend_goes_to_the_pending_address(testapp, conn, base_env, inbox, make_user):
    user = make_user()
    pending = unique_email('pending')
    conn.execute(
        'UPDATE users SET unconfirmed_email = %s WHERE id = %s', (pending, user.id)
    )

    resend(testapp, user)
    deliver(base_env, inbox.port)

    received = inbox.one_to(pending)
    assert received.message['Subject'] == 'Confirm your new email address'
    assert inbox.to(user.email) == []
    _, token = received.link('/app/auth/confirmation', 'confirmation_token')
    assert confirm(testapp, token).json['data']['email'] == pending


def test_resend_sends_nothing_to_a_confirmed_user(
    testapp, conn, base_env, inbox, make_user
):
    user = make_user()
    testapp.get(
        '/api/v1/profile', headers=user.headers
    )  # a session's first request marks it used
    # Mail earlier tests of this worker left queued goes now, not in the delivery below,
    # which would otherwise change the outbox rows this test says stay the same.
    deliver(base_env, inbox.port)
    before = state(conn)

    resend(testapp, user)
    deliver(base_env, inbox.port)

    assert state(conn) == before
    assert queued_count(conn, user.email) == 0 and inbox.to(user.email) == []


def test_resend_mails_no_link_to_an_address_another_users_revert_link_reserves(
    testapp, conn, make_user
):
    # The owner moves the account to a new address and confirms it: the old address is
    # free in users, reserved by the owner's live revert link (SPEC 3.4).
    owner, moved = make_user(), unique_email('moved')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': moved}}, headers=owner.headers
    )
    revert = queued_token(conn, owner.email, 'token')
    confirm(testapp, queued_token(conn, moved, 'confirmation_token'))
    # Another user asks for the reserved address: answered as taken, no link (3.3).
    other = make_user(name='Mallory')
    answer = testapp.put_json(
        '/api/v1/profile', {'profile': {'email': owner.email}}, headers=other.headers
    )
    assert answer.json['unconfirmed_email'] == owner.email
    assert queued_count(conn, owner.email) == 2  # the revert notice, the taken notice
    # Both are the owner's mail: the address is theirs while their link reserves it.
    assert {
        row['user_id']
        for row in conn.execute(
            'SELECT user_id FROM mail_outbox WHERE to_address = %s', (owner.email,)
        )
    } == {owner.id}

    # Resending, signed in or not, must not mail the link the change withheld: the
    # owner's mailbox would get a genuine "confirm" link for Mallory's account, whose
    # use takes the address and makes the owner's revert fail.
    resend(testapp, other)
    testapp.post_json('/resend_confirmation', {'email': other.email})

    assert queued_count(conn, owner.email) == 2
    links = conn.execute(
        'SELECT count(*) AS n FROM one_time_tokens WHERE user_id = %s'
        " AND purpose = 'confirmation'",
        (other.id,),
    ).fetchone()['n']
    assert links == 0
    assert testapp.post_json('/auth/email_revert', {'token': revert}).json == {}
    assert user_row(conn, owner.id)['email'] == owner.email


def test_resend_needs_credentials(testapp):
    answer = testapp.post('/api/v1/profile/resend_confirmation', status=401)
    assert answer.json == {
        'errors': ['You need to sign in or sign up before continuing.']
    }


# Password reset.


def test_a_forgotten_password_is_reset_from_the_mailed_link(
    testapp, conn, base_env, inbox, make_user, caplog
):
    caplog.set_level(logging.DEBUG)
    user = make_user()
    other = make_user()

    answer = testapp.post_json('/auth/password', {'email': f'  {user.email.upper()} '})
    assert answer.json == RESET_REQUESTED
    deliver(base_env, inbox.port)
    received = inbox.one_to(user.email)
    assert received.message['Subject'] == 'Reset password instructions'
    link, token = received.link('/app/auth/password/edit', 'reset_password_token')
    assert (
        link
        == f'http://frontdesk.test/app/auth/password/edit?reset_password_token={token}'
    )
    answer = reset(testapp, token)

    assert answer.json['data']['id'] == user.id and answer.headers['uid'] == user.email
    assert signed_in(testapp, token_headers(answer))
    assert not signed_in(testapp, user.headers), (
        'the tokens issued before the reset stay valid'
    )
    assert signed_in(testapp, other.headers)
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, status=401
    )
    testapp.post_json('/auth/sign_in', {'email': user.email, 'password': NEW_PASSWORD})
    before = state(conn)
    assert (
        reset(testapp, token, password='yet another one', status=422).json
        == INVALID_TOKEN
    )
    assert state(conn) == before
    assert token not in service_log(caplog) and NEW_PASSWORD not in service_log(caplog)


def test_a_reset_confirms_an_unconfirmed_user(testapp, conn, make_user):
    user = make_user(confirmed=False)
    testapp.post_json('/auth/password', {'email': user.email})
    token = queued_token(conn, user.email, 'reset_password_token')

    assert reset(testapp, token).json['data']['confirmed'] is True
    testapp.post_json('/auth/sign_in', {'email': user.email, 'password': NEW_PASSWORD})


@pytest.mark.parametrize('body', [{'email': ''}, {'email': 42}, {'email': None}, {}])
def test_a_reset_request_without_an_address_answers_the_same_and_writes_nothing(
    testapp, conn, body
):
    before = state(conn)
    assert testapp.post_json('/auth/password', body).json == RESET_REQUESTED
    assert state(conn) == before


def test_a_reset_request_for_an_unknown_address_sends_nothing_but_costs_the_same(
    testapp, conn, inbox, base_env
):
    """The same statements run; the outbox row is 'suppressed': no bodies, never
    sent."""
    nobody = unique_email('nobody')
    before = state(conn)
    assert (
        testapp.post_json('/auth/password', {'email': nobody.upper()}).json
        == RESET_REQUESTED
    )
    after = state(conn)
    assert (after['users'], after['user_tokens'], after['one_time']) == (
        before['users'],
        before['user_tokens'],
        before['one_time'],
    )
    row = conn.execute(
        'SELECT kind, status, text_body, html_body FROM mail_outbox'
        ' WHERE to_address = %s',
        (nobody,),
    ).fetchone()
    assert row == {
        'kind': 'reset_password',
        'status': 'suppressed',
        'text_body': None,
        'html_body': None,
    }
    deliver(base_env, inbox.port)
    assert inbox.to(nobody) == []
    assert conn.execute(
        'SELECT status FROM mail_outbox WHERE to_address = %s', (nobody,)
    ).fetchone() == {'status': 'suppressed'}


def test_reset_request_timing_for_known_and_unknown_addresses(testapp, make_user):
    """Reports (does not assert) the median time of 50 requests each: target < 0.5 ms
    apart.

    Interleaved, so drift on a shared machine hits both alike. The structural fix is
    that both do the same statements and writes (mail.request_password_reset).
    """
    import statistics
    import time

    known = [make_user().email for _ in range(5)]
    times = {'known': [], 'unknown': []}
    for attempt in range(60):
        for kind in ('known', 'unknown'):
            email = known[attempt % 5] if kind == 'known' else unique_email('ghost')
            started = time.perf_counter()
            testapp.post_json('/auth/password', {'email': email})
            if attempt >= 10:  # the first ten warm both paths up
                times[kind].append(time.perf_counter() - started)
    medians = {kind: statistics.median(values) * 1000 for kind, values in times.items()}
    print(
        f'\nPOST /auth/password median over {len(times["known"])} each: known '
        f'{medians["known"]:.3f} ms, unknown {medians["unknown"]:.3f} ms, difference '
        f'{medians["known"] - medians["unknown"]:+.3f} ms (target: under 0.5 ms apart)'
    )


def test_a_reset_request_for_a_user_queues_one_mail(testapp, conn, make_user):
    user = make_user()
    before = state(conn)
    assert (
        testapp.post_json('/auth/password', {'email': user.email}).json
        == RESET_REQUESTED
    )
    assert state(conn) != before and queued_count(conn, user.email) == 1


def test_an_expired_reset_token_is_invalid(testapp, conn, make_user):
    user = make_user()
    testapp.post_json('/auth/password', {'email': user.email})
    token = queued_token(conn, user.email, 'reset_password_token')
    conn.execute(
        "UPDATE one_time_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE user_id = %s',
        (user.id,),
    )
    before = state(conn)

    assert reset(testapp, token, status=422).json == INVALID_TOKEN
    assert state(conn) == before
    assert signed_in(testapp, user.headers)


def test_a_reset_link_mailed_to_an_address_the_user_left_is_invalid(
    testapp, conn, make_user
):
    user = make_user()
    testapp.post_json('/auth/password', {'email': user.email})
    token = queued_token(conn, user.email, 'reset_password_token')
    conn.execute(
        'UPDATE users SET email = %s WHERE id = %s', (unique_email('left'), user.id)
    )
    before = state(conn)

    assert reset(testapp, token, status=422).json == INVALID_TOKEN
    assert state(conn) == before


def test_a_confirmation_token_is_no_reset_token(testapp, conn, make_user):
    user = make_user(confirmed=False)
    resend(testapp, user)
    token = queued_token(conn, user.email, 'confirmation_token')
    before = state(conn)

    assert reset(testapp, token, status=422).json == INVALID_TOKEN
    assert state(conn) == before


@pytest.mark.parametrize('token', ['', None, 7, 'not-a-token'])
def test_a_missing_or_unknown_reset_token_is_invalid(testapp, conn, token):
    before = state(conn)
    assert reset(testapp, token, status=422).json == INVALID_TOKEN
    assert (
        testapp.put_json('/auth/password', {'password': NEW_PASSWORD}, status=422).json
        == INVALID_TOKEN
    )
    assert state(conn) == before


@pytest.mark.parametrize(
    ('fields', 'expected'),
    [
        (
            {'password': 'short', 'password_confirmation': 'short'},
            {
                'message': 'Password is too short (minimum is 8 characters)',
                'attributes': ['password'],
            },
        ),
        (
            {'password': 'é' * 37, 'password_confirmation': 'é' * 37},
            {
                'message': 'Password is too long (maximum is 72 bytes)',
                'attributes': ['password'],
            },
        ),
        (
            {'password': '', 'password_confirmation': ''},
            {'message': "Password can't be blank", 'attributes': ['password']},
        ),
        (
            {'password_confirmation': NEW_PASSWORD},
            {
                'message': (
                    "Password can't be blank, "
                    "Password confirmation doesn't match Password"
                ),
                'attributes': ['password', 'password_confirmation'],
            },
        ),
        (
            {'password': NEW_PASSWORD, 'password_confirmation': 'something else'},
            {
                'message': "Password confirmation doesn't match Password",
                'attributes': ['password_confirmation'],
            },
        ),
        (
            {'password': 'short', 'password_confirmation': 'shorter'},
            {
                'message': (
                    'Password is too short (minimum is 8 characters), '
                    "Password confirmation doesn't match Password"
                ),
                'attributes': ['password', 'password_confirmation'],
            },
        ),
        (
            {'password': 12345678},
            {'message': 'Password must be a string', 'attributes': ['password']},
        ),
    ],
)
def test_the_new_password_follows_the_rules_and_a_refusal_keeps_the_token(
    testapp, conn, make_user, fields, expected
):
    user = make_user()
    testapp.post_json('/auth/password', {'email': user.email})
    token = queued_token(conn, user.email, 'reset_password_token')
    before = state(conn)

    answer = testapp.put_json(
        '/auth/password', {'reset_password_token': token, **fields}, status=422
    )

    assert answer.json == expected
    assert state(conn) == before
    assert reset(testapp, token).status_int == 200
