"""Single sign-on with OpenID Connect (SPEC 19): the start, which sends the browser to
the account's provider, and the callback, which checks what the provider sends back and
ends in a one-time ``sso_auth_token`` for POST /auth/sign_in (services/sign_in.py
with_sso_token).

A flow lives in sso_flows for 10 minutes under a random id, the ``fd_sso`` cookie; its
state, nonce and PKCE verifier never leave the server but in the redirect to the
provider. The callback holds no database connection while it calls the provider (the
pool is small and a provider may take its whole deadline). Every failure of the
callback is a redirect to the login page with an audit event saying why.
"""

import base64
import dataclasses
import hashlib
import urllib.parse

import psycopg
from psycopg.types.json import Jsonb

import errors
from services import addresses
from services import audit
from services import credentials
from services import oidc_http
from services import oidc_tokens
from services import security_mail
from services import sessions
from services import sso_providers
from services import users
import tokens

COOKIE = 'fd_sso'
CALLBACK_PATH = '/omniauth/oidc/callback'
FLOW_SECONDS = 600
TARGETS = ('web', 'mobile')
MOBILE_URL = 'chatwootapp://auth/saml'
# The error codes the reference login page shows a message for.
NOT_ENABLED = 'saml-not-enabled'
FAILED = 'saml-authentication-failed'
NO_ACCOUNT = 'no-account-found'
# RFC 8176 methods that are a second factor by themselves; sms counts beside another.
SECOND_FACTORS = frozenset(('mfa', 'otp', 'hwk'))
CLAIM_LIMIT = 255  # user_tokens.sso_sid / sso_sub


class Failed(Exception):
    """The callback ends at the login page with ``error``; ``reason`` goes to the
    audit event."""

    def __init__(self, reason, error=FAILED, user_id=None):
        super().__init__(reason)
        self.reason = reason
        self.error = error
        self.user_id = user_id


@dataclasses.dataclass(frozen=True)
class Redirect:
    """Where the browser goes next; ``cookie``: the fd_sso value to set (a start), or
    None."""

    location: str
    cookie: str | None = None


def redirect_uri(config):
    """The callback address the administrator registers at the provider."""
    return config.frontend_url.rstrip('/') + CALLBACK_PATH


def login_page(config, **params):
    return (
        f'{config.frontend_url.rstrip("/")}/app/login?{urllib.parse.urlencode(params)}'
    )


def start(pool, queries, config, email, target):
    """The redirect of a start: to the provider of ``email``'s domain, with a new
    flow; to the login page's saml-not-enabled when there is none."""
    target = target if target in TARGETS else 'web'
    flow_id, state, nonce, verifier = (tokens.new_token() for _ in range(4))
    with pool.connection() as conn:
        provider = sso_providers.for_address(conn, queries, email)
        if provider is None:
            return Redirect(login_page(config, error=NOT_ENABLED))
        conn.execute(
            queries['sso.flow_start'],
            {
                'id_digest': tokens.digest(flow_id),
                'state_digest': tokens.digest(state),
                'nonce': nonce,
                'code_verifier': verifier,
                'account_id': provider['account_id'],
                'email': addresses.normalise(email),
                'target': target,
            },
        )
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return Redirect(
        _with_query(
            provider['discovery']['authorization_endpoint'],
            {
                'response_type': 'code',
                'scope': 'openid email profile',
                'client_id': provider['client_id'],
                'redirect_uri': redirect_uri(config),
                'state': state,
                'nonce': nonce,
                'code_challenge': challenge.rstrip(b'=').decode(),
                'code_challenge_method': 'S256',
                'login_hint': addresses.normalise(email),
            },
        ),
        cookie=flow_id,
    )


