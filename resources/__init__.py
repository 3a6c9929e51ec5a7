"""HTTP resources, one module per URL family."""

import falcon

import tokens

JSON = 'application/json; charset=utf-8'


def send_json_text(resp, text, key=None):
    """Send a JSON document the database rendered, optionally as ``{key: document}``.

    NOTE: house style says resp.media; documents rendered by PostgreSQL (user_json,
    account_json) are passed through as they are, since parsing them only to
    serialise them again would double the work on the hottest paths.
    """
    body = text.encode('utf-8')
    if key is not None:
        body = b'{"%s":%s}' % (key.encode('ascii'), body)
    resp.data = body
    resp.content_type = JSON
    resp.status = falcon.HTTP_200


def send_outcome(resp, outcome):
    """Answer a way in (services/sign_in.py): 200 ``{"data": <user>}`` with the five
    headers of the session, or 206 and the challenge, no token headers (SPEC 12)."""
    if outcome.challenge is None:
        token, client, expires_at = outcome.session
        tokens.set_headers(resp, token, client, expires_at, outcome.uid)
        send_json_text(resp, outcome.document, key='data')
    else:
        resp.status = falcon.HTTP_206
        resp.media = outcome.challenge
        resp.cache_control = ['no-store']
