"""GET /api/v1/openapi.json: every route, request and response, from schemas/."""

import copy
import re

import openapi_spec_validator
import pytest

import apidoc
import app as app_module
import config as config_module
from db import load_queries
from tests import contract
from validators import load_schemas
from validators import load_validators
from validators import with_server_checks

SIGNED_IN = ('user', 'member', 'administrator', 'administrator_session')


@pytest.fixture(scope='module')
def document(testapp):
    return testapp.get('/api/v1/openapi.json', status=200).json


def test_the_document_is_valid_openapi_3_1(document):
    assert document['openapi'] == '3.1.0'
    openapi_spec_validator.validate(document)
    # The hook that checks every response of the suite uses the same document.
    assert document == contract.document()


def test_every_ref_points_into_the_document(document):
    for ref in set(apidoc.refs(document)):
        assert ref.startswith('#/'), ref
        node = document
        for part in ref[2:].split('/'):
            node = node[part.replace('~1', '/').replace('~0', '~')]
    # Each body is a component of its own (a schema file, or one entry of its $defs),
    # and each component is used.
    schemas = '#/components/schemas/'
    used = {
        ref.removeprefix(schemas)
        for ref in apidoc.refs({**document, 'components': {}})
        if ref.startswith(schemas)
    }
    for schema in document['components']['schemas'].values():
        used |= {ref.removeprefix(schemas) for ref in apidoc.refs(schema)}
    assert set(document['components']['schemas']) == used
    assert set(document['components']['schemas']) <= set(
        apidoc.components(load_schemas())
    )
    assert not [ref for ref in apidoc.refs(document) if '$defs' in ref]


def test_component_names_come_from_the_files_and_cannot_collide():
    assert {'response_user', 'response_user.membership', 'definitions.email'} <= set(
        apidoc.components(load_schemas())
    )
    # A file with only $defs is no body itself.
    assert 'response_errors' not in apidoc.components(load_schemas())
    # Generated clients name classes after components: ResponseBodiesSession twice.
    with pytest.raises(RuntimeError, match='would collide'):
        apidoc.components(
            {
                'response_bodies_session': {'type': 'object'},
                'response_bodies': {'$defs': {'session': {'type': 'object'}}},
            }
        )
    with pytest.raises(RuntimeError, match='names neither a file nor one of its'):
        apidoc.components({'a': {'properties': {'b': {'$ref': '#/properties/c'}}}})


def test_every_route_and_method_is_described(document, config, pool, queries):
    route_table = app_module.routes(pool, queries, config, load_validators())
    for template, resource in route_table:
        if getattr(resource, 'undocumented', False):  # the HTML docs page and its files
            continue
        path = re.sub(r'\{(\w+)[^}]*\}', r'{\1}', template)
        for method, level in resource.access.items():
            operation = document['paths'][path][method.lower()]
            where = f'{method} {path}'
            path_parameters = [
                param['name']
                for param in operation['parameters']
                if param['in'] == 'path'
            ]
            assert path_parameters == re.findall(r'\{(\w+)', template), where
            assert (operation['security'] == []) == (level == 'public'), where
            responses = operation['responses']
            # A success, or (single sign-on, SPEC 19) a redirect.
            assert {'200', '201', '204', '302'} & set(
                responses
            ) and '500' in responses, where
            if level in SIGNED_IN:
                assert (
                    responses['401']['content']['application/json']['schema']
                    is not None
                ), where
            schema = getattr(resource, 'schemas', {}).get(method)
            if schema:
                content = operation['requestBody']['content']
                body = content['application/json']['schema']
                assert body == {'$ref': f'#/components/schemas/{schema}'}, where
                # Forms and multipart are described in prose: generators send JSON.
                assert set(content) == {'application/json'}, where
                assert {'400', '413', '415', '422'} <= set(responses), where
            else:
                assert 'requestBody' not in operation, where
    described = sum(len(operations) for operations in document['paths'].values())
    assert described == sum(
        len(resource.access)
        for _, resource in route_table
        if not getattr(resource, 'undocumented', False)
    )


