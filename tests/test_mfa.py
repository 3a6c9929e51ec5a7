"""Two-factor sign-in (SPEC 12): the whole flow, and every bypass of the reference
system refused.

Codes are computed here from the provisioning URL with pyotp, as an authenticator app
would. A code is accepted for one 30 s step either side of now and never twice, and no
step older than the last one used: a test uses the codes of steps now-1, now and now+1
in that order (``code(-1)``, ``code(0)``, ``code(1)``), each reckoned when it is sent.
``code(0)`` and ``code(1)`` stay valid if the clock crosses into the next step before
the server checks them; ``code(-1)`` would not (it is then two steps old), so it is
reckoned clear of a step boundary (Authenticator.code).
"""

import base64
import re
import time

import pyotp
import pytest

import config as config_module
from services import mfa
from tests import contract
from tests.support.rate_windows import start_clear_of_a_window_boundary
from tests.support.users import unique_ip
from tests.test_confirmations import queued_token
from tests.test_confirmations import resend

NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
UNAVAILABLE = {'error': 'MFA feature is not available. Please configure SECRET_KEY.'}
INVALID_MFA_TOKEN = {'error': 'Invalid or expired MFA token'}
INVALID_CODE = {'error': 'Invalid verification code'}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
TOKEN_HEADERS = ('access-token', 'client', 'uid', 'expiry', 'token-type')


class Authenticator:
    """What an authenticator app holds after scanning the provisioning URL."""

    def __init__(self, provisioning_url):
        self.totp = pyotp.parse_uri(provisioning_url)

    def code(self, offset=0):
        if offset < 0:
            # A code of the step before now is refused if the server's clock has crossed
            # into the next step by the time it checks (it then lies two steps back);
            # closer than 2 s to a boundary, wait it out. The request that carries the
            # code takes milliseconds, in process or through gunicorn.
            start_clear_of_a_window_boundary(mfa.STEP_SECONDS, margin=2)
        return self.totp.at(time.time() + offset * mfa.STEP_SECONDS)


def enable(testapp, user, headers=None):
    """Enrol ``user`` through the API: (its authenticator, its recovery codes)."""
    headers = user.headers if headers is None else headers
    started = testapp.post_json(
        '/api/v1/profile/mfa', {'password': user.password}, headers=headers
    ).json
    app = Authenticator(started['provisioning_url'])
    assert app.totp.secret == started['secret']
    enabled = testapp.post_json(
        '/api/v1/profile/mfa/verify', {'otp_code': app.code(-1)}, headers=headers
    ).json
    assert enabled['enabled'] is True
    return app, enabled['backup_codes']


def sign_in(testapp, user, status=206):
    return testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status=status
    )


def challenge(testapp, user):
    """The mfa_token of a password sign-in of an MFA user."""
    answer = sign_in(testapp, user)
    assert (
        set(answer.json) == {'mfa_required', 'mfa_token'}
        and answer.json['mfa_required'] is True
    )
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    assert answer.headers['Cache-Control'] == 'no-store'
    return answer.json['mfa_token']


def second_step(testapp, mfa_token, status=200, headers=None, **factor):
    return testapp.post_json(
        '/auth/sign_in',
        {'mfa_token': mfa_token, **factor},
        status=status,
        headers=headers,
    )


def headers_of(answer):
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


def wrong_code(app):
    valid = {app.code(offset) for offset in (-1, 0, 1)}
    return next(
        code for code in ('000000', '111111', '222222', '333333') if code not in valid
    )


def access_token(testapp, headers):
    return testapp.get('/api/v1/profile', headers=headers).json['access_token']


def test_enrol_verify_sign_in_recovery_codes_regenerate_disable(
    testapp, make_user, conn
):
    user = make_user()
    assert testapp.get('/api/v1/profile/mfa', headers=user.headers).json == {
        'feature_available': True,
        'enabled': False,
        'backup_codes_generated': False,
        'backup_codes_remaining': 0,
    }

    started = testapp.post_json(
        '/api/v1/profile/mfa', {'password': user.password}, headers=user.headers
    ).json
    assert started['provisioning_url'].startswith('otpauth://totp/Frontdesk:')
    assert started['provisioning_url'].endswith(
        f'?secret={started["secret"]}&issuer=Frontdesk'
    )
    app = Authenticator(started['provisioning_url'])
    assert (app.totp.digits, app.totp.interval, app.totp.digest().name) == (
        6,
        30,
        'sha1',
    )
    # Still off until a code proves the app has the secret.
    assert (
        testapp.get('/api/v1/profile', headers=user.headers).json['mfa_enabled']
        is False
    )
    sign_in(testapp, user, status=200)
    assert testapp.post_json(
        '/api/v1/profile/mfa/verify',
        {'otp_code': wrong_code(app)},
        headers=user.headers,
        status=422,
    ).json == {'message': 'Invalid verification code'}

    enabled = testapp.post_json(
        '/api/v1/profile/mfa/verify', {'otp_code': app.code(-1)}, headers=user.headers
    )
    codes = enabled.json['backup_codes']
    assert len(codes) == len(set(codes)) == 10
    # A credential change: the caller's session stays, the others and the access token
    # go.
    assert (
        testapp.get('/api/v1/profile', headers=user.headers).json['mfa_enabled'] is True
    )
    testapp.get(
        '/api/v1/profile', headers={'api_access_token': user.access_token}, status=401
    )
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
        ).fetchone()['n']
        == 1
    )
    assert testapp.get('/api/v1/profile/mfa', headers=user.headers).json == {
        'feature_available': True,
        'enabled': True,
        'backup_codes_generated': True,
        'backup_codes_remaining': 10,
    }
    assert testapp.post_json(
        '/api/v1/profile/mfa',
        {'password': user.password},
        headers=user.headers,
        status=422,
    ).json == {'message': 'MFA is already enabled'}

    # Sign in with a code; the same code never twice. One code, reckoned once: reckoned
    # again, a step boundary between the two would make it a new, valid one.
    code = app.code(0)
    signed_in = second_step(testapp, challenge(testapp, user), otp_code=code)
    assert signed_in.json['data']['mfa_enabled'] is True
    testapp.get('/api/v1/profile', headers=headers_of(signed_in))
    assert (
        second_step(testapp, challenge(testapp, user), status=400, otp_code=code).json
        == INVALID_CODE
    )

    # A recovery code once, not twice, typed any which way.
    second_step(testapp, challenge(testapp, user), backup_code=sloppy(codes[0]))
    assert (
        second_step(
            testapp, challenge(testapp, user), status=400, backup_code=codes[0]
        ).json
        == INVALID_CODE
    )
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json[
            'backup_codes_remaining'
        ]
        == 9
    )

    # New codes replace the old ones.
    new_codes = testapp.post_json(
        '/api/v1/profile/mfa/backup_codes',
        {'otp_code': app.code(1)},
        headers=user.headers,
    ).json['backup_codes']
    assert not set(new_codes) & set(codes)
    second_step(testapp, challenge(testapp, user), status=400, backup_code=codes[1])
    second_step(testapp, challenge(testapp, user), backup_code=new_codes[0])
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json[
            'backup_codes_remaining'
        ]
        == 9
    )

    # Off, behind the password and a second factor.
    assert testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': 'wrong password', 'backup_code': new_codes[1]},
        headers=user.headers,
        status=422,
    ).json == {'message': 'Invalid credentials or verification code'}
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password},
        headers=user.headers,
        status=422,
    )
    assert testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, 'backup_code': new_codes[1]},
        headers=user.headers,
    ).json == {'enabled': False}
    assert testapp.get('/api/v1/profile/mfa', headers=user.headers).json == {
        'feature_available': True,
        'enabled': False,
        'backup_codes_generated': False,
        'backup_codes_remaining': 0,
    }
    assert sign_in(testapp, user, status=200).json['data']['mfa_enabled'] is False


