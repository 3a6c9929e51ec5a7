"""A real OpenID Connect provider on loopback for the single sign-on tests (SPEC 19).

``run_oidc_provider()`` starts tests/oidc_provider/server.mjs (panva's oidc-provider,
pinned by its package-lock.json, installed by scripts/bootstrap) on a port the system
picks, reads the issuer it prints, yields an ``OidcProvider`` and stops it.
tests/conftest.py keeps one for the session (fixture ``oidc_provider``); each test
registers its own client and people, so tests never share them::

    client_id, client_secret = oidc_provider.register_client(
        gunicorn_url + '/omniauth/oidc/callback',
        gunicorn_url + '/auth/oidc/backchannel_logout',
    )
    sub = oidc_provider.add_account(email, 'Ada Lovelace', amr=['pwd', 'otp'])

Its issuer is ``http://127.0.0.1:PORT``: Frontdesk admits it with
OIDC_ALLOW_PRIVATE_ISSUERS=true. tests/support/sso_browser.py signs in through it.
"""

import contextlib
import dataclasses
import pathlib
import re
import subprocess

from tests.support import ROOT
from tests.support.processes import wait_ready
from tests.support.sso_browser import SsoBrowser

OIDC_PROVIDER = ROOT / 'tests' / 'oidc_provider'


@dataclasses.dataclass
class OidcProvider:
    issuer: str
    discovery: dict  # its /.well-known/openid-configuration
    log_path: pathlib.Path  # its stdout and stderr

    def _post(self, url, doc):
        answer = SsoBrowser(check_contract=False).request('POST', url, json_body=doc)
        assert answer.status == 201, (url, answer.status, answer.body[:500])
        return answer.json

    def register_client(self, redirect_uri, backchannel_logout_uri=None, **metadata):
        """Register a confidential client by dynamic registration (RFC 7591):
        client_secret_basic, RS256 ID tokens, ``sid`` in them and in logout tokens.
        ``metadata`` adds to or overrides what is registered. Return (client_id,
        client_secret)."""
        doc = {
            'redirect_uris': [redirect_uri],
            'token_endpoint_auth_method': 'client_secret_basic',
            'id_token_signed_response_alg': 'RS256',
            'grant_types': ['authorization_code'],
            'response_types': ['code'],
        }
        if backchannel_logout_uri:
            doc['backchannel_logout_uri'] = backchannel_logout_uri
            doc['backchannel_logout_session_required'] = True
        client = self._post(self.discovery['registration_endpoint'], doc | metadata)
        return client['client_id'], client['client_secret']

    def add_account(self, email, name, email_verified=True, amr=None, sub=None):
        """A person who signs in at the provider by typing ``email``; their ID tokens
        carry these claims and ``amr`` (``['pwd']`` when None; [] for none at all).
        Return their ``sub`` (random unless given)."""
        doc = {'email': email, 'name': name, 'email_verified': email_verified}
        if amr is not None:
            doc['amr'] = amr
        if sub is not None:
            doc['sub'] = sub
        return self._post(self.issuer + '/_test/accounts', doc)['sub']


_LISTENING = re.compile(
    rb'^oidc-provider listening on (http://127\.0\.0\.1:\d+)$', re.M
)


def _issuer_once_listening(proc, log_path):
    """The issuer the provider prints once it listens (on the port the system gave
    it: no other process can take a port between its choice and the bind)."""

    def printed():
        found = _LISTENING.search(log_path.read_bytes())
        return found and found.group(1).decode()

    try:
        return wait_ready(proc, printed, 'oidc-provider')
    except (RuntimeError, TimeoutError) as ex:
        raise RuntimeError(
            f'{ex}: ' + log_path.read_text(errors='replace')[-2000:]
        ) from None


@contextlib.contextmanager
def run_oidc_provider(log_path, port=0):
    """Start the provider on 127.0.0.1 (a free port unless ``port``); yield an
    ``OidcProvider``; stop it."""
    log_path = pathlib.Path(log_path)
    with open(log_path, 'wb') as log:
        proc = subprocess.Popen(
            ['node', 'server.mjs', str(port)],
            cwd=OIDC_PROVIDER,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            issuer = _issuer_once_listening(proc, log_path)
            answer = SsoBrowser(check_contract=False).request(
                'GET', issuer + '/.well-known/openid-configuration'
            )
            yield OidcProvider(issuer, answer.json, log_path)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
