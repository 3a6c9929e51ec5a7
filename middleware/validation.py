"""Request bodies and query strings checked against the schemas resources declare.

Schemas are compiled once in ``create_app()`` (validators.py); bodies are parsed by the
handlers of bodies.py and forms.py.
"""

import re

import falcon

from bodies import JSON_BODY_LIMIT
from bodies import MULTIPART_OVERHEAD
from bodies import too_large
import errors

UNSUPPORTED_MEDIA_TYPE = (
    'Content-Type must be application/json or application/x-www-form-urlencoded'
)


_MULTIPART = re.compile(r'^\s*multipart/form-data\b', re.IGNORECASE)


def is_multipart(req):
    return bool(req.content_type and _MULTIPART.match(req.content_type))


class JSONSchemaValidation:
    """Parse and validate the body of every method that declares a schema.

    JSON and form bodies are both accepted; a form body's strings are first cast to the
    types the schema wants, so both then meet the same validation.

    A resource declares ``schemas = {'POST': 'account_create'}``, and for query
    parameters ``query = {'GET': 'audit_events_query'}`` (cast as form bodies are, left
    in ``req.context.query``). The parsed body is left in ``req.context.doc``. A
    method that also takes multipart/form-data names its reader, a hook
    (docs/architecture.md): ``multipart = {'PUT': read_multipart}``, called as
    ``read_multipart(req, avatar_max_bytes)``, returns the same document shape. Methods
    in ``resource.deferred_validation`` are parsed here but validated by the responder,
    where the contract orders other checks first (sign-up).
    """

    def __init__(self, validators, avatar_max_bytes):
        self._validators = validators
        self._avatar_max_bytes = avatar_max_bytes
        self._multipart_limit = avatar_max_bytes + MULTIPART_OVERHEAD

    def process_resource(self, req, resp, resource, params):
        query = getattr(resource, 'query', {}).get(req.method)
        if query is not None:
            validator = self._validators[query]
            req.context.query = validator.coerce(dict(req.params))
            validator.check(req.context.query)
        name = getattr(resource, 'schemas', {}).get(req.method)
        if name is None:
            return
        readers = getattr(resource, 'multipart', ())
        if req.method in readers and is_multipart(req):
            limit = self._multipart_limit
            if req.content_length and req.content_length > limit:
                raise too_large(limit)
            doc = readers[req.method](req, self._avatar_max_bytes)
        else:
            if req.content_length and req.content_length > JSON_BODY_LIMIT:
                raise too_large(JSON_BODY_LIMIT)
            content_type = (req.content_type or 'application/json').lower()
            form = content_type.startswith(falcon.MEDIA_URLENCODED)
            if not (form or content_type.startswith(falcon.MEDIA_JSON)):
                raise errors.APIError(
                    falcon.HTTP_415, {'message': UNSUPPORTED_MEDIA_TYPE}
                )
            doc = req.get_media(default_when_empty={})
            if form:
                doc = self._validators[name].coerce(doc)
        req.context.doc = doc
        if req.method not in getattr(resource, 'deferred_validation', ()):
            self._validators[name].check(doc)