def test_security_is_the_token_headers_or_api_access_token(document):
    schemes = dict(document['components']['securitySchemes'])
    # Personal access tokens as Authorization: Bearer (SPEC 17).
    bearer = schemes.pop('personalAccessToken')
    assert (bearer['type'], bearer['scheme']) == ('http', 'bearer')
    assert {scheme['name'] for scheme in schemes.values()} == {
        'access-token',
        'client',
        'uid',
        'api_access_token',
        'mfa_token',
    }
    assert all(
        scheme['type'] == 'apiKey' and scheme['in'] == 'header'
        for scheme in schemes.values()
    )
    assert document['paths']['/api/v1/profile']['get']['security'] == [
        {'accessToken': [], 'client': [], 'uid': []},
        {'apiAccessToken': []},
        {'personalAccessToken': []},
    ]
    profile = document['paths']['/api/v1/profile']['get']
    assert profile['x-personal-access-token-scope'] == 'profile:read'
    # Bearer is offered exactly where a scope opens the operation to such tokens.
    for path, operations in document['paths'].items():
        for method, operation in operations.items():
            assert ({'personalAccessToken': []} in operation['security']) == (
                'x-personal-access-token-scope' in operation
            ), (method, path)
    assert {} in document['paths']['/api/v1/accounts']['post']['security']
    # The setup token of an account's MFA requirement reaches the MFA endpoints only.
    assert document['paths']['/api/v1/profile/mfa']['post']['security'] == [
        {'accessToken': [], 'client': [], 'uid': []},
        {'mfaToken': []},
    ]
    assert [
        path
        for path, operations in document['paths'].items()
        if any(
            {'mfaToken': []} in operation['security']
            for operation in operations.values()
        )
    ] == [
        '/api/v1/profile/mfa',
        '/api/v1/profile/mfa/verify',
        '/api/v1/profile/mfa/backup_codes',
    ]


def _headers(document, path, method, status):
    response = document['paths'][path][method]['responses'][status]
    return {
        name: contract._resolve(header)['required']
        for name, header in response['headers'].items()
    }


def test_response_headers(document):
    token = {'access-token', 'token-type', 'client', 'expiry', 'uid'}
    assert _headers(document, '/auth/sign_in', 'post', '200') == {
        'X-Request-Id': True,
        **dict.fromkeys(token, True),
    }
    # Echoed for token-header requests only, so not required.
    assert _headers(document, '/api/v1/profile', 'get', '200') == {
        'X-Request-Id': True,
        **dict.fromkeys(token, False),
    }
    assert _headers(document, '/auth/sign_out', 'delete', '200') == {
        'X-Request-Id': True
    }
    assert (
        _headers(document, '/api/v1/accounts/{account_id}/cache_keys', 'get', '200')[
            'Cache-Control'
        ]
        is True
    )
    assert _headers(document, '/auth/sign_in', 'post', '429')['Retry-After'] is True
    assert _headers(document, '/api/v1/profile', 'get', '503')['Retry-After'] is True


def test_the_multipart_body_has_every_profile_field_and_the_avatar(document):
    schemas = load_schemas()
    profile = schemas['profile_update']['properties']['profile']['properties']
    multipart = schemas['profile_update_multipart']['properties']
    assert set(multipart) == {f'profile[{name}]' for name in profile} | {
        'profile[avatar]'
    }
    assert multipart['profile[avatar]']['format'] == 'binary'
    # Named in the description: a second media type breaks generated clients.
    put = document['paths']['/api/v1/profile']['put']
    assert set(put['requestBody']['content']) == {'application/json'}
    assert '`schemas/profile_update_multipart.json`' in put['description']