def callback(pool, queries, config, params, cookie, facts, presented):
    """The redirect of a callback (``params``: its query; ``cookie``: fd_sso's value;
    ``presented``: the sign-in credentials the request carries, for the notice of a
    first confirmation, as services/sign_in.confirm): to the login page with an
    ``sso_auth_token``, or with the error of why not (audited)."""
    flow = None
    try:
        flow = _take_flow(pool, queries, params.get('state'), cookie)
        if params.get('error') is not None:
            raise Failed('provider_error')
        if flow is None:
            raise Failed('state_mismatch')
        claims = _claims(pool, queries, config, flow, params.get('code'))
        return _finish(pool, queries, config, flow, claims, facts, presented)
    except (Failed, oidc_http.ProviderError) as failed:
        _record_failure(
            pool,
            queries,
            failed.reason,
            flow and flow['account_id'],
            getattr(failed, 'user_id', None),
            facts,
        )
        return Redirect(login_page(config, error=getattr(failed, 'error', FAILED)))


def _record_failure(pool, queries, reason, account_id, user_id, facts):
    """The audit row of a failed callback, bounded per client address and hour
    (sso.attack_record_callback_failure): anyone can call the callback."""
    facts = facts or audit.NO_REQUEST
    with pool.connection() as conn:
        conn.execute(
            queries['sso.attack_record_callback_failure'],
            {
                'address_key': audit.address_key(facts.ip_address or ''),
                'reason': reason,
                'account_id': account_id,
                'subject_id': user_id,
                'ip_address': facts.ip_address,
                'user_agent': facts.user_agent,
                'details': Jsonb({'reason': reason}),
            },
        )


def _take_flow(pool, queries, state, cookie):
    """The flow of the cookie whose state came back, used up, with its provider; None
    when there is no such live flow."""
    if not all(isinstance(value, str) and value for value in (state, cookie)):
        return None
    with pool.connection() as conn:
        return conn.execute(
            queries['sso.flow_take'],
            {'id_digest': tokens.digest(cookie), 'state_digest': tokens.digest(state)},
        ).fetchone()


def _claims(pool, queries, config, flow, code):
    """The ID token's claims, from the code exchanged with the flow's verifier and
    checked (oidc_tokens) with its nonce; then its address, verified."""
    if not isinstance(code, str) or not code:
        raise Failed('no_code')
    secret = sso_providers.client_secret(config, flow)
    if secret is None:
        raise Failed('secret_unreadable')
    discovery = flow['discovery']
    form = {
        'grant_type': 'authorization_code',
        'code': code,
        'redirect_uri': redirect_uri(config),
        'code_verifier': flow['code_verifier'],
    }
    auth = None
    methods = discovery.get('token_endpoint_auth_methods_supported')
    if methods is None or 'client_secret_basic' in methods:
        # RFC 6749 2.3.1: both form-encoded before they are joined.
        auth = tuple(
            urllib.parse.quote(value, safe='') for value in (flow['client_id'], secret)
        )
    else:
        form.update(client_id=flow['client_id'], client_secret=secret)
    answer = oidc_http.request_json(
        config, 'POST', discovery['token_endpoint'], data=form, auth=auth
    )
    claims = oidc_tokens.check_id_token(
        pool, queries, config, flow, answer.get('id_token'), flow['nonce']
    )
    if not addresses.is_valid(claims.get('email')):
        raise Failed('no_email')
    if claims.get('email_verified') is not True:
        raise Failed('email_unverified')
    for key in ('sub', 'sid'):
        value = claims.get(key)
        if (key == 'sub' or value is not None) and not (
            isinstance(value, str) and 0 < len(value) <= CLAIM_LIMIT
        ):
            raise Failed('bad_claims')
    return claims


