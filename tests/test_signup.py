"""POST /api/v1/accounts: sign-up in the order of SPEC 4.1, captcha, concurrency."""

from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
import json
import threading
import time
import urllib.parse

import pytest

from tests.support.servers import http
from tests.support.users import unique_email

INVALID_PARAMS = {
    'message': 'Invalid, please check the signup parameters and try again'
}


def signup_body(**overrides):
    body = {
        'account_name': 'Acme Support',
        'email': unique_email('signup'),
        'user_full_name': 'Ada Lovelace',
        'password': 'Password1!',
        'locale': None,
        'user': None,
    }
    body.update(overrides)
    return body


def counts(conn, email):
    row = conn.execute(
        """SELECT (SELECT count(*) FROM users WHERE email = lower(%(e)s)) AS users,
                  (SELECT count(*) FROM account_users au JOIN users u ON u.id = au.user_id
                    WHERE u.email = lower(%(e)s)) AS memberships""",  # noqa: E501
        {'e': email},
    ).fetchone()
    return row['users'], row['memberships']


def test_sign_up_creates_everything_and_returns_the_token_headers(testapp, conn):
    body = signup_body(email='  Mixed.Case-%s@Example.COM ' % time.time_ns())
    resp = testapp.post_json('/api/v1/accounts', body, status=200)
    email = body['email'].strip().lower()
    for header in ('access-token', 'token-type', 'client', 'expiry', 'uid'):
        assert resp.headers[header]
    assert resp.headers['token-type'] == 'Bearer'
    assert resp.headers['uid'] == email
    assert int(resp.headers['expiry']) > time.time() + 59 * 86400
    data = resp.json['data']
    assert data['email'] == email and data['uid'] == email
    assert data['name'] == 'Ada Lovelace'
    assert data['confirmed'] is False
    assert data['role'] == 'administrator'
    assert data['accounts'][0]['id'] == data['account_id']
    assert data['accounts'][0]['locale'] == 'en'
    assert data['accounts'][0]['permissions'] == ['administrator']
    user = conn.execute('SELECT * FROM users WHERE email = %s', (email,)).fetchone()
    assert (
        user['encrypted_password'].startswith('$2b$')
        and 'Password1!' not in user['encrypted_password']
    )
    assert user['confirmed_at'] is None
    assert conn.execute(
        'SELECT name, locale FROM accounts WHERE id = %s', (data['account_id'],)
    ).fetchone() == {'name': 'Acme Support', 'locale': 'en'}
    tokens = conn.execute(
        'SELECT token_digest FROM user_tokens WHERE user_id = %s', (user['id'],)
    ).fetchall()
    assert (
        len(tokens) == 1
        and tokens[0]['token_digest'] != resp.headers['access-token'].encode()
    )
    confirmation = conn.execute(
        'SELECT * FROM one_time_tokens WHERE user_id = %s', (user['id'],)
    ).fetchone()
    assert confirmation['purpose'] == 'confirmation' and confirmation['email'] == email
    mail = conn.execute(
        'SELECT * FROM mail_outbox WHERE to_address = %s', (email,)
    ).fetchone()
    assert (
        mail['kind'] == 'confirmation'
        and 'http://frontdesk.test/app/auth/confirmation?confirmation_token='
        in mail['text_body']
    )
    # The headers work at once.
    headers = {k: resp.headers[k] for k in ('access-token', 'client', 'uid')}
    assert (
        testapp.get('/api/v1/profile', headers=headers, status=200).json['id']
        == data['id']
    )
    assert (
        testapp.get(
            f'/api/v1/accounts/{data["account_id"]}', headers=headers, status=200
        ).json['name']
        == 'Acme Support'
    )


def test_locale_is_stored(testapp):
    resp = testapp.post_json(
        '/api/v1/accounts', signup_body(locale='pt_BR'), status=200
    )
    assert resp.json['data']['accounts'][0]['locale'] == 'pt_BR'


@pytest.mark.parametrize(
    'missing',
    [
        {'account_name': None},
        {'account_name': '   '},
        {'email': ''},
        {'user_full_name': 42},
        {'email': None, 'account_name': None, 'user_full_name': None},
    ],
)
def test_missing_or_blank_parameters_are_a_403(testapp, conn, missing):
    body = signup_body(**missing)
    assert (
        testapp.post_json('/api/v1/accounts', body, status=403).json == INVALID_PARAMS
    )
    if isinstance(body['email'], str) and body['email']:
        assert counts(conn, body['email']) == (0, 0)


