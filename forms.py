"""application/x-www-form-urlencoded bodies, read as Rails reads them (SPEC 11).

``profile[name]=Ada&profile[ui_settings][theme]=dark`` becomes
``{"profile": {"name": "Ada", "ui_settings": {"theme": "dark"}}}``;
``tags[]=a&tags[]=b`` a list. Every value is a string; ``coerce()`` then turns the
ones the schema wants as another type into it, as Rails' type casting does, so
validation, limits and error messages are those of a JSON body.
"""

import re
import urllib.parse

import falcon

import errors

MAX_FIELDS = 1000
MAX_NESTING = 32
_KEY = re.compile(r'^([^\[\]]+)((?:\[[^\[\]]*\])*)$')
_SUBKEY = re.compile(r'\[([^\[\]]*)\]')
_BOOLEANS = {'true': True, 'false': False, '1': True, '0': False}
_INTEGER = re.compile(r'^-?[0-9]{1,20}$')


def _malformed(detail):
    return errors.BadRequest(f'Malformed form body: {detail}')


def _path(key):
    match = _KEY.match(key)
    if match is None:
        return [key]
    path = [match.group(1), *_SUBKEY.findall(match.group(2))]
    if len(path) > MAX_NESTING:
        raise _malformed(f'nested deeper than {MAX_NESTING} levels')
    if '' in path[:-1]:
        # Rails' a[][b] (lists of objects): nothing in this API takes one.
        raise _malformed(f'{key} is not supported')
    return path


def _container(doc, parents, key):
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise _malformed(f'conflicting parameters for {key}')
    return node


def parse(data):
    """Form bytes -> nested dict of strings (and lists of strings for ``name[]``)."""
    try:
        pairs = urllib.parse.parse_qsl(
            data.decode('utf-8'),
            keep_blank_values=True,
            encoding='utf-8',
            errors='strict',
            max_num_fields=MAX_FIELDS,
        )
    except UnicodeDecodeError:
        raise _malformed('not UTF-8') from None
    except ValueError:
        raise _malformed(f'more than {MAX_FIELDS} fields') from None
    doc = {}
    for key, value in pairs:
        if '\x00' in key or '\x00' in value:
            raise _malformed('NUL characters are not allowed')
        *parents, last = _path(key)
        if last == '' and parents:
            # name[]=a&name[]=b: a list.
            *parents, name = parents
            items = _container(doc, parents, key).setdefault(name, [])
            if not isinstance(items, list):
                raise _malformed(f'conflicting parameters for {key}')
            items.append(value)
        else:
            node = _container(doc, parents, key)
            if isinstance(node.get(last), (dict, list)):
                raise _malformed(f'conflicting parameters for {key}')
            # A repeated plain key: the last one wins, as in Rails.
            node[last] = value
    return doc


class FormHandler(falcon.media.BaseHandler):
    """Parse form bodies under the same size limit as JSON."""

    exhaust_stream = True

    def __init__(self, limit, too_large):
        self.limit = limit
        self._too_large = too_large

    def deserialize(self, stream, content_type, content_length):
        data = stream.read(self.limit + 1)
        if len(data) > self.limit:
            raise self._too_large(self.limit)
        if not data.strip():
            raise falcon.MediaNotFoundError('form')
        return parse(data)


def _types(schema, resolver):
    """The JSON types ``schema`` accepts (empty: any), following $ref and
    anyOf/oneOf."""
    schema, resolver = _deref(schema, resolver)
    found = set()
    kind = schema.get('type')
    if kind is not None:
        found.update(kind if isinstance(kind, list) else [kind])
    elif 'enum' in schema or 'const' in schema:
        values = schema.get('enum', [schema.get('const')])
        found.update(
            'null' if value is None else 'string' if isinstance(value, str) else 'other'
            for value in values
        )
    for key in ('anyOf', 'oneOf'):
        for branch in schema.get(key, ()):
            branch_types = _types(branch, resolver)
            if not branch_types:
                return set()
            found |= branch_types
    return found


def _deref(schema, resolver):
    while isinstance(schema, dict) and '$ref' in schema:
        resolved = resolver.lookup(schema['$ref'])
        schema, resolver = resolved.contents, resolved.resolver
    return (schema if isinstance(schema, dict) else {}), resolver


def coerce(value, schema, resolver):
    """Cast the strings of a form body to what ``schema`` wants, where Rails would."""
    schema, resolver = _deref(schema, resolver)
    if isinstance(value, dict):
        properties = schema.get('properties', {})
        return {
            key: coerce(item, properties[key], resolver) if key in properties else item
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = schema.get('items')
        return [coerce(item, items, resolver) for item in value] if items else value
    if not isinstance(value, str):
        return value
    types = _types(schema, resolver)
    if not types or 'string' in types:
        return value
    if value == '':
        return None
    if 'boolean' in types and value in _BOOLEANS:
        return _BOOLEANS[value]
    if types & {'integer', 'number'} and _INTEGER.match(value):
        return int(value)
    return value
