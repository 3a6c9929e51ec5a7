"""An account's single sign-on settings (SPEC 19, "Settings, per account").

A PUT goes in three steps, so that no database connection is held while the provider
is asked (its discovery may take the whole 5 s deadline of services/oidc_http.py):

1. ``checked`` and ``precheck``: the body's rules, then what the database says of the
   domains and of a stored secret; a request that would fail anyway calls nobody;
2. ``discover``: the provider's discovery document, checked, with no connection held;
3. ``save``, in one transaction from the account row on (the lock every administrator
   action takes first, services/memberships.py): the same checks again, then the
   provider row, its domains, an audit event and a mail to every administrator.

A domain belongs to one account's provider (sso_domains' primary key, which decides a
race between two accounts: the loser gets the 422, not a 500), and an account claims
one only while one of its active administrators has a confirmed address in exactly
that domain: the proof of a mailbox there. Without it, anyone could sign up, claim a
company's domain and send its people to a provider of their own.
"""

from psycopg.types.json import Jsonb

import errors
from services import audit
from services import mail
from services import memberships
from services import oidc_http
from services import security_mail
from services import sso_providers

# Where the administrator registers the service at the provider (SPEC 19).
REDIRECT_PATH = '/omniauth/oidc/callback'
BACKCHANNEL_LOGOUT_PATH = '/auth/oidc/backchannel_logout'
BOOLEANS = ('jit_provisioning', 'enforce', 'trust_idp_mfa')
# What an administrator may change, in the order the audit event names them.
FIELDS = ('issuer', 'client_id', 'client_secret', 'allowed_domains', *BOOLEANS)
SECRET_REQUIRED = "Client secret can't be blank"
ADVICE = (
    'If you and your fellow administrators expected this change, there is nothing to '
    "do. If not, check the account's single sign-on settings and its audit log now: "
    'whoever changed them can send its members to another identity provider.'
)


def require_available(config):
    """The client secret is sealed with SECRET_KEY (SPEC 12, 19): without it the
    settings cannot be written (403, as the MFA endpoints answer)."""
    if config.secret_key is None:
        raise errors.SSOUnavailable()


def redirect_uri(config):
    """The callback the provider sends the browser back to."""
    return config.frontend_url + REDIRECT_PATH


def backchannel_logout_uri(config):
    """Where the provider posts its logout tokens."""
    return config.frontend_url + BACKCHANNEL_LOGOUT_PATH


def answer(config, row):
    """The settings as the API shows them (``row``: sso.settings_current's): never
    the secret, and what the administrator registers at the provider."""
    return {
        'issuer': row['issuer'],
        'client_id': row['client_id'],
        'client_secret_set': True,
        'allowed_domains': list(row['allowed_domains']),
        **{name: row[name] for name in BOOLEANS},
        'redirect_uri': redirect_uri(config),
        'backchannel_logout_uri': backchannel_logout_uri(config),
    }


def read(conn, queries, config, account_id):
    """The account's settings as ``answer`` shows them, or None."""
    row = conn.execute(
        queries['sso.settings_current'], {'account_id': account_id}
    ).fetchone()
    return None if row is None else answer(config, row)


def checked(config, settings):
    """The body's ``sso_settings`` (schema-valid: the schema holds the domains to
    lower-case DNS names, at most 50) as it is stored: domains unique and sorted,
    booleans false when absent, no secret (None) when none is sent. 422 for an issuer
    that is no URL a provider may have (services/oidc_http.check_url: https, unless
    private issuers are allowed).

    The 422s of this module are ``{"message"}`` alone (SPEC 19): each names what
    failed, and most depend on what is stored or on the provider, not on the body's
    shape."""
    try:
        oidc_http.check_url(config, settings['issuer'])
    except oidc_http.ProviderError as failed:
        raise errors.Unprocessable(message=failed.message) from None
    return {
        'issuer': settings['issuer'],
        'client_id': settings['client_id'],
        'client_secret': settings.get('client_secret') or None,
        'allowed_domains': sorted(set(settings['allowed_domains'])),
        **{name: settings.get(name, False) for name in BOOLEANS},
    }


def precheck(conn, queries, account_id, settings):
    """What save() checks again under its lock, before the provider is called: a
    secret is sent or stored, and every domain may be claimed."""
    current = conn.execute(
        queries['sso.settings_current'], {'account_id': account_id}
    ).fetchone()
    _check_secret(current, settings)
    _check_domains(conn, queries, account_id, settings['allowed_domains'])


