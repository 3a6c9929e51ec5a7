"""HTTP resources, one module per URL family."""

import falcon

JSON = 'application/json; charset=utf-8'
# The service's release, as GET /api and the OpenAPI document report it.
VERSION = '1.1.0'


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
