"""The provider's signed tokens (SPEC 19): ID tokens at the callback, logout tokens at
the back channel, checked by joserfc against the provider's JWKS; never by hand.

Only asymmetric keys from the JWKS are used and only the asymmetric algorithms the
discovery document lists (never ``none``, never HMAC: a token "signed" with the public
key as an HMAC secret is refused whatever it says). The JWKS is kept in sso_providers
and fetched again when a token names a key not in it, at most once a minute per
provider (sso.keys_claim_refresh), so a forged ``kid`` cannot make the service call the
provider on every request.

``provider``: a row of sso_providers (account_id, issuer, client_id, discovery, jwks).
Every refusal is an oidc_http.ProviderError whose ``reason`` the audit event carries.
"""

import functools
import time
import types
import warnings

import orjson
from psycopg.types.json import Jsonb

from services.oidc_http import ProviderError
from services.oidc_http import request_json

# What a JWKS may give and a token may be signed with: asymmetric only.
ASYMMETRIC = {
    'RS256',
    'RS384',
    'RS512',
    'PS256',
    'PS384',
    'PS512',
    'ES256',
    'ES384',
    'ES512',
    'EdDSA',
}
KEY_TYPES = {'RSA', 'EC', 'OKP'}


@functools.cache
def _jose():
    """joserfc, imported at the first token to check: about 9 MB a worker that never
    sees one does not carry (imported here, against the house rule of imports at the
    top, for that reason; docs/performance.md)."""
    from joserfc import errors
    from joserfc import jwt
    from joserfc.jwk import KeySet
    from joserfc.jws import extract_compact

    return types.SimpleNamespace(
        errors=errors, jwt=jwt, KeySet=KeySet, extract_compact=extract_compact
    )


# SPEC 19: iat within 2 minutes of now (either way); exp with no leeway.
IAT_SKEW_SECONDS = 120


def peek(token):
    """(header, claims) of a compact JWS, unverified: to choose the provider and the
    key. Anything else is a ProviderError('malformed')."""
    jose = _jose()
    try:
        if not isinstance(token, str) or len(token) > 16384:
            raise ValueError
        signed = jose.extract_compact(token.encode('ascii'))
        payload = orjson.loads(signed.payload)
        if not isinstance(payload, dict):
            raise ValueError
        return signed.headers(), payload
    except (ValueError, UnicodeError, orjson.JSONDecodeError, jose.errors.JoseError):
        raise ProviderError('malformed', 'The token is not a signed JWT') from None


def _key_set(jwks):
    """The usable keys of a JWKS document (asymmetric, importable); one bad entry is
    left out, not a failure of the rest."""
    jose = _jose()
    keys = []
    for entry in (jwks or {}).get('keys') or ():
        if not isinstance(entry, dict) or entry.get('kty') not in KEY_TYPES:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                keys.append(jose.KeySet.import_key_set({'keys': [entry]}).keys[0])
        except Exception:  # noqa: BLE001 (any malformed key: leave it out)
            continue
    return jose.KeySet(keys)


def _kids(jwks):
    return {
        entry.get('kid')
        for entry in (jwks or {}).get('keys') or ()
        if isinstance(entry, dict)
    }


def keys_for(pool, queries, config, provider, kid):
    """The provider's key set, fetched again when ``kid`` is not in it and the last
    fetch is over a minute old. The fetch holds no database connection."""
    jwks = provider.get('jwks')
    if jwks is not None and kid in _kids(jwks):
        return _key_set(jwks)
    with pool.connection() as conn:
        claimed = conn.execute(
            queries['sso.keys_claim_refresh'], {'account_id': provider['account_id']}
        ).fetchone()
        if claimed is None:
            current = conn.execute(
                queries['sso.keys_current'], {'account_id': provider['account_id']}
            ).fetchone()
            return _key_set(current and current['jwks'])
    jwks = request_json(config, 'GET', provider['discovery']['jwks_uri'])
    with pool.connection() as conn:
        conn.execute(
            queries['sso.keys_store'],
            {'account_id': provider['account_id'], 'jwks': Jsonb(jwks)},
        )
    return _key_set(jwks)


def verify(pool, queries, config, provider, token, claims):
    """The claims of ``token`` once its signature holds under the provider's keys and
    ``claims`` (joserfc ClaimsOption per name: essential, value, values) hold; iss and
    aud always, with exp when present and iat within IAT_SKEW_SECONDS."""
    jose = _jose()
    header, _ = peek(token)
    allowed = ASYMMETRIC & set(
        provider['discovery'].get('id_token_signing_alg_values_supported') or ['RS256']
    )
    # A header is the sender's JSON: an alg or kid that is no string (a list, an
    # object) is refused or ignored, never looked up in a set.
    if not isinstance(header.get('alg'), str) or header['alg'] not in allowed:
        raise ProviderError(
            'bad_alg', f'The token is signed with {str(header.get("alg"))[:20]!r}'
        )
    kid = header.get('kid') if isinstance(header.get('kid'), str) else None
    keys = keys_for(pool, queries, config, provider, kid)
    try:
        decoded = jose.jwt.decode(token, keys, algorithms=sorted(allowed))
    except jose.errors.InvalidKeyIdError:
        raise ProviderError(
            'unknown_key', "No key of the provider has the token's kid"
        ) from None
    except jose.errors.JoseError as refused:
        raise ProviderError(
            'bad_signature', f'The token does not verify ({refused.error})'
        ) from None
    now = int(time.time())
    registry = jose.jwt.JWTClaimsRegistry(
        now=now,
        iss={'essential': True, 'value': provider['issuer']},
        aud={'essential': True, 'value': provider['client_id']},
        iat={'essential': True},
        **claims,
    )
    try:
        registry.validate(decoded.claims)
    except jose.errors.ExpiredTokenError:
        raise ProviderError('expired', 'The token has expired') from None
    except jose.errors.JoseError as refused:
        raise ProviderError(
            'bad_claims', f"The token's claims do not hold ({refused})"
        ) from None
    iat = decoded.claims.get('iat')
    if not isinstance(iat, int) or abs(now - iat) > IAT_SKEW_SECONDS:
        raise ProviderError(
            'bad_iat', 'The token was not issued within 2 minutes of now'
        )
    audiences = decoded.claims['aud']
    if isinstance(audiences, list) and len(audiences) > 1 or 'azp' in decoded.claims:
        if decoded.claims.get('azp') != provider['client_id']:
            raise ProviderError('bad_azp', 'The token is for another party (azp)')
    return decoded.claims


def check_id_token(pool, queries, config, provider, token, nonce):
    """The ID token's claims (SPEC 19's callback order, after the code exchange)."""
    return verify(
        pool,
        queries,
        config,
        provider,
        token,
        {
            'exp': {'essential': True},
            'sub': {'essential': True},
            'nonce': {'essential': True, 'value': nonce},
        },
    )
