"""No input gets a 500: requests generated from /api/v1/openapi.json.

schemathesis generates valid and invalid requests for every operation from the same
schema files the app validates with, with and without credentials; every answer must be
a documented status with the documented body. Bodies that are not JSON a schema could
describe (NUL characters, lone surrogates, duplicate keys, deep nesting, garbage
multipart) are generated with Hypothesis below and sent as raw bytes.

PROPERTY_EXAMPLES sets the examples per operation (default 25, so CI stays fast); the
seed is fixed, so a run is the same every time.
"""

import copy
import functools
import io
import json
import os
import urllib.parse

import hypothesis
from hypothesis import strategies as st
from PIL import Image
import pytest
import schemathesis
from schemathesis.specs.openapi.checks import negative_data_rejection

import app as app_module
from services import sessions
from tests import contract

EXAMPLES = int(os.environ.get('PROPERTY_EXAMPLES', '25'))
SEED = 20261121
CHECKS = (
    'not_a_server_error',
    'status_code_conformance',
    'content_type_conformance',
    'response_headers_conformance',
    'response_schema_conformance',
    'negative_data_rejection',
    'ignored_auth',
)


class LazyApp:
    """The WSGI app, known at import but built only once the test database exists."""

    app = None

    def __call__(self, environ, start_response):
        return self.app(environ, start_response)


@pytest.fixture(scope='module', autouse=True)
def wsgi_app(config, pool):
    schema.app.app = app_module.create_app(config, pool)


# The document the app serves (tests/test_openapi.py checks they are the same), loaded
# at import so that pytest can list one test per operation. A copy: schemathesis fills
# the examples of what it is given in, and contract.document() is what every response
# of the suite is checked against.
schema = schemathesis.openapi.from_dict(
    copy.deepcopy(contract.document()),
    config=schemathesis.Config.from_dict(
        {
            'seed': SEED,
            'generation': {'max-examples': EXAMPLES, 'mode': 'all', 'database': 'none'},
            'checks': {
                'enabled': False,
                **{name: {'enabled': True} for name in CHECKS},
            },
        }
    ),
)
schema.app = LazyApp()


@pytest.fixture(scope='module')
def fresh_token(pool, queries, config):
    """Headers of a new token of ``user``: a generated sign-out may revoke the last
    one."""

    def issue(user):
        with pool.connection() as conn:
            token, client, _ = sessions.issue(conn, queries, config, user.id)
        return {'access-token': token, 'client': client, 'uid': user.email}

    return issue


def _check(case, response):
    request = response.request
    contract.check(
        case.method,
        case.formatted_path,
        dict(request.headers),
        response.status_code,
        {name: values[0] for name, values in response.headers.items()},
        response.content,
    )


@schema.parametrize()
@hypothesis.settings(
    deadline=None, derandomize=True, suppress_health_check=list(hypothesis.HealthCheck)
)
def test_no_input_gets_a_500_without_credentials(case):
    response = case.call_and_validate()
    _check(case, response)


def _valid_id(value):
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 2**63


@schema.parametrize()
@hypothesis.settings(
    deadline=None, derandomize=True, suppress_health_check=list(hypothesis.HealthCheck)
)
def test_no_input_gets_a_500_signed_in(case, admin, fresh_token):
    # Valid account ids become the caller's own account, so that generated requests get
    # past the membership check; invalid ones stay as generated.
    if _valid_id((case.path_parameters or {}).get('account_id')):
        case.path_parameters['account_id'] = admin.account_id
    # A member's sessions (SPEC 13): the caller is a member of its own account, so
    # valid user ids reach the revocation rather than the 404 of a stranger.
    if _valid_id((case.path_parameters or {}).get('user_id')):
        case.path_parameters['user_id'] = admin.id
    profile = case.body.get('profile') if isinstance(case.body, dict) else None
    if isinstance(profile, dict) and _valid_id(profile.get('account_id')):
        profile['account_id'] = admin.account_id
    excluded = []
    if case.operation.path == '/api/v1/accounts':
        # Signed in, sign-up reads only account_name and locale (SPEC 4.1): a bad
        # password beside them is rightly ignored. (Multipart bodies, which the document
        # names in words only, are generated below.)
        excluded.append(negative_data_rejection)
    if len(case.operation.query) and case.operation.path != '/auth/sso':
        # Unknown query parameters are ignored (SPEC 0); on a route that needs the token
        # headers schemathesis pairs an unknown one with the headers it believes
        # missing, which the call supplies, and calls the 200 accepted bad data (the
        # members' sessions, both audit logs). /auth/sso needs no headers: its check
        # stays.
        excluded.append(negative_data_rejection)
    response = case.call_and_validate(
        headers=fresh_token(admin), excluded_checks=excluded
    )
    _check(case, response)


