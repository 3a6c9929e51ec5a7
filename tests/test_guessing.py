"""Guessing is bounded per user, not per route (SPEC 3.4), with RATE_LIMITS=off.

Every password check spends one budget of 10 wrong per 15 minutes, every second-factor
check one of 10 wrong per hour; past it every such check is a 429, the right answer too.
Every password check, right or wrong, is also capped at 30 per 15 minutes, and a route
that refuses for another reason first runs no bcrypt.
A window's end is reached by deleting the stored counts, not by sleeping.
"""

import concurrent.futures
import time

from services import passwords
from tests.support.servers import http
from tests.support.users import unique_email
from tests.test_credentials import _newest_token
from tests.test_mfa import Authenticator
from tests.test_mfa import challenge
from tests.test_mfa import enable
from tests.test_mfa import second_step
from tests.test_mfa import subjects_to
from tests.test_mfa import wrong_code


def password_change(user, current):
    return {
        'profile': {
            'current_password': current,
            'password': 'a new long passphrase',
            'password_confirmation': 'a new long passphrase',
        }
    }


def wrong_sign_in(testapp, user, status=401):
    return testapp.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': 'not the password'},
        status=status,
    )


def end_window(conn, user_id, kind):
    """End the user's current window, as if its period had gone by: its counts (the
    budget's and, for passwords, the cap's) are gone."""
    conn.execute(
        'DELETE FROM rate_limit_counters WHERE bucket IN (%s, %s)',
        (f'{kind}|user={user_id}', f'{kind}_checks|user={user_id}'),
    )


def events(conn, user_id, *names):
    return [
        row['event']
        for row in conn.execute(
            'SELECT event FROM audit_events'
            ' WHERE subject_id = %s AND event = ANY(%s) ORDER BY id',
            (user_id, list(names)),
        )
    ]


def test_ten_wrong_passwords_anywhere_then_every_password_check_is_refused(
    testapp, make_user, conn
):
    user = make_user()
    # Wrong passwords at the three routes that check one share one budget.
    for _ in range(4):
        wrong_sign_in(testapp, user)
    for _ in range(3):
        testapp.put_json(
            '/api/v1/profile',
            password_change(user, 'not the password'),
            headers=user.headers,
            status=422,
        )
    for _ in range(3):
        testapp.post_json(
            '/api/v1/profile/mfa',
            {'password': 'not the password'},
            headers=user.headers,
            status=422,
        )
    # Now even the right password is refused, at every route that checks it.
    answer = testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=429
    )
    assert 1 <= int(answer.headers['Retry-After']) <= 15 * 60
    # A refused sign-in is a failed one (SPEC 14).
    assert [
        row['details']['reason']
        for row in conn.execute(
            'SELECT details FROM audit_events WHERE subject_id = %s'
            " AND event = 'sign_in_failed' ORDER BY id",
            (user.id,),
        )
    ] == ['password'] * 4 + ['rate_limited']
    testapp.put_json(
        '/api/v1/profile',
        password_change(user, user.password),
        headers=user.headers,
        status=429,
    )
    testapp.post_json(
        '/api/v1/profile/mfa',
        {'password': user.password},
        headers=user.headers,
        status=429,
    )
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, 'otp_code': '123456'},
        headers=user.headers,
        status=429,
    )
    # What needs no password still works; the user was told once.
    testapp.get('/api/v1/profile', headers=user.headers)
    assert subjects_to(conn, user.email) == ['Someone is guessing your password']
    # The wrong ones on signed-in routes are audit events, and so is the spent budget.
    assert events(
        conn, user.id, 'password_check_failed', 'password_guesses_exhausted'
    ) == (['password_check_failed'] * 6 + ['password_guesses_exhausted'])
    # When the window has passed, the right password works again.
    end_window(conn, user.id, 'password')
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=200
    )


def test_right_passwords_spend_nothing(testapp, make_user):
    user = make_user()
    for _ in range(12):
        testapp.post_json(
            '/auth/sign_in',
            {'email': user.email, 'password': user.password},
            status=200,
        )
    for _ in range(9):
        wrong_sign_in(testapp, user)
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=200
    )


def test_an_unknown_address_is_refused_as_a_known_one_is(testapp, make_user):
    user = make_user()
    unknown = {'email': 'nobody-' + user.email, 'password': 'not the password'}
    for _ in range(10):
        wrong_sign_in(testapp, user)
        testapp.post_json('/auth/sign_in', unknown, status=401)
    known = wrong_sign_in(testapp, user, status=429)
    nobody = testapp.post_json('/auth/sign_in', unknown, status=429)
    assert known.json == nobody.json


def code_checks_signed_in(testapp, user, factor, status, otp=None):
    """New backup codes (with ``otp``, else the factor's code), then disabling MFA."""
    code = otp or factor['otp_code']
    testapp.post_json(
        '/api/v1/profile/mfa/backup_codes',
        {'otp_code': code},
        headers=user.headers,
        status=status,
    )
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, **factor},
        headers=user.headers,
        status=status,
    )