# JSON Schema 2020-12's keywords, and the ones OpenAPI 3.1 adds.
STANDARD_KEYWORDS = {
    *('$ref', '$comment', 'title', 'description', 'default', 'examples', 'example'),
    *('type', 'enum', 'const', 'deprecated', 'readOnly', 'writeOnly'),
    *('minLength', 'maxLength', 'pattern', 'format'),
    *('contentMediaType', 'contentEncoding', 'contentSchema'),
    *('minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'),
    *('items', 'prefixItems', 'contains', 'minItems', 'maxItems', 'uniqueItems'),
    *('properties', 'additionalProperties', 'patternProperties', 'propertyNames'),
    *('required', 'dependentRequired', 'dependentSchemas', 'minProperties'),
    'maxProperties',
    *('allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else'),
    *('discriminator', 'xml', 'externalDocs'),
}
# Formats of JSON Schema 2020-12, and OpenAPI's binary (ajv-formats knows them all).
STANDARD_FORMATS = {'date-time', 'date', 'time', 'email', 'uri', 'uuid', 'binary'}


def _schemas(document):
    """(where, schema) of every schema in the document, nested ones included."""
    found = [
        (f'components/schemas/{name}', schema)
        for name, schema in document['components']['schemas'].items()
    ]
    for path, operations in document['paths'].items():
        for method, operation in operations.items():
            for param in operation['parameters']:
                found.append((f'{method} {path} {param["name"]}', param['schema']))
    todo = list(found)
    while todo:
        where, schema = todo.pop()
        subschemas = [
            (f'{where}/{key}', schema[key])
            for key in ('items', 'additionalProperties', 'not')
            if isinstance(schema.get(key), dict)
        ]
        subschemas += [
            (f'{where}/{key}/{index}', item)
            for key in ('anyOf', 'oneOf', 'allOf', 'prefixItems')
            for index, item in enumerate(schema.get(key, ()))
        ]
        subschemas += [
            (f'{where}/properties/{name}', item)
            for name, item in schema.get('properties', {}).items()
        ]
        found += subschemas
        todo += subschemas
    return found


def test_the_schemas_use_standard_keywords_and_formats_only(document):
    for where, schema in _schemas(document):
        assert set(schema) <= STANDARD_KEYWORDS, (
            where,
            set(schema) - STANDARD_KEYWORDS,
        )
        assert schema.get('format', 'date-time') in STANDARD_FORMATS, where


def test_objects_say_whether_they_take_other_properties(document):
    """A free-form object says additionalProperties: true (openapi-typescript makes
    {"type": "object"} alone a Record<string, never>); null is a type beside another,
    not a field's only one."""
    for where, schema in _schemas(document):
        types = schema.get('type', [])
        if 'object' in types:
            assert 'additionalProperties' in schema, where
        assert types != 'null' or '/anyOf/' in where or '/oneOf/' in where, where
    schemas = document['components']['schemas']
    assert schemas['response_user']['properties']['ui_settings']['additionalProperties']
    assert schemas['response_user']['properties']['type']['type'] == ['string', 'null']


def test_the_server_checks_what_the_files_cannot_say(document):
    """The published files are standard; the server is stricter where they say so in
    words (validators.SERVER_CHECKS), with its own messages."""
    schemas = document['components']['schemas']
    assert 'bytes in UTF-8' in schemas['definitions.password']['description']
    timezone = schemas['account_update']['properties']['timezone']
    assert 'time zone database' in timezone['description']
    validators = load_validators()
    assert validators['account_update'].errors({'timezone': 'Mars/Base'}) == [
        ('timezone', 'Timezone is invalid')
    ]
    assert validators['account_update'].errors({'name': ' '}) == [
        ('name', "Name can't be blank")
    ]
    assert validators['sign_in'].schema == load_schemas()['sign_in']
    with pytest.raises(RuntimeError, match='SERVER_CHECKS: x.json#/y is not in'):
        with_server_checks(load_schemas(), {'x.json#/y': {'maxBytes': 1}})


def test_the_document_names_its_server(document):
    assert document['servers'] == [
        {'url': '/', 'description': 'The server that serves this document.'}
    ]


def test_a_method_without_declared_responses_stops_the_boot():
    class Forgotten:
        access = {'GET': 'user', 'DELETE': 'user'}
        responses = {'GET': {200: 'user'}}

    with pytest.raises(RuntimeError, match='no responses declared for DELETE'):
        apidoc.build([('/x', Forgotten())], load_schemas())