# Raw bodies: what no schema describes, sent as bytes to every operation that takes
# JSON.


def _schema_fields(schema):
    """{field: [its fields]} of a request schema: ``profile`` lists the nested ones."""
    if '$ref' in schema:
        schema = contract.document()['components']['schemas'][
            schema['$ref'].rsplit('/', 1)[-1]
        ]
    return {
        name: list(prop.get('properties', ()))
        for name, prop in schema.get('properties', {}).items()
    }


JSON_OPERATIONS = [
    (
        method.upper(),
        path,
        _schema_fields(
            operation['requestBody']['content']['application/json']['schema']
        ),
    )
    for path, operations in contract.document()['paths'].items()
    for method, operation in operations.items()
    if 'requestBody' in operation
]

# Escaped by json.dumps: NUL, lone surrogates and their kin reach the parser as \uXXXX.
_TEXT = st.text(
    st.characters(codec=None)
    | st.sampled_from(['\x00', '\ud800', '\udc00', '\U0001f600', '\ufeff']),
    max_size=20,
)
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)
_FRAGMENTS = st.one_of(
    _VALUES.map(json.dumps),
    # Unescaped: a lone surrogate becomes bytes that are not UTF-8.
    _VALUES.map(lambda value: json.dumps(value, ensure_ascii=False)),
    st.sampled_from(
        [
            '1e400',
            '-0',
            '30.0',
            '1e2',
            '9' * 400,
            'NaN',
            'Infinity',
            '"\\ud800"',
            '"\\u0000"',
            '"\\udc00\\ud800"',
            '"a\\\\u0000"',
        ]
    ),
    # Huge strings, up to over the 1 MiB limit.
    st.tuples(
        st.sampled_from(['x', 'é', '\U0001f600', ' ']),
        st.sampled_from([256, 20_001, 300_000, 1_048_576]),
    ).map(lambda pair: json.dumps(pair[0] * pair[1], ensure_ascii=False)),
    # Deep nesting, around and beyond the parser's limit.
    st.tuples(
        st.integers(1, 1100)
        | st.sampled_from([199, 201, 254, 255, 990, 1000, 1024, 1025]),
        st.booleans(),
    ).map(
        lambda pair: (
            '[' * pair[0] + ']' * pair[0]
            if pair[1]
            else '{"a":' * pair[0] + '1' + '}' * pair[0]
        )
    ),
)


def _object(pairs):
    return '{' + ','.join(f'{json.dumps(key)}:{value}' for key, value in pairs) + '}'


def _json_bodies(fields):
    keys = st.sampled_from(sorted(fields)) | _TEXT if fields else _TEXT
    pairs = st.lists(st.tuples(keys, _FRAGMENTS), max_size=4)
    objects = pairs.map(_object)
    nested = [
        st.lists(st.tuples(st.sampled_from(inner) | _TEXT, _FRAGMENTS), max_size=4).map(
            lambda inner_pairs, name=name: _object([(name, _object(inner_pairs))])
        )
        for name, inner in fields.items()
        if inner
    ]
    duplicates = st.tuples(keys, _FRAGMENTS, _FRAGMENTS).map(
        lambda t: _object([(t[0], t[1]), (t[0], t[2])])
    )
    truncated = objects.flatmap(
        lambda text: st.integers(0, len(text)).map(lambda end: text[:end])
    )
    text_bodies = st.one_of(objects, *nested, duplicates, _FRAGMENTS, truncated)
    return text_bodies.map(
        lambda text: text.encode('utf-8', 'surrogatepass')
    ) | st.binary(max_size=64)


