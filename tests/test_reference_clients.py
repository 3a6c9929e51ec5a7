"""What the reference system's clients need (SPEC 11): Rails routing, /api, the public
resend, reset_access_token, form bodies and CORS. The clients themselves run in
test_chatwoot_clients.py."""

import re
import statistics
import time
import urllib.parse

import psycopg_pool
import pytest

import app as app_module
from tests.support.sso import SETTINGS_ROUTE
from tests.support.users import PASSWORD
from tests.support.users import unique_email
from tests.support.users import unique_ip
from tests.test_signup import FakeVerifier
import tokens

NOT_FOUND = {'error': 'Resource could not be found'}
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
FORM = 'application/x-www-form-urlencoded'


def form(pairs):
    return urllib.parse.urlencode(pairs)


# Rails routing: a .json suffix and repeated slashes, in one place for every route.


def concrete(template, account_id, ids=None):
    """The path of ``template`` with the account id, and other ids from ``ids`` by
    name."""
    path = template.replace('{account_id:id}', str(account_id))
    return re.sub(
        r'\{(\w+):[^}]*\}', lambda match: str((ids or {})[match.group(1)]), path
    )


def route_table(config, pool, queries):
    from validators import load_validators

    return app_module.routes(pool, queries, config, load_validators())


def test_every_route_answers_the_same_with_a_json_suffix(
    testapp, config, pool, queries, admin, make_user, make_account
):
    """Each declared method of each route, plain and with .json, from two like
    callers."""
    checked = 0
    for template, resource in route_table(config, pool, queries):
        if template.endswith('.json') or getattr(resource, 'undocumented', False):
            # /api/v1/openapi.json: its name has the suffix already; the HTML docs page
            continue
        for method in sorted(getattr(resource, 'access', {})):
            answers = []
            for suffix in ('', '.json'):
                account_id = make_account()
                caller = make_user(account_id=account_id, role='administrator')
                with pool.connection() as conn:
                    session = conn.execute(
                        'SELECT id FROM user_tokens WHERE client = %s', (caller.client,)
                    ).fetchone()['id']
                    # A personal access token of the caller's (SPEC 17).
                    token = conn.execute(
                        'INSERT INTO personal_access_tokens (user_id, name,'
                        " token_digest, scopes, expires_at) VALUES (%s, 'suffix', %s,"
                        " '{profile:read}', now() + interval '1 day') RETURNING id",
                        (caller.id, tokens.digest(tokens.new_personal_token())),
                    ).fetchone()['id']
                # The caller's own session (422: not with this endpoint), user id and
                # token.
                path = (
                    concrete(
                        template,
                        account_id,
                        {
                            'session_id': session,
                            'user_id': caller.id,
                            'token_id': token,
                        },
                    )
                    + suffix
                )
                answer = testapp.request(
                    path,
                    method=method,
                    headers=caller.headers,
                    body=b'{}',
                    content_type='application/json',
                    expect_errors=True,
                )
                # A redirect (SPEC 19) has no body: its Location is compared.
                body = (
                    answer.json
                    if answer.content_type == 'application/json'
                    else answer.headers.get('Location')
                )
                answers.append(
                    (
                        answer.status_int,
                        sorted(body) if isinstance(body, dict) else type(body).__name__,
                    )
                )
            assert answers[0] == answers[1], f'{method} {template}: {answers}'
            # An account with no single sign-on settings: its GET and DELETE are the
            # 404 of SPEC 19 (its PUT, a 422 for this body, shows the route matched).
            assert answers[0][0] != 404 or template == SETTINGS_ROUTE, (
                f'{method} {template}'
            )
            checked += 1
    assert checked >= 20


def test_sign_up_and_sign_in_with_the_json_suffix(testapp):
    email = unique_email()
    body = {
        'account_name': 'Suffix',
        'email': email,
        'user_full_name': 'Sue',
        'password': PASSWORD,
    }
    answer = testapp.post_json('/api/v1/accounts.json', body, status=200)
    assert answer.json['data']['email'] == email and answer.headers['access-token']
    assert (
        testapp.post_json(
            '/auth/sign_in.json',
            {'email': email, 'password': 'wrong password'},
            status=401,
        ).json['success']
        is False
    )


