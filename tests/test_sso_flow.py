"""Single sign-on with OpenID Connect (SPEC 19): the start, the callback and the sign-in
with its sso_auth_token, against a forged provider (tests/support/fake_idp.py) that
answers what each test tells it to.

A test starts a flow as a browser would (GET /auth/sso), reads the state and nonce from
the redirect to the provider, has the provider hand out an ID token with that nonce,
and comes back to the callback with the fd_sso cookie of the start. Every refusal of
the callback ends in the login page's error and an audit event naming why, and no
token.
"""

import dataclasses
import http.client
import threading
import time
import urllib.parse

import pytest
import webtest

import app as app_module
import config as config_module
from services import passwords
from services import sessions
from services import sso
from services import users
from tests import contract
from tests.smtp_server import deliver
from tests.support.fake_idp import fake_idp
from tests.support.servers import free_port
from tests.support.servers import http as real_http
from tests.support.servers import run_gunicorn
from tests.support.sso import insert_provider
from tests.support.sso import unique_domain
from tests.support.sso_browser import SsoBrowser
from tests.support.users import PASSWORD
from tests.support.users import unique_ip
from tests.support.users import User
from tests.test_confirmations import confirm
from tests.test_confirmations import queued_token
from tests.test_confirmations import reset
from tests.test_mfa import enable
from tests.test_mfa import TOKEN_HEADERS

FRONTEND = 'http://frontdesk.test'
FAILED = f'{FRONTEND}/app/login?error=saml-authentication-failed'
NOT_ENABLED = f'{FRONTEND}/app/login?error=saml-not-enabled'
NO_ACCOUNT = f'{FRONTEND}/app/login?error=no-account-found'
CLIENT_ID = 'frontdesk-client'
CLIENT_SECRET = 'a secret: with/odd chars'
INVALID_LOGIN = {
    'success': False,
    'errors': ['Invalid login credentials. Please try again.'],
}
BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'
SSO_ENV = {'OIDC_ALLOW_PRIVATE_ISSUERS': 'true'}


@pytest.fixture(scope='module')
def sso_config(base_env):
    return config_module.load({**base_env, **SSO_ENV})


@pytest.fixture(scope='module')
def app(sso_config, pool):
    return webtest.TestApp(app_module.create_app(sso_config, pool))


@pytest.fixture
def idp():
    with fake_idp() as provider:
        yield provider


@dataclasses.dataclass
class Setup:
    account_id: int
    domain: str
    idp: object

    def address(self, prefix='someone'):
        return f'{prefix}-{time.monotonic_ns()}@{self.domain}'


@pytest.fixture
def make_sso(conn, sso_config, make_account, idp):
    """An account whose provider is ``idp`` for a domain of its own."""

    def make(**options):
        account_id = make_account()
        domain = unique_domain()
        insert_provider(
            conn,
            sso_config,
            account_id,
            idp.issuer,
            CLIENT_ID,
            CLIENT_SECRET,
            [domain],
            **options,
        )
        return Setup(account_id, domain, idp)

    return make


@pytest.fixture
def setup(make_sso):
    return make_sso()


def add_user(
    pool, queries, config, email, account_id=None, confirmed=True, status='active'
):
    """A user with ``email`` (and a session), member of ``account_id`` when given."""
    hashed = passwords.hash_password(PASSWORD, config.bcrypt_rounds)
    with pool.connection() as conn, conn.transaction():
        user_id = users.create_user(
            conn,
            queries,
            name='Ada Member',
            email=email,
            encrypted_password=hashed,
            confirmed=confirmed,
        )
        token, client, _ = sessions.issue(conn, queries, config, user_id)
        if account_id is not None:
            conn.execute(
                queries['memberships.insert'],
                {
                    'account_id': account_id,
                    'user_id': user_id,
                    'role': 'agent',
                    'stamp_active': False,
                },
            )
            conn.execute(
                'UPDATE account_users SET status = %s WHERE user_id = %s',
                (status, user_id),
            )
    return User(user_id, email, PASSWORD, token, client, None)


@pytest.fixture
def member(pool, queries, config, setup):
    return add_user(pool, queries, config, setup.address('member'), setup.account_id)


@dataclasses.dataclass
class Flow:
    state: str
    nonce: str
    cookie: str
    query: dict


def start(app, email, target='web'):
    """GET /auth/sso as a browser: the flow the redirect to the provider carries."""
    answer = app.get('/auth/sso', {'email': email, 'target': target}, status=302)
    app.cookiejar.clear()
    location = answer.headers['Location']
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    cookie = answer.headers['Set-Cookie']
    value = cookie.partition(';')[0].partition('=')[2]
    return Flow(query['state'], query['nonce'], value, query)


