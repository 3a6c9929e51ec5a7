"""Form-encoded bodies from other sites are refused (SPEC 3.4): a browser posts an
HTML form anywhere without a preflight, so its Origin must be the service's own or an
allowed one."""

import pytest

REFUSED = {'error': 'Cross-site form refused'}
FORM = 'application/x-www-form-urlencoded'


def sign_in_form(app, user, status, **headers):
    body = f'email={user.email}&password={user.password.replace(" ", "+")}'
    return app.post(
        '/auth/sign_in', body, headers={'Content-Type': FORM, **headers}, status=status
    )


@pytest.mark.parametrize(
    'origin',
    [
        'https://evil.example',
        'null',
        'http://frontdesk.test.evil.example',
        'https://frontdesk.test',
        # Not URLs at all (urlsplit raises on them): refused, never a 500.
        'http://[',
        'http://[::1',
        'http://[frontdesk.test]',
    ],
)
def test_a_form_from_another_origin_is_refused(testapp, make_user, conn, origin):
    user = make_user()
    answer = sign_in_form(testapp, user, 403, Origin=origin)
    assert answer.json == REFUSED
    assert 'access-token' not in answer.headers
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
        ).fetchone()['n']
        == 1
    )


def test_a_form_from_the_frontend_or_without_origin_is_accepted(testapp, make_user):
    user = make_user()
    sign_in_form(
        testapp, user, 200, Origin='http://frontdesk.test'
    )  # FRONTEND_URL of the tests
    sign_in_form(testapp, user, 200, Origin='HTTP://FRONTDESK.TEST:80')
    sign_in_form(testapp, user, 200)  # curl sends no Origin
    # A page served by the API's own host (WebTest's requests go to localhost:80).
    sign_in_form(testapp, user, 200, Origin='http://localhost:80')


def test_an_allowed_cors_origin_may_post_forms(make_testapp, make_user):
    app = make_testapp(CORS_ALLOWED_ORIGINS='https://dash.example')
    user = make_user()
    sign_in_form(app, user, 200, Origin='https://dash.example')
    assert sign_in_form(app, user, 403, Origin='https://other.example').json == REFUSED


def test_a_multipart_form_from_another_origin_is_refused(testapp, make_user):
    user = make_user()
    answer = testapp.put(
        '/api/v1/profile',
        {'profile[name]': 'Mallory'},
        content_type='multipart/form-data',
        headers={**user.headers, 'Origin': 'https://evil.example'},
        status=403,
    )
    assert answer.json == REFUSED
    assert (
        testapp.get('/api/v1/profile', headers=user.headers).json['name'] != 'Mallory'
    )


def test_json_from_another_origin_is_left_to_cors(testapp, make_user):
    user = make_user()
    testapp.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': user.password},
        headers={'Origin': 'https://evil.example'},
        status=200,
    )