@pytest.mark.parametrize('suffix', ['.xml', '.html', '.jsonx', '.JSON', '.json.xml'])
def test_other_suffixes_are_unknown_routes(testapp, admin, suffix):
    assert (
        testapp.get('/api/v1/profile' + suffix, headers=admin.headers, status=404).json
        == NOT_FOUND
    )
    assert (
        testapp.get(
            f'/api/v1/accounts/{admin.account_id}{suffix}',
            headers=admin.headers,
            status=404,
        ).json
        == NOT_FOUND
    )


def test_repeated_slashes_are_one(testapp, admin):
    # The dashboard's AccountAPI.update('', data) builds /api/v1/accounts/<id>//.
    answer = testapp.patch_json(
        f'/api/v1/accounts/{admin.account_id}//',
        {'name': 'Squeezed'},
        headers=admin.headers,
        status=200,
    )
    assert answer.json['name'] == 'Squeezed'
    assert testapp.get(
        f'//api///v1/accounts/{admin.account_id}/cache_keys/',
        headers=admin.headers,
        status=200,
    ).json['cache_keys']
    assert (
        testapp.get('/api/v1//profile.json', headers=admin.headers, status=200).json[
            'id'
        ]
        == admin.id
    )


def test_unknown_routes_stay_the_json_404(testapp, admin):
    for path in (
        '/api/v1/nothing',
        '/api/v1/nothing.json',
        '/api/v1/profile/nothing',
        '/.json',
    ):
        assert testapp.get(path, headers=admin.headers, status=404).json == NOT_FOUND


def test_the_openapi_document_keeps_its_name(testapp):
    assert (
        testapp.get('/api/v1/openapi.json', status=200)
        .json['openapi']
        .startswith('3.1')
    )


# GET /api


def test_api_reports_version_time_and_the_database(testapp):
    body = testapp.get('/api', status=200).json
    assert set(body) == {'version', 'timestamp', 'queue_services', 'data_services'}
    assert body['data_services'] == 'ok' and body['queue_services'] == 'ok'
    assert (
        body['version'] == testapp.get('/api/v1/openapi.json').json['info']['version']
    )
    assert body['timestamp'].endswith('Z')
    assert testapp.get('/api.json', status=200).json['data_services'] == 'ok'


def test_api_with_the_database_down_still_answers_200(config):
    import webtest

    # A pool to a port where nothing listens, whose own checkout timeout is a minute:
    # /api must give up after its one second, not the pool's minute. The bound below is
    # far from both, so a loaded machine (slow to build the app, timed apart) cannot
    # fail it, and a responder that waited for the pool cannot pass.
    dead = psycopg_pool.ConnectionPool(
        'postgresql://postgres@127.0.0.1:9/none',
        min_size=0,
        max_size=1,
        timeout=60,
        open=True,
    )
    try:
        testapp = webtest.TestApp(app_module.create_app(config, dead))
        started = time.monotonic()
        body = testapp.get('/api', status=200).json
        assert body['data_services'] == 'error' and body['queue_services'] == 'ok'
        assert time.monotonic() - started < 30
    finally:
        dead.close()


# POST /resend_confirmation (no credentials)


def confirmation_mails(conn, address):
    """Confirmation mails that will really go out (not the 'suppressed' rows of equal
    work)."""
    return conn.execute(
        'SELECT count(*) AS n FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'confirmation' AND status <> 'suppressed'",
        (address,),
    ).fetchone()['n']


def test_public_resend_answers_alike_and_mails_only_unconfirmed_users(
    testapp, make_user, conn
):
    unconfirmed, confirmed = make_user(confirmed=False), make_user()
    unknown = unique_email()
    answers = [
        testapp.post_json('/resend_confirmation', {'email': address}, status=200)
        for address in (unconfirmed.email.upper(), confirmed.email, unknown)
    ]
    assert [answer.json for answer in answers] == [{}, {}, {}]
    assert {answer.headers['Content-Length'] for answer in answers} == {'2'}
    assert confirmation_mails(conn, unconfirmed.email) == 1
    assert confirmation_mails(conn, confirmed.email) == 0
    assert confirmation_mails(conn, unknown) == 0
    # An unknown address costs the same statements: a row that is never sent, with no
    # link.
    suppressed = conn.execute(
        'SELECT status, text_body, html_body FROM mail_outbox WHERE to_address = %s',
        (unknown,),
    ).fetchall()
    assert suppressed == [
        {'status': 'suppressed', 'text_body': None, 'html_body': None}
    ]
    for body in ({}, {'email': None}, {'email': ['x']}, {'email': ''}):
        assert testapp.post_json('/resend_confirmation', body, status=200).json == {}


