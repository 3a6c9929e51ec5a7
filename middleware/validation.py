"""Request bodies: size limits, JSON parsing, and JSON Schema validation.

Schemas come from ``schemas/`` and are compiled once in ``create_app()``. Every
violation becomes a Rails-style full message (``Name is too long (maximum is 255
characters)``); all failing fields are reported together in one 422.
"""

import datetime
import json
import pathlib
import re
import zoneinfo

import falcon
import jsonschema
import orjson
import referencing
from jsonschema import validators

import errors
from middleware import forms

SCHEMAS_DIR = pathlib.Path(__file__).resolve().parent.parent / 'schemas'
JSON_BODY_LIMIT = 1024 * 1024
MULTIPART_OVERHEAD = 64 * 1024
UNSUPPORTED_MEDIA_TYPE = 'Content-Type must be application/json or application/x-www-form-urlencoded'
_NUL_ESCAPE = b'\\u0000'
# orjson parses 1024 levels, but json.dumps (psycopg's Jsonb) runs out of Python stack
# before that, and orjson.dumps stops at 254: deeper documents could not be stored.
MAX_DEPTH = 200


def _not_blank(validator, wanted, instance, schema):
    if wanted and isinstance(instance, str) and not instance.strip():
        yield jsonschema.ValidationError('blank')


def _max_bytes(validator, limit, instance, schema):
    if isinstance(instance, str) and len(instance.encode('utf-8', 'surrogatepass')) > limit:
        yield jsonschema.ValidationError('too many bytes')


_Validator = validators.extend(
    jsonschema.Draft202012Validator, {'notBlank': _not_blank, 'maxBytes': _max_bytes}
)
_FORMATS = jsonschema.FormatChecker(formats=())
_TIMEZONES = frozenset(zoneinfo.available_timezones())


@_FORMATS.checks('date-time')
def _is_date_time(value):
    """ISO 8601 as Python reads it; a time without an offset is UTC."""
    if not isinstance(value, str):
        return True
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


@_FORMATS.checks('iana-timezone')
def _is_timezone(value):
    return not isinstance(value, str) or value in _TIMEZONES


_TYPE_MESSAGES = {
    'integer': 'must be an integer',
    'number': 'is not a number',
    'boolean': 'must be true or false',
    'string': 'must be a string',
    'object': 'must be an object',
    'array': 'must be an array',
}


def humanize(attribute):
    return attribute.replace('_', ' ').capitalize()


def _wanted_type(schema):
    wanted = schema.get('type')
    if isinstance(wanted, list):
        wanted = next((kind for kind in wanted if kind != 'null'), 'null')
    return wanted


def _message(error):
    """Turn one jsonschema error into (attribute, full message)."""
    if error.validator in ('anyOf', 'oneOf') and error.context:
        # "a locale or null": report why it is not a locale, not that it is not null.
        branches = [sub for sub in error.context if not (sub.validator == 'type' and sub.validator_value == 'null')]
        return _message(branches[0] if branches else error.context[0])
    keyword, value, instance, schema = error.validator, error.validator_value, error.instance, error.schema
    path = [part for part in error.absolute_path if isinstance(part, str)]
    if keyword in ('required', 'dependentRequired'):
        wanted = value if keyword == 'required' else [
            name for key, names in value.items() if key in instance for name in names]
        missing = next(name for name in wanted if name not in instance)
        prop = schema.get('properties', {}).get(missing, {})
        attribute = missing
        text = _TYPE_MESSAGES['boolean'] if _wanted_type(prop) == 'boolean' else "can't be blank"
    else:
        attribute = path[-1] if path else ''
        if keyword == 'type':
            wanted = _wanted_type(schema)
            # SPEC 0: a null where an object (or a string) is required counts as missing.
            text = "can't be blank" if instance is None and wanted != 'boolean' else _TYPE_MESSAGES.get(wanted, 'is invalid')
        elif keyword == 'maxLength':
            text = f'is too long (maximum is {value} characters)'
        elif keyword == 'maxBytes':
            text = f'is too long (maximum is {value} bytes)'
        elif keyword == 'minLength':
            text = "can't be blank" if instance == '' else f'is too short (minimum is {value} characters)'
        elif keyword == 'notBlank':
            text = "can't be blank"
        elif keyword == 'enum':
            text = 'is not included in the list'
        elif keyword == 'maximum':
            text = f'must be less than or equal to {value}'
        elif keyword == 'minimum':
            text = f'must be greater than or equal to {value}'
        else:
            text = 'is invalid'
    if not attribute:
        return '', 'Request body must be a JSON object'
    return attribute, f'{humanize(attribute)} {text}'