def test_ten_wrong_codes_anywhere_then_every_code_check_is_refused(
    testapp, make_user, conn
):
    user = make_user()
    app, codes = enable(testapp, user)
    # At sign-in (5 wrong use up a challenge: two challenges), then signed in.
    for _ in range(2):
        mfa_token = challenge(testapp, user)
        for _ in range(3):
            second_step(testapp, mfa_token, status=400, otp_code=wrong_code(app))
    code_checks_signed_in(testapp, user, {'otp_code': wrong_code(app)}, status=422)
    second_step(
        testapp,
        challenge(testapp, user),
        status=400,
        backup_code='AAAAAA-AAAAAA-AAAAAA-AAAAAA',
    )
    second_step(testapp, challenge(testapp, user), status=400, otp_code=wrong_code(app))
    # The right code and a right recovery code are refused for the rest of the hour.
    mfa_token = challenge(testapp, user)
    answer = second_step(testapp, mfa_token, status=429, otp_code=app.code(0))
    assert 1 <= int(answer.headers['Retry-After']) <= 60 * 60
    second_step(testapp, mfa_token, status=429, backup_code=codes[0])
    code_checks_signed_in(
        testapp, user, {'backup_code': codes[0]}, status=429, otp=app.code(0)
    )
    assert (
        subjects_to(conn, user.email)[-1]
        == 'Someone is guessing your verification codes'
    )
    assert events(
        conn, user.id, 'second_factor_check_failed', 'second_factor_guesses_exhausted'
    ) == (['second_factor_check_failed'] * 2 + ['second_factor_guesses_exhausted'])
    end_window(conn, user.id, 'second_factor')
    second_step(testapp, mfa_token, status=200, otp_code=app.code(1))


def test_verify_spends_the_second_factor_budget(testapp, make_user):
    user = make_user()
    started = testapp.post_json(
        '/api/v1/profile/mfa', {'password': user.password}, headers=user.headers
    ).json
    app = Authenticator(started['provisioning_url'])
    for _ in range(10):
        testapp.post_json(
            '/api/v1/profile/mfa/verify',
            {'otp_code': wrong_code(app)},
            headers=user.headers,
            status=422,
        )
    testapp.post_json(
        '/api/v1/profile/mfa/verify',
        {'otp_code': app.code(0)},
        headers=user.headers,
        status=429,
    )


def test_concurrent_wrong_guesses_cannot_exceed_the_budget(gunicorn_url, make_user):
    user = make_user()
    headers = {**user.headers, 'Content-Type': 'application/json'}

    def guess(_):
        return http(
            'PUT',
            gunicorn_url + '/api/v1/profile',
            password_change(user, 'not the password'),
            headers=headers,
        ).status

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(guess, range(24)))
    assert statuses.count(422) == 10 and statuses.count(429) == 14


def test_the_current_password_of_an_email_change_spends_the_password_budget(
    testapp, make_user, conn
):
    # Review finding: an e-mail change checks `current_password` (SPEC 3.4, recent
    # authentication) outside the budget, so a stolen session, stale or not, could
    # guess the password there without limit, and with it pass the reauthentication
    # check (a fresh session: a new address, personal access tokens).
    user = make_user()
    conn.execute(
        "UPDATE user_tokens SET authenticated_at = now() - interval '1 hour'"
        ' WHERE user_id = %s',
        (user.id,),
    )

    def email_change(current, status):
        return testapp.put_json(
            '/api/v1/profile',
            {'profile': {'email': unique_email('new'), 'current_password': current}},
            headers=user.headers,
            status=status,
        )

    for _ in range(10):
        email_change('not the password', 422)
    # The budget is spent: the right password is refused too, here and at sign-in.
    email_change(user.password, 429)
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=429
    )
    assert (
        testapp.get('/api/v1/profile', headers=user.headers).json['unconfirmed_email']
        is None
    )
    assert events(
        conn, user.id, 'password_check_failed', 'password_guesses_exhausted'
    ) == (['password_check_failed'] * 10 + ['password_guesses_exhausted'])


def right_sign_in(testapp, user, status=200):
    return testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=status
    )


def test_thirty_password_checks_right_or_wrong_then_every_check_is_refused(
    testapp, make_user, conn
):
    # Review finding: a right password was never counted, so one user's requests could
    # keep bcrypt busy without end (30 enrolments pushed /healthz from 2 ms to 322 ms).
    user = make_user()
    for _ in range(20):
        right_sign_in(testapp, user)
    for _ in range(5):
        testapp.post_json(
            '/api/v1/profile/mfa',
            {'password': user.password},
            headers=user.headers,
        )
    for _ in range(5):
        wrong_sign_in(testapp, user)
    # 30 checks in the window: the next is refused, right or wrong, at every route, in
    # the shape of the guessing budget's 429.
    refused = right_sign_in(testapp, user, status=429)
    assert 1 <= int(refused.headers['Retry-After']) <= 15 * 60
    assert refused.json == wrong_sign_in(testapp, user, status=429).json
    testapp.post_json(
        '/api/v1/profile/mfa',
        {'password': user.password},
        headers=user.headers,
        status=429,
    )
    testapp.put_json(
        '/api/v1/profile',
        password_change(user, user.password),
        headers=user.headers,
        status=429,
    )
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': unique_email('new'), 'current_password': user.password}},
        headers=user.headers,
        status=429,
    )
    # Routes that check no password still work; the wrong budget was never spent.
    testapp.get('/api/v1/profile', headers=user.headers)
    assert events(conn, user.id, 'password_guesses_exhausted') == []
    end_window(conn, user.id, 'password')
    right_sign_in(testapp, user)