def test_the_contract_hook_fails_on_what_the_document_does_not_say():
    headers = {'Content-Type': 'application/json', 'X-Request-Id': 'r1'}
    contract.check('GET', '/healthz', {}, 200, headers, b'{"status": "ok"}')
    with pytest.raises(AssertionError, match='status 201 is not documented'):
        contract.check('GET', '/healthz', {}, 201, headers, b'{"status": "ok"}')
    with pytest.raises(AssertionError, match='does not match the documented schema'):
        contract.check('GET', '/healthz', {}, 200, headers, b'{"status": "fine"}')
    with pytest.raises(AssertionError, match='required header X-Request-Id'):
        contract.check(
            'GET',
            '/healthz',
            {},
            200,
            {'Content-Type': 'application/json'},
            b'{"status": "ok"}',
        )
    with pytest.raises(AssertionError, match='token headers are not echoed'):
        contract.check(
            'GET',
            '/api/v1/profile',
            {'access-token': 'a', 'client': 'b', 'uid': 'c'},
            200,
            headers,
            b'{}',
        )
    # A documented path with another method is an unknown route: the 404 is all it may
    # answer.
    contract.check(
        'DELETE',
        '/healthz',
        {},
        404,
        headers,
        b'{"error": "Resource could not be found"}',
    )
    # A route only a test knows is left alone.
    contract.check('GET', '/boom', {}, 500, headers, b'not json')


def test_every_operation_has_a_tag_a_summary_a_description_and_examples(document):
    tags = {tag['name'] for tag in document['tags']}
    for path, operations in document['paths'].items():
        for method, operation in operations.items():
            where = (
                f'{method.upper()} {path}: write the summary and description as the '
                "responder's docstring; add examples to apidoc.EXAMPLES / "
                'REQUEST_EXAMPLES'
            )
            assert operation['tags'] and set(operation['tags']) <= tags, where
            assert operation['summary'] and operation['description'], where
            for status, response in operation['responses'].items():
                if 'content' not in response:  # a 204 or a redirect: no body to show
                    assert status == '204' or 'Location' in response['headers'], (
                        f'{where} ({status})'
                    )
                    continue
                assert 'example' in response['content']['application/json'], (
                    f'{where} ({status})'
                )
            if 'requestBody' in operation:
                assert (
                    'example' in operation['requestBody']['content']['application/json']
                ), where


def test_every_example_matches_its_schema(document):
    """Response examples against the document's schemas; request examples against the
    validators the service applies (with its own keywords)."""
    validators = load_validators()
    for path, operations in document['paths'].items():
        for method, operation in operations.items():
            for status, response in operation['responses'].items():
                if 'content' not in response:
                    continue
                pointer = contract._pointer(
                    'paths',
                    path,
                    method,
                    'responses',
                    status,
                    'content',
                    'application/json',
                    'schema',
                )
                example = response['content']['application/json']['example']
                errors = list(contract._validator(pointer).iter_errors(example))
                assert not errors, (
                    f'{method.upper()} {path} {status}: {errors[0].message}'
                )
            request = (
                operation.get('requestBody', {})
                .get('content', {})
                .get('application/json')
            )
            if request:
                stem = request['schema']['$ref'].rpartition('/')[2]
                validators[stem].check(request['example'])


def test_a_document_shares_no_example_with_the_next_one_built():
    """A reader that fills an example in (schemathesis does, in test_properties.py)
    changes its own document only: a document built later, the one the service serves
    included, still has apidoc's examples."""
    config = config_module.Config(database_url='postgresql://unused')

    def build():
        table = app_module.routes(None, load_queries(), config, load_validators())
        return dict(table)[apidoc.OPENAPI_PATH].document

    def examples(document):
        for operations in document['paths'].values():
            for operation in operations.values():
                request = operation.get('requestBody', {}).get('content', {})
                if 'application/json' in request:
                    yield request['application/json']['example']
                for response in operation['responses'].values():
                    if 'content' in response:
                        yield response['content']['application/json']['example']

    first = build()
    pristine = copy.deepcopy(first)
    for example in examples(first):
        if isinstance(example, dict):
            example['filled_in'] = True
        elif isinstance(example, list):
            example.append('filled in')
    assert build() == pristine