def callback(app, params, cookie=None, **headers):
    """The browser back at the callback: where it is sent next. From an address of
    its own unless ``headers`` name one: failures are audited once per address, hour
    and reason."""
    app.cookiejar.clear()
    headers.setdefault('X-Real-IP', unique_ip())
    if cookie is not None:
        headers['Cookie'] = f'{sso.COOKIE}={cookie}'
    answer = app.get('/omniauth/oidc/callback', params, headers=headers, status=302)
    # The flow's cookie is cleared, whatever the outcome.
    assert answer.headers['Set-Cookie'].startswith(f'{sso.COOKIE}=""; expires=')
    return answer.headers['Location']


def sign_in_through(app, setup, email, token=None, target='web', claims=None):
    """A whole flow for ``email``; the provider's ID token has ``claims`` over those
    that pass (None removes one; ``token``: a callable of the claims instead of
    signing them)."""
    flow = start(app, email, target)
    merged = {
        **setup.idp.claims(CLIENT_ID, flow.nonce, email=email),
        **(claims or {}),
    }
    merged = {key: value for key, value in merged.items() if value is not None}
    setup.idp.id_token = (token or setup.idp.sign)(merged)
    return callback(app, {'code': 'the-code', 'state': flow.state}, flow.cookie), flow


def token_of(location):
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    return query['email'], query['sso_auth_token']


def last_audit_id(conn):
    return conn.execute(
        'SELECT COALESCE(max(id), 0) AS id FROM audit_events'
    ).fetchone()['id']


def failures_since(conn, since):
    return [
        row['details']['reason']
        for row in conn.execute(
            'SELECT details FROM audit_events WHERE id > %s AND event ='
            " 'sso_sign_in_failed' ORDER BY id",
            (since,),
        )
    ]


def sso_tokens_of(conn, user_id):
    return conn.execute(
        'SELECT count(*) AS n FROM one_time_tokens'
        " WHERE user_id = %s AND purpose = 'sso'",
        (user_id,),
    ).fetchone()['n']


def session_headers(answer):
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


# --- the start ------------------------------------------------------------------------


def test_the_start_sends_the_browser_to_the_provider_with_state_nonce_and_pkce(
    app, setup
):
    email = setup.address()
    answer = app.post(
        '/api/v1/auth/saml_login',
        {'email': email.upper(), 'target': 'web'},
        headers={'Origin': 'https://elsewhere.example'},
        status=302,
    )
    location = urllib.parse.urlsplit(answer.headers['Location'])
    assert f'{location.scheme}://{location.netloc}{location.path}' == (
        setup.idp.issuer + '/authorize'
    )
    query = dict(urllib.parse.parse_qsl(location.query))
    assert query['response_type'] == 'code'
    assert query['scope'] == 'openid email profile'
    assert query['client_id'] == CLIENT_ID
    assert query['redirect_uri'] == f'{FRONTEND}/omniauth/oidc/callback'
    assert query['code_challenge_method'] == 'S256'
    assert len(query['code_challenge']) == 43
    assert query['login_hint'] == email
    # At least 128 random bits each (32 bytes, base64url).
    assert len(query['state']) >= 43 and len(query['nonce']) >= 43
    cookie = answer.headers['Set-Cookie']
    assert cookie.startswith(f'{sso.COOKIE}=')
    attributes = {part.strip().lower() for part in cookie.split(';')[1:]}
    assert {
        'httponly',
        'samesite=lax',
        'path=/omniauth/oidc/callback',
        'max-age=600',
    } <= attributes
    assert 'secure' not in attributes  # FRONTEND_URL is http here
    assert answer.headers['Cache-Control'] == 'no-store'
    assert answer.body == b'' and answer.content_type == 'text/plain'


def test_a_start_for_an_https_frontend_sets_a_secure_cookie(
    base_env, pool, setup, make_testapp
):
    app = make_testapp(**SSO_ENV, FRONTEND_URL='https://frontdesk.test')
    answer = app.get('/auth/sso', {'email': setup.address()}, status=302)
    assert 'secure' in answer.headers['Set-Cookie'].lower()


@pytest.mark.parametrize(
    'params',
    [{}, {'email': ''}, {'email': 'not an address'}, {'email': 'a@nobody.example'}],
)
def test_no_provider_for_the_address_is_saml_not_enabled(app, params):
    answer = app.get('/auth/sso', params, status=302)
    assert answer.headers['Location'] == NOT_ENABLED
    assert 'Set-Cookie' not in answer.headers
    answer = app.post('/api/v1/auth/saml_login', params, status=302)
    assert answer.headers['Location'] == NOT_ENABLED


# --- the happy path -------------------------------------------------------------------