def test_secrets_and_recovery_codes_are_not_stored_readable(testapp, make_user, conn):
    user = make_user()
    app, codes = enable(testapp, user)
    row = conn.execute(
        'SELECT otp_secret FROM users WHERE id = %s', (user.id,)
    ).fetchone()
    stored = bytes(row['otp_secret'])
    assert app.totp.secret.encode() not in stored
    assert base64.b32decode(app.totp.secret) not in stored
    digests = conn.execute(
        'SELECT code_digest FROM mfa_recovery_codes WHERE user_id = %s', (user.id,)
    ).fetchall()
    assert len(digests) == 10
    dumped = str(
        conn.execute(
            'SELECT m::text FROM mfa_recovery_codes m WHERE user_id = %s', (user.id,)
        ).fetchall()
    )
    assert not any(code.replace('-', '') in dumped or code in dumped for code in codes)


def test_every_mfa_endpoint_refuses_the_api_access_token(testapp, make_user):
    user = make_user()
    enable(testapp, user)
    api = {'api_access_token': access_token(testapp, user.headers)}
    testapp.get('/api/v1/profile', headers=api)
    assert (
        testapp.get('/api/v1/profile/mfa', headers=api, status=403).json
        == NEEDS_SESSION
    )
    assert (
        testapp.post_json(
            '/api/v1/profile/mfa', {'password': user.password}, headers=api, status=403
        ).json
        == NEEDS_SESSION
    )
    for path in ('/api/v1/profile/mfa/verify', '/api/v1/profile/mfa/backup_codes'):
        assert (
            testapp.post_json(
                path, {'otp_code': '123456'}, headers=api, status=403
            ).json
            == NEEDS_SESSION
        )
    assert (
        testapp.delete_json(
            '/api/v1/profile/mfa',
            {'password': user.password, 'otp_code': '123456'},
            headers=api,
            status=403,
        ).json
        == NEEDS_SESSION
    )


def test_a_stolen_api_token_cannot_enrol_an_authenticator(testapp, make_user, conn):
    user = make_user()
    testapp.post_json(
        '/api/v1/profile/mfa',
        {'password': user.password},
        headers={'api_access_token': user.access_token},
        status=403,
    )
    assert (
        conn.execute(
            'SELECT otp_secret FROM users WHERE id = %s', (user.id,)
        ).fetchone()['otp_secret']
        is None
    )


def test_enrolment_starts_without_a_body(testapp, make_user, conn):
    """The reference dashboard 4.15 sends POST /api/v1/profile/mfa with no body
    (SPEC 12)."""
    user = make_user()
    started = testapp.post('/api/v1/profile/mfa', headers=user.headers).json
    assert started['provisioning_url'].endswith(
        f'?secret={started["secret"]}&issuer=Frontdesk'
    )
    assert (
        conn.execute(
            'SELECT otp_secret FROM users WHERE id = %s', (user.id,)
        ).fetchone()['otp_secret']
        is not None
    )
    again = testapp.post_json('/api/v1/profile/mfa', {}, headers=user.headers).json
    app = Authenticator(again['provisioning_url'])
    testapp.post_json(
        '/api/v1/profile/mfa/verify', {'otp_code': app.code(0)}, headers=user.headers
    )
    assert (
        testapp.get('/api/v1/profile', headers=user.headers).json['mfa_enabled'] is True
    )


@pytest.mark.parametrize(
    'body', [{'password': ''}, {'password': 'not the password'}, {'password': None}]
)
def test_a_password_sent_at_enrolment_is_checked(testapp, make_user, conn, body):
    user = make_user()
    testapp.post_json('/api/v1/profile/mfa', body, headers=user.headers, status=422)
    if body['password'] is not None:
        assert testapp.post_json(
            '/api/v1/profile/mfa', body, headers=user.headers, status=422
        ).json == {'message': 'Invalid current password'}
    assert (
        conn.execute(
            'SELECT otp_secret FROM users WHERE id = %s', (user.id,)
        ).fetchone()['otp_secret']
        is None
    )