def test_public_resend_goes_to_a_pending_address(testapp, make_user, conn):
    user = make_user()
    new_address = unique_email('pending')
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': new_address}},
        headers=user.headers,
        status=200,
    )
    before = confirmation_mails(conn, new_address)
    testapp.post_json('/resend_confirmation', {'email': user.email}, status=200)
    assert confirmation_mails(conn, new_address) == before + 1


def test_public_resend_timing_is_reported(testapp, make_user):
    """Reports (does not assert) the median time of known and unknown addresses."""
    user = make_user(confirmed=False)
    times = {'known': [], 'unknown': []}
    for _ in range(30):
        for kind, address in (('known', user.email), ('unknown', unique_email())):
            started = time.perf_counter()
            testapp.post_json('/resend_confirmation', {'email': address}, status=200)
            times[kind].append(time.perf_counter() - started)
    known, unknown = (
        statistics.median(times[kind]) * 1000 for kind in ('known', 'unknown')
    )
    print(
        f'\nresend_confirmation median: known {known:.2f} ms, '
        f'unknown {unknown:.2f} ms, difference {known - unknown:.2f} ms'
    )


def test_public_resend_checks_the_captcha_when_configured(
    make_testapp, make_user, conn
):
    verifier = FakeVerifier()
    try:
        app = make_testapp(HCAPTCHA_SECRET='0xsecret', HCAPTCHA_VERIFY_URL=verifier.url)
        user = make_user(confirmed=False)
        assert app.post_json(
            '/resend_confirmation', {'email': user.email}, status=422
        ).json == {'message': 'Invalid captcha'}
        verifier.mode = 'reject'
        app.post_json(
            '/resend_confirmation',
            {'email': user.email, 'h_captcha_client_response': 'bad'},
            status=422,
        )
        assert confirmation_mails(conn, user.email) == 0
        verifier.mode = 'accept'
        app.post_json(
            '/resend_confirmation',
            {'email': user.email, 'h_captcha_client_response': 'ok'},
            status=200,
        )
        assert confirmation_mails(conn, user.email) == 1
    finally:
        verifier.server.shutdown()


def test_public_resend_allows_five_per_ip(make_testapp, make_user):
    limited = make_testapp(RATE_LIMITS='on')
    ip, user = unique_ip(), make_user(confirmed=False)
    for _ in range(5):
        limited.post_json(
            '/resend_confirmation',
            {'email': user.email},
            headers={'X-Real-IP': ip},
            status=200,
        )
    assert limited.post_json(
        '/resend_confirmation',
        {'email': unique_email()},
        headers={'X-Real-IP': ip},
        status=429,
    ).json == {'message': 'Retry later'}


# POST /api/v1/profile/reset_access_token


def test_reset_access_token_rotates_it(testapp, make_user, make_account):
    user = make_user(account_id=make_account())
    old = user.access_token
    assert testapp.get('/api/v1/profile', headers={'api_access_token': old}, status=200)
    answer = testapp.post(
        '/api/v1/profile/reset_access_token', headers=user.headers, status=200
    )
    new = answer.json['access_token']
    assert new != old and len(new) >= 32
    assert answer.headers['access-token'] == user.token  # the caller's session stays
    assert testapp.get('/api/v1/profile', headers={'api_access_token': old}, status=401)
    assert (
        testapp.get(
            '/api/v1/profile', headers={'api_access_token': new}, status=200
        ).json['id']
        == user.id
    )
    assert (
        testapp.get('/api/v1/profile', headers=user.headers, status=200).json[
            'access_token'
        ]
        == new
    )


def test_reset_access_token_is_a_credential_change(
    testapp, make_user, pool, queries, config, conn
):
    from services import sessions

    user = make_user()
    with pool.connection() as pooled, pooled.transaction():
        other_token, other_client, _ = sessions.issue(pooled, queries, config, user.id)
    pubsub = conn.execute(
        'SELECT pubsub_token FROM users WHERE id = %s', (user.id,)
    ).fetchone()['pubsub_token']
    testapp.post('/api/v1/profile/reset_access_token', headers=user.headers, status=200)
    other = {'access-token': other_token, 'client': other_client, 'uid': user.email}
    assert testapp.get('/api/v1/profile', headers=other, status=401)
    # SPEC 3.3: reset_access_token rotates the access token only, not pubsub_token.
    after = conn.execute(
        'SELECT pubsub_token FROM users WHERE id = %s', (user.id,)
    ).fetchone()['pubsub_token']
    assert after == pubsub