def test_a_member_signs_in_with_the_token_and_the_session_says_sso(
    app, conn, setup, member
):
    location, flow = sign_in_through(app, setup, member.email)
    email, token = token_of(location)
    assert location == (
        f'{FRONTEND}/app/login?'
        + urllib.parse.urlencode({'email': member.email, 'sso_auth_token': token})
    )
    assert email == member.email and len(token) >= 43
    # The code went to the provider with the verifier and the client's credentials.
    method, path, headers, form = setup.idp.requests[-2]
    assert (method, path) == ('POST', '/token')
    assert form['code'] == 'the-code' and form['grant_type'] == 'authorization_code'
    assert form['redirect_uri'] == f'{FRONTEND}/omniauth/oidc/callback'
    assert len(form['code_verifier']) >= 43 and 'client_secret' not in form
    assert headers['Authorization'].startswith('Basic ')
    signed_in = app.post_json(
        '/auth/sign_in',
        {'email': member.email, 'sso_auth_token': token, 'password': ''},
        status=200,
    )
    assert all(name in signed_in.headers for name in TOKEN_HEADERS)
    assert signed_in.json['data']['email'] == member.email
    listed = app.get(
        '/api/v1/profile/sessions', headers=session_headers(signed_in), status=200
    ).json
    current = next(entry for entry in listed if entry['current'])
    assert current['sign_in_method'] == 'sso'
    assert {entry['sign_in_method'] for entry in listed if not entry['current']} == {
        'password'
    }
    stored = conn.execute(
        'SELECT sign_in_method, sso_account_id, sso_sid, sso_sub FROM user_tokens'
        ' WHERE client = %s',
        (signed_in.headers['client'],),
    ).fetchone()
    assert stored == {
        'sign_in_method': 'sso',
        'sso_account_id': setup.account_id,
        'sso_sid': 'sid-' + flow.nonce[:8],
        'sso_sub': 'sub-' + flow.nonce[:8],
    }
    audited = conn.execute(
        "SELECT account_id, subject_id FROM audit_events WHERE event = 'sso_sign_in'"
        ' AND subject_id = %s',
        (member.id,),
    ).fetchall()
    assert audited == [{'account_id': setup.account_id, 'subject_id': member.id}]
    # Single use: the same token again is a wrong password's 401.
    again = app.post_json(
        '/auth/sign_in',
        {'email': member.email, 'sso_auth_token': token},
        status=401,
    )
    assert again.json == INVALID_LOGIN


def test_client_secret_post_when_the_provider_has_no_basic(
    app, conn, idp, make_testapp, sso_config, make_account
):
    idp.discovery['token_endpoint_auth_methods_supported'] = ['client_secret_post']
    setup = Setup(make_account(), unique_domain(), idp)
    insert_provider(
        conn,
        sso_config,
        setup.account_id,
        idp.issuer,
        CLIENT_ID,
        CLIENT_SECRET,
        [setup.domain],
        jit_provisioning=True,
    )
    location, _ = sign_in_through(app, setup, setup.address())
    assert 'sso_auth_token=' in location
    _, _, headers, form = idp.requests[-2]
    assert form['client_id'] == CLIENT_ID and form['client_secret'] == CLIENT_SECRET
    assert 'Authorization' not in headers


def test_a_mobile_start_ends_in_the_mobile_app(app, setup, member):
    location, _ = sign_in_through(app, setup, member.email, target='mobile')
    email, token = token_of(location)
    assert location == 'chatwootapp://auth/saml?' + urllib.parse.urlencode(
        {'email': member.email, 'sso_auth_token': token}
    )
    app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=200
    )


# --- every refusal of the callback ----------------------------------------------------


def assert_refused(app, conn, location, since, reason, user_id=None):
    assert location == FAILED, location
    assert failures_since(conn, since) == [reason]
    if user_id is not None:
        assert sso_tokens_of(conn, user_id) == 0


def test_the_providers_error_fails(app, conn, setup, member):
    since = last_audit_id(conn)
    flow = start(app, member.email)
    location = callback(
        app, {'error': 'access_denied', 'state': flow.state}, flow.cookie
    )
    assert_refused(app, conn, location, since, 'provider_error', member.id)
    # The flow is used up by it.
    since = last_audit_id(conn)
    setup.idp.id_token = setup.idp.sign(
        setup.idp.claims(CLIENT_ID, flow.nonce, email=member.email)
    )
    location = callback(app, {'code': 'c', 'state': flow.state}, flow.cookie)
    assert_refused(app, conn, location, since, 'state_mismatch', member.id)


