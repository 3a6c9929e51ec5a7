"""/auth/sign_in, /auth/sign_out, /auth/validate_token and the token rules of SPEC 3."""

import time

from tests.support.users import PASSWORD

INVALID_LOGIN = {
    'success': False,
    'errors': ['Invalid login credentials. Please try again.'],
}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}


def sign_in(testapp, email, password, status=200):
    return testapp.post_json(
        '/auth/sign_in', {'email': email, 'password': password}, status=status
    )


def headers_of(resp):
    return {name: resp.headers[name] for name in ('access-token', 'client', 'uid')}


def test_sign_in_issues_a_working_token(testapp, admin, conn):
    resp = sign_in(testapp, f'  {admin.email.upper()} ', PASSWORD)
    assert resp.json['data']['id'] == admin.id
    assert resp.json['data']['accounts'][0]['permissions'] == ['administrator']
    assert resp.headers['token-type'] == 'Bearer'
    assert resp.headers['uid'] == admin.email
    assert len(resp.headers['access-token']) >= 43
    stored = conn.execute(
        'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (admin.id,)
    ).fetchone()['n']
    assert stored == 2
    profile = testapp.get('/api/v1/profile', headers=headers_of(resp), status=200)
    assert profile.json['id'] == admin.id
    # Headers do not rotate: the same token comes back.
    assert profile.headers['access-token'] == resp.headers['access-token']
    assert profile.headers['expiry'] == resp.headers['expiry']


def test_wrong_password_and_unknown_email_get_the_same_401(testapp, make_user):
    user = make_user()
    assert (
        sign_in(testapp, user.email, 'wrong password', status=401).json == INVALID_LOGIN
    )
    assert (
        sign_in(testapp, 'nobody-' + user.email, PASSWORD, status=401).json
        == INVALID_LOGIN
    )
    assert sign_in(testapp, user.email, 'x' * 100, status=401).json == INVALID_LOGIN
    assert testapp.post_json('/auth/sign_in', {}, status=401).json == INVALID_LOGIN


def test_special_characters_in_passwords_work(testapp, make_user):
    user = make_user(password='.><?" \'\\ 日本 🙂')
    sign_in(testapp, user.email, user.password)


def test_unconfirmed_user_is_told_to_confirm(testapp, make_user):
    user = make_user(confirmed=False)
    body = sign_in(testapp, user.email, PASSWORD, status=401).json
    assert body['success'] is False
    assert body['error_code'] == 'user_not_confirmed'
    assert user.email in body['errors'][0]


def test_wrong_types_are_422(testapp):
    resp = testapp.post_json(
        '/auth/sign_in', {'email': ['a'], 'password': 1}, status=422
    )
    assert resp.json == {
        'message': 'Email must be a string, Password must be a string',
        'attributes': ['email', 'password'],
    }


def test_sign_out_revokes_only_that_token(testapp, make_user, conn):
    user = make_user()
    other = headers_of(sign_in(testapp, user.email, PASSWORD))
    resp = testapp.delete('/auth/sign_out', headers=user.headers, status=200)
    assert resp.json == {'success': True}
    assert 'access-token' not in resp.headers
    assert (
        testapp.get('/api/v1/profile', headers=user.headers, status=401).json
        == UNAUTHENTICATED
    )
    testapp.get('/api/v1/profile', headers=other, status=200)
    assert testapp.delete('/auth/sign_out', status=401).json == UNAUTHENTICATED


def test_validate_token(testapp, make_user):
    user = make_user()
    resp = testapp.get('/auth/validate_token', headers=user.headers, status=200)
    # SPEC 3.1: wrapped in payload, where the reference dashboard reads payload.data.
    assert set(resp.json) == {'payload'}
    assert resp.json['payload']['success'] is True
    assert resp.json['payload']['data']['email'] == user.email
    assert (
        resp.json['payload']['data']
        == testapp.get('/api/v1/profile', headers=user.headers).json
    )
    assert resp.headers['access-token'] == user.token
    invalid = {'success': False, 'errors': ['Invalid login credentials']}
    assert testapp.get('/auth/validate_token', status=401).json == invalid
    assert (
        testapp.get(
            '/auth/validate_token',
            headers={**user.headers, 'access-token': 'x'},
            status=401,
        ).json
        == invalid
    )


def test_every_bad_credential_is_the_same_401(testapp, make_user, conn):
    user, other = make_user(), make_user()
    conn.execute(
        "UPDATE user_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE user_id = %s',
        (other.id,),
    )
    variants = [
        {},
        {'access-token': user.token},
        {'access-token': user.token, 'client': user.client},
        {
            **user.headers,
            'access-token': user.token[:-1] + ('A' if user.token[-1] != 'A' else 'B'),
        },
        {**user.headers, 'client': other.client},
        {**user.headers, 'uid': other.email},
        other.headers,
        {'api_access_token': 'nope'},
        {'api_access_token': ''},
        {**user.headers, 'uid': 'é' * 300},
    ]
    for headers in variants:
        assert (
            testapp.get('/api/v1/profile', headers=headers, status=401).json
            == UNAUTHENTICATED
        ), headers


def test_credentials_in_the_query_string_or_body_are_ignored(testapp, make_user):
    user = make_user()
    query = '&'.join(
        f'{name}={value}'
        for name, value in {
            **user.headers,
            'api_access_token': user.access_token,
        }.items()
    )
    testapp.get(f'/api/v1/profile?{query}', status=401)
    testapp.put_json('/api/v1/accounts/1', {**user.headers, 'name': 'x'}, status=401)


def test_uid_is_matched_case_insensitively(testapp, make_user):
    user = make_user()
    testapp.get(
        '/api/v1/profile',
        headers={**user.headers, 'uid': user.email.upper()},
        status=200,
    )


def test_the_oldest_tokens_beyond_the_maximum_are_dropped(
    make_testapp, make_user, conn
):
    app = make_testapp(MAX_TOKENS_PER_USER='3')
    user = make_user()
    issued = [headers_of(sign_in(app, user.email, PASSWORD)) for _ in range(4)]
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
        ).fetchone()['n']
        == 3
    )
    app.get('/api/v1/profile', headers=user.headers, status=401)
    app.get('/api/v1/profile', headers=issued[0], status=401)
    for headers in issued[1:]:
        app.get('/api/v1/profile', headers=headers, status=200)


def test_token_lifespan_is_configurable(make_testapp, make_user):
    user = make_user()
    resp = sign_in(make_testapp(TOKEN_LIFESPAN_DAYS='1'), user.email, PASSWORD)
    assert abs(int(resp.headers['expiry']) - (time.time() + 86400)) < 60