def test_verify_without_enrolment_enables_nothing(testapp, make_user):
    user = make_user()
    testapp.post_json(
        '/api/v1/profile/mfa/verify',
        {'otp_code': '123456'},
        headers=user.headers,
        status=422,
    )
    testapp.post_json(
        '/api/v1/profile/mfa/backup_codes',
        {'otp_code': '123456'},
        headers=user.headers,
        status=422,
    )
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json['enabled']
        is False
    )


def test_codes_outside_one_step_either_side_are_refused():
    secret = pyotp.random_base32()
    totp, now = pyotp.TOTP(secret), time.time()
    step = int(now // 30)
    for offset in (-1, 0, 1):
        assert (
            mfa.code_step(secret, totp.at(now + 30 * offset), None, now=now)
            == step + offset
        )
    for offset in (-3, -2, 2, 3):
        code = totp.at(now + 30 * offset)
        if code not in {totp.at(now + 30 * near) for near in (-1, 0, 1)}:
            assert mfa.code_step(secret, code, None, now=now) is None
    # The replay guard: the step used last, and any before it, are refused.
    assert mfa.code_step(secret, totp.at(now), step, now=now) is None
    assert mfa.code_step(secret, totp.at(now - 30), step, now=now) is None
    assert mfa.code_step(secret, totp.at(now + 30), step, now=now) == step + 1
    for junk in ('', '12345', '1234567', 'abcdef', '１２３４５６', None, 123456):
        assert mfa.code_step(secret, junk, None, now=now) is None


def test_sealed_secrets_open_only_for_their_user_and_key(config):
    sealed = mfa.seal(config, 7, 'JBSWY3DPEHPK3PXP')
    assert mfa.unseal(config, 7, sealed) == 'JBSWY3DPEHPK3PXP'
    assert mfa.unseal(config, 8, sealed) is None
    other = config_module.load(
        {'DATABASE_URL': 'x', 'SECRET_KEY': base64.b64encode(b'k' * 32).decode()}
    )
    assert mfa.unseal(other, 7, sealed) is None
    assert mfa.unseal(config, 7, sealed[:-1] + bytes([sealed[-1] ^ 1])) is None
    assert mfa.seal(config, 7, 'JBSWY3DPEHPK3PXP') != sealed  # a fresh nonce each time


def sloppy(code):
    """``code`` as a person may type it: lower case, a dash and a space, I/L for 1, O
    for 0."""
    typed = code.replace('1', 'l').replace('0', 'O').lower()
    return f' {typed[:4]}-{typed[4:]} '


def test_recovery_codes_are_8_crockford_characters(testapp, make_user):
    """The reference clients' code fields hold exactly 8 characters (SPEC 12)."""
    _, codes = enable(testapp, make_user())
    assert len(set(codes)) == 10
    assert all(re.fullmatch('[0-9A-HJKMNP-TV-Z]{8}', code) for code in codes), (
        codes
    )  # 5 bits each: 40 bits


def test_a_recovery_code_is_read_in_any_case_and_works_once(testapp, make_user):
    user = make_user()
    app, codes = enable(testapp, user)
    for code in codes[:3]:
        second_step(testapp, challenge(testapp, user), backup_code=sloppy(code))
        assert (
            second_step(
                testapp, challenge(testapp, user), status=400, backup_code=code
            ).json
            == INVALID_CODE
        )
    # Typed from the mobile app's 8-character field, as issued.
    second_step(testapp, challenge(testapp, user), backup_code=codes[3])
    for junk in (
        codes[4][:7],
        codes[4] + 'X',
        codes[4].replace(codes[4][0], 'U', 1),
        '',
        '-' * 8,
    ):
        second_step(testapp, challenge(testapp, user), status=400, backup_code=junk)
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json[
            'backup_codes_remaining'
        ]
        == 6
    )


def test_recovery_codes_of_before_migration_0013_still_work(testapp, make_user, conn):
    """The 24-character codes of 0009 were stored as bare SHA-256 (salt NULL): kept
    valid."""
    user = make_user()
    enable(testapp, user)
    old_code = 'ABCDEF-GHIJKL-MNOPQR-STUVWX'
    conn.execute(
        'INSERT INTO mfa_recovery_codes (user_id, code_digest) VALUES (%s, sha256(%s))',
        (user.id, old_code.replace('-', '').encode()),
    )
    second_step(
        testapp, challenge(testapp, user), backup_code='abcdef ghijkl mn0pqr stuvwx'
    )
    second_step(testapp, challenge(testapp, user), status=400, backup_code=old_code)


def test_the_kdf_check_costs_one_derivation_per_batch(monkeypatch):
    derived = []
    real = mfa._derive
    monkeypatch.setattr(
        mfa, '_derive', lambda code, salt: derived.append(code) or real(code, salt)
    )
    salt = bytes(16)
    cache = {}
    wanted = {mfa._expected_digest('ab-cd efgh', salt, cache) for _ in range(10)}
    assert derived == ['ABCDEFGH'] and wanted == {real('ABCDEFGH', salt)}
    # A malformed code costs none (its shape is no secret).
    assert mfa._expected_digest('ABCDEFG', b'\x01' * 16, {}) == bytes(
        32
    ) and derived == ['ABCDEFGH']


# The reference system's bypasses, each refused.


def test_a_password_reset_of_an_mfa_user_answers_206_and_no_session(
    testapp, make_user, conn
):
    user = make_user()
    app, _ = enable(testapp, user)
    testapp.post_json('/auth/password', {'email': user.email})
    token = queued_token(conn, user.email, 'reset_password_token')
    answer = testapp.put_json(
        '/auth/password',
        {'reset_password_token': token, 'password': 'a brand new secret'},
        status=206,
    )
    assert set(answer.json) == {'mfa_required', 'mfa_token'}
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    # The password was set (the old one no longer works), and every session ended.
    sign_in(testapp, user, status=401)
    testapp.get('/api/v1/profile', headers=user.headers, status=401)
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
        ).fetchone()['n']
        == 0
    )
    # The link is used up; the session needs the second factor.
    testapp.put_json(
        '/auth/password',
        {'reset_password_token': token, 'password': 'a brand new secret'},
        status=422,
    )
    done = second_step(testapp, answer.json['mfa_token'], otp_code=app.code(0))
    testapp.get('/api/v1/profile', headers=headers_of(done))