@pytest.mark.parametrize('case', ['unknown', 'replayed', 'no_cookie', 'other_cookie'])
def test_a_state_that_is_not_this_browsers_live_flow_fails(
    app, conn, setup, member, case
):
    flow = start(app, member.email)
    other = start(app, member.email)
    setup.idp.id_token = lambda form: setup.idp.sign(
        setup.idp.claims(CLIENT_ID, flow.nonce, email=member.email)
    )
    params, cookie = {'code': 'c', 'state': flow.state}, flow.cookie
    if case == 'unknown':
        params['state'] = 'x' * 43
    elif case == 'replayed':
        assert 'sso_auth_token=' in callback(app, params, cookie)
    elif case == 'no_cookie':
        cookie = None
    else:
        cookie = other.cookie
    tokens_before = sso_tokens_of(conn, member.id)
    since = last_audit_id(conn)
    location = callback(app, params, cookie)
    assert location == FAILED
    assert failures_since(conn, since) == ['state_mismatch']
    assert sso_tokens_of(conn, member.id) == tokens_before
    # No code went to the provider for the refused callback.
    assert [r[1] for r in setup.idp.requests].count('/token') == (
        1 if case == 'replayed' else 0
    )


@pytest.mark.parametrize(
    ('answer', 'reason'),
    [
        ((500, 'application/json', b'{}'), 'http_500'),
        ((200, 'text/html', b'<html>hello</html>'), 'not_json'),
        ((200, 'application/json', b'{"access_token": "at"}'), 'malformed'),
    ],
)
def test_a_token_endpoint_that_answers_badly_fails(
    app, conn, setup, member, answer, reason
):
    setup.idp.answers['/token'] = answer
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, member.email)
    assert_refused(app, conn, location, since, reason, member.id)


def test_a_token_endpoint_that_holds_the_connection_fails_within_the_deadline(
    app, conn, setup, member
):
    # Far longer than the 5 s deadline: an answer before it proves the deadline.
    setup.idp.delays['/token'] = 60
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, member.email)
    assert '/token' not in setup.idp.finished
    assert_refused(app, conn, location, since, 'timeout', member.id)


def test_a_provider_that_refuses_connections_fails(
    app, conn, setup, member, sso_config
):
    flow = start(app, member.email)
    # The provider goes away between the start and the callback.
    with conn.transaction():
        conn.execute(
            'UPDATE sso_providers SET discovery = jsonb_set(discovery,'
            " '{token_endpoint}', '\"http://127.0.0.1:9/token\"')"
            ' WHERE account_id = %s',
            (setup.account_id,),
        )
    since = last_audit_id(conn)
    location = callback(app, {'code': 'c', 'state': flow.state}, flow.cookie)
    assert_refused(app, conn, location, since, 'unreachable', member.id)


def test_a_key_not_in_the_jwks_fails_after_one_fetch(app, conn, setup, member):
    since = last_audit_id(conn)
    location, _ = sign_in_through(
        app, setup, member.email, token=lambda c: setup.idp.sign(c, kid='k9')
    )
    assert_refused(app, conn, location, since, 'unknown_key', member.id)
    assert [r[1] for r in setup.idp.requests].count('/jwks') == 1
    # Within the minute, another unknown kid fetches nothing more.
    since = last_audit_id(conn)
    location, _ = sign_in_through(
        app, setup, member.email, token=lambda c: setup.idp.sign(c, kid='k8')
    )
    assert_refused(app, conn, location, since, 'unknown_key', member.id)
    assert [r[1] for r in setup.idp.requests].count('/jwks') == 1


@pytest.mark.parametrize(
    ('forge', 'reason'),
    [
        (lambda idp: idp.unsigned, 'bad_alg'),
        (lambda idp: idp.hmac_with_public_key, 'bad_alg'),
        (lambda idp: lambda c: idp.sign(c, key=idp.other_key), 'bad_signature'),
    ],
    ids=['alg_none', 'hmac_with_the_public_key', 'another_key'],
)
def test_a_forged_signature_fails(app, conn, setup, member, forge, reason):
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, member.email, token=forge(setup.idp))
    assert_refused(app, conn, location, since, reason, member.id)


@pytest.mark.parametrize(
    ('claims', 'reason'),
    [
        (lambda now: {'iss': 'https://other.example'}, 'bad_claims'),
        (lambda now: {'aud': 'another-client'}, 'bad_claims'),
        (lambda now: {'exp': now - 10}, 'expired'),
        (lambda now: {'iat': now - 180}, 'bad_iat'),
        (lambda now: {'iat': now + 180}, 'bad_claims'),
        (lambda now: {'nonce': 'n' * 43}, 'bad_claims'),
        (lambda now: {'email': None}, 'no_email'),
        (lambda now: {'email_verified': False}, 'email_unverified'),
        (lambda now: {'email_verified': None}, 'email_unverified'),
        (lambda now: {'email_verified': 'true'}, 'email_unverified'),
    ],
    ids=[
        'wrong_iss',
        'wrong_aud',
        'expired',
        'iat_3_minutes_ago',
        'iat_in_3_minutes',
        'wrong_nonce',
        'no_email',
        'email_unverified',
        'no_email_verified',
        'email_verified_a_string',
    ],
)
def test_an_id_token_whose_claims_do_not_hold_fails(
    app, conn, setup, member, claims, reason
):
    claims = claims(int(time.time()))
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, member.email, claims=claims)
    assert_refused(app, conn, location, since, reason, member.id)


