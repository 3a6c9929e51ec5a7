"""POST /auth/oidc/backchannel_logout: an identity provider ends the sessions its
session opened (SPEC 19; OpenID Connect Back-Channel Logout 1.0)."""

import urllib.parse

import falcon

import errors
from services import sso_logout

INVALID_REQUEST = {'error': 'invalid_request'}
# A logout token is a compact JWS of a few kilobytes (oidc_tokens.peek takes 16 KiB).
BODY_LIMIT = 32 * 1024


class BackchannelLogout:
    """The provider's server posts here, with no browser and no Origin.

    No request schema: every refusal, a body that is no form included, is the 400
    ``invalid_request`` the specification asks for (2.8), not the API's 415 or 422.
    """

    access = {'POST': 'public'}
    responses = {'POST': {200: 'backchannel_done', 400: 'backchannel_invalid'}}
    # A provider signs many users out at once; whoever else posts gets few tries.
    rate_limits = {'POST': (('ip', 120, 60),)}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Back-channel logout (for identity providers)

        The provider's server posts the form field `logout_token` (a signed JWT,
        OpenID Connect Back-Channel Logout 1.0), with the address this service gives as
        `backchannel_logout_uri` in the single sign-on settings. A valid token ends
        every session its `sid` opened here, or with only `sub` every single-sign-on
        session of that subject at that provider: 200 `{}`. Anything else (not signed
        by the provider its `iss` and `aud` name, issued over 2 minutes away from now,
        used before, no logout event, neither `sid` nor `sub`, a `nonce`, the provider's
        keys unreachable within 5 s): 400 `{"error": "invalid_request"}`. Both with
        `Cache-Control: no-store`, and an audit event. 120 per IP per minute.
        """
        resp.cache_control = ['no-store']
        try:
            sso_logout.log_out(
                self._pool,
                self._queries,
                self._config,
                _logout_token(req),
                req.context.facts,
            )
        except sso_logout.Refused:
            raise errors.APIError(
                falcon.HTTP_400, INVALID_REQUEST, headers={'Cache-Control': 'no-store'}
            ) from None
        resp.media = {}


def _logout_token(req):
    """The one ``logout_token`` of a form body, or None."""
    content_type = (req.content_type or '').split(';')[0].strip().lower()
    if content_type != falcon.MEDIA_URLENCODED:
        return None
    data = req.bounded_stream.read(BODY_LIMIT + 1)
    if len(data) > BODY_LIMIT:
        return None
    try:
        form = urllib.parse.parse_qs(
            data.decode('ascii'), strict_parsing=True, max_num_fields=16
        )
    except (UnicodeDecodeError, ValueError):
        return None
    values = form.get('logout_token', [])
    return values[0] if len(values) == 1 else None