def test_a_confirmation_for_an_mfa_user_answers_206_and_no_session(
    testapp, make_user, conn
):
    user = make_user()
    app, codes = enable(testapp, user)
    new_address = f'moved-{user.email}'
    conn.execute(
        'UPDATE users SET unconfirmed_email = %s WHERE id = %s', (new_address, user.id)
    )
    resend(testapp, user)
    token = queued_token(conn, new_address, 'confirmation_token')
    answer = testapp.post_json(
        '/auth/confirmation', {'confirmation_token': token}, status=206
    )
    assert set(answer.json) == {'mfa_required', 'mfa_token'}
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    assert (
        conn.execute('SELECT email FROM users WHERE id = %s', (user.id,)).fetchone()[
            'email'
        ]
        == new_address
    )
    done = second_step(testapp, answer.json['mfa_token'], backup_code=codes[0])
    assert done.headers['uid'] == new_address


def test_a_challenge_token_is_no_credential(testapp, make_user):
    user = make_user()
    enable(testapp, user)
    mfa_token = challenge(testapp, user)
    for headers in (
        {'mfa_token': mfa_token},
        {'api_access_token': mfa_token},
        {'access-token': mfa_token, 'client': 'x', 'uid': user.email},
    ):
        testapp.get('/api/v1/profile', headers=headers, status=401)
        testapp.get('/auth/validate_token', headers=headers, status=401)
        testapp.get('/api/v1/profile/mfa', headers=headers, status=401)
        testapp.post_json(
            '/api/v1/profile/mfa/backup_codes',
            {'otp_code': '123456'},
            headers=headers,
            status=401,
        )


def test_neither_token_of_a_206_opens_any_other_endpoint(testapp, enforcing, make_user):
    """Sent as the mfa_token header to every documented operation that needs
    credentials."""
    member = make_user(account_id=enforcing.account_id)
    setup_token = sign_in(testapp, member).json['mfa_token']
    challenge_token = challenge(testapp, enforcing)
    opened = []
    for path, operations in contract.document()['paths'].items():
        for method, operation in operations.items():
            if not operation['security'] or {} in operation['security']:
                continue  # public, or optional credentials (sign-up, validate_token)
            url = re.sub(
                r'\{\w+\}', '1', path.replace('{account_id}', str(enforcing.account_id))
            )
            for token in (setup_token, challenge_token):
                answer = testapp.request(
                    url,
                    method=method.upper(),
                    headers={'mfa_token': token},
                    expect_errors=True,
                )
                if answer.status_int != 401 and not (
                    token == setup_token and {'mfaToken': []} in operation['security']
                ):
                    opened.append((method, path, answer.status_int))
    assert opened == []


def test_five_wrong_codes_use_up_the_challenge(testapp, make_user):
    user = make_user()
    app, codes = enable(testapp, user)
    mfa_token = challenge(testapp, user)
    for _ in range(mfa.MAX_WRONG_CODES):
        assert (
            second_step(testapp, mfa_token, status=400, otp_code=wrong_code(app)).json
            == INVALID_CODE
        )
    assert (
        second_step(testapp, mfa_token, status=401, otp_code=app.code(0)).json
        == INVALID_MFA_TOKEN
    )
    assert (
        second_step(testapp, mfa_token, status=401, backup_code=codes[0]).json
        == INVALID_MFA_TOKEN
    )
    # A fresh challenge still works, with the code the dead one was refused.
    second_step(testapp, challenge(testapp, user), otp_code=app.code(0))


def test_an_expired_or_used_challenge_fails(testapp, make_user, conn):
    user = make_user()
    app, codes = enable(testapp, user)
    mfa_token = challenge(testapp, user)
    conn.execute(
        "UPDATE one_time_tokens SET expires_at = now() - interval '1 second'"
        " WHERE user_id = %s AND purpose = 'mfa_challenge'",
        (user.id,),
    )
    assert (
        second_step(testapp, mfa_token, status=401, otp_code=app.code(0)).json
        == INVALID_MFA_TOKEN
    )
    mfa_token = challenge(testapp, user)
    second_step(testapp, mfa_token, backup_code=codes[0])
    assert (
        second_step(testapp, mfa_token, status=401, backup_code=codes[1]).json
        == INVALID_MFA_TOKEN
    )
    for junk in ('', 'x' * 43, 'not a token'):
        assert (
            second_step(testapp, junk, status=401, otp_code='123456').json
            == INVALID_MFA_TOKEN
        )


def test_a_challenge_dies_with_a_credential_change(testapp, make_user):
    user = make_user()
    app, codes = enable(testapp, user)
    mfa_token = challenge(testapp, user)
    testapp.post('/api/v1/profile/reset_access_token', headers=user.headers)
    second_step(testapp, mfa_token, status=401, backup_code=codes[0])


def test_a_wrong_password_gets_no_challenge(testapp, make_user, conn):
    user = make_user()
    enable(testapp, user)
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': 'wrong password'}, status=401
    )
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM one_time_tokens WHERE user_id = %s'
            " AND purpose = 'mfa_challenge'",
            (user.id,),
        ).fetchone()['n']
        == 0
    )


def test_disabling_needs_a_second_factor_as_well_as_the_password(testapp, make_user):
    user = make_user()
    app, codes = enable(testapp, user)
    for body in (
        {'password': user.password},
        {'password': user.password, 'otp_code': wrong_code(app)},
        {'password': user.password, 'backup_code': 'AAAAAAAA'},
        {'password': user.password, 'otp_code': '', 'backup_code': ''},
        {'otp_code': app.code(0)},
        {'backup_code': codes[0]},
    ):
        testapp.delete_json(
            '/api/v1/profile/mfa', body, headers=user.headers, status=422
        )
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json['enabled'] is True
    )
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, 'otp_code': app.code(1)},
        headers=user.headers,
    )
    assert (
        testapp.get('/api/v1/profile', headers=user.headers).json['mfa_enabled']
        is False
    )


