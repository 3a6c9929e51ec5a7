"""Single sign-on end to end (SPEC 19): real gunicorn, the
suite's real OpenID Connect provider (tests/support/oidc_provider.py), a person's
browser (tests/support/sso_browser.py), real SMTP where mail matters, and nginx with
deploy/nginx.conf in front for the reverse-proxy case.

Everything is done as people do it (tests/support/sso_people.py): an organisation's
administrator signs up in the organisation's domain, confirms the mailed link and saves
the settings over the API; members sign up, confirm and turn MFA on over the API, or
join just in time. Each test asserts what the person sees: the redirect, the sign-in's
status, the sessions list, whether a session still opens the profile, the mail.

One gunicorn serves the module, its FRONTEND_URL its own base URL (the provider sends
the browser back to it); the nginx test has its own pair, FRONTEND_URL nginx's base.
"""

import time

import pytest

from tests.nginx_server import run_nginx
from tests.nginx_server import shared_workdir
from tests.smtp_server import deliver
from tests.support.servers import free_port
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.sso_browser import SsoBrowser
from tests.support.sso_people import enable_mfa
from tests.support.sso_people import later_code
from tests.support.sso_people import mailed_token
from tests.support.sso_people import make_org
from tests.support.sso_people import PASSWORD
from tests.support.sso_people import session_of
from tests.support.sso_people import sign_up
from tests.support.sso_people import sign_up_confirmed
from tests.support.sso_people import token_sign_in
from tests.test_sso_enforce import BREAK_GLASS_SUBJECT

SSO_ENV = {'OIDC_ALLOW_PRIVATE_ISSUERS': 'true'}
SSO_REQUIRED = {
    'success': False,
    'errors': ["Sign in with your organisation's single sign-on"],
    'error_code': 'sso_required',
}
INVALID_LOGIN = {
    'success': False,
    'errors': ['Invalid login credentials. Please try again.'],
}
NOTICE_SUBJECT = 'Your e-mail address is confirmed'


@pytest.fixture(scope='module')
def base(base_env, tmp_path_factory):
    """gunicorn (2 workers) whose FRONTEND_URL is itself."""
    port = free_port()
    url = f'http://127.0.0.1:{port}'
    log_path = tmp_path_factory.mktemp('sso_e2e') / 'gunicorn.log'
    env = {**base_env, **SSO_ENV, 'FRONTEND_URL': url}
    with run_gunicorn(env, workers=2, port=port, log_path=log_path):
        yield url


@pytest.fixture
def org(base, conn, oidc_provider):
    """An organisation set up over the API (settings as keyword arguments)."""
    return lambda **settings: make_org(base, conn, oidc_provider, **settings)


def password_sign_in(base, email, password=PASSWORD):
    return http('POST', base + '/auth/sign_in', {'email': email, 'password': password})


def second_step(base, mfa_token, code):
    return http(
        'POST', base + '/auth/sign_in', {'mfa_token': mfa_token, 'otp_code': code}
    )


def profile_status(base, headers):
    """What a signed-in GET /api/v1/profile answers with these session headers."""
    return http('GET', base + '/api/v1/profile', headers=headers).status


def current_method(base, headers):
    listed = http('GET', base + '/api/v1/profile/sessions', headers=headers)
    assert listed.status == 200, listed.body
    return [entry['sign_in_method'] for entry in listed.json if entry['current']]


def membership(base, headers, account_id):
    """The person's role in ``account_id`` as their profile shows it (None: none)."""
    accounts = http('GET', base + '/api/v1/profile', headers=headers).json['accounts']
    return next((a['role'] for a in accounts if a['id'] == account_id), None)


def assert_challenge(answer):
    """A 206 second step, and no session yet."""
    assert answer.status == 206, (answer.status, answer.body)
    assert answer.json['mfa_required'] is True, answer.json
    assert 'access-token' not in answer.headers
    return answer.json['mfa_token']


def mfa_member(base, conn, org, prefix='mfa', amr=None):
    """Someone of ``org``'s domain who signed up, confirmed and turned MFA on in
    Frontdesk, and whom the provider knows: (address, authenticator)."""
    address = org.address(prefix)
    _, headers = sign_up_confirmed(base, conn, address, 'Mia Factor')
    totp = enable_mfa(base, headers)
    org.provider.add_account(address, 'Mia Factor', amr=amr)
    return address, totp


