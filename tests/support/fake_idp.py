"""A forged OpenID Connect provider on loopback, for what a real one would not send.

The real provider of the suite (the oidc-provider package) answers correctly; this one
answers what a test tells it to: HTML for JSON, a 500, a token endpoint that holds the
connection, ID tokens signed with another key, with ``alg: none``, with HMAC keyed by
the public key, with the wrong claims. It signs with its own RSA key (kid ``k1``) and
publishes it at /jwks.

    with fake_idp() as idp:
        idp.id_token = idp.sign({...claims...})       # what /token hands out next
        idp.answers['/token'] = (500, 'text/html', b'<html>oops</html>')
        idp.delays['/token'] = 60                       # seconds before answering
        ...                                             # idp.finished: delays run out
"""

import base64
import contextlib
import http.server
import json
import threading
import time
import urllib.parse

from joserfc import jwt
from joserfc.jwk import OctKey
from joserfc.jwk import RSAKey

DISCOVERY = '/.well-known/openid-configuration'


class FakeIdP:
    def __init__(self, issuer):
        self.issuer = issuer
        self.key = RSAKey.generate_key(2048, parameters={'kid': 'k1'})
        self.other_key = RSAKey.generate_key(2048, parameters={'kid': 'k1'})
        self.discovery = {
            'issuer': issuer,
            'authorization_endpoint': issuer + '/authorize',
            'token_endpoint': issuer + '/token',
            'jwks_uri': issuer + '/jwks',
            'end_session_endpoint': issuer + '/logout',
            'response_types_supported': ['code'],
            'code_challenge_methods_supported': ['S256'],
            'id_token_signing_alg_values_supported': ['RS256'],
            'token_endpoint_auth_methods_supported': [
                'client_secret_basic',
                'client_secret_post',
            ],
            'backchannel_logout_supported': True,
            'backchannel_logout_session_supported': True,
        }
        self.jwks = {'keys': [self.key.as_dict(private=False)]}
        # The ID token /token hands out (a string, or a callable of the form sent).
        self.id_token = None
        # path -> (status, content type, body bytes): answered instead of the default.
        self.answers = {}
        # path -> seconds to wait before answering.
        self.delays = {}
        # (method, path, headers, form) of every request, in order.
        self.requests = []
        # The paths whose delay had run out (their answer was about to go), in order:
        # a caller that got its answer while its path is not here gave up first.
        self.finished = []

    # --- tokens -------------------------------------------------------------------
    def claims(self, client_id, nonce, **overrides):
        """An ID token's claims that pass every check; ``overrides`` (None removes)."""
        now = int(time.time())
        claims = {
            'iss': self.issuer,
            'aud': client_id,
            'sub': 'sub-' + nonce[:8],
            'exp': now + 300,
            'iat': now,
            'nonce': nonce,
            'email': 'someone@example.com',
            'email_verified': True,
            'name': 'Some One',
            'sid': 'sid-' + nonce[:8],
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def sign(self, claims, alg='RS256', kid='k1', key=None):
        header = {'alg': alg, 'typ': 'JWT'}
        if kid is not None:
            header['kid'] = kid
        return jwt.encode(header, claims, key or self.key, algorithms=[alg])

    def unsigned(self, claims):
        """``alg: none``: header and claims, and an empty signature."""

        def part(value):
            raw = json.dumps(value).encode()
            return base64.urlsafe_b64encode(raw).rstrip(b'=').decode()

        return f'{part({"alg": "none", "typ": "JWT"})}.{part(claims)}.'

    def hmac_with_public_key(self, claims):
        """HS256 keyed with the bytes of the published public key (the classic
        algorithm-confusion forgery)."""
        public = json.dumps(self.key.as_dict(private=False)).encode()
        return self.sign(claims, alg='HS256', key=OctKey.import_key(public), kid='k1')

    # --- serving ------------------------------------------------------------------
    def _answer(self, handler, method):
        path = urllib.parse.urlsplit(handler.path).path
        length = int(handler.headers.get('Content-Length') or 0)
        raw = handler.rfile.read(length) if length else b''
        form = dict(urllib.parse.parse_qsl(raw.decode('latin-1')))
        self.requests.append((method, path, dict(handler.headers), form))
        time.sleep(self.delays.get(path, 0))
        self.finished.append(path)
        if path in self.answers:
            status, content_type, body = self.answers[path]
        elif path == DISCOVERY:
            status, content_type, body = 200, 'application/json', self.discovery
        elif path == '/jwks':
            status, content_type, body = 200, 'application/json', self.jwks
        elif path == '/token' and method == 'POST':
            token = self.id_token(form) if callable(self.id_token) else self.id_token
            body = {'access_token': 'at', 'token_type': 'Bearer', 'id_token': token}
            status, content_type = 200, 'application/json'
        else:
            status, content_type, body = 404, 'text/plain', b'not here'
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        try:
            handler.send_response(status)
            handler.send_header('Content-Type', content_type)
            handler.send_header('Content-Length', str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            pass  # the caller gave up (its deadline): what a slow provider sees


@contextlib.contextmanager
def fake_idp():
    """A FakeIdP serving on a free loopback port until the block ends."""
    holder = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            holder['idp']._answer(self, 'GET')

        def do_POST(self):
            holder['idp']._answer(self, 'POST')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    idp = holder['idp'] = FakeIdP(f'http://127.0.0.1:{server.server_address[1]}')
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        server.shutdown()
        server.server_close()