def _finish(pool, queries, config, flow, claims, facts, presented):
    """Who the verified address is in the provider's account, then their token."""
    email = addresses.normalise(claims['email'])
    account_id = flow['account_id']
    try:
        with pool.connection() as conn, conn.transaction():
            if not conn.execute(
                queries['sso.flow_domain_allowed'],
                {'account_id': account_id, 'domain': email.rpartition('@')[2]},
            ).fetchone()['allowed']:
                raise Failed('domain_not_allowed')
            user = conn.execute(
                queries['sso.flow_user'], {'email': email, 'account_id': account_id}
            ).fetchone()
            if user is not None:
                # Before provisioning, which would give a locked-out user (every
                # membership suspended, SPEC 18) an active one.
                try:
                    sessions.refuse_locked_out(conn, queries, user['id'])
                except errors.AccountSuspended:
                    raise Failed('suspended', user_id=user['id']) from None
            user_id = _member(conn, queries, flow, user, email, claims)
            if user is not None and not user['confirmed']:
                _first_confirmation(conn, queries, config, user_id, facts, presented)
            token = tokens.new_token()
            conn.execute(
                queries['sso.flow_issue_token'],
                {
                    'user_id': user_id,
                    'email': email,
                    'token_digest': tokens.digest(token),
                    'account_id': account_id,
                    'sid': claims.get('sid'),
                    'sub': claims['sub'],
                    'idp_second_factor': flow['trust_idp_mfa']
                    and names_second_factor(claims.get('amr')),
                },
            )
            audit.record(
                conn,
                queries,
                'sso_sign_in',
                subject_id=user_id,
                actor_id=user_id,
                account_id=account_id,
                facts=facts,
                details={
                    'provisioned': user is None or user['membership_status'] is None
                },
            )
    except (users.EmailTaken, psycopg.errors.UniqueViolation):
        # Another callback created that user or membership meanwhile.
        raise Failed('conflict') from None
    query = {'email': email, 'sso_auth_token': token}
    if flow['target'] == 'mobile':
        return Redirect(f'{MOBILE_URL}?{urllib.parse.urlencode(query)}')
    return Redirect(login_page(config, **query))


def _member(conn, queries, flow, user, email, claims):
    """The id of the user who signs in as a member of the provider's account: a
    member; with jit_provisioning, a new member (and a new user without a password);
    else Failed."""
    if user is not None and user['membership_status'] == 'suspended':
        raise Failed('suspended', user_id=user['id'])
    if user is not None and user['membership_status'] is not None:
        return user['id']
    if not flow['jit_provisioning']:
        raise Failed('no_account', error=NO_ACCOUNT, user_id=user and user['id'])
    user_id = user['id'] if user is not None else None
    if user_id is None:
        name = claims.get('name')
        name = name.strip()[:255] if isinstance(name, str) else ''
        user_id = users.create_user(
            conn,
            queries,
            name=name or email.partition('@')[0],
            email=email,
            encrypted_password=None,
            confirmed=True,
        )
    conn.execute(
        queries['memberships.insert'],
        {
            'account_id': flow['account_id'],
            'user_id': user_id,
            'role': 'agent',
            'stamp_active': False,
        },
    )
    return user_id


def _first_confirmation(conn, queries, config, user_id, facts, presented):
    """The owner's first confirmation (SPEC 3.4): the password chosen at sign-up goes,
    every session, link and token from before ends (a credential change), and the
    notice of rule 1 is mailed unless the request carries the sign-up's session."""
    confirmed = conn.execute(
        queries['sso.flow_confirm'], {'user_id': user_id}
    ).fetchone()
    notice = security_mail.sign_up_notice(conn, queries, config, confirmed, presented)
    credentials.change(
        conn, queries, config, user_id, reason='confirmation', facts=facts
    )
    security_mail.send_sign_up_notice(conn, queries, config, notice)


def names_second_factor(amr):
    """Whether an ID token's ``amr`` (RFC 8176) names a second factor: mfa, otp or
    hwk, or sms beside another method."""
    if not isinstance(amr, list):
        return False
    methods = {method for method in amr if isinstance(method, str)}
    return bool(methods & SECOND_FACTORS) or ('sms' in methods and len(methods) > 1)


def _with_query(url, params):
    """``url`` with ``params`` added to the query it may already have."""
    parts = urllib.parse.urlsplit(url)
    query = '&'.join(filter(None, (parts.query, urllib.parse.urlencode(params))))
    return parts._replace(query=query).geturl()