def test_an_mfa_member_signs_in_through_the_provider_and_then_the_second_step(
    base, conn, org
):
    sso = org(jit_provisioning=True)
    address, totp = mfa_member(base, conn, sso)

    result = sso.sign_in(address)
    assert result.location.startswith(base + '/app/login?'), result.steps
    assert result.params['email'] == address
    mfa_token = assert_challenge(token_sign_in(base, result))
    signed_in = second_step(base, mfa_token, later_code(totp))

    assert signed_in.status == 200, signed_in.body
    assert signed_in.json['data']['email'] == address
    headers = session_of(signed_in)
    assert current_method(base, headers) == ['sso']
    assert membership(base, headers, sso.account_id) == 'agent'


def test_the_providers_second_factor_counts_where_the_account_trusts_it(
    base, conn, org
):
    sso = org(jit_provisioning=True, trust_idp_mfa=True)
    with_otp, _ = mfa_member(base, conn, sso, 'otp', amr=['pwd', 'otp'])
    password_only, _ = mfa_member(base, conn, sso, 'pwd', amr=['pwd'])

    trusted = token_sign_in(base, sso.sign_in(with_otp))
    assert trusted.status == 200, trusted.body
    assert current_method(base, session_of(trusted)) == ['sso']
    assert_challenge(token_sign_in(base, sso.sign_in(password_only)))


def test_just_in_time_a_new_person_becomes_a_confirmed_agent_without_a_password(
    base, org
):
    sso = org(jit_provisioning=True)
    address = sso.person('newcomer', 'Nia Newcomer')

    result = sso.sign_in(address)
    signed_in = token_sign_in(base, result)

    assert signed_in.status == 200, signed_in.body
    headers = session_of(signed_in)
    profile = http('GET', base + '/api/v1/profile', headers=headers).json
    assert (profile['email'], profile['name'], profile['confirmed']) == (
        address,
        'Nia Newcomer',
        True,
    )
    assert membership(base, headers, sso.account_id) == 'agent'
    # No password was ever set: none signs in.
    for password in (PASSWORD, '', 'a password the test provider does not check'):
        refused = password_sign_in(base, address, password)
        assert refused.status == 401, (password, refused.body)


def test_without_just_in_time_a_stranger_finds_no_account(base, org):
    sso = org()
    address = sso.person('stranger')

    result = sso.sign_in(address)

    assert result.location == base + '/app/login?error=no-account-found', result.steps


def test_enforced_the_password_is_refused_and_the_provider_lets_the_person_in(
    base, conn, org
):
    sso = org(jit_provisioning=True, enforce=True)
    address = sso.address('enforced')
    sign_up(base, address, 'Eve Enforced')
    # The mailed link confirms the address but opens no session where single sign-on
    # is enforced (resources/confirmations.py).
    token = mailed_token(conn, address, 'confirmation_token')
    confirmed = http('POST', base + '/auth/confirmation', {'confirmation_token': token})
    assert (confirmed.status, confirmed.json) == (401, SSO_REQUIRED)
    assert conn.execute(
        'SELECT confirmed_at IS NOT NULL AS confirmed FROM users WHERE email = %s',
        (address,),
    ).fetchone() == {'confirmed': True}
    sso.provider.add_account(address, 'Eve Enforced')

    refused = password_sign_in(base, address)
    assert (refused.status, refused.json) == (401, SSO_REQUIRED)
    assert 'access-token' not in refused.headers
    signed_in = token_sign_in(base, sso.sign_in(address))
    assert signed_in.status == 200, signed_in.body
    assert current_method(base, session_of(signed_in)) == ['sso']


def test_break_glass_an_administrator_with_mfa_signs_in_and_every_administrator_hears(
    base, conn, org, inbox, base_env
):
    sso = org(jit_provisioning=True, enforce=True)
    totp = enable_mfa(base, sso.admin_headers)
    # A second administrator, outside the domain (no API hands out roles: the row is
    # stored as the account's owner would have it made).
    colleague = f'colleague-{time.monotonic_ns()}@example.org'
    sign_up_confirmed(base, conn, colleague, 'Col League')
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role)'
        " SELECT %s, id, 'administrator' FROM users WHERE email = %s",
        (sso.account_id, colleague),
    )
    # An agent of the domain (just in time), who hears nothing.
    agent = sso.person('agent')
    assert token_sign_in(base, sso.sign_in(agent)).status == 200

    mfa_token = assert_challenge(password_sign_in(base, sso.admin_email))
    signed_in = second_step(base, mfa_token, later_code(totp))

    assert signed_in.status == 200, signed_in.body
    assert current_method(base, session_of(signed_in)) == ['password']
    deliver(base_env, inbox.port)
    told = [
        item
        for item in inbox.received
        if item.message['Subject'] == BREAK_GLASS_SUBJECT
        and f'Address: {sso.admin_email}' in item.text
    ]
    assert sorted(address for item in told for address in item.rcpt_tos) == sorted(
        [sso.admin_email, colleague]
    ), [item.rcpt_tos for item in told]
    assert not [
        item
        for item in inbox.to(agent)
        if item.message['Subject'] == BREAK_GLASS_SUBJECT
    ]