def test_a_missing_key_is_a_403_too(testapp):
    body = signup_body()
    del body['user_full_name']
    assert (
        testapp.post_json('/api/v1/accounts', body, status=403).json == INVALID_PARAMS
    )
    assert testapp.post('/api/v1/accounts', status=403).json == INVALID_PARAMS
    assert (
        testapp.post_json('/api/v1/accounts', [body], status=403).json == INVALID_PARAMS
    )


@pytest.mark.parametrize(
    'email', ['plainaddress', 'a@b', 'two@@example.com', 'sp ace@example.com']
)
def test_an_invalid_email_is_a_403(testapp, email):
    resp = testapp.post_json('/api/v1/accounts', signup_body(email=email), status=403)
    assert resp.json == {'message': 'You have entered an invalid email'}


def test_an_address_already_registered_in_any_case_is_a_403(testapp, make_user, conn):
    user = make_user()
    resp = testapp.post_json(
        '/api/v1/accounts', signup_body(email=user.email.upper()), status=403
    )
    assert resp.json == {
        'message': f'You have already signed up for an account with {user.email}'
    }
    assert counts(conn, user.email) == (1, 0)


@pytest.mark.parametrize(
    'password, message',
    [
        ('', "Password can't be blank"),
        ('short', 'Password is too short (minimum is 8 characters)'),
        ('é' * 37, 'Password is too long (maximum is 72 bytes)'),
        (12345678, 'Password must be a string'),
    ],
)
def test_password_rules(testapp, conn, password, message):
    body = signup_body(password=password)
    resp = testapp.post_json('/api/v1/accounts', body, status=422)
    assert resp.json == {'message': message, 'attributes': ['password']}
    assert counts(conn, body['email']) == (0, 0)


def test_a_missing_password_is_blank(testapp):
    body = signup_body()
    del body['password']
    assert testapp.post_json('/api/v1/accounts', body, status=422).json == {
        'message': "Password can't be blank",
        'attributes': ['password'],
    }


def test_72_bytes_of_any_characters_is_accepted(testapp):
    testapp.post_json(
        '/api/v1/accounts', signup_body(password='日本語' * 8), status=200
    )
    testapp.post_json(
        '/api/v1/accounts', signup_body(password=' \t🙂' + 'x' * 66), status=200
    )


def test_several_field_errors_come_together(testapp):
    resp = testapp.post_json(
        '/api/v1/accounts',
        signup_body(account_name='a' * 256, locale='xx', password='x'),
        status=422,
    )
    assert resp.json == {
        'message': 'Account name is too long (maximum is 255 characters), '
        'Password is too short (minimum is 8 characters), '
        'Locale is not included in the list',
        'attributes': ['account_name', 'password', 'locale'],
    }


def test_signup_disabled_is_a_404_before_anything_else(make_testapp, conn):
    disabled = make_testapp(ENABLE_ACCOUNT_SIGNUP='false')
    body = signup_body()
    assert disabled.post_json('/api/v1/accounts', body, status=404).json == {
        'error': 'Resource could not be found'
    }
    assert disabled.post(
        '/api/v1/accounts', '{broken', content_type='application/json', status=404
    )
    assert counts(conn, body['email']) == (0, 0)
    make_testapp(ENABLE_ACCOUNT_SIGNUP='api_only').post_json(
        '/api/v1/accounts', signup_body(), status=200
    )


def test_signed_in_caller_gets_a_new_account_not_a_new_user(testapp, admin, conn):
    body = {
        'account_name': 'Second Account',
        'email': 'ignored@example.com',
        'user_full_name': 'X',
        'password': 'whatever1',
    }
    resp = testapp.post_json(
        '/api/v1/accounts', body, headers=admin.headers, status=200
    )
    data = resp.json['data']
    assert data['id'] == admin.id
    assert data['account_id'] != admin.account_id
    assert sorted(entry['id'] for entry in data['accounts']) == sorted(
        [admin.account_id, data['account_id']]
    )
    assert {entry['role'] for entry in data['accounts']} == {'administrator'}
    assert resp.headers['access-token'] == admin.token
    assert counts(conn, 'ignored@example.com') == (0, 0)
    # Only account_name is needed when signed in.
    testapp.post_json(
        '/api/v1/accounts', {'account_name': 'Third'}, headers=admin.headers, status=200
    )
    assert (
        testapp.post_json(
            '/api/v1/accounts', {}, headers=admin.headers, status=403
        ).json
        == INVALID_PARAMS
    )