# Without SECRET_KEY, and with a short one.


def test_without_secret_key_the_feature_is_unavailable(make_testapp, make_user):
    app = make_testapp(SECRET_KEY='')
    user = make_user()
    assert app.get('/api/v1/profile/mfa', headers=user.headers).json == {
        'feature_available': False,
        'enabled': False,
        'backup_codes_generated': False,
        'backup_codes_remaining': 0,
    }
    assert (
        app.post_json(
            '/api/v1/profile/mfa',
            {'password': user.password},
            headers=user.headers,
            status=403,
        ).json
        == UNAVAILABLE
    )
    for path in ('/api/v1/profile/mfa/verify', '/api/v1/profile/mfa/backup_codes'):
        assert (
            app.post_json(
                path, {'otp_code': '123456'}, headers=user.headers, status=403
            ).json
            == UNAVAILABLE
        )
    assert (
        app.delete_json(
            '/api/v1/profile/mfa',
            {'password': user.password},
            headers=user.headers,
            status=403,
        ).json
        == UNAVAILABLE
    )


def test_without_secret_key_an_mfa_user_still_needs_a_second_factor(
    testapp, make_testapp, make_user
):
    user = make_user()
    _, codes = enable(testapp, user)
    app = make_testapp(SECRET_KEY='')
    mfa_token = challenge(app, user)
    # No key, no TOTP check; the recovery codes (digests) still let the owner in.
    second_step(app, mfa_token, status=400, otp_code='123456')
    second_step(app, mfa_token, backup_code=codes[0])


@pytest.mark.parametrize(
    'value', [base64.b64encode(b'k' * 31).decode(), 'c2hvcnQ=', 'not base64 at all!']
)
def test_a_short_or_malformed_secret_key_stops_the_service(value, capsys):
    with pytest.raises(config_module.ConfigError, match='SECRET_KEY'):
        config_module.load({'DATABASE_URL': 'x', 'SECRET_KEY': value})
    with pytest.raises(SystemExit) as stopped:
        config_module.load_or_exit({'DATABASE_URL': 'x', 'SECRET_KEY': value})
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'SECRET_KEY' in err


def test_a_secret_key_of_32_bytes_in_either_base64_alphabet_is_accepted():
    key = bytes(range(200, 232))
    for text in (
        base64.b64encode(key).decode(),
        base64.urlsafe_b64encode(key).decode().rstrip('='),
    ):
        assert (
            config_module.load({'DATABASE_URL': 'x', 'SECRET_KEY': text}).secret_key
            == key
        )


# Accounts that require MFA.


@pytest.fixture
def enforcing(testapp, admin):
    """An account that requires MFA, its administrator enrolled."""
    enable(testapp, admin)
    answer = testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'enforce_mfa': True},
        headers=admin.headers,
    )
    assert answer.json['enforce_mfa'] is True
    return admin


def test_only_an_administrator_with_mfa_may_require_it(testapp, admin, make_user):
    assert testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'enforce_mfa': True},
        headers=admin.headers,
        status=422,
    ).json == {
        'message': 'Enforce mfa needs two-factor sign-in turned on for yourself first',
        'attributes': ['enforce_mfa'],
    }
    agent = make_user(account_id=admin.account_id)
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'enforce_mfa': True},
        headers=agent.headers,
        status=401,
    )
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'enforce_mfa': 'yes'},
        headers=admin.headers,
        status=422,
    )


def test_an_unenrolled_member_must_enrol_before_anything_else(
    testapp, enforcing, make_user
):
    member = make_user(account_id=enforcing.account_id)
    # Its sign-in hands out the setup token, no session.
    answer = sign_in(testapp, member)
    assert set(answer.json) == {'mfa_setup_required', 'mfa_token'}
    assert not any(name in answer.headers for name in TOKEN_HEADERS)
    setup = {'mfa_token': answer.json['mfa_token']}
    # The setup token reaches the MFA endpoints and nothing else.
    testapp.get('/api/v1/profile', headers=setup, status=401)
    testapp.get(f'/api/v1/accounts/{enforcing.account_id}', headers=setup, status=401)
    second_step(testapp, setup['mfa_token'], status=401, otp_code='123456')
    assert testapp.get('/api/v1/profile/mfa', headers=setup).json['enabled'] is False
    # Its API token, and a session from before the requirement, are refused elsewhere.
    refused = {
        'error': 'Your account requires two-factor sign-in: enable it first',
        'error_code': 'mfa_enrollment_required',
    }
    assert (
        testapp.get(
            '/api/v1/profile',
            headers={'api_access_token': member.access_token},
            status=403,
        ).json
        == refused
    )
    assert (
        testapp.get('/api/v1/profile', headers=member.headers, status=403).json
        == refused
    )
    testapp.get(
        f'/api/v1/accounts/{enforcing.account_id}', headers=member.headers, status=403
    )
    testapp.get('/api/v1/profile/mfa', headers=member.headers)

    app, _ = enable(testapp, member, headers=setup)
    # Enrolled: the setup token is spent; sign in as any MFA user.
    testapp.get('/api/v1/profile/mfa', headers=setup, status=401)
    done = second_step(testapp, challenge(testapp, member), otp_code=app.code(0))
    testapp.get('/api/v1/profile', headers=headers_of(done))
    testapp.get(
        '/api/v1/profile',
        headers={'api_access_token': done.json['data']['access_token']},
    )


def test_an_unenrolled_member_may_sign_out(testapp, enforcing, make_user):
    member = make_user(account_id=enforcing.account_id)
    testapp.delete('/auth/sign_out', headers=member.headers)