_CONTENT_TYPES = st.sampled_from(
    [
        'application/json',
        'application/json',
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'text/plain',
        'application/x-www-form-urlencoded',
        '',
    ]
)
_HEADER_TEXT = st.text(st.characters(max_codepoint=255), max_size=12) | st.sampled_from(
    ['\x00', 'a\x00b', ' ']
)
# Valid credentials of either kind, none, or one credential header replaced by garbage.
_CREDENTIALS = st.sampled_from(['token', 'api_access_token', 'none']) | st.tuples(
    st.sampled_from(['access-token', 'client', 'uid', 'api_access_token', 'mfa_token']),
    _HEADER_TEXT,
)


def _headers(credentials, user, fresh_token):
    if credentials == 'token':
        return fresh_token(user)
    if credentials == 'api_access_token':
        return {'api_access_token': user.access_token}
    if credentials == 'none':
        return {}
    name, garbage = credentials
    return {
        **(fresh_token(user) if name not in ('api_access_token', 'mfa_token') else {}),
        name: garbage,
    }


def _send(testapp, method, path, body, headers):
    response = testapp.request(
        path, method=method, body=body, headers=headers, expect_errors=True
    )
    # The conftest hook has checked the status, headers and body against the document.
    assert response.status_int < 500, (
        f'{method} {path} -> {response.status}\nheaders: {headers}\n'
        f'body: {body[:300]!r}'
    )
    return response


@pytest.mark.parametrize(
    'method, path, fields',
    JSON_OPERATIONS,
    ids=[f'{m} {p}' for m, p, _ in JSON_OPERATIONS],
)
def test_no_raw_json_body_gets_a_500(testapp, admin, fresh_token, method, path, fields):
    path = path.replace('{account_id}', str(admin.account_id))

    @hypothesis.given(
        body=_json_bodies(fields), content_type=_CONTENT_TYPES, credentials=_CREDENTIALS
    )
    @hypothesis.settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def run(body, content_type, credentials):
        headers = {
            **_headers(credentials, admin, fresh_token),
            'Content-Type': content_type,
        }
        _send(testapp, method, path, body, headers)

    run()


def _tiny_image(fmt):
    out = io.BytesIO()
    Image.new('RGB', (2, 2), 'red').save(out, fmt)
    return out.getvalue()


_PROFILE_FIELDS = sorted(_schema_fields({'$ref': 'profile_update'})['profile']) + [
    'avatar'
]
_PART_NAMES = (
    st.sampled_from([f'profile[{name}]' for name in _PROFILE_FIELDS])
    | st.sampled_from(['profile', 'profile[]', 'profile[avatar][x]', '', 'avatar'])
    | _TEXT
)
_PART_CONTENTS = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(
        [
            _tiny_image('PNG'),
            _tiny_image('GIF'),
            _tiny_image('JPEG'),
            _tiny_image('WEBP'),
            b'<svg xmlns="http://www.w3.org/2000/svg"/>',
            b'\xff\xfe\x00',
            b'a\x00b',
            b'{"a": 1}',
            b'[]',
        ]
    ),
    st.tuples(
        st.sampled_from([_tiny_image('PNG'), _tiny_image('GIF')]), st.integers(1, 60)
    ).map(lambda pair: pair[0][: pair[1]]),  # truncated images
    _TEXT.map(lambda text: text.encode('utf-8', 'surrogatepass')),
)


# A lone surrogate becomes bytes that are not UTF-8 in the part's headers.
_FILENAMES = _TEXT | st.sampled_from(['a.png', '../../x', '\udcff'])


