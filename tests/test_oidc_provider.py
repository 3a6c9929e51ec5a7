"""The suite's OpenID Connect provider and browser, proved on their own (SPEC 19).

tests/oidc_provider/server.mjs (a real oidc-provider), tests/support/oidc_provider.py
(fixture ``oidc_provider``) and tests/support/sso_browser.py are what Frontdesk's single
sign-on tests stand on; here a relying party of the test's own, on Frontdesk's routes,
takes their place, so a failure here is the harness's and not Frontdesk's. The test
exchanges the code itself (client_secret_basic, PKCE) and checks the tokens with
joserfc against the provider's JWKS. One test asks Frontdesk's own discovery
(services/oidc_http.py) whether it takes this issuer: only with
OIDC_ALLOW_PRIVATE_ISSUERS, as the SSO tests will run it.
"""

import base64
import contextlib
import hashlib
import http.cookies
import http.server
import secrets
import threading
import urllib.parse

from joserfc import jwt
from joserfc.jwk import KeySet
import pytest

import config as config_module
from services import oidc_http
from tests.support.sso_browser import SsoBrowser
from tests.support.users import unique_email

FRONTEND = 'http://frontdesk.test'
LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout'


class RelyingParty:
    """Frontdesk's SSO routes, reduced to what proves the harness: the start sends the
    browser to the provider (state, nonce, PKCE S256, a flow cookie on the callback
    path), the callback records what came back, the back channel records tokens."""

    def __init__(self, base, provider):
        self.base = base
        self.provider = provider
        self.client_id = self.client_secret = None
        self.flows = {}  # flow cookie -> {state, nonce, verifier}
        self.callbacks = []  # (query, flow cookie or None)
        self.logout_tokens = []

    @property
    def redirect_uri(self):
        return self.base + '/omniauth/oidc/callback'

    def start(self, email):
        flow_id = secrets.token_urlsafe(16)
        flow = {
            'state': secrets.token_urlsafe(16),
            'nonce': secrets.token_urlsafe(16),
            'verifier': secrets.token_urlsafe(32),
        }
        self.flows[flow_id] = flow
        challenge = hashlib.sha256(flow['verifier'].encode()).digest()
        query = urllib.parse.urlencode(
            {
                'response_type': 'code',
                'client_id': self.client_id,
                'redirect_uri': self.redirect_uri,
                'scope': 'openid email profile',
                'state': flow['state'],
                'nonce': flow['nonce'],
                'code_challenge': base64.urlsafe_b64encode(challenge)
                .rstrip(b'=')
                .decode(),
                'code_challenge_method': 'S256',
                'login_hint': email,
            }
        )
        # Secure, as Falcon sets cookies by default: browsers send it to loopback.
        cookie = (
            f'fd_sso={flow_id}; Path=/omniauth/oidc/callback; HttpOnly; SameSite=Lax;'
            ' Secure'
        )
        location = self.provider.discovery['authorization_endpoint'] + '?' + query
        return location, cookie

    def handle(self, handler, method):
        parts = urllib.parse.urlsplit(handler.path)
        length = int(handler.headers.get('Content-Length') or 0)
        form = dict(urllib.parse.parse_qsl(handler.rfile.read(length).decode()))
        headers = {}
        if method == 'POST' and parts.path == '/api/v1/auth/saml_login':
            status = 302
            headers['Location'], headers['Set-Cookie'] = self.start(form['email'])
        elif method == 'GET' and parts.path == '/auth/sso':
            query = dict(urllib.parse.parse_qsl(parts.query))
            status = 302
            headers['Location'], headers['Set-Cookie'] = self.start(query['email'])
        elif method == 'GET' and parts.path == '/omniauth/oidc/callback':
            cookies = http.cookies.SimpleCookie(handler.headers.get('Cookie', ''))
            flow_id = cookies['fd_sso'].value if 'fd_sso' in cookies else None
            self.callbacks.append((dict(urllib.parse.parse_qsl(parts.query)), flow_id))
            status, headers['Location'] = 302, FRONTEND + '/app/login?signed=in'
        elif method == 'POST' and parts.path == '/auth/oidc/backchannel_logout':
            self.logout_tokens.append(form.get('logout_token'))
            status, headers['Cache-Control'] = 200, 'no-store'
        else:
            status = 404
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header('Content-Length', '0')
        handler.end_headers()

    def exchange(self, code, verifier):
        """The token request: client_secret_basic (RFC 6749 2.3.1), PKCE."""
        user = urllib.parse.quote(self.client_id, safe='')
        password = urllib.parse.quote(self.client_secret, safe='')
        basic = base64.b64encode(f'{user}:{password}'.encode()).decode()
        return SsoBrowser(check_contract=False).request(
            'POST',
            self.provider.discovery['token_endpoint'],
            form={
                'grant_type': 'authorization_code',
                'code': code,
                'redirect_uri': self.redirect_uri,
                'code_verifier': verifier,
            },
            headers={'Authorization': 'Basic ' + basic},
        )

    def verify(self, token):
        """The claims of a token the provider signed (its JWKS, RS256 only)."""
        jwks = SsoBrowser(check_contract=False).request(
            'GET', self.provider.discovery['jwks_uri']
        )
        keys = KeySet.import_key_set(jwks.json)
        decoded = jwt.decode(token, keys, algorithms=['RS256'])
        assert decoded.header['alg'] == 'RS256'
        return decoded.claims