def test_an_address_outside_the_providers_domains_fails(
    app, conn, setup, pool, queries, config
):
    # A user of another domain, member of the account: the provider does not speak
    # for that domain.
    outsider = add_user(
        pool,
        queries,
        config,
        f'x-{time.monotonic_ns()}@{unique_domain()}',
        setup.account_id,
    )
    since = last_audit_id(conn)
    location, _ = sign_in_through(
        app, setup, setup.address(), claims={'email': outsider.email}
    )
    assert_refused(app, conn, location, since, 'domain_not_allowed', outsider.id)


# --- who signs in ---------------------------------------------------------------------


def test_without_jit_a_stranger_finds_no_account(app, conn, setup):
    email = setup.address('stranger')
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, email)
    assert location == NO_ACCOUNT
    assert failures_since(conn, since) == ['no_account']
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM users WHERE email = %s', (email,)
        ).fetchone()['n']
        == 0
    )


def test_without_jit_a_user_who_is_not_a_member_finds_no_account(
    app, conn, setup, pool, queries, config, make_account
):
    user = add_user(pool, queries, config, setup.address('other'), make_account())
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, user.email)
    assert location == NO_ACCOUNT
    assert failures_since(conn, since) == ['no_account']
    assert sso_tokens_of(conn, user.id) == 0


def test_with_jit_a_stranger_becomes_a_confirmed_agent_without_a_password(
    app, conn, make_sso
):
    setup = make_sso(jit_provisioning=True)
    email = setup.address('New.Person').upper()
    location, _ = sign_in_through(app, setup, email, claims={'name': '  New Person  '})
    normalised, token = token_of(location)
    assert normalised == email.lower()
    signed_in = app.post_json(
        '/auth/sign_in', {'email': normalised, 'sso_auth_token': token}, status=200
    )
    assert signed_in.json['data']['name'] == 'New Person'
    assert signed_in.json['data']['confirmed'] is True
    row = conn.execute(
        'SELECT u.encrypted_password, au.role, au.account_id FROM users u'
        ' JOIN account_users au ON au.user_id = u.id WHERE u.email = %s',
        (normalised,),
    ).fetchall()
    assert row == [
        {
            'encrypted_password': None,
            'role': 'agent',
            'account_id': setup.account_id,
        }
    ]
    # No password signs in.
    app.post_json(
        '/auth/sign_in', {'email': normalised, 'password': PASSWORD}, status=401
    )


def test_with_jit_a_nameless_token_names_the_user_after_the_address(
    app, conn, make_sso
):
    setup = make_sso(jit_provisioning=True)
    email = setup.address('grace')
    location, _ = sign_in_through(app, setup, email, claims={'name': None})
    _, token = token_of(location)
    signed_in = app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=200
    )
    assert signed_in.json['data']['name'] == email.partition('@')[0]


def test_with_jit_a_user_of_another_account_joins_as_an_agent(
    app, conn, make_sso, pool, queries, config, make_account
):
    setup = make_sso(jit_provisioning=True)
    user = add_user(pool, queries, config, setup.address('other'), make_account())
    location, _ = sign_in_through(app, setup, user.email)
    _, token = token_of(location)
    app.post_json(
        '/auth/sign_in', {'email': user.email, 'sso_auth_token': token}, status=200
    )
    role = conn.execute(
        'SELECT role FROM account_users WHERE user_id = %s AND account_id = %s',
        (user.id, setup.account_id),
    ).fetchone()
    assert role == {'role': 'agent'}
    # The password the user had stays: the address was confirmed already.
    app.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, status=200
    )


def test_a_suspended_member_fails(
    app, conn, make_sso, pool, queries, config, make_account
):
    # Suspended in this account, active in another: not locked out (SPEC 18), and
    # still refused here.
    setup = make_sso(jit_provisioning=True)
    user = add_user(
        pool,
        queries,
        config,
        setup.address('suspended'),
        setup.account_id,
        status='suspended',
    )
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role)'
        " VALUES (%s, %s, 'agent')",
        (make_account(), user.id),
    )
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, user.email)
    assert_refused(app, conn, location, since, 'suspended', user.id)


