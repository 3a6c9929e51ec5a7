"""CORS for dashboards served from another origin (SPEC 11); off unless
CORS_ALLOWED_ORIGINS."""

import falcon

import tokens

# What a dashboard sends: the sign-in headers, the integration tokens (a personal access
# token may come as Authorization: Bearer, SPEC 17), the setup token of an account's MFA
# requirement (SPEC 12), and JSON bodies.
ALLOWED_HEADERS = (
    'access-token, client, uid, expiry, token-type, api_access_token, authorization, '
    'mfa_token, content-type'
)


class CORS(falcon.CORSMiddleware):
    """Falcon's CORS policy for exact origins, plus what it leaves out.

    NOTE: falcon.CORSMiddleware matches origins, answers with the request's origin
    (never ``*`` when given a list) and exposes headers; it cannot answer a preflight
    with 204, name a fixed list of allowed headers (it echoes whatever the browser asks
    for), or send ``Vary: Origin``, which keeps shared caches from serving one origin's
    answer to another. Those three are added here.
    """

    def __init__(self, origins):
        super().__init__(allow_origins=origins, expose_headers=tokens.TOKEN_HEADERS)

    def process_response(self, req, resp, resource, req_succeeded):
        super().process_response(req, resp, resource, req_succeeded)
        resp.append_header('Vary', 'Origin')
        if resp.get_header('Access-Control-Allow-Methods') is not None:
            # A preflight Falcon's default OPTIONS responder answered for a known route.
            resp.set_header('Access-Control-Allow-Headers', ALLOWED_HEADERS)
            resp.status = falcon.HTTP_204
            resp.data = b''