@st.composite
def _multipart_bodies(draw):
    boundary = draw(
        st.sampled_from(['frontdesk-boundary', 'b', 'x' * 70])
        | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80)
    )
    chunks = []
    for name, content in draw(
        st.lists(st.tuples(_PART_NAMES, _PART_CONTENTS), max_size=5)
    ):
        disposition = f'form-data; name="{name}"'
        if draw(st.booleans()):
            disposition += f'; filename="{draw(_FILENAMES)}"'
        head = f'Content-Disposition: {disposition}\r\n'
        if draw(st.booleans()):
            head += f'Content-Type: {draw(st.sampled_from(["image/png", "text/plain", "application/json", "x"]))}\r\n'  # noqa: E501
        chunks.append(
            f'--{boundary}\r\n{head}\r\n'.encode('utf-8', 'surrogatepass')
            + content
            + b'\r\n'
        )
    body = b''.join(chunks) + f'--{boundary}--\r\n'.encode()
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]
    content_type = draw(
        st.sampled_from(
            [
                f'multipart/form-data; boundary={boundary}',
                f'multipart/form-data; boundary="{boundary}"',
                'multipart/form-data',
                'multipart/form-data; boundary=',
            ]
        )
    )
    return body, content_type


@pytest.mark.parametrize('method', ['PUT', 'PATCH'])
def test_no_multipart_body_gets_a_500(testapp, admin, fresh_token, method):
    @hypothesis.given(
        body=_multipart_bodies()
        | st.tuples(
            st.binary(max_size=200), st.just('multipart/form-data; boundary=b')
        ),
        credentials=_CREDENTIALS,
    )
    @hypothesis.settings(
        max_examples=4 * EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def run(body, credentials):
        body, content_type = body
        _send(
            testapp,
            method,
            '/api/v1/profile',
            body,
            {**_headers(credentials, admin, fresh_token), 'Content-Type': content_type},
        )

    run()


# What the generated requests found, kept as plain examples.


def test_an_integer_written_with_a_fraction_is_an_integer(testapp, admin):
    resp = testapp.put(
        f'/api/v1/accounts/{admin.account_id}',
        b'{"auto_resolve_duration": 30.0}',
        content_type='application/json',
        headers=admin.headers,
        status=200,
    )
    assert resp.json['auto_resolve_duration'] == 30


def test_nesting_deeper_than_the_limit_is_a_400(testapp, admin):
    for depth in (200, 990, 1020):
        body = (
            b'{"profile": {"ui_settings": '
            + b'{"a":' * depth
            + b'"\\u0000"'
            + b'}' * depth
            + b'}}'
        )
        resp = testapp.put(
            '/api/v1/profile',
            body,
            content_type='application/json',
            headers=admin.headers,
            status=400,
        )
        assert resp.json == {'message': 'Malformed JSON: nested deeper than 200 levels'}
    body = b'{"profile": {"ui_settings": ' + b'{"a":' * 197 + b'1' + b'}' * 197 + b'}}'
    testapp.put(
        '/api/v1/profile',
        body,
        content_type='application/json',
        headers=admin.headers,
        status=200,
    )


def test_a_nul_in_a_credential_header_is_no_credential(testapp, make_testapp):
    testapp.get('/api/v1/profile', headers={'api_access_token': 'a\x00b'}, status=401)
    limited = make_testapp(RATE_LIMITS='on')
    limited.post_json(
        '/auth/sign_in',
        {'email': 'nobody@example.com', 'password': 'x'},
        headers={'X-Real-IP': '10.0.0.1\x00'},
        status=401,
    )


def test_a_multipart_part_header_that_is_not_utf8_is_a_400(testapp, admin):
    body = (
        b'--b\r\nContent-Disposition: form-data; name="profile[name]"; '
        b'filename="\xed\xa0\x80"\r\n\r\nAda\r\n--b--\r\n'
    )
    resp = testapp.request(
        '/api/v1/profile',
        method='PUT',
        body=body,
        status=400,
        headers={**admin.headers, 'Content-Type': 'multipart/form-data; boundary=b'},
    )
    assert resp.json == {'message': 'Multipart part headers are not UTF-8'}


# The one address syntax (SPEC 3.3): the schemas and the code that cannot use a schema
# (sign-in, reset requests, the public resend) agree on every generated string, and none
# of the endpoints that read an address answers 500 for one.

_ADDRESS_TEXT = st.lists(
    st.sampled_from(
        list('ab.@-_+,<>"()[] \t\n1é!#%\'/=?^`{|}~') + ['xn--', '.com', '@x.io']
    ),
    max_size=16,
).map(''.join)


@hypothesis.given(address=_ADDRESS_TEXT)
@hypothesis.settings(
    max_examples=20 * EXAMPLES, derandomize=True, deadline=None, database=None
)
def test_the_schema_and_the_code_agree_on_what_an_address_is(address):
    from services import addresses

    schema_ok = not _profile_validator().errors({'profile': {'email': address}})
    assert schema_ok == addresses.is_valid(address), repr(address)


@functools.cache
def _profile_validator():
    from validators import load_validators

    return load_validators()['profile_update']


def test_no_address_gets_a_500_where_addresses_are_read(testapp):
    @hypothesis.given(address=_ADDRESS_TEXT)
    @hypothesis.settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def run(address):
        body = json.dumps(
            {
                'email': address,
                'password': 'a long passphrase',
                'account_name': 'A',
                'user_full_name': 'A',
                'token': address,
            }
        ).encode()
        for method, path in (
            ('POST', '/api/v1/accounts'),
            ('POST', '/auth/sign_in'),
            ('POST', '/auth/password'),
            ('POST', '/resend_confirmation'),
            ('POST', '/auth/email_revert'),
            ('POST', '/auth/mfa_revert'),
        ):
            _send(testapp, method, path, body, {'Content-Type': 'application/json'})


# Two-factor sign-in (SPEC 12): the states generated requests cannot reach by
# themselves, an MFA user with a live challenge, and codes of every shape.

_CODES = (
    st.none()
    | _TEXT
    | st.integers(0, 10**7)
    | st.from_regex(r'\A[0-9]{6}\Z')
    | st.sampled_from(
        [
            'AAAAAA-AAAAAA-AAAAAA-AAAAAA',
            'aaaaaa aaaaaa aaaaaa aaaaaa',
            '0O1I8B' * 4,
            '-' * 30,
            '１２３４５６',
            '12 34 56',
        ]
    )
)


def test_no_second_factor_gets_a_500(testapp, make_user, fresh_token, conn):
    from tests.test_guessing import end_window
    from tests.test_mfa import enable

    user = make_user()
    enable(testapp, user)

    @hypothesis.given(
        factor=st.fixed_dictionaries(
            {}, optional={'otp_code': _CODES, 'backup_code': _CODES}
        ),
        endpoint=st.sampled_from(['sign_in', 'verify', 'backup_codes', 'disable']),
    )
    @hypothesis.settings(
        max_examples=4 * EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def run(factor, endpoint):
        # Every example checks the right password; the cap on password checks (SPEC
        # 3.4, 30 per 15 minutes) is not what this property is about.
        end_window(conn, user.id, 'password')
        if endpoint == 'sign_in':
            challenge = testapp.post_json(
                '/auth/sign_in',
                {'email': user.email, 'password': user.password},
                status=206,
            ).json['mfa_token']
            body, path, method, headers = (
                {'mfa_token': challenge, **factor},
                '/auth/sign_in',
                'POST',
                {},
            )
        else:
            path = {
                'verify': '/api/v1/profile/mfa/verify',
                'backup_codes': '/api/v1/profile/mfa/backup_codes',
                'disable': '/api/v1/profile/mfa',
            }[endpoint]
            body = {'password': user.password, **factor}
            method, headers = (
                ('DELETE' if endpoint == 'disable' else 'POST'),
                fresh_token(user),
            )
        _send(
            testapp,
            method,
            path,
            json.dumps(body).encode(),
            {**headers, 'Content-Type': 'application/json'},
        )

    run()


@hypothesis.settings(
    max_examples=EXAMPLES * 2,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(
    name=st.text(min_size=1, max_size=40), method=st.sampled_from(['GET', 'HEAD'])
)
def test_no_docs_asset_name_gets_a_500(testapp, name, method):
    """The docs page's files (HTML and JS, outside the OpenAPI document) by any name."""
    path = '/api/v1/docs/assets/' + urllib.parse.quote(name, safe='')
    resp = testapp.request(path, method=method, expect_errors=True)
    assert resp.status_int in (200, 404), (path, resp.status)
