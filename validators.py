"""Request schemas: loaded from ``schemas/`` and compiled into validators once at boot.

Every violation becomes a Rails-style full message (``Name is too long (maximum is 255
characters)``); all failing fields are reported together in one 422.

The files hold standard JSON Schema 2020-12 only: client teams vendor them and compile
them with their own tools (ajv in strict mode refuses any keyword or format it does not
know). What the server checks beyond them is in SERVER_CHECKS below, merged into the
copy it compiles; the files say in words what it is.
"""

import copy
import datetime
import functools
import json
import pathlib
import urllib.parse
import zoneinfo

import jsonschema
import referencing

import errors
import forms

SCHEMAS_DIR = pathlib.Path(__file__).resolve().parent / 'schemas'


# A string that must not be blank says so with this standard pattern.
NOT_BLANK = r'\S'

# Where the server is stricter than the published files: {'<file>#<JSON pointer>':
# {keyword: value}}, with the keywords of _Validator below.
SERVER_CHECKS = {
    # bcrypt reads 72 bytes; the file says maxLength 72, which allows more bytes.
    'definitions.json#/$defs/password': {'maxBytes': 72},
    # A name the server's time zone database knows; the file has its shape only.
    'account_update.json#/properties/timezone': {'format': 'iana-timezone'},
}


def _max_bytes(validator, limit, instance, schema):
    if (
        isinstance(instance, str)
        and len(instance.encode('utf-8', 'surrogatepass')) > limit
    ):
        yield jsonschema.ValidationError('too many bytes')


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {'maxBytes': _max_bytes}
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
        branches = [
            sub
            for sub in error.context
            if not (sub.validator == 'type' and sub.validator_value == 'null')
        ]
        return _message(branches[0] if branches else error.context[0])
    keyword, value, instance, schema = (
        error.validator,
        error.validator_value,
        error.instance,
        error.schema,
    )
    path = [part for part in error.absolute_path if isinstance(part, str)]
    if keyword in ('required', 'dependentRequired'):
        wanted = (
            value
            if keyword == 'required'
            else [
                name
                for key, names in value.items()
                if key in instance
                for name in names
            ]
        )
        missing = next(name for name in wanted if name not in instance)
        prop = schema.get('properties', {}).get(missing, {})
        attribute = missing
        text = (
            _TYPE_MESSAGES['boolean']
            if _wanted_type(prop) == 'boolean'
            else "can't be blank"
        )
    else:
        attribute = path[-1] if path else ''
        if keyword == 'type':
            wanted = _wanted_type(schema)
            # SPEC 0: a null where an object (or a string) is required counts as
            # missing.
            text = (
                "can't be blank"
                if instance is None and wanted != 'boolean'
                else _TYPE_MESSAGES.get(wanted, 'is invalid')
            )
        elif keyword == 'maxLength':
            text = f'is too long (maximum is {value} characters)'
        elif keyword == 'maxBytes':
            text = f'is too long (maximum is {value} bytes)'
        elif keyword == 'minLength':
            text = (
                "can't be blank"
                if instance == ''
                else f'is too short (minimum is {value} characters)'
            )
        elif keyword == 'pattern' and value == NOT_BLANK:
            text = "can't be blank"
        elif keyword == 'minProperties' and instance == {}:
            # Rails' params.require: an empty object counts as missing.
            text = "can't be blank"
        elif keyword == 'minItems':
            text = (
                "can't be blank"
                if not instance
                else f'is too short (minimum is {value} items)'
            )
        elif keyword == 'maxItems':
            text = f'is too long (maximum is {value} items)'
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
    """One compiled schema; ``check(doc)`` raises the 422 of SPEC section 0.

    ``schema`` is the file as published; what is compiled has SERVER_CHECKS too.
    """

    def __init__(self, name, schema, registry):
        self.name = name
        self.schema = schema
        checked = inline_refs(registry, f'{name}.json')
        self._validator = _Validator(
            checked, registry=registry, format_checker=_FORMATS
        )
        self._resolver = registry.resolver(base_uri=f'{name}.json')

    def coerce(self, doc):
        """A form body's strings cast to the types this schema wants (forms.py)."""
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