def discover(config, issuer):
    """The issuer's discovery document (SPEC 19), or the 422 naming what failed.
    Call it with no database connection held."""
    try:
        return oidc_http.discover(config, issuer)
    except oidc_http.ProviderError as failed:
        raise errors.Unprocessable(
            message=f'The issuer cannot be used: {failed.message}'
        ) from None


def _check_secret(current, settings):
    if current is None and settings['client_secret'] is None:
        raise errors.Unprocessable(message=SECRET_REQUIRED)


def _check_domains(conn, queries, account_id, domains):
    """422 naming the domains another account's provider has, or that no active
    administrator of this account has a confirmed address in."""
    claims = conn.execute(
        queries['sso.settings_domain_claims'],
        {'account_id': account_id, 'domains': domains},
    ).fetchall()
    _refuse_taken([row['domain'] for row in claims if row['claimed_elsewhere']])
    unproven = [row['domain'] for row in claims if not row['proven']]
    if unproven:
        raise errors.Unprocessable(
            message='Allowed domains need an administrator of this account with a '
            f'confirmed address in each: none has one in {", ".join(unproven)}'
        )


def _refuse_taken(domains):
    if domains:
        raise errors.Unprocessable(
            message='Allowed domains already belong to another account: '
            + ', '.join(domains)
        )


def save(conn, queries, config, account_id, settings, discovery, facts):
    """Store ``settings`` (checked()'s) with the provider's ``discovery``, in the
    caller's transaction, on behalf of the caller of ``facts``; announce the change.
    Returns the settings as ``answer`` shows them."""
    memberships.hold_as_administrator(conn, queries, account_id, facts.caller_id)
    before = read(conn, queries, config, account_id)
    _check_secret(before, settings)
    domains = settings['allowed_domains']
    _check_domains(conn, queries, account_id, domains)
    secret = settings['client_secret']
    conn.execute(
        queries['sso.settings_upsert'],
        {
            **settings,
            'account_id': account_id,
            'client_secret_encrypted': secret
            and sso_providers.seal_secret(config, account_id, secret),
            'discovery': Jsonb(discovery),
        },
    )
    params = {'account_id': account_id, 'domains': domains}
    conn.execute(queries['sso.settings_drop_domains'], params)
    claimed = {
        row['domain']
        for row in conn.execute(queries['sso.settings_claim_domains'], params)
    }
    _refuse_taken([domain for domain in domains if domain not in claimed])
    if before is not None:
        # What the provider vouched for under the replaced settings must not sign in.
        conn.execute(queries['sso.attack_void_issued'], {'account_id': account_id})
    after = read(conn, queries, config, account_id)
    old = before or {}
    changed = [
        name
        for name in FIELDS
        if (
            secret is not None
            if name == 'client_secret'
            else old.get(name) != after[name]
        )
    ]
    _announce(
        conn,
        queries,
        config,
        account_id,
        'sso_settings_updated',
        {'created': before is None, 'fields': changed, **_facts_of(after)},
        facts,
    )
    return after


def delete(conn, queries, config, account_id, facts):
    """Remove the account's settings in the caller's transaction and announce it;
    False when there were none."""
    memberships.hold_as_administrator(conn, queries, account_id, facts.caller_id)
    gone = conn.execute(
        queries['sso.settings_delete'], {'account_id': account_id}
    ).fetchone()
    if gone is None:
        return False
    conn.execute(queries['sso.attack_void_issued'], {'account_id': account_id})
    _announce(
        conn,
        queries,
        config,
        account_id,
        'sso_settings_deleted',
        _facts_of(gone),
        facts,
    )
    return True


def _facts_of(settings):
    """What the audit event and the mail name: the provider and its domains (no
    secret)."""
    return {
        'issuer': settings['issuer'],
        'allowed_domains': list(settings['allowed_domains']),
    }


def _announce(conn, queries, config, account_id, event, details, facts):
    """The audit event, and a security e-mail to every active administrator."""
    audit.record(
        conn, queries, event, account_id=account_id, facts=facts, details=details
    )
    lines = [
        f'By: {facts.caller_email}',
        mail.FromRequest('Identity provider: ', details['issuer']),
        mail.FromRequest('Domains: ', ', '.join(details['allowed_domains'])),
    ]
    if details.get('fields'):
        lines.append('Changed: ' + ', '.join(details['fields']).replace('_', ' '))
    security_mail.send_to_administrators(
        conn,
        queries,
        config,
        event,
        account_id,
        facts,
        {'lines': lines, 'advice': ADVICE},
    )