def test_a_password_reset_of_an_unenrolled_member_gives_the_setup_token(
    testapp, enforcing, make_user, conn
):
    member = make_user(account_id=enforcing.account_id)
    testapp.post_json('/auth/password', {'email': member.email})
    token = queued_token(conn, member.email, 'reset_password_token')
    answer = testapp.put_json(
        '/auth/password',
        {'reset_password_token': token, 'password': 'a brand new secret'},
        status=206,
    )
    assert set(answer.json) == {'mfa_setup_required', 'mfa_token'}


def test_members_of_other_accounts_are_not_affected(
    testapp, enforcing, make_account, make_user
):
    other = make_user(account_id=make_account())
    sign_in(testapp, other, status=200)
    testapp.get('/api/v1/profile', headers={'api_access_token': other.access_token})


def test_sign_in_without_mfa_is_unchanged(testapp, make_user):
    user = make_user()
    answer = sign_in(testapp, user, status=200)
    assert answer.json['data']['mfa_enabled'] is False
    assert all(name in answer.headers for name in TOKEN_HEADERS)
    testapp.get('/api/v1/profile', headers=headers_of(answer))


# Rate limits (SPEC 12): counted apart from the password step.


@pytest.fixture
def limited(make_testapp):
    return make_testapp(RATE_LIMITS='on')


def test_the_second_step_allows_ten_per_ip_a_minute(limited, make_user):
    ip = unique_ip()
    for _ in range(10):
        limited.post_json(
            '/auth/sign_in',
            {'mfa_token': 'x' * 43, 'otp_code': '123456'},
            headers={'X-Real-IP': ip},
            status=401,
        )
    answer = limited.post_json(
        '/auth/sign_in',
        {'mfa_token': 'y' * 43, 'otp_code': '123456'},
        headers={'X-Real-IP': ip},
        status=429,
    )
    assert 1 <= int(answer.headers['Retry-After']) <= 60
    # The password step of that address is counted apart, and is not used up.
    user = make_user()
    limited.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': user.password},
        headers={'X-Real-IP': ip},
        status=200,
    )


def test_the_second_step_allows_ten_per_mfa_token_a_minute(testapp, limited, make_user):
    user = make_user()
    app, _ = enable(testapp, user)
    mfa_token = challenge(testapp, user)
    for attempt in range(10):
        second_step(
            limited,
            mfa_token,
            status=400 if attempt < mfa.MAX_WRONG_CODES else 401,
            otp_code=wrong_code(app),
            headers={'X-Real-IP': unique_ip()},
        )
    limited.post_json(
        '/auth/sign_in',
        {'mfa_token': mfa_token, 'otp_code': app.code(0)},
        headers={'X-Real-IP': unique_ip()},
        status=429,
    )


@pytest.mark.parametrize(
    'method, path',
    [
        ('POST', '/api/v1/profile/mfa/verify'),
        ('POST', '/api/v1/profile/mfa/backup_codes'),
        ('DELETE', '/api/v1/profile/mfa'),
    ],
)
def test_codes_at_the_mfa_endpoints_allow_five_per_user_a_minute(
    limited, make_user, method, path
):
    user, other = make_user(), make_user()
    for _ in range(5):
        limited.request(
            path,
            method=method,
            json={'otp_code': '123456'},
            headers=user.headers,
            status=422,
        )
    limited.request(
        path,
        method=method,
        json={'otp_code': '123456'},
        headers=user.headers,
        status=429,
    )
    # Per user, whatever the address.
    limited.request(
        path,
        method=method,
        json={'otp_code': '123456'},
        headers=other.headers,
        status=422,
    )


# Security e-mails and audit events (SPEC 12, 14).


def events_of(conn, user_id):
    return [
        (row['event'], row['details'].get('reason'))
        for row in conn.execute(
            'SELECT event, details FROM audit_events WHERE subject_id = %s ORDER BY id',
            (user_id,),
        )
    ]


def subjects_to(conn, address):
    return [
        row['subject']
        for row in conn.execute(
            'SELECT subject FROM mail_outbox WHERE to_address = %s ORDER BY id',
            (address,),
        )
    ]


def test_each_mfa_event_is_audited_and_mailed(testapp, make_user, conn):
    user = make_user()
    app, codes = enable(testapp, user)
    testapp.post_json(
        '/api/v1/profile/mfa/backup_codes',
        {'otp_code': app.code(0)},
        headers=user.headers,
    )
    codes = testapp.post_json(
        '/api/v1/profile/mfa/backup_codes',
        {'otp_code': app.code(1)},
        headers=user.headers,
    ).json['backup_codes']
    second_step(testapp, challenge(testapp, user), status=400, otp_code=wrong_code(app))
    second_step(testapp, challenge(testapp, user), backup_code=codes[0])
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, 'backup_code': codes[1]},
        headers=user.headers,
    )
    mfa_events = [
        event
        for event in events_of(conn, user.id)
        if event[0].startswith(('mfa', 'sign_in'))
    ]
    assert mfa_events == [
        ('mfa_enabled', None),
        ('mfa_backup_codes_regenerated', None),
        ('mfa_backup_codes_regenerated', None),
        ('sign_in_failed', 'mfa'),
        ('mfa_recovery_code_used', None),
        ('sign_in_succeeded', None),
        ('mfa_recovery_code_used', None),
        ('mfa_disabled', None),
    ]
    assert subjects_to(conn, user.email) == [
        'Two-factor sign-in was turned on',
        'New recovery codes were made',
        'New recovery codes were made',
        'A recovery code was used',
        'A recovery code was used',
        'Two-factor sign-in was turned off',
    ]
    # No secret in any of them.
    bodies = str(
        conn.execute(
            'SELECT text_body, html_body FROM mail_outbox WHERE to_address = %s',
            (user.email,),
        ).fetchall()
    )
    details = str(
        conn.execute(
            'SELECT details FROM audit_events WHERE subject_id = %s', (user.id,)
        ).fetchall()
    )
    for code in codes:
        assert code not in bodies and code not in details
    assert app.totp.secret not in bodies and app.totp.secret not in details