class SchemaValidator:
    """One compiled schema; ``check(doc)`` raises the 422 of SPEC section 0."""

    def __init__(self, name, schema, registry):
        self.name = name
        self.schema = schema
        self._validator = _Validator(schema, registry=registry, format_checker=_FORMATS)
        self._resolver = registry.resolver(base_uri=f'{name}.json')

    def coerce(self, doc):
        """A form body's strings cast to the types this schema wants (middleware/forms.py)."""
        return forms.coerce(doc, self.schema, self._resolver)

    def errors(self, doc):
        found = {}
        for error in self._validator.iter_errors(doc):
            attribute, text = _message(error)
            found.setdefault(attribute, text)
        return list(found.items())

    def check(self, doc):
        found = self.errors(doc)
        if not found:
            return
        if '' in dict(found):
            raise errors.Unprocessable(message='Request body must be a JSON object')
        raise errors.Unprocessable(found)


def load_schemas(directory=SCHEMAS_DIR):
    """Return ``{stem: schema dict}`` for every file in ``schemas/``."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob('*.json'))}


def load_validators(directory=SCHEMAS_DIR):
    """Compile every request schema; a broken schema stops the boot."""
    schemas = load_schemas(directory)
    registry = referencing.Registry().with_resources(
        (f'{stem}.json', referencing.Resource.from_contents(schema)) for stem, schema in schemas.items()
    )
    compiled = {}
    for stem, schema in schemas.items():
        _Validator.check_schema(schema)
        compiled[stem] = SchemaValidator(stem, schema, registry)
    return compiled


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
        if not data.strip():
            raise falcon.MediaNotFoundError('JSON')
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as ex:
            raise errors.BadRequest(f'Malformed JSON: {ex.msg}') from None
        # Only a body with that many brackets can be that deep: the usual one is not walked.
        if data.count(b'[') + data.count(b'{') > MAX_DEPTH and _depth(doc) > MAX_DEPTH:
            raise errors.BadRequest(f'Malformed JSON: nested deeper than {MAX_DEPTH} levels')
        # PostgreSQL can store no NUL character, in text or in jsonb.
        if _NUL_ESCAPE in data and _contains_nul(doc):
            raise errors.BadRequest('Malformed JSON: NUL characters are not allowed')
        return doc

    def serialize(self, media, content_type):
        return orjson.dumps(media)


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
        falcon.HTTP_413, {'message': f'Request body is too large (maximum is {limit} bytes)'}
    )


_MULTIPART = re.compile(r'^\s*multipart/form-data\b', re.IGNORECASE)


def is_multipart(req):
    return bool(req.content_type and _MULTIPART.match(req.content_type))


class JSONSchemaValidation:
    """Parse and validate the body of every method that declares a schema.

    JSON and form bodies are both accepted; a form body's strings are first cast to the
    types the schema wants, so both then meet the same validation.

    A resource declares ``schemas = {'POST': 'account_create'}``, and for query
    parameters ``query = {'GET': 'audit_events_query'}`` (cast as form bodies are, left in
    ``req.context.query``). The parsed body is
    left in ``req.context.doc``. Methods listed in ``resource.multipart`` also take
    multipart/form-data, parsed by ``resource.parse_multipart(req)`` into the same
    document shape. Methods in ``resource.deferred_validation`` are parsed here but
    validated by the responder, where the contract orders other checks first (sign-up).
    """

    def __init__(self, validators, avatar_max_bytes):
        self._validators = validators
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
        multipart = req.method in getattr(resource, 'multipart', ())
        if multipart and is_multipart(req):
            limit = self._multipart_limit
            if req.content_length and req.content_length > limit:
                raise too_large(limit)
            doc = resource.parse_multipart(req, limit)
        else:
            if req.content_length and req.content_length > JSON_BODY_LIMIT:
                raise too_large(JSON_BODY_LIMIT)
            content_type = (req.content_type or 'application/json').lower()
            form = content_type.startswith(falcon.MEDIA_URLENCODED)
            if not (form or content_type.startswith(falcon.MEDIA_JSON)):
                raise errors.APIError(falcon.HTTP_415, {'message': UNSUPPORTED_MEDIA_TYPE})
            doc = req.get_media(default_when_empty={})
            if form:
                doc = self._validators[name].coerce(doc)
        req.context.doc = doc
        if req.method not in getattr(resource, 'deferred_validation', ()):
            self._validators[name].check(doc)