def test_a_locked_out_user_fails(
    app, conn, make_sso, pool, queries, config, make_account
):
    # Not a member of this account; every membership suspended elsewhere: JIT would
    # make them a member, and they are still refused (nothing changes).
    setup = make_sso(jit_provisioning=True)
    user = add_user(
        pool,
        queries,
        config,
        setup.address('locked'),
        make_account(),
        status='suspended',
    )
    since = last_audit_id(conn)
    location, _ = sign_in_through(app, setup, user.email)
    assert_refused(app, conn, location, since, 'suspended', user.id)
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM account_users WHERE user_id = %s', (user.id,)
        ).fetchone()['n']
        == 1
    )


def test_the_owners_sso_ends_a_squatters_sign_up(app, conn, make_sso, base_env, inbox):
    setup = make_sso(jit_provisioning=True)
    owner_address = setup.address('owner')
    squatter_password = 'orange tulip 77 x'
    signed_up = app.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Squat',
            'email': owner_address,
            'user_full_name': 'Squatter',
            'password': squatter_password,
        },
        status=200,
    )
    squatter = session_headers(signed_up)
    location, _ = sign_in_through(app, setup, owner_address)
    email, token = token_of(location)
    # The squatter's session is gone, and the password no longer signs in.
    app.get('/api/v1/profile', headers=squatter, status=401)
    app.post_json(
        '/auth/sign_in',
        {'email': owner_address, 'password': squatter_password},
        status=401,
    )
    user = conn.execute(
        'SELECT id, confirmed_at, encrypted_password FROM users WHERE email = %s',
        (owner_address,),
    ).fetchone()
    assert user['confirmed_at'] is not None and user['encrypted_password'] is None
    # The owner signs in with the token, and got the notice of SPEC 3.4 rule 1.
    app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=200
    )
    deliver(base_env, inbox.port)
    subjects = [item.message['Subject'] for item in inbox.to(owner_address)]
    assert 'Your e-mail address is confirmed' in subjects


# --- the sign-in with the token -------------------------------------------------------


def test_an_expired_token_is_a_wrong_password(app, conn, setup, member):
    location, _ = sign_in_through(app, setup, member.email)
    email, token = token_of(location)
    conn.execute(
        'UPDATE one_time_tokens SET expires_at = now() WHERE user_id = %s AND purpose'
        " = 'sso'",
        (member.id,),
    )
    since = last_audit_id(conn)
    answer = app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=401
    )
    assert answer.json == INVALID_LOGIN
    assert not any(name in answer.headers for name in ('access-token', 'client'))
    assert conn.execute(
        "SELECT details FROM audit_events WHERE id > %s AND event = 'sign_in_failed'",
        (since,),
    ).fetchone()['details'] == {'reason': 'sso_token'}


def test_a_token_signs_in_only_its_own_user(
    app, conn, setup, member, pool, queries, config
):
    other = add_user(pool, queries, config, setup.address('other'), setup.account_id)
    location, _ = sign_in_through(app, setup, member.email)
    _, token = token_of(location)
    answer = app.post_json(
        '/auth/sign_in', {'email': other.email, 'sso_auth_token': token}, status=401
    )
    assert answer.json == INVALID_LOGIN
    # Its own user still can.
    app.post_json(
        '/auth/sign_in', {'email': member.email, 'sso_auth_token': token}, status=200
    )


def test_a_made_up_token_is_a_wrong_password(app, member):
    answer = app.post_json(
        '/auth/sign_in',
        {'email': member.email, 'sso_auth_token': 'x' * 43, 'password': PASSWORD},
        status=401,
    )
    assert answer.json == INVALID_LOGIN


def test_an_empty_token_beside_a_password_signs_in_by_password(app, conn, member):
    answer = app.post_json(
        '/auth/sign_in',
        {'email': member.email, 'password': PASSWORD, 'sso_auth_token': ''},
        status=200,
    )
    assert (
        conn.execute(
            'SELECT sign_in_method FROM user_tokens WHERE client = %s',
            (answer.headers['client'],),
        ).fetchone()['sign_in_method']
        == 'password'
    )


def test_an_mfa_user_gets_the_challenge_and_the_second_step_opens_an_sso_session(
    app, conn, setup, member
):
    authenticator, _ = enable(app, member)
    location, flow = sign_in_through(app, setup, member.email)
    email, token = token_of(location)
    challenged = app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=206
    )
    assert challenged.json['mfa_required'] is True
    assert not any(name in challenged.headers for name in TOKEN_HEADERS)
    signed_in = app.post_json(
        '/auth/sign_in',
        {'mfa_token': challenged.json['mfa_token'], 'otp_code': authenticator.code(0)},
        status=200,
    )
    stored = conn.execute(
        'SELECT sign_in_method, sso_sid FROM user_tokens WHERE client = %s',
        (signed_in.headers['client'],),
    ).fetchone()
    assert stored == {'sign_in_method': 'sso', 'sso_sid': 'sid-' + flow.nonce[:8]}


