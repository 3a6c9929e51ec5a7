"""Request bodies: size limits and JSON parsing (form bodies are forms.py's)."""

import falcon
import orjson

import errors

JSON_BODY_LIMIT = 1024 * 1024
MULTIPART_OVERHEAD = 64 * 1024
_NUL_ESCAPE = b'\\u0000'
# orjson parses 1024 levels, but json.dumps (psycopg's Jsonb) runs out of Python stack
# before that, and orjson.dumps stops at 254: deeper documents could not be stored.
MAX_DEPTH = 200


class JSONHandler(falcon.media.BaseHandler):
    """orjson both ways; a body over the limit is a 413; a NUL in a string, or nesting
    deeper than MAX_DEPTH, a 400."""

    exhaust_stream = True

    def __init__(self, limit=JSON_BODY_LIMIT):
        self.limit = limit

    def deserialize(self, stream, content_type, content_length):
        data = stream.read(self.limit + 1)
        if len(data) > self.limit:
            raise too_large(self.limit)
        # No body is no body; a body of whitespace is not JSON (SPEC 0), as in Rails.
        if not data:
            raise falcon.MediaNotFoundError('JSON')
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as ex:
            raise errors.BadRequest(
                f'Malformed JSON: {_what_is_wrong(data, ex)}'
            ) from None
        # Only a body with that many brackets can be that deep: the usual one is not
        # walked.
        if data.count(b'[') + data.count(b'{') > MAX_DEPTH and _depth(doc) > MAX_DEPTH:
            raise errors.BadRequest(
                f'Malformed JSON: nested deeper than {MAX_DEPTH} levels'
            )
        # PostgreSQL can store no NUL character, in text or in jsonb.
        if _NUL_ESCAPE in data and _contains_nul(doc):
            raise errors.BadRequest('Malformed JSON: NUL characters are not allowed')
        return doc

    def serialize(self, media, content_type):
        return orjson.dumps(media)


def _what_is_wrong(data, ex):
    """The parser's account of a syntax error, in the API's words for bytes that are
    not UTF-8 (orjson calls those a ``str`` with "surrogates") and for whitespace
    alone (to orjson, "input data is empty")."""
    try:
        data.decode('utf-8')
    except UnicodeDecodeError:
        return 'not UTF-8'
    return ex.msg if data.strip() else 'only whitespace, no value'


def _children(value):
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return value if isinstance(value, list) else ()


def _depth(doc):
    # A loop, not recursion: 1024 levels would overflow Python's stack.
    depth, level = 0, [doc]
    while level := [value for value in level if isinstance(value, (dict, list))]:
        depth += 1
        level = [child for value in level for child in _children(value)]
    return depth


def _contains_nul(doc):
    pending = [doc]
    while pending:
        value = pending.pop()
        if isinstance(value, str) and '\x00' in value:
            return True
        pending.extend(_children(value))
    return False


def too_large(limit):
    return errors.APIError(
        falcon.HTTP_413,
        {'message': f'Request body is too large (maximum is {limit} bytes)'},
    )
