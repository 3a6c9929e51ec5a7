"""Back-channel logout (SPEC 19; OpenID Connect Back-Channel Logout 1.0): a provider
ends here the sessions its own session opened.

The logout token is checked by joserfc (services/oidc_tokens.verify): the provider is
the configured one its ``iss`` names whose client id is in its ``aud`` (several accounts
may share an issuer, Google's say), the signature by that provider's JWKS, ``iat``
within 2 minutes; then what makes it a logout token (2.4, 2.6): the back-channel
logout member in ``events``, a ``sid`` or a ``sub``, no ``nonce``, and a ``jti`` not
seen before (kept in sso_logout_tokens while the token could pass the iat check).

Every refusal is audited, bounded per client address and hour as failed sign-ins of
unknown addresses are (anyone can post a token): sso.logout_record_refusal.
"""

from psycopg.types.json import Jsonb

from services import audit
from services import oidc_tokens
from services.oidc_http import ProviderError

EVENT = 'http://schemas.openid.net/event/backchannel-logout'
# What joserfc checks beyond iss, aud and iat (verify): these must be there.
CLAIMS = {'jti': {'essential': True}, 'events': {'essential': True}}
# A jti is kept until its token can no longer pass the iat check, and a margin.
KEEP_SECONDS = oidc_tokens.IAT_SKEW_SECONDS + 180
# sid, sub and jti as sso_logout_tokens and user_tokens keep them; the issuer as
# sso_providers does.
CLAIM_LIMIT = 255
ISSUER_LIMIT = 2048


class Refused(Exception):
    """The logout token is refused (already audited); ``reason`` says why."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def log_out(pool, queries, config, token, facts):
    """End the sessions ``token`` names; the number ended, or Refused."""
    account_id = None
    try:
        _, peeked = oidc_tokens.peek(token)
        providers = _providers(pool, queries, peeked)
        account_id = providers[0]['account_id']
        claims = oidc_tokens.verify(pool, queries, config, providers[0], token, CLAIMS)
        sid, sub, jti = _logout_claims(claims)
        with pool.connection() as conn, conn.transaction():
            taken = conn.execute(
                queries['sso.logout_take_jti'],
                {
                    'account_id': account_id,
                    'jti': jti,
                    'iat': claims['iat'],
                    'keep_seconds': KEEP_SECONDS,
                },
            ).fetchone()
            if taken is None:
                raise ProviderError('replayed', 'The logout token was used before')
            ended = conn.execute(
                queries['sso.logout_end_sessions'],
                {
                    'account_ids': [p['account_id'] for p in providers],
                    'sid': sid,
                    'sub': sub,
                },
            ).fetchall()
            users = {row['user_id'] for row in ended}
            audit.record(
                conn,
                queries,
                'sso_backchannel_logout',
                subject_id=users.pop() if len(users) == 1 else None,
                account_id=account_id,
                facts=facts,
                details={'sessions_ended': len(ended), 'by': 'sid' if sid else 'sub'},
            )
        return len(ended)
    except ProviderError as refused:
        _record_refusal(pool, queries, account_id, refused.reason, facts)
        raise Refused(refused.reason) from None


def _text(value, limit):
    """``value`` if a claim may be it: a string PostgreSQL can take, within limit."""
    if isinstance(value, str) and 0 < len(value) <= limit and '\x00' not in value:
        return value
    return None


def _providers(pool, queries, peeked):
    """The configured providers of the token's issuer whose client id is in its
    audience (unverified yet: verify checks both again); none is a refusal."""
    issuer = _text(peeked.get('iss'), ISSUER_LIMIT)
    audience = peeked.get('aud')
    audiences = audience if isinstance(audience, list) else [audience]
    if issuer is None:
        raise ProviderError('unknown_provider', 'No issuer')
    with pool.connection() as conn:
        rows = conn.execute(
            queries['sso.logout_providers'], {'issuer': issuer}
        ).fetchall()
    found = [row for row in rows if row['client_id'] in audiences]
    if not found:
        raise ProviderError('unknown_provider', 'No provider has that issuer and aud')
    return found


def _logout_claims(claims):
    """(sid, sub, jti) of a verified token that is a logout token; else refused."""
    events = claims.get('events')
    if not isinstance(events, dict) or not isinstance(events.get(EVENT), dict):
        raise ProviderError('not_logout', 'No back-channel logout event')
    if 'nonce' in claims:
        raise ProviderError('nonce', 'A logout token carries no nonce')
    jti = _text(claims.get('jti'), CLAIM_LIMIT)
    sid = _text(claims.get('sid'), CLAIM_LIMIT)
    sub = _text(claims.get('sub'), CLAIM_LIMIT)
    if jti is None:
        raise ProviderError('bad_claims', 'No usable jti')
    if (sid is None and sub is None) or (
        sid is None and 'sid' in claims or sub is None and 'sub' in claims
    ):
        raise ProviderError('no_subject', 'Neither a usable sid nor sub')
    return sid, sub, jti


def _record_refusal(pool, queries, account_id, reason, facts):
    facts = facts or audit.NO_REQUEST
    with pool.connection() as conn:
        conn.execute(
            queries['sso.logout_record_refusal'],
            {
                'address_key': audit.address_key(facts.ip_address or ''),
                'reason': reason,
                'account_id': account_id,
                'ip_address': facts.ip_address,
                'user_agent': facts.user_agent,
                'details': Jsonb({'reason': reason}),
            },
        )
