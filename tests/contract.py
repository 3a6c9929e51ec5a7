"""Check a response against /api/v1/openapi.json: the hook behind every test request.

conftest.py routes every WebTest request, and tests/support/servers.py every ``http()``
answer, through ``check()``, so the whole suite keeps the document honest. A path no
operation matches (a route a test added, /avatars/... served by nginx) is not checked; a
documented path with an undocumented status, header or body fails the test.
"""

import functools
import json
import re
import urllib.parse

import jsonschema
import referencing
import referencing.jsonschema

import apidoc
import app as app_module
import config as config_module
import db
from middleware import routing
from validators import load_validators

_DOCUMENT_URI = 'urn:frontdesk:openapi'
_NOT_FOUND = '#/components/schemas/' + apidoc.component_name(
    'response_errors', 'not_found'
)
_TOKEN_REQUEST = ('access-token', 'client', 'uid')


@functools.cache
def document():
    """The document of an app with the default configuration (sign-up open)."""
    config = config_module.Config(database_url='postgresql://unused')
    table = app_module.routes(None, db.load_queries(), config, load_validators())
    return dict(table)[apidoc.OPENAPI_PATH].document


@functools.cache
def _registry():
    resource = referencing.Resource.from_contents(
        document(), default_specification=referencing.jsonschema.DRAFT202012
    )
    return referencing.Registry().with_resource(_DOCUMENT_URI, resource)


@functools.cache
def _validator(ref):
    return jsonschema.Draft202012Validator(
        {'$ref': _DOCUMENT_URI + ref}, registry=_registry()
    )


@functools.cache
def _paths():
    return [
        (re.compile('^' + re.sub(r'\\\{\w+\\\}', '[^/]+', re.escape(path)) + '$'), path)
        for path in document()['paths']
    ]


def _resolve(node):
    while '$ref' in node:
        node = (
            _registry()
            .resolver(_DOCUMENT_URI)
            .lookup(_DOCUMENT_URI + node['$ref'])
            .contents
        )
    return node


def _pointer(*parts):
    return '#/' + '/'.join(
        str(part).replace('~', '~0').replace('/', '~1') for part in parts
    )


def _check_body(where, pointer, headers, body):
    content_type = headers.get('content-type', '')
    assert content_type.startswith('application/json'), (
        f'{where}: Content-Type {content_type!r} is not JSON'
    )
    try:
        doc = json.loads(body)
    except ValueError:
        raise AssertionError(f'{where}: the body is not JSON: {body[:200]!r}') from None
    error = jsonschema.exceptions.best_match(_validator(pointer).iter_errors(doc))
    if error is not None:
        path = '/'.join(str(part) for part in error.absolute_path)
        raise AssertionError(
            f'{where}: the body does not match the documented schema at /{path}: '
            f'{error.message}\nbody: {body[:500]!r}'
        )


def check(method, path, request_headers, status, headers, body):
    """Fail with a clear message when the response is not what the document says."""
    method = method.upper()
    # The route the app serves: routing.normalize is what the app itself applies first.
    path = routing.normalize(
        urllib.parse.urlsplit(path).path, frozenset(document()['paths'])
    )
    request_headers = {name.lower(): value for name, value in request_headers.items()}
    headers = {name.lower(): value for name, value in headers.items()}
    template = next(
        (template for pattern, template in _paths() if pattern.match(path)), None
    )
    if template is None or method in ('OPTIONS', 'HEAD'):
        return  # not a documented route (or Falcon's default OPTIONS answer)
    where = f'{method} {path} -> {status}'
    operation = document()['paths'][template].get(method.lower())
    if operation is None:
        # A documented path with another method is an unknown route (SPEC 0).
        assert status == 404, (
            f'{where}: {method} is not documented for {template}, so only a 404 is'
        )
        _check_body(where, _NOT_FOUND, headers, body)
        return
    response = operation['responses'].get(str(status))
    assert response is not None, (
        f'{where}: status {status} is not documented for {method} {template} '
        f'(documented: {", ".join(operation["responses"])})\nbody: {body[:500]!r}'
    )
    for name, header in response.get('headers', {}).items():
        header = _resolve(header)
        value = headers.get(name.lower())
        if value is None:
            assert not header.get('required'), (
                f'{where}: the required header {name} is missing'
            )
            continue
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(header['schema']).iter_errors(value)
        )
        assert error is None, (
            f'{where}: header {name}: {value!r}: {error and error.message}'
        )
    _check_token_echo(where, operation, response, request_headers, status, headers)
    if 'content' not in response:  # a 204 or a redirect (SPEC 19): no body at all
        assert not body, f'{where}: a body where the document says none: {body[:200]!r}'
        return
    _check_body(
        where,
        _pointer(
            'paths',
            template,
            method.lower(),
            'responses',
            status,
            'content',
            'application/json',
            'schema',
        ),
        headers,
        body,
    )


def _check_token_echo(where, operation, response, request_headers, status, headers):
    """SPEC 3: token-header requests get their token echoed; api_access_token ones do
    not."""
    if (
        not 200 <= status < 300
        or 'access-token' not in response.get('headers', {})
        or not operation['security']
    ):
        return
    if all(request_headers.get(name) for name in _TOKEN_REQUEST):
        assert 'access-token' in headers, f'{where}: the token headers are not echoed'
    elif request_headers.get(
        'api_access_token'
    ) and 'access-token' not in _required_headers(response):
        assert 'access-token' not in headers, (
            f'{where}: a token was sent back to an api_access_token caller'
        )


def _required_headers(response):
    return {
        name
        for name, header in response.get('headers', {}).items()
        if _resolve(header).get('required')
    }
