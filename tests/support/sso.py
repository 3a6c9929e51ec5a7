"""Single sign-on in the tests (SPEC 19): an account's provider stored as the settings
endpoint stores it, for tests of the flow and the back channel that do not test the
settings; and unique e-mail domains (a domain belongs to one provider)."""

import uuid

from psycopg.types.json import Jsonb

from services import oidc_http
from services import sso_providers

# An account's single sign-on settings: its GET and DELETE answer SPEC 19's 404 until
# the account has some, so the tests that walk every route expect that 404 here.
SETTINGS_ROUTE = '/api/v1/accounts/{account_id:id}/sso_settings'


def unique_domain():
    return f'sso-{uuid.uuid4().hex[:10]}.example.com'


def insert_provider(
    conn,
    config,
    account_id,
    issuer,
    client_id,
    client_secret,
    domains,
    jit_provisioning=False,
    enforce=False,
    trust_idp_mfa=False,
):
    """Store ``account_id``'s provider at ``issuer`` (its discovery read now, so it
    must be serving) for ``domains``."""
    discovery = oidc_http.discover(config, issuer)
    conn.execute(
        'INSERT INTO sso_providers (account_id, issuer, client_id,'
        ' client_secret_encrypted, jit_provisioning, enforce, trust_idp_mfa, discovery)'
        ' VALUES (%s, %s, %s, %s, %s, %s, %s, %s)',
        (
            account_id,
            issuer,
            client_id,
            sso_providers.seal_secret(config, account_id, client_secret),
            jit_provisioning,
            enforce,
            trust_idp_mfa,
            Jsonb(discovery),
        ),
    )
    for domain in domains:
        conn.execute(
            'INSERT INTO sso_domains (domain, account_id) VALUES (%s, %s)',
            (domain, account_id),
        )