def test_a_challenge_answered_with_an_unknown_token_is_a_failed_sign_in(testapp, conn):
    before = conn.execute(
        "SELECT count(*) AS n FROM audit_events WHERE event = 'sign_in_failed'"
        " AND details->>'reason' = 'mfa'"
    ).fetchone()['n']
    # From an address of its own: such failures write one row per address and hour
    # (SPEC 14).
    second_step(
        testapp,
        'no such token',
        status=401,
        otp_code='123456',
        headers={'X-Real-IP': unique_ip()},
    )
    after = conn.execute(
        "SELECT count(*) AS n FROM audit_events WHERE event = 'sign_in_failed'"
        " AND details->>'reason' = 'mfa'"
    ).fetchone()['n']
    assert after == before + 1


# Seams found in review: MFA must not outlive the owner taking the address back.


def test_an_unconfirmed_user_cannot_enrol(testapp, make_user, conn):
    """Whoever signed up with someone else's address cannot put an authenticator of
    their own in front of the owner's confirmation and reset."""
    squatter = make_user(confirmed=False)
    refused = {'message': 'Confirm your e-mail address before enabling MFA'}
    assert (
        testapp.post_json(
            '/api/v1/profile/mfa',
            {'password': squatter.password},
            headers=squatter.headers,
            status=422,
        ).json
        == refused
    )
    # A secret made while confirmed does not become usable after the fact either.
    conn.execute('UPDATE users SET confirmed_at = now() WHERE id = %s', (squatter.id,))
    started = testapp.post_json(
        '/api/v1/profile/mfa', {'password': squatter.password}, headers=squatter.headers
    ).json
    conn.execute('UPDATE users SET confirmed_at = NULL WHERE id = %s', (squatter.id,))
    code = Authenticator(started['provisioning_url']).code(0)
    assert (
        testapp.post_json(
            '/api/v1/profile/mfa/verify',
            {'otp_code': code},
            headers=squatter.headers,
            status=422,
        ).json
        == refused
    )
    assert (
        testapp.get('/api/v1/profile', headers=squatter.headers).json['mfa_enabled']
        is False
    )


def test_an_email_revert_turns_off_the_takers_mfa(testapp, make_user, conn, queries):
    """Someone who took the account and enrolled an authenticator of theirs: the owner's
    revert, and the reset it mails, must end at a session for the owner, not a 206."""
    from services import mail
    from tests.test_confirmations import queued_token

    owner = make_user()
    old_address = owner.email
    with conn.transaction():
        revert = mail._issue(
            conn,
            queries,
            owner.id,
            'email_revert',
            old_address,
            mail.REVERT_LIFESPAN,
            replace=False,
        )
    enable(testapp, owner)  # the taker's authenticator, after the link (SPEC 3.4)
    assert testapp.post_json('/auth/email_revert', {'token': revert}).json == {}
    row = conn.execute(
        'SELECT otp_secret, mfa_enabled_at, (SELECT count(*) FROM mfa_recovery_codes c'
        ' WHERE c.user_id = u.id) AS codes FROM users u WHERE id = %s',
        (owner.id,),
    ).fetchone()
    assert row == {'otp_secret': None, 'mfa_enabled_at': None, 'codes': 0}
    reset = queued_token(conn, old_address, 'reset_password_token')
    answer = testapp.put_json(
        '/auth/password',
        {
            'reset_password_token': reset,
            'password': 'the owner again 7',
            'password_confirmation': 'the owner again 7',
        },
        status=200,
    )
    assert (
        answer.headers['access-token'] and answer.json['data']['mfa_enabled'] is False
    )


def test_enforced_mfa_also_holds_where_credentials_are_optional(
    testapp, enforcing, make_user
):
    member = make_user(account_id=enforcing.account_id)
    for headers in (member.headers, {'api_access_token': member.access_token}):
        assert (
            testapp.get('/auth/validate_token', headers=headers, status=403).json[
                'error_code'
            ]
            == 'mfa_enrollment_required'
        )
        testapp.post_json(
            '/api/v1/accounts',
            {'account_name': 'Side door'},
            headers=headers,
            status=403,
        )
    # Without credentials these stay what they are.
    testapp.get('/auth/validate_token', status=401)


# The reference dashboard 4.15 and mobile app: empty codes, the session cap,
# and the link that undoes an enablement.

FIREFOX = (
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0'
)


def test_an_empty_code_counts_as_absent(testapp, make_user):
    """The dashboard sends otp_code "" beside a recovery code, and backup_code "" beside
    a TOTP code."""
    user = make_user()
    app, codes = enable(testapp, user)
    second_step(testapp, challenge(testapp, user), otp_code='', backup_code=codes[0])
    second_step(testapp, challenge(testapp, user), otp_code=app.code(0), backup_code='')
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, 'otp_code': '', 'backup_code': codes[1]},
        headers=user.headers,
    )
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json['enabled']
        is False
    )


def test_the_second_step_at_the_session_cap_ends_the_least_recently_active_session(
    make_testapp, make_user, conn
):
    """The dashboard's code form has no session picker: no 409 on this step
    (SPEC 12)."""
    capped = make_testapp(MAX_USER_SESSIONS='3')
    user = make_user()
    _, codes = enable(capped, user)
    browser = {'User-Agent': FIREFOX}
    opened = [
        headers_of(
            second_step(
                capped, challenge(capped, user), backup_code=code, headers=browser
            )
        )
        for code in codes[:2]
    ]
    conn.execute(
        "UPDATE user_tokens SET last_used_at = now() - interval '1 hour'"
        ' WHERE client = %s',
        (opened[0]['client'],),
    )

    signed_in = second_step(
        capped, challenge(capped, user), backup_code=codes[2], headers=browser
    )

    assert signed_in.json['data']['id'] == user.id
    capped.get('/api/v1/profile', headers=opened[0], status=401)
    for headers in (user.headers, opened[1], headers_of(signed_in)):
        capped.get('/api/v1/profile', headers=headers)
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
        ).fetchone()['n']
        == 3
    )