class FakeVerifier:
    """A local stand-in for hCaptcha's siteverify: records forms, answers per mode."""

    def __init__(self):
        self.mode = 'accept'
        self.forms = []
        self.release = threading.Event()
        verifier = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers['Content-Length'])
                verifier.forms.append(
                    (
                        self.headers['Content-Type'],
                        urllib.parse.parse_qs(self.rfile.read(length).decode()),
                    )
                )
                if verifier.mode == 'slow':
                    # Answer only when the test is done with it (or after a minute).
                    verifier.release.wait(60)
                if verifier.mode == 'error':
                    self.send_response(500)
                    self.end_headers()
                    return
                answer = json.dumps({'success': verifier.mode == 'accept'}).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(answer)))
                self.end_headers()
                try:
                    self.wfile.write(answer)
                except BrokenPipeError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}/siteverify'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope='module')
def verifier():
    fake = FakeVerifier()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def captcha_app(make_testapp, verifier):
    verifier.mode, verifier.forms[:] = 'accept', []
    return make_testapp(HCAPTCHA_SECRET='0xsecret', HCAPTCHA_VERIFY_URL=verifier.url)


def test_captcha_accepted_is_posted_form_encoded(captcha_app, verifier):
    captcha_app.post_json(
        '/api/v1/accounts', signup_body(h_captcha_client_response='tok-123'), status=200
    )
    content_type, form = verifier.forms[-1]
    assert content_type == 'application/x-www-form-urlencoded'
    assert form['secret'] == ['0xsecret'] and form['response'] == ['tok-123']


@pytest.mark.parametrize(
    'mode, response',
    [
        ('accept', None),
        ('accept', ''),
        ('reject', 'tok'),
        ('error', 'tok'),
        ('garbage', 'tok'),
    ],
)
def test_captcha_failures_are_422_and_create_nothing(
    captcha_app, verifier, conn, mode, response
):
    verifier.mode = mode
    body = signup_body(h_captcha_client_response=response)
    assert captcha_app.post_json('/api/v1/accounts', body, status=422).json == {
        'message': 'Invalid captcha'
    }
    assert counts(conn, body['email']) == (0, 0)


def test_captcha_verifier_down_or_slow_fails_closed(make_testapp, verifier, conn):
    verifier.mode = 'slow'
    verifier.release.clear()
    slow = make_testapp(HCAPTCHA_SECRET='s', HCAPTCHA_VERIFY_URL=verifier.url)
    started = time.monotonic()
    body = signup_body(h_captcha_client_response='tok')
    try:
        assert slow.post_json('/api/v1/accounts', body, status=422).json == {
            'message': 'Invalid captcha'
        }
        # Refused after the 5 s timeout, while the verifier still holds its answer; the
        # bound only tells a timeout from a hang.
        assert 4.5 < time.monotonic() - started < 30
    finally:
        verifier.release.set()
    down = make_testapp(
        HCAPTCHA_SECRET='s', HCAPTCHA_VERIFY_URL='http://127.0.0.1:9/siteverify'
    )
    assert down.post_json('/api/v1/accounts', body, status=422).json == {
        'message': 'Invalid captcha'
    }
    assert counts(conn, body['email']) == (0, 0)


def test_twenty_concurrent_signups_with_one_address_make_one_account(
    gunicorn_url, conn
):
    email = unique_email('race')
    name = f'Race {email}'
    results = [None] * 20

    def sign_up(index):
        body = signup_body(
            email=email.upper() if index % 2 else email, account_name=name
        )
        results[index] = http('POST', gunicorn_url + '/api/v1/accounts', json_body=body)

    threads = [threading.Thread(target=sign_up, args=(index,)) for index in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(answer.status for answer in results)
    assert statuses == [200] + [403] * 19
    for answer in results:
        if answer.status == 403:
            assert answer.json == {
                'message': f'You have already signed up for an account with {email}'
            }
    assert counts(conn, email) == (1, 1)
    accounts = conn.execute(
        'SELECT count(*) AS n FROM accounts WHERE name = %s', (name,)
    ).fetchone()['n']
    assert accounts == 1


def test_addresses_are_stored_lower_cased_and_must_be_ascii(testapp):
    email = f'Emile.O-Brien+{time.time_ns()}@EXAMPLE.COM'
    resp = testapp.post_json('/api/v1/accounts', signup_body(email=email), status=200)
    assert resp.json['data']['email'] == resp.headers['uid'] == email.lower()
    # The address comes back in the uid header, which cannot carry other characters.
    resp = testapp.post_json(
        '/api/v1/accounts',
        signup_body(email=f'émile-{time.time_ns()}@example.com'),
        status=403,
    )
    assert resp.json == {'message': 'You have entered an invalid email'}
