"""SSO_LOGIN_URL_COMMAND of the reference harness's `sso` scenario
(shared/clients/chatwoot, harness/sso.mjs): the instance's side of single sign-on,
run for real, printing where it ends.

    cd ROOT && python -m tests.sso_login_url plain|mfa

``plain``: a new person of the organisation signs in at the provider (just-in-time
provisioning makes them an agent member); prints the final redirect,
``<FRONTEND_URL>/app/login?email=...&sso_auth_token=...``. ``mfa``: someone signs up
with an address in the organisation's domain, confirms it with the mailed link, turns
MFA on in the profile, then signs in through the provider (and joins the account just in
time); prints the redirect, then the TOTP secret (base32) on the second line.

Environment (tests/test_chatwoot_clients.py sets it): SSO_BASE_URL (Frontdesk, whose
FRONTEND_URL is itself), SSO_ISSUER (the test provider), SSO_DOMAIN (the organisation's
domain, with jit_provisioning on), DATABASE_URL (to read the mailed link, as the
harness does).
"""

import os
import sys
import time

import psycopg
from psycopg.rows import dict_row

from tests.support.oidc_provider import OidcProvider
from tests.support.servers import http
from tests.support.sso_browser import SsoBrowser
from tests.support.sso_people import enable_mfa
from tests.support.sso_people import sign_up_confirmed


def main(kind):
    base = os.environ['SSO_BASE_URL']
    issuer = os.environ['SSO_ISSUER']
    discovery = http('GET', issuer + '/.well-known/openid-configuration').json
    provider = OidcProvider(issuer, discovery, None)
    address = f'{kind}-{time.monotonic_ns()}@{os.environ["SSO_DOMAIN"]}'
    secret = None
    if kind == 'mfa':
        with psycopg.connect(
            os.environ['DATABASE_URL'], autocommit=True, row_factory=dict_row
        ) as conn:
            _, headers = sign_up_confirmed(base, conn, address, 'Mia Factor')
        secret = enable_mfa(base, headers).secret
    elif kind != 'plain':
        raise SystemExit(f'usage: {sys.argv[0]} plain|mfa')
    provider.add_account(address, f'{kind.title()} Member')
    result = SsoBrowser().sign_in(base, address, provider)
    print(result.location)
    if secret:
        print(secret)


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) == 2 else '')