def test_reset_access_token_refuses_the_access_token_itself(testapp, make_user, conn):
    user = make_user()
    answer = testapp.post(
        '/api/v1/profile/reset_access_token',
        headers={'api_access_token': user.access_token},
        status=403,
    )
    assert answer.json == NEEDS_SESSION
    stored = conn.execute(
        'SELECT access_token FROM users WHERE id = %s', (user.id,)
    ).fetchone()['access_token']
    assert stored == user.access_token
    assert testapp.post('/api/v1/profile/reset_access_token', status=401).json['errors']


def test_reset_access_token_needs_recent_authentication(testapp, make_user, conn):
    """SPEC 3.4, minting a credential: a session whose last password or second-factor
    check is older than REAUTH_WINDOW_MINUTES (a stolen one, kept alive by use) gets no
    new access token; the owner signing in again does."""
    user = make_user()
    conn.execute(
        "UPDATE user_tokens SET authenticated_at = now() - interval '16 minutes',"
        ' last_used_at = now() WHERE user_id = %s',
        (user.id,),
    )
    answer = testapp.post(
        '/api/v1/profile/reset_access_token', headers=user.headers, status=403
    )
    assert answer.json == {
        'error': 'Sign in again to change this',
        'error_code': 'reauthentication_required',
    }
    stored = conn.execute(
        'SELECT access_token FROM users WHERE id = %s', (user.id,)
    ).fetchone()['access_token']
    assert stored == user.access_token
    assert not conn.execute(
        'SELECT 1 FROM audit_events WHERE subject_id = %s'
        " AND event = 'access_token_reset'",
        (user.id,),
    ).fetchone()
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}
    ).headers
    fresh = {name: signed_in[name] for name in ('access-token', 'client', 'uid')}
    renewed = testapp.post('/api/v1/profile/reset_access_token', headers=fresh).json
    assert renewed['access_token'] != user.access_token


# The user and account JSON fields the clients read.


def test_user_and_account_json_carry_the_client_fields(testapp, admin, conn):
    user = testapp.get('/api/v1/profile', headers=admin.headers).json
    assert (
        user['type'] is None
        and user['inviter_id'] is None
        and user['mfa_enabled'] is False
    )
    assert user['created_at'].endswith('Z')
    stored = conn.execute(
        'SELECT pubsub_token FROM users WHERE id = %s', (admin.id,)
    ).fetchone()
    assert (
        user['pubsub_token'] == stored['pubsub_token']
        and len(user['pubsub_token']) >= 32
    )
    account = testapp.get(
        f'/api/v1/accounts/{admin.account_id}', headers=admin.headers
    ).json
    assert account['features'] == {} and account['latest_chatwoot_version'] is None


def test_pubsub_tokens_differ_between_users(make_user, conn):
    first, second = make_user(), make_user()
    rows = conn.execute(
        'SELECT pubsub_token FROM users WHERE id = ANY(%s)', ([first.id, second.id],)
    ).fetchall()
    assert len({row['pubsub_token'] for row in rows}) == 2


# Form bodies (application/x-www-form-urlencoded) wherever JSON is accepted.


def test_sign_up_and_sign_in_as_forms(testapp, conn):
    email = unique_email()
    answer = testapp.post(
        '/api/v1/accounts',
        form(
            {
                'account_name': 'Form Co',
                'email': email,
                'user_full_name': 'Fay',
                'password': PASSWORD,
                'locale': 'fr',
            }
        ),
        content_type=FORM,
        status=200,
    )
    assert answer.json['data']['accounts'][0]['locale'] == 'fr'
    conn.execute('UPDATE users SET confirmed_at = now() WHERE email = %s', (email,))
    answer = testapp.post(
        '/auth/sign_in',
        form({'email': email, 'password': PASSWORD}),
        content_type=FORM,
        status=200,
    )
    assert answer.json['data']['email'] == email


def test_profile_update_as_a_form_with_nested_keys(testapp, admin):
    body = form(
        {
            'profile[name]': 'Ada Form',
            'profile[ui_settings][theme]': 'dark',
            'profile[ui_settings][sidebar]': 'open',
            'profile[display_name]': '',
            'profile[role]': 'x',
        }
    )
    answer = testapp.put(
        '/api/v1/profile', body, headers=admin.headers, content_type=FORM, status=200
    )
    assert answer.json['name'] == 'Ada Form'
    assert answer.json['display_name'] == ''
    assert answer.json['ui_settings'] == {'theme': 'dark', 'sidebar': 'open'}
    assert answer.json['role'] == 'administrator'