def test_the_providers_logout_ends_exactly_the_sessions_of_that_provider_session(
    base, conn, org
):
    sso = org(jit_provisioning=True)
    address = sso.address('two-browsers')
    sign_up_confirmed(base, conn, address, 'Tess Two')
    sso.provider.add_account(address, 'Tess Two')
    first, second = SsoBrowser(), SsoBrowser()
    in_first = session_of(token_sign_in(base, sso.sign_in(address, first)))
    in_second = session_of(token_sign_in(base, sso.sign_in(address, second)))
    by_password = password_sign_in(base, address)
    assert by_password.status == 200, by_password.body
    by_password = session_of(by_password)
    for headers in (in_first, in_second, by_password):
        assert profile_status(base, headers) == 200

    first.log_out_at_provider()

    assert profile_status(base, in_first) == 401
    assert profile_status(base, in_second) == 200
    assert profile_status(base, by_password) == 200
    assert current_method(base, in_second) == ['sso']


def test_the_owners_single_sign_on_ends_a_squatters_sign_up(
    base, conn, org, inbox, base_env
):
    sso = org(jit_provisioning=True)
    owner = sso.address('owner')
    squatter_password = 'mallard tulip 99 z'
    _, squatter = sign_up(base, owner, 'Squatter', squatter_password)
    assert profile_status(base, squatter) == 200
    sso.provider.add_account(owner, 'Olga Owner')

    signed_in = token_sign_in(base, sso.sign_in(owner))

    assert signed_in.status == 200, signed_in.body
    assert profile_status(base, squatter) == 401
    refused = password_sign_in(base, owner, squatter_password)
    assert (refused.status, refused.json) == (401, INVALID_LOGIN)
    headers = session_of(signed_in)
    assert membership(base, headers, sso.account_id) == 'agent'
    deliver(base_env, inbox.port)
    assert NOTICE_SUBJECT in [item.message['Subject'] for item in inbox.to(owner)]


def test_the_mobile_target_ends_in_the_app_and_its_token_signs_in(base, org):
    sso = org(jit_provisioning=True)
    address = sso.person('mobile')

    result = sso.sign_in(address, target='mobile')

    assert result.location.startswith('chatwootapp://auth/saml?'), result.steps
    assert result.params['email'] == address
    signed_in = token_sign_in(base, result)
    assert signed_in.status == 200, signed_in.body
    assert current_method(base, session_of(signed_in)) == ['sso']


@pytest.fixture(scope='module')
def behind_nginx(base_env):
    """nginx with deploy/nginx.conf in front of a gunicorn whose FRONTEND_URL is
    nginx's base: nginx starts first (its upstream is the port gunicorn will take)."""
    port = free_port()
    with shared_workdir() as workdir:
        upstream = f'127.0.0.1:{port}'
        with run_nginx(workdir, upstream, workdir / 'avatars') as (proxy, access_log):
            env = {
                **base_env,
                **SSO_ENV,
                'FRONTEND_URL': proxy,
                'AVATAR_DIR': str(workdir / 'avatars'),
            }
            log_path = workdir / 'gunicorn.log'
            with run_gunicorn(env, workers=2, port=port, log_path=log_path):
                yield proxy, access_log


def test_through_nginx_the_start_and_the_callback_reach_frontdesk(
    behind_nginx, conn, oidc_provider
):
    proxy, access_log = behind_nginx
    sso = make_org(proxy, conn, oidc_provider, jit_provisioning=True)
    address = sso.person('proxied')
    browser = SsoBrowser()

    result = sso.sign_in(address, browser)

    assert result.location.startswith(proxy + '/app/login?'), result.steps
    assert result.params['email'] == address
    assert result.steps[0].startswith(f'POST {proxy}/api/v1/auth/saml_login -> 302')
    assert any(
        step.startswith(f'GET {proxy}/omniauth/oidc/callback?') for step in result.steps
    ), result.steps
    signed_in = token_sign_in(proxy, result)
    assert signed_in.status == 200, signed_in.body
    headers = session_of(signed_in)
    assert current_method(proxy, headers) == ['sso']
    log = access_log.read_text()
    assert (
        'POST /api/v1/auth/saml_login' in log and 'GET /omniauth/oidc/callback' in log
    )
    # The provider's back-channel logout comes through nginx too.
    browser.log_out_at_provider()
    assert profile_status(proxy, headers) == 401