def test_a_member_of_an_account_that_requires_mfa_must_enrol_first(
    app, conn, setup, member
):
    conn.execute(
        'UPDATE accounts SET enforce_mfa = true WHERE id = %s', (setup.account_id,)
    )
    location, _ = sign_in_through(app, setup, member.email)
    email, token = token_of(location)
    answer = app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=206
    )
    assert answer.json['mfa_setup_required'] is True


@pytest.mark.parametrize(
    ('trust', 'amr', 'status'),
    [
        (True, ['pwd', 'otp'], 200),
        (True, ['hwk'], 200),
        (True, ['pwd', 'sms'], 200),
        (True, ['pwd'], 206),
        (True, ['sms'], 206),
        (True, None, 206),
        (False, ['pwd', 'otp'], 206),
    ],
)
def test_the_providers_second_factor_counts_only_where_the_account_trusts_it(
    app, conn, make_sso, pool, queries, config, trust, amr, status
):
    setup = make_sso(trust_idp_mfa=trust)
    user = add_user(pool, queries, config, setup.address('mfa'), setup.account_id)
    enable(app, user)
    location, _ = sign_in_through(app, setup, user.email, claims={'amr': amr})
    email, token = token_of(location)
    app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=status
    )


def test_at_the_session_cap_a_browser_picks_and_the_same_token_then_works(
    base_env, pool, queries, config, setup, member, make_testapp
):
    app = make_testapp(**SSO_ENV, MAX_USER_SESSIONS='2')
    with pool.connection() as conn, conn.transaction():
        sessions.issue(conn, queries, config, member.id)
    location, _ = sign_in_through(app, setup, member.email)
    email, token = token_of(location)
    body = {'email': email, 'sso_auth_token': token}
    refused = app.post_json(
        '/auth/sign_in', body, headers={'User-Agent': BROWSER}, status=409
    )
    assert refused.json['sessions_limit_reached'] is True
    victim = refused.json['sessions'][-1]['id']
    signed_in = app.post_json(
        '/auth/sign_in',
        {**body, 'revoke_session_id': victim},
        headers={'User-Agent': BROWSER},
        status=200,
    )
    listed = app.get(
        '/api/v1/profile/sessions', headers=session_headers(signed_in), status=200
    ).json
    assert victim not in [entry['id'] for entry in listed]
    assert len(listed) == 2


# --- over the wire: a slow provider holds one worker, not the service ----------------


def _get(base, path, headers=None):
    """GET without following redirects."""
    parts = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request('GET', path, headers=headers or {})
        answer = connection.getresponse()
        body = answer.read()
        headers_in = {k.lower(): v for k, v in answer.getheaders()}
        contract.check('GET', path, headers or {}, answer.status, headers_in, body)
        return answer.status, headers_in
    finally:
        connection.close()


def test_a_slow_token_endpoint_fails_in_time_while_the_service_answers(
    base_env, tmp_path, setup, member
):
    # Far longer than the 5 s deadline.
    setup.idp.delays['/token'] = 60
    with run_gunicorn(
        {**base_env, **SSO_ENV}, workers=2, log_path=tmp_path / 'gunicorn.log'
    ) as base:
        status, headers = _get(
            base, '/auth/sso?' + urllib.parse.urlencode({'email': member.email})
        )
        assert status == 302
        query = dict(
            urllib.parse.parse_qsl(urllib.parse.urlsplit(headers['location']).query)
        )
        cookie = headers['set-cookie'].partition(';')[0]
        setup.idp.id_token = setup.idp.sign(
            setup.idp.claims(CLIENT_ID, query['nonce'], email=member.email)
        )
        result = {}

        def finish():
            result['answer'] = _get(
                base,
                '/omniauth/oidc/callback?'
                + urllib.parse.urlencode({'code': 'c', 'state': query['state']}),
                {'Cookie': cookie},
            )

        waiting = threading.Thread(target=finish)
        waiting.start()
        # Once the provider holds the code exchange, one worker is waiting on it...
        while '/token' not in [r[1] for r in setup.idp.requests]:
            assert waiting.is_alive(), result
            time.sleep(0.02)
        # ...and the other answers meanwhile: before the waiting one is let go.
        assert real_http('GET', base + '/healthz').status == 200
        profile = real_http('GET', base + '/api/v1/profile', headers=member.headers)
        assert profile.status == 200
        assert 'answer' not in result, 'answered only after the waiting worker'
        waiting.join(timeout=30)
        status, headers = result['answer']
        assert (status, headers['location']) == (302, FAILED)
        # Let go by its own deadline, not by the provider, which had not answered.
        assert '/token' not in setup.idp.finished