@pytest.mark.parametrize(
    'value, stored', [('false', False), ('0', False), ('true', True), ('1', True)]
)
def test_booleans_are_coerced_as_rails_does(testapp, admin, value, stored):
    body = form(
        {'profile[auto_offline]': value, 'profile[account_id]': str(admin.account_id)}
    )
    answer = testapp.post(
        '/api/v1/profile/auto_offline',
        body,
        headers=admin.headers,
        content_type=FORM,
        status=200,
    )
    assert answer.json['accounts'][0]['auto_offline'] is stored


@pytest.mark.parametrize(
    'pairs, message',
    [
        ({'profile[auto_offline]': 'maybe'}, 'Auto offline must be true or false'),
        ({'profile[auto_offline]': ''}, 'Auto offline must be true or false'),
        (
            {'profile[auto_offline]': 'true', 'profile[account_id]': 'abc'},
            'Account id must be an integer',
        ),
        (
            {'profile[auto_offline]': 'true', 'profile[account_id]': '1.5'},
            'Account id must be an integer',
        ),
    ],
)
def test_values_that_cannot_be_coerced_are_the_usual_422(
    testapp, admin, pairs, message
):
    pairs = {'profile[account_id]': str(admin.account_id), **pairs}
    answer = testapp.post(
        '/api/v1/profile/auto_offline',
        form(pairs),
        headers=admin.headers,
        content_type=FORM,
        status=422,
    )
    assert message in answer.json['message']


def test_availability_and_active_account_as_forms(testapp, admin):
    body = form(
        {'profile[availability]': 'busy', 'profile[account_id]': str(admin.account_id)}
    )
    answer = testapp.post(
        '/api/v1/profile/availability',
        body,
        headers=admin.headers,
        content_type=FORM,
        status=200,
    )
    assert answer.json['accounts'][0]['availability'] == 'busy'
    body = form({'profile[account_id]': str(admin.account_id)})
    assert (
        testapp.put(
            '/api/v1/profile/set_active_account',
            body,
            headers=admin.headers,
            content_type=FORM,
            status=200,
        ).json
        == {}
    )


def test_account_update_as_a_form_with_integers_and_nulls(testapp, admin):
    url = f'/api/v1/accounts/{admin.account_id}'
    answer = testapp.patch(
        url,
        form({'name': 'Formed', 'auto_resolve_duration': '30'}),
        headers=admin.headers,
        content_type=FORM,
        status=200,
    )
    assert (
        answer.json['name'] == 'Formed' and answer.json['auto_resolve_duration'] == 30
    )
    answer = testapp.patch(
        url,
        form({'auto_resolve_duration': ''}),
        headers=admin.headers,
        content_type=FORM,
        status=200,
    )
    assert answer.json['auto_resolve_duration'] is None
    answer = testapp.patch(
        url,
        form({'auto_resolve_duration': '1000', 'locale': 'xx'}),
        headers=admin.headers,
        content_type=FORM,
        status=422,
    )
    assert sorted(answer.json['attributes']) == ['auto_resolve_duration', 'locale']


def test_confirmation_reset_and_resend_as_forms(testapp, make_user):
    for path, method, field in (
        ('/auth/confirmation', 'POST', 'confirmation_token'),
        ('/auth/password', 'PUT', 'reset_password_token'),
    ):
        body = form(
            {
                field: 'not-a-token',
                'password': 'brand new pass',
                'password_confirmation': 'brand new pass',
            }
        )
        answer = testapp.request(
            path,
            method=method,
            body=body.encode(),
            content_type=FORM,
            expect_errors=True,
        )
        assert (answer.status_int, answer.json) == (422, {'message': 'Invalid token'})
    user = make_user(confirmed=False)
    assert testapp.post(
        '/auth/password', form({'email': user.email}), content_type=FORM, status=200
    ).json['message']
    assert (
        testapp.post(
            '/resend_confirmation',
            form({'email': user.email}),
            content_type=FORM,
            status=200,
        ).json
        == {}
    )


@pytest.mark.parametrize(
    'body',
    [
        b'a=1&a[b]=2',
        b'profile[name]=x&profile=y',
        b'a[][b]=1',
        b'%ff=1',
        b'profile[name]=%00',
    ],
)
def test_malformed_forms_are_a_400_and_change_nothing(testapp, admin, body):
    before = testapp.get('/api/v1/profile', headers=admin.headers).json
    answer = testapp.put(
        '/api/v1/profile', body, headers=admin.headers, content_type=FORM, status=400
    )
    assert answer.json['message'].startswith('Malformed form body')
    assert testapp.get('/api/v1/profile', headers=admin.headers).json == before


