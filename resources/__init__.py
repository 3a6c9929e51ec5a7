"""HTTP resources, one module per URL family."""

import urllib.parse

import falcon
import orjson

import tokens

JSON = 'application/json; charset=utf-8'
# The reference dashboard keeps its token headers here (JSON, as js-cookie writes it).
SESSION_COOKIE = 'cw_d_session_info'
SESSION_KEYS = ('access-token', 'client', 'uid')


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
        tokens.set_headers(resp, outcome.session, outcome.uid)
        send_json_text(resp, outcome.document, key='data')
    else:
        resp.status = falcon.HTTP_206
        resp.media = outcome.challenge
        resp.cache_control = ['no-store']


def presented_sessions(req):
    """The sign-in credentials a request carries, (access-token, client, uid) each: its
    token headers and the reference dashboard's SESSION_COOKIE, which a browser sends
    by itself with a same-origin request.

    For the notice of a first confirmation only (SPEC 3.4 rule 1): whether they are a
    live session is for the service to say. What is malformed, or could not be one of
    ours (not printable ASCII), is left out; a bad cookie is as no cookie.
    """
    found = [tuple(req.get_header(key) for key in SESSION_KEYS)]
    for value in req.get_cookie_values(SESSION_COOKIE) or ():
        try:
            info = orjson.loads(urllib.parse.unquote(value))
        except orjson.JSONDecodeError:
            continue
        if isinstance(info, dict):
            found.append(tuple(info.get(key) for key in SESSION_KEYS))
    return [
        credentials
        for credentials in found
        if all(
            isinstance(value, str) and value and value.isascii() and value.isprintable()
            for value in credentials
        )
    ]