def test_a_refused_email_change_checks_no_password(testapp, make_user, conn):
    """The daily limit of e-mail changes refuses before the current password is
    checked: a wrong one is no guess, and spends nothing."""
    user = make_user()
    for _ in range(5):
        testapp.put_json(
            '/api/v1/profile',
            {'profile': {'email': unique_email('new')}},
            headers=user.headers,
        )
    for _ in range(11):
        testapp.put_json(
            '/api/v1/profile',
            {
                'profile': {
                    'email': unique_email('new'),
                    'current_password': 'not the password',
                }
            },
            headers=user.headers,
            status=429,
        )
    assert events(conn, user.id, 'password_check_failed') == []
    right_sign_in(testapp, user)


def test_disabling_mfa_without_a_code_checks_no_password(testapp, make_user, conn):
    user = make_user()
    enable(testapp, user)
    for code in ({}, {'otp_code': ''}, {'otp_code': '', 'backup_code': ' '}) * 4:
        answer = testapp.delete_json(
            '/api/v1/profile/mfa',
            {'password': 'not the password', **code},
            headers=user.headers,
            status=422,
        )
        assert answer.json == {'message': 'Invalid credentials or verification code'}
    assert events(conn, user.id, 'password_check_failed') == []


def test_an_unconfirmed_user_enrols_without_a_password_check(testapp, make_user, conn):
    """MFA enrolment refuses an unconfirmed user (and one with MFA on) before the
    password is checked: 31 tries spend neither the budget nor the cap."""
    user = make_user(confirmed=False)
    for password in ['not the password'] * 11 + [user.password] * 20:
        answer = testapp.post_json(
            '/api/v1/profile/mfa',
            {'password': password},
            headers=user.headers,
            status=422,
        )
        assert answer.json == {
            'message': 'Confirm your e-mail address before enabling MFA'
        }
    assert events(conn, user.id, 'password_check_failed') == []
    enabled = make_user()
    enable(testapp, enabled)
    answer = testapp.post_json(
        '/api/v1/profile/mfa',
        {'password': 'not the password'},
        headers=enabled.headers,
        status=422,
    )
    assert answer.json == {'message': 'MFA is already enabled'}


def test_a_sign_in_without_a_password_or_an_address_runs_no_bcrypt(
    make_testapp, make_user, conn
):
    """An empty password is nobody's: refused at once, for a known address as for an
    unknown one; what is no address runs no dummy check. Seen by timing: the user's hash
    and the dummy one are made costly (2^12 rounds), so that one bcrypt run takes far
    longer than the whole refusal."""
    costly = make_testapp(BCRYPT_ROUNDS='12')
    user = make_user()
    hashed = passwords.hash_password(user.password, 12)
    conn.execute(
        'UPDATE users SET encrypted_password = %s WHERE id = %s', (hashed, user.id)
    )
    # Untimed: the app's first request, which also makes the dummy hash (once per
    # process).
    costly.post_json(
        '/auth/sign_in',
        {'email': 'nobody-' + user.email, 'password': 'not the password'},
        status=401,
    )
    started = time.perf_counter()
    passwords.check_password('not the password', hashed)
    one_check = time.perf_counter() - started
    for body in (
        {'email': user.email, 'password': ''},
        {'email': user.email},
        {'email': 'nobody-' + user.email, 'password': ''},
        {'email': 'not an address', 'password': user.password},
        {'password': user.password},
    ):
        started = time.perf_counter()
        costly.post_json('/auth/sign_in', body, status=401)
        assert time.perf_counter() - started < one_check / 2, body


def test_a_reset_spends_the_cap_but_is_never_refused_by_it(testapp, make_user, conn):
    """A reset link's reuse rule (SPEC 15) checks the new password against the current
    one: a bcrypt run, on the user's cap. Past the cap the rule is left out rather than
    the reset refused, since a reset is how the owner takes the account back from
    whoever spends the cap."""
    user = make_user()
    testapp.post_json('/auth/password', {'email': user.email})
    token = _newest_token(conn, user.email, 'reset_password_token')
    reset = {'reset_password_token': token, 'password': user.password}
    for _ in range(29):
        right_sign_in(testapp, user)
    refused = testapp.put_json('/auth/password', reset, status=422)
    assert refused.json['message'] == 'Password must differ from the current one'
    right_sign_in(testapp, user, status=429)
    testapp.put_json('/auth/password', reset, status=200)