def revert_link(conn, user):
    """The "this was not me" link of the newest MFA-enabled e-mail to ``user``."""
    row = conn.execute(
        'SELECT text_body, html_body FROM mail_outbox WHERE to_address = %s'
        ' AND subject = %s ORDER BY id DESC LIMIT 1',
        (user.email, 'Two-factor sign-in was turned on'),
    ).fetchone()
    link = re.search(
        r'http://frontdesk\.test/app/auth/mfa_revert\?token=([A-Za-z0-9_-]+)',
        row['text_body'],
    )
    assert link.group(0) in row['html_body']
    return link.group(1)


def test_the_link_of_the_mfa_enabled_mail_turns_that_enablement_off(
    testapp, make_user, conn
):
    """Enabling needs no password (SPEC 12), so whoever holds a session could lock the
    owner out with an authenticator of theirs; the owner's mailbox undoes it."""
    owner = make_user()
    taker = headers_of(
        testapp.post_json(
            '/auth/sign_in', {'email': owner.email, 'password': owner.password}
        )
    )
    started = testapp.post('/api/v1/profile/mfa', headers=taker).json
    code = Authenticator(started['provisioning_url']).code(0)
    testapp.post_json('/api/v1/profile/mfa/verify', {'otp_code': code}, headers=taker)
    token = revert_link(conn, owner)

    assert testapp.post_json('/auth/mfa_revert', {'token': token}).json == {}

    row = conn.execute(
        'SELECT otp_secret, mfa_enabled_at, encrypted_password, (SELECT count(*) FROM'
        ' mfa_recovery_codes c WHERE c.user_id = u.id) AS codes, (SELECT count(*)'
        ' FROM user_tokens t WHERE t.user_id = u.id) AS sessions FROM users u'
        ' WHERE id = %s',
        (owner.id,),
    ).fetchone()
    assert row == {
        'otp_secret': None,
        'mfa_enabled_at': None,
        'encrypted_password': None,
        'codes': 0,
        'sessions': 0,
    }
    assert events_of(conn, owner.id)[-1] == ('mfa_enabled_reverted', None)
    testapp.get('/api/v1/profile', headers=taker, status=401)
    testapp.get(
        '/api/v1/profile', headers={'api_access_token': owner.access_token}, status=401
    )
    sign_in(testapp, owner, status=401)  # the password is cleared
    # The reset it mails signs the owner in, with no second factor.
    reset = queued_token(conn, owner.email, 'reset_password_token')
    answer = testapp.put_json(
        '/auth/password',
        {
            'reset_password_token': reset,
            'password': 'the owner again 7',
            'password_confirmation': 'the owner again 7',
        },
        status=200,
    )
    assert answer.json['data']['mfa_enabled'] is False
    # Used: the link works once.
    assert testapp.post_json('/auth/mfa_revert', {'token': token}, status=422).json == {
        'message': 'Invalid token'
    }


def test_a_link_never_turns_off_a_later_enablement(testapp, make_user, conn):
    user = make_user()
    app, codes = enable(testapp, user)
    earlier = revert_link(conn, user)
    testapp.delete_json(
        '/api/v1/profile/mfa',
        {'password': user.password, 'backup_code': codes[0]},
        headers=user.headers,
    )
    enable(testapp, user)
    later = revert_link(conn, user)

    assert testapp.post_json(
        '/auth/mfa_revert', {'token': earlier}, status=422
    ).json == {'message': 'Invalid token'}
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json['enabled'] is True
    )
    sign_in(
        testapp, user
    )  # nothing else happened either: the password and the session stand
    testapp.post_json('/auth/mfa_revert', {'token': later})
    assert sign_in(testapp, user, status=401).json['success'] is False


def test_the_link_survives_a_later_credential_change_and_the_mail_says_what_it_does(
    testapp, make_user, conn
):
    user = make_user()
    enable(testapp, user)
    token = revert_link(conn, user)
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s AND subject = %s',
        (user.email, 'Two-factor sign-in was turned on'),
    ).fetchone()['text_body']
    assert 'within 7 days' in body and 'turns two-factor sign-in off again' in body
    testapp.post('/api/v1/profile/reset_access_token', headers=user.headers)
    conn.execute(
        "UPDATE one_time_tokens SET expires_at = now() + interval '1 minute'"
        " WHERE user_id = %s AND purpose = 'mfa_revert'",
        (user.id,),
    )
    testapp.post_json('/auth/mfa_revert', {'token': token})
    assert testapp.get('/api/v1/profile', headers=user.headers, status=401)


def test_an_expired_revert_link_is_invalid(testapp, make_user, conn):
    user = make_user()
    enable(testapp, user)
    token = revert_link(conn, user)
    conn.execute(
        "UPDATE one_time_tokens SET expires_at = now() - interval '1 second'"
        " WHERE user_id = %s AND purpose = 'mfa_revert'",
        (user.id,),
    )
    testapp.post_json('/auth/mfa_revert', {'token': token}, status=422)
    assert (
        testapp.get('/api/v1/profile/mfa', headers=user.headers).json['enabled'] is True
    )


def test_a_code_of_the_step_before_is_reckoned_clear_of_a_step_boundary(monkeypatch):
    """The helper the tests enrol with: ``code(-1)`` reckoned 0.5 s before a step
    boundary would be two steps old once the server checks it after the boundary (a
    flaky 422 in CI); it is reckoned after the boundary instead. A fake clock stands in
    for time, which sleeping advances."""
    boundary = 1_800_000_000.0  # a multiple of 30 s
    clock = [boundary - 0.5]
    monkeypatch.setattr(time, 'time', lambda: clock[0])
    monkeypatch.setattr(
        time, 'sleep', lambda seconds: clock.__setitem__(0, clock[0] + seconds)
    )
    secret = pyotp.random_base32()
    app = Authenticator(pyotp.TOTP(secret).provisioning_uri(name='a@example.com'))
    code = app.code(-1)
    checked_at = boundary + 0.2  # the server, once the request reaches it
    assert mfa.code_step(secret, code, None, now=checked_at) is not None