def inline_refs(registry, uri):
    """The schema at ``uri`` with every ``$ref`` replaced by what it points to.

    Validating with ``$ref`` looks each one up in the registry on every request; a
    typical profile update spent half of its validation there (31 against 17 µs).
    The result validates exactly as the original: a ``$ref`` beside other
    keywords becomes an ``allOf`` of its target in the same place, which 2020-12 says
    is what it means. A reference cycle stops the boot (no schema has one).
    """
    return _inline(registry, uri, registry.contents(uri), ())


# Keywords whose value maps names to schemas (a property may be named "$ref"), and
# those whose value is an instance, not a schema: neither is a reference.
_SCHEMA_MAPS = frozenset(
    ('properties', 'patternProperties', 'dependentSchemas', '$defs', 'definitions')
)
_INSTANCES = frozenset(('const', 'enum', 'default', 'examples'))


def _inline(registry, uri, node, seen):
    """``node``, a schema or a list of schemas, with its references inlined."""
    if isinstance(node, list):
        return [_inline(registry, uri, item, seen) for item in node]
    if not isinstance(node, dict):
        return node
    inlined = {}
    for key, value in node.items():
        if key in _INSTANCES:
            inlined[key] = value
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            inlined[key] = {
                name: _inline(registry, uri, schema, seen)
                for name, schema in value.items()
            }
            continue
        if key != '$ref':
            inlined[key] = _inline(registry, uri, value, seen)
            continue
        file, _, pointer = value.partition('#')
        # The file the target is in: its own references are relative to it.
        target_uri = urllib.parse.urljoin(uri, file) if file else uri
        if (target_uri, pointer) in seen:
            raise RuntimeError(f'{uri}: $ref {value} is a cycle')
        target = _inline(
            registry,
            target_uri,
            registry.resolver(base_uri=uri).lookup(value).contents,
            (*seen, (target_uri, pointer)),
        )
        if len(node) == 1:
            return target
        if 'allOf' in node:
            raise RuntimeError(f'{uri}: $ref beside allOf is not inlined')
        inlined['allOf'] = [target]
    return inlined


def load_schemas(directory=SCHEMAS_DIR):
    """Return ``{stem: schema dict}`` for every file in ``schemas/``."""
    return {
        path.stem: json.loads(path.read_text())
        for path in sorted(directory.glob('*.json'))
    }


def with_server_checks(schemas, checks=None):
    """A copy of ``schemas`` ({stem: schema}) with SERVER_CHECKS merged in; a pointer
    that names nothing stops the boot."""
    checked = copy.deepcopy(schemas)
    for where, keywords in (SERVER_CHECKS if checks is None else checks).items():
        stem, _, pointer = where.partition('.json#')
        node = checked.get(stem)
        for part in filter(None, pointer.split('/')):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise RuntimeError(f'SERVER_CHECKS: {where} is not in schemas/')
        # First, so that their message is the one reported (72 bytes, not characters).
        published = dict(node)
        node.clear()
        node.update({**keywords, **published})
    return checked


# Once per process: a worker builds one app, but the tests build dozens in one process,
# and compiling costs about 0.2 s each time. Nothing changes the compiled validators
# after the boot. That each file is a valid 2020-12 schema is checked by
# tests/test_validators.py, not here: another 0.2 s of every worker's boot.
@functools.cache
def load_validators(directory=SCHEMAS_DIR):
    """Compile every request schema; a reference that names nothing or a cycle stops
    the boot."""
    schemas = load_schemas(directory)
    registry = referencing.Registry().with_resources(
        (f'{stem}.json', referencing.Resource.from_contents(schema))
        for stem, schema in with_server_checks(schemas).items()
    )
    return {
        stem: SchemaValidator(stem, schema, registry)
        for stem, schema in schemas.items()
    }