def test_sessions_of_links_say_link_and_of_a_sign_up_password(app, conn):
    address = f'linked-{time.monotonic_ns()}@example.com'

    def methods():
        return {
            row['client']: row['sign_in_method']
            for row in conn.execute(
                'SELECT client, sign_in_method FROM user_tokens t JOIN users u'
                ' ON u.id = t.user_id WHERE u.email = %s',
                (address,),
            )
        }

    signed_up = app.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Links',
            'email': address,
            'user_full_name': 'Lin K',
            'password': 'orange tulip 77 x',
        },
        status=200,
    )
    assert methods() == {signed_up.headers['client']: 'password'}
    confirmed = confirm(app, queued_token(conn, address, 'confirmation_token'))
    assert methods() == {confirmed.headers['client']: 'link'}
    app.post_json('/auth/password', {'email': address}, status=200)
    reset_in = reset(app, queued_token(conn, address, 'reset_password_token'))
    assert methods() == {reset_in.headers['client']: 'link'}


# --- end to end with the suite's real provider (oidc-provider) ------------------------


@pytest.fixture(scope='module')
def real_service(base_env, tmp_path_factory):
    """gunicorn (2 workers) whose FRONTEND_URL is itself, as when it serves the
    dashboard's host: the provider sends the browser back to it."""
    port = free_port()
    base = f'http://127.0.0.1:{port}'
    log_path = tmp_path_factory.mktemp('sso_flow') / 'gunicorn.log'
    env = {**base_env, **SSO_ENV, 'FRONTEND_URL': base}
    with run_gunicorn(env, workers=2, port=port, log_path=log_path):
        yield base


@pytest.fixture
def real_setup(real_service, oidc_provider, conn, sso_config, make_account):
    """An account whose provider is the real one, for a domain of its own."""

    def make(**options):
        client_id, secret = oidc_provider.register_client(
            real_service + '/omniauth/oidc/callback',
            backchannel_logout_uri=real_service + '/auth/oidc/backchannel_logout',
        )
        setup = Setup(make_account(), unique_domain(), oidc_provider)
        insert_provider(
            conn,
            sso_config,
            setup.account_id,
            oidc_provider.issuer,
            client_id,
            secret,
            [setup.domain],
            **options,
        )
        return setup

    return make


def test_a_member_signs_in_through_the_real_provider(
    real_service, oidc_provider, real_setup, pool, queries, config, conn
):
    setup = real_setup()
    user = add_user(pool, queries, config, setup.address('real'), setup.account_id)
    sub = oidc_provider.add_account(user.email, 'Real Member')
    browser = SsoBrowser()
    result = browser.sign_in(real_service, user.email, oidc_provider)
    assert result.location.startswith(real_service + '/app/login?'), result.steps
    assert result.params['email'] == user.email, result.steps
    signed_in = real_http(
        'POST',
        real_service + '/auth/sign_in',
        {'email': user.email, 'sso_auth_token': result.params['sso_auth_token']},
    )
    assert signed_in.status == 200, signed_in.body
    headers = {name: signed_in.headers[name] for name in ('access-token', 'client')}
    headers['uid'] = user.email
    listed = real_http(
        'GET', real_service + '/api/v1/profile/sessions', headers=headers
    ).json
    assert [entry['sign_in_method'] for entry in listed if entry['current']] == ['sso']
    stored = conn.execute(
        'SELECT sso_account_id, sso_sub, sso_sid IS NOT NULL AS has_sid'
        ' FROM user_tokens WHERE client = %s',
        (headers['client'],),
    ).fetchone()
    assert stored == {
        'sso_account_id': setup.account_id,
        'sso_sub': sub,
        'has_sid': True,
    }
    # The provider's logout ends that session through the back channel.
    browser.log_out_at_provider()
    profile = real_http('GET', real_service + '/api/v1/profile', headers=headers)
    assert profile.status == 401


def test_the_real_providers_cancel_and_the_mobile_target(
    real_service, oidc_provider, real_setup, pool, queries, config
):
    setup = real_setup(jit_provisioning=True)
    email = setup.address('mobile')
    oidc_provider.add_account(email, 'Mo Bile')
    cancelled = SsoBrowser().sign_in(real_service, email, oidc_provider, cancel=True)
    assert cancelled.location == real_service + (
        '/app/login?error=saml-authentication-failed'
    ), cancelled.steps
    result = SsoBrowser().sign_in(
        real_service, email, oidc_provider, target='mobile', start='get'
    )
    assert result.location.startswith('chatwootapp://auth/saml?'), result.steps
    assert (
        real_http(
            'POST',
            real_service + '/auth/sign_in',
            {'email': email, 'sso_auth_token': result.params['sso_auth_token']},
        ).status
        == 200
    )