@contextlib.contextmanager
def relying_party(provider):
    holder = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            holder['rp'].handle(self, 'GET')

        def do_POST(self):
            holder['rp'].handle(self, 'POST')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    rp = holder['rp'] = RelyingParty(
        f'http://127.0.0.1:{server.server_address[1]}', provider
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        rp.client_id, rp.client_secret = provider.register_client(
            rp.redirect_uri, rp.base + '/auth/oidc/backchannel_logout'
        )
        yield rp
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def rp(oidc_provider):
    with relying_party(oidc_provider) as rp:
        yield rp


def sign_in_and_exchange(rp, email, **options):
    """Sign in through the browser; return (the result, the callback's query, the
    token answer's JSON)."""
    browser = SsoBrowser(check_contract=False)
    result = browser.sign_in(rp.base, email, rp.provider, **options)
    assert result.location == FRONTEND + '/app/login?signed=in', result.steps
    [(query, flow_id)] = rp.callbacks
    flow = rp.flows[flow_id]
    assert query['state'] == flow['state'], result.steps
    answer = rp.exchange(query['code'], flow['verifier'])
    assert answer.status == 200, answer.body
    return browser, result, answer.json, flow


def test_discovery_says_what_frontdesk_needs(oidc_provider):
    doc = oidc_provider.discovery
    assert doc['issuer'] == oidc_provider.issuer
    assert oidc_provider.issuer.startswith('http://127.0.0.1:')
    assert 'code' in doc['response_types_supported']
    assert doc['code_challenge_methods_supported'] == ['S256']
    assert doc['id_token_signing_alg_values_supported'] == ['RS256']
    assert 'client_secret_basic' in doc['token_endpoint_auth_methods_supported']
    assert doc['backchannel_logout_supported'] is True
    assert doc['backchannel_logout_session_supported'] is True
    assert {'openid', 'email', 'profile'} <= set(doc['scopes_supported'])
    for endpoint in ('authorization', 'token', 'registration', 'end_session'):
        assert doc[f'{endpoint}_endpoint'].startswith(oidc_provider.issuer + '/')


def test_frontdesk_discovery_takes_it_only_with_private_issuers(oidc_provider):
    def config(allow):
        return config_module.Config(
            database_url='postgresql://unused', oidc_allow_private_issuers=allow
        )

    doc = oidc_http.discover(config(True), oidc_provider.issuer)

    assert doc['token_endpoint'] == oidc_provider.discovery['token_endpoint']
    with pytest.raises(oidc_http.ProviderError):
        oidc_http.discover(config(False), oidc_provider.issuer)


def test_code_flow_gives_registered_claims_amr_and_sid(rp):
    email = unique_email('sso')
    sub = rp.provider.add_account(email, 'Ada Lovelace', amr=['pwd', 'otp'])

    _, result, tokens, flow = sign_in_and_exchange(rp, email)

    assert result.steps[0].startswith(f'POST {rp.base}/api/v1/auth/saml_login -> 302')
    assert sum('/interaction/' in step and 'POST' in step for step in result.steps) == 2
    [(query, flow_id)] = rp.callbacks
    assert flow_id is not None  # the flow cookie came back on the callback path
    assert query['iss'] == rp.provider.issuer
    claims = rp.verify(tokens['id_token'])
    assert claims['iss'] == rp.provider.issuer
    assert claims['aud'] == rp.client_id
    assert claims['nonce'] == flow['nonce']
    assert claims['sub'] == sub
    assert claims['email'] == email
    assert claims['email_verified'] is True
    assert claims['name'] == 'Ada Lovelace'
    assert claims['amr'] == ['pwd', 'otp']
    assert claims['sid']


def test_unregistered_login_is_a_verified_address_with_a_password(rp):
    email = unique_email('walk-in')

    _, result, tokens, _ = sign_in_and_exchange(rp, email, start='get')

    assert '/auth/sso?' in result.steps[0]
    claims = rp.verify(tokens['id_token'])
    assert claims['email'] == email
    assert claims['email_verified'] is True
    assert claims['amr'] == ['pwd']
    assert 'name' not in claims


def test_the_address_typed_at_the_provider_and_an_unverified_one(rp):
    email, typed = unique_email('asked'), unique_email('typed')
    rp.provider.add_account(typed, 'Typed', email_verified=False, amr=[])

    _, _, tokens, _ = sign_in_and_exchange(rp, email, login=typed)

    claims = rp.verify(tokens['id_token'])
    assert claims['email'] == typed
    assert claims['email_verified'] is False
    assert 'amr' not in claims


def test_cancel_at_the_provider_comes_back_as_access_denied(rp):
    result = SsoBrowser(check_contract=False).sign_in(
        rp.base, unique_email('cancel'), rp.provider, cancel=True
    )

    assert result.location == FRONTEND + '/app/login?signed=in', result.steps
    [(query, _)] = rp.callbacks
    assert query['error'] == 'access_denied'
    assert 'code' not in query


def test_pkce_is_required(rp):
    location, _ = rp.start(unique_email('pkce'))
    parts = urllib.parse.urlsplit(location)
    query = dict(urllib.parse.parse_qsl(parts.query))
    del query['code_challenge'], query['code_challenge_method']
    without = parts._replace(query=urllib.parse.urlencode(query)).geturl()

    answer = SsoBrowser(check_contract=False).request('GET', without)

    assert answer.status == 303, answer.body
    back = urllib.parse.urlsplit(answer.headers['location'])
    assert back.path == '/omniauth/oidc/callback'
    error = dict(urllib.parse.parse_qsl(back.query))
    assert error['error'] == 'invalid_request'
    assert 'PKCE' in error['error_description']


def test_code_exchange_needs_the_verifier(rp):
    email = unique_email('verifier')
    result = SsoBrowser(check_contract=False).sign_in(rp.base, email, rp.provider)
    [(query, _)] = rp.callbacks

    answer = rp.exchange(query['code'], secrets.token_urlsafe(32))

    assert answer.status == 400, (answer.body, result.steps)
    assert answer.json['error'] == 'invalid_grant'


def test_a_second_sign_in_reuses_the_provider_session(rp):
    email = unique_email('again')
    browser, first, _, _ = sign_in_and_exchange(rp, email)
    rp.callbacks.clear()

    again = browser.sign_in(rp.base, email, rp.provider)

    assert again.location == FRONTEND + '/app/login?signed=in', again.steps
    assert not any('/interaction/' in step for step in again.steps), again.steps
    [(query, _)] = rp.callbacks
    assert query['code']


def test_logout_at_the_provider_posts_a_logout_token(rp):
    email = unique_email('logout')
    sub = rp.provider.add_account(email, 'Grace Hopper')
    browser, _, tokens, _ = sign_in_and_exchange(rp, email)
    sid = rp.verify(tokens['id_token'])['sid']

    answer = browser.log_out_at_provider()

    assert answer.headers['location'].startswith(rp.provider.issuer + '/session/end')
    [logout_token] = rp.logout_tokens
    claims = rp.verify(logout_token)
    assert claims['iss'] == rp.provider.issuer
    assert claims['aud'] == rp.client_id
    assert claims['sub'] == sub
    assert claims['sid'] == sid
    assert claims['events'] == {LOGOUT_EVENT: {}}
    assert claims['jti']
    assert 'nonce' not in claims
    # The provider's session is over: logging out again posts nothing, and the next
    # sign-in asks for the address again.
    assert browser.log_out_at_provider().status == 303
    assert len(rp.logout_tokens) == 1
    rp.callbacks.clear()
    again = browser.sign_in(rp.base, email, rp.provider)
    assert any('/interaction/' in step for step in again.steps), again.steps