def test_a_form_over_one_mebibyte_is_a_413(testapp, admin):
    body = b'profile[name]=' + b'x' * (1024 * 1024)
    answer = testapp.put(
        '/api/v1/profile', body, headers=admin.headers, content_type=FORM, status=413
    )
    assert answer.json == {
        'message': 'Request body is too large (maximum is 1048576 bytes)'
    }


def test_field_rules_are_the_same_for_forms(testapp, admin):
    answer = testapp.put(
        '/api/v1/profile',
        form({'profile[name]': 'x' * 256}),
        headers=admin.headers,
        content_type=FORM,
        status=422,
    )
    assert answer.json == {
        'message': 'Name is too long (maximum is 255 characters)',
        'attributes': ['name'],
    }


# CORS


DASHBOARD = 'https://dashboard.example.com'


@pytest.fixture
def cors_app(make_testapp):
    return make_testapp(CORS_ALLOWED_ORIGINS=f'{DASHBOARD}, https://other.example.com')


def test_preflight_is_answered_before_authentication(cors_app):
    answer = cors_app.options(
        '/api/v1/profile',
        headers={
            'Origin': DASHBOARD,
            'Access-Control-Request-Method': 'PUT',
            'Access-Control-Request-Headers': 'access-token,client,uid,content-type',
        },
        status=204,
    )
    assert answer.headers['Access-Control-Allow-Origin'] == DASHBOARD
    assert 'PUT' in answer.headers['Access-Control-Allow-Methods']
    allowed = {
        name.strip()
        for name in answer.headers['Access-Control-Allow-Headers'].split(',')
    }
    assert {
        'access-token',
        'client',
        'uid',
        'api_access_token',
        'content-type',
    } <= allowed
    exposed = {
        name.strip()
        for name in answer.headers['Access-Control-Expose-Headers'].split(',')
    }
    assert exposed == {'access-token', 'token-type', 'client', 'expiry', 'uid'}
    assert 'Origin' in answer.headers['Vary']
    assert answer.body == b''


def test_allowed_origin_gets_the_headers_on_real_answers(cors_app, admin):
    for answer in (
        cors_app.get(
            '/api/v1/profile',
            headers={**admin.headers, 'Origin': DASHBOARD},
            status=200,
        ),
        cors_app.get('/api/v1/profile', headers={'Origin': DASHBOARD}, status=401),
    ):
        assert answer.headers['Access-Control-Allow-Origin'] == DASHBOARD
        assert 'access-token' in answer.headers['Access-Control-Expose-Headers']
        assert 'Origin' in answer.headers['Vary']


def test_an_origin_not_listed_gets_no_cors_headers(cors_app, admin):
    for answer in (
        cors_app.get(
            '/api/v1/profile',
            headers={**admin.headers, 'Origin': 'https://evil.example.com'},
        ),
        cors_app.options(
            '/api/v1/profile',
            headers={
                'Origin': 'https://evil.example.com',
                'Access-Control-Request-Method': 'PUT',
            },
        ),
    ):
        assert not [
            name
            for name in answer.headers
            if name.lower().startswith('access-control-')
        ]


def test_cors_is_off_by_default(testapp, admin):
    answer = testapp.options(
        '/api/v1/profile',
        headers={'Origin': DASHBOARD, 'Access-Control-Request-Method': 'PUT'},
    )
    assert answer.status_int == 200  # Falcon's own OPTIONS answer, no CORS
    assert not [
        name for name in answer.headers if name.lower().startswith('access-control-')
    ]
    answer = testapp.get(
        '/api/v1/profile', headers={**admin.headers, 'Origin': DASHBOARD}
    )
    assert 'Access-Control-Allow-Origin' not in answer.headers


@pytest.mark.parametrize(
    'value', ['*', 'dashboard.example.com', 'https://dash.example.com/app', 'ftp://x.y']
)
def test_bad_origins_stop_the_start(value):
    import config as config_module

    with pytest.raises(config_module.ConfigError, match='CORS_ALLOWED_ORIGINS'):
        config_module.load(
            {'DATABASE_URL': 'postgresql://x', 'CORS_ALLOWED_ORIGINS': value}
        )
