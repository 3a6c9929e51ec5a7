"""HTTP resources, one module per URL family."""

import falcon

from services import profiles
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


def send_signed_in(resp, conn, queries, config, user_id, session, uid):
    """200 ``{"data": <user>}`` with the five headers of the token just issued."""
    doc = profiles.document(conn, queries, config, user_id)
    token, client, expires_at = session
    tokens.set_headers(resp, token, client, expires_at, uid)
    send_json_text(resp, doc, key='data')


def send_challenge(resp, challenge):
    """206: a second factor or an enrolment before any session (SPEC 12); no token
    headers."""
    resp.status = falcon.HTTP_206
    resp.media = challenge
    resp.cache_control = ['no-store']
