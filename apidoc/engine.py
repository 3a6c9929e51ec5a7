"""The engine: the document built from the route table and the schema files.

Each resource already declares, per method, its access level, its request schema and
whether it takes multipart; its responder's docstring is the operation's summary and
description. It also declares ``responses = {'GET': {200: 'user'}}``: the statuses only
it can answer, by a name of responses.RESPONSES. The statuses the middleware answers
follow from the other declarations (a schema means 400/413/415/422, a signed-in access
level 401...), so nothing is written down twice.

The schema files go under ``components/schemas``: each file that describes a body as
``<file stem>``, each entry of a file's ``$defs`` as ``<file stem>.<name>``, their
relative ``$ref``s rewritten to point there (components()).
"""

import inspect
import re

from apidoc.examples import describe
from apidoc.responses import EVERYWHERE
from apidoc.responses import HEADERS
from apidoc.responses import NOT_ECHOED
from apidoc.responses import RESPONSES
from config import VERSION
from middleware.access import access_level
from middleware.access import scope_for
from middleware.access import SCOPED_LEVELS
from middleware.routing import PathId
from tokens import TOKEN_HEADERS

OPENAPI_PATH = '/api/v1/openapi.json'

_SESSION = [{'accessToken': [], 'client': [], 'uid': []}]
_SIGNED_IN = [*_SESSION, {'apiAccessToken': []}]
_ENROLMENT = [*_SESSION, {'mfaToken': []}]
_PERSONAL = {'personalAccessToken': []}
SECURITY_SCHEMES = {
    'accessToken': {
        'type': 'apiKey',
        'in': 'header',
        'name': 'access-token',
        'description': 'Sent with client and uid: the three headers of a sign-in.',
    },
    'client': {'type': 'apiKey', 'in': 'header', 'name': 'client'},
    'uid': {
        'type': 'apiKey',
        'in': 'header',
        'name': 'uid',
        'description': "The user's current e-mail.",
    },
    'apiAccessToken': {
        'type': 'apiKey',
        'in': 'header',
        'name': 'api_access_token',
        'description': (
            "The profile's access_token, or a personal access token (fdpat_...); its "
            'successes echo no token headers.'
        ),
    },
    'personalAccessToken': {
        'type': 'http',
        'scheme': 'bearer',
        'description': (
            'Authorization: Bearer fdpat_...: a personal access token (SPEC 17), on '
            'the operations whose x-personal-access-token-scope it has.'
        ),
    },
    'mfaToken': {
        'type': 'apiKey',
        'in': 'header',
        'name': 'mfa_token',
        'description': (
            'The mfa_token of a 206 mfa_setup_required sign-in: reaches only the '
            '/api/v1/profile/mfa endpoints, until MFA is on.'
        ),
    },
}

DESCRIPTION = """\
The account and profile API of Frontdesk. Bodies are JSON \
(`application/json; charset=utf-8`) except the avatar upload; errors are always JSON. \
Signed-in requests send either the three headers `access-token`, `client`, `uid` of a \
sign-in, or `api_access_token`. Unknown fields in request bodies are ignored.

Wherever a JSON body is accepted, `application/x-www-form-urlencoded` is accepted too \
(what the reference dashboard and mobile app send), in Rails' bracket notation \
(`profile[name]=Ada&profile[ui_settings][theme]=dark`, `tags[]=a&tags[]=b`). Its \
values are strings, cast where the schema wants another type: `true`/`false`/`1`/`0` \
for booleans, decimal digits for integers, an empty value for null; anything else is \
the usual 422. This document describes the JSON bodies; a form carries the same fields.

Two-factor sign-in (TOTP, RFC 6238): enrol with `POST /api/v1/profile/mfa` (no body \
needed) and `POST /api/v1/profile/mfa/verify` (the first code; the recovery codes come \
back once). Then `POST /auth/sign_in` with the password answers 206 \
`{"mfa_required": true, "mfa_token"}` and no token headers, and a second \
`POST /auth/sign_in` with `mfa_token` and `otp_code` (or `backup_code`) signs in (at \
the session limit it ends the least recently active session); a password reset or a \
confirmation of such a user answers the same 206. A member of an account with \
`enforce_mfa` and without MFA gets 206 `{"mfa_setup_required": true, "mfa_token"}` \
instead: that token, as the `mfa_token` header, reaches only the `/api/v1/profile/mfa` \
endpoints, and after enrolling the member signs in again with a code. The MFA \
endpoints refuse `api_access_token`.

Tokens for integrations (personal access tokens): `POST /api/v1/profile/access_tokens` \
with a fresh sign-in answers a token `fdpat_...` once. Send it as \
`Authorization: Bearer fdpat_...` (or `api_access_token`). It reaches only the \
operations whose `x-personal-access-token-scope` it has (`profile:read`, \
`profile:write`, `account:read`, `account:write`; a write scope includes its read \
scope) and only the accounts it names; elsewhere 403 `insufficient_scope` with \
`required_scope`, and on every operation without a scope (sessions, tokens, MFA, \
audit logs...) the 403 `This action needs a signed-in session`. Answers to it carry \
`access_token` and `pubsub_token` as null.

An administrator may suspend a member of the account \
(`POST /api/v1/accounts/{account_id}/agents/{user_id}/suspend`, and `/reactivate`): \
that account's routes, and the profile endpoints that name it, then answer 403 \
`membership_suspended` to the member whatever the credential, and each entry of the \
user's `accounts` carries `membership_status`. A member suspended in every account is \
signed out everywhere, and every way of signing in answers 401 `account_suspended` \
until an administrator reactivates them.

The schemas are standard JSON Schema 2020-12, the files of `schemas/` with each \
`$defs` entry as a component of its own (`<file>.<name>`). A body they accept can \
still be a 422 for what no schema can say: a password's limit of 72 bytes in UTF-8 \
(`maxLength` counts characters), a time zone name the server's time zone database does \
not know, the password rules of `GET /api/v1/password_policy`, a wrong password, token \
or code.

Response schemas forbid properties they do not list (`additionalProperties: false`), \
so that the service's own tests catch a field that should not be sent. A later release \
may add fields: a client that validates responses should allow unknown properties \
(docs/api.md, "Validating responses")."""

# Relative: the document is served by the API it describes, at its root.
SERVERS = [{'url': '/', 'description': 'The server that serves this document.'}]

_FIELD = re.compile(r'\{(\w+)(?::(\w+))?\}')
_COMPONENTS = '#/components/schemas/'
# What a schema file says about itself rather than about a value.
_FILE_KEYWORDS = ('$schema', '$id', '$defs', '$comment', 'title', 'description')


def component_name(stem, name=None):
    """The component of a schema file (``response_user``), or of one of its $defs
    (``response_user.membership``)."""
    return stem if name is None else f'{stem}.{name}'


def _component_ref(ref, stem):
    """A ``$ref`` of the file ``stem`` as one to a component:
    ``definitions.json#/$defs/email`` -> ``#/components/schemas/definitions.email``."""
    target, _, fragment = ref.partition('#')
    target = target.removesuffix('.json') if target else stem
    parts = fragment.split('/')
    if fragment in ('', '/'):
        return _COMPONENTS + component_name(target)
    if len(parts) == 3 and parts[:2] == ['', '$defs']:
        return _COMPONENTS + component_name(target, parts[2])
    raise RuntimeError(
        f'schemas/{stem}.json: $ref {ref!r} names neither a file nor one of its $defs'
    )


# Keywords whose value is a schema, a list of schemas, or a map of names to schemas;
# the others hold data (enum, const, examples...) and are copied as they are.
_SUBSCHEMA = (
    'items',
    'additionalProperties',
    'unevaluatedProperties',
    'unevaluatedItems',
    'not',
    'if',
    'then',
    'else',
    'contains',
    'propertyNames',
    'contentSchema',
)
_SUBSCHEMA_LISTS = ('allOf', 'anyOf', 'oneOf', 'prefixItems')
_SUBSCHEMA_MAPS = ('properties', 'patternProperties', 'dependentSchemas')


def _rewrite(schema, stem):
    """A schema of the file ``stem`` for the document: refs to components; no $id
    (it would make '#/components/...' resolve against the file), and the title folded
    into the description (generators would name models after a title sentence)."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ('$id', '$schema', '$defs', 'title'):
            continue
        if key == '$ref':
            value = _component_ref(value, stem)
        elif key in _SUBSCHEMA:
            value = _rewrite(value, stem)
        elif key in _SUBSCHEMA_LISTS:
            value = [_rewrite(item, stem) for item in value]
        elif key in _SUBSCHEMA_MAPS:
            value = {name: _rewrite(item, stem) for name, item in value.items()}
        out[key] = value
    if schema.get('title'):
        title = schema['title'].rstrip('.') + '.'
        out['description'] = ' '.join(filter(None, [title, schema.get('description')]))
    return out


def components(schemas):
    """{name: schema}: each file that describes a value, and each entry of its $defs,
    so that every body is a component of its own (generators name models after
    them)."""
    found = {}
    for stem, schema in schemas.items():
        if set(schema) - set(_FILE_KEYWORDS):
            found[component_name(stem)] = _rewrite(schema, stem)
        for name, definition in schema.get('$defs', {}).items():
            found[component_name(stem, name)] = _rewrite(definition, stem)
    # Generators turn names into class names: these must stay apart too.
    seen = {}
    for name in found:
        key = re.sub(r'[^a-z0-9]', '', name.lower())
        if key in seen:
            raise RuntimeError(f'components {seen[key]} and {name} would collide')
        seen[key] = name
    return found


def refs(node):
    """Every $ref string in a document or schema, nested ones included."""
    if isinstance(node, dict):
        if isinstance(node.get('$ref'), str):
            yield node['$ref']
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def _used(paths, available):
    """The components that ``paths`` refer to, directly or through others."""
    used, todo = set(), [ref for ref in refs(paths) if ref.startswith(_COMPONENTS)]
    while todo:
        name = todo.pop().removeprefix(_COMPONENTS)
        if name in used:
            continue
        if name not in available:
            raise RuntimeError(f'$ref to {name}: no schema file has it')
        used.add(name)
        todo += [ref for ref in refs(available[name]) if ref.startswith(_COMPONENTS)]
    return used


def prose(resource, method):
    """(summary, description) of an operation: what the resource declares in
    ``descriptions`` (a resource that serves several routes), else the responder's
    docstring: its first line, then its paragraphs."""
    declared = getattr(resource, 'descriptions', {}).get(method)
    if declared:
        return declared
    doc = inspect.getdoc(getattr(resource, f'on_{method.lower()}', None)) or ''
    summary, _, rest = doc.partition('\n\n')
    paragraphs = [' '.join(part.split()) for part in rest.split('\n\n')]
    return ' '.join(summary.split()), '\n\n'.join(filter(None, paragraphs))


def _path(template):
    """``{account_id:id}`` -> ``{account_id}`` and its parameter."""
    parameters = []
    for name, converter in _FIELD.findall(template):
        schema = {'type': 'string'}
        if converter == 'id':
            schema = {'type': 'integer', 'minimum': 1, 'maximum': PathId.MAXIMUM}
        parameters.append(
            {'name': name, 'in': 'path', 'required': True, 'schema': schema}
        )
    return _FIELD.sub(r'{\1}', template), parameters


def _refusals(resource, method, level):
    """The 403s of the access rules for integration credentials (SPEC 3.4, 17)."""
    scope = scope_for(resource, method)
    if (
        level in ('session', 'enrolment', 'administrator_session')
        or getattr(resource, 'session_fields', {}).get(method)
        or (level in SCOPED_LEVELS and scope is None)
    ):
        yield 'needs_session'
    if scope is not None:
        yield 'insufficient_scope'
    if level in ('member', 'administrator', 'administrator_session') or getattr(
        resource, 'account_in_body', {}
    ).get(method):
        yield 'legacy_token_disabled'


def _statuses(resource, method, level):
    """{status: [response names]}: what the resource declares, then what the
    middleware adds.
    """
    declared = getattr(resource, 'responses', {}).get(method)
    if not declared:
        raise RuntimeError(
            f'{type(resource).__name__}: no responses declared for {method}'
        )
    # A status answered for two reasons declares a tuple of names.
    statuses = {
        status: [name] if isinstance(name, str) else list(name)
        for status, name in declared.items()
    }

    def add(status, name):
        statuses.setdefault(status, [])
        if name not in statuses[status]:
            statuses[status].append(name)

    if level not in ('public', 'optional'):  # every other level of access.LEVELS
        add(401, 'unauthenticated')
    for name in _refusals(resource, method, level):
        add(403, name)
    if level in (
        'optional',
        'user',
        'session',
        'member',
        'administrator',
        'administrator_session',
    ) and not getattr(resource, 'before_enrolment', False):
        add(403, 'mfa_enrollment_required')
    if level in ('member', 'administrator', 'administrator_session'):
        add(404, 'not_found')
    if level in ('member', 'administrator', 'administrator_session') or getattr(
        resource, 'account_in_body', {}
    ).get(method):
        add(403, 'membership_suspended')
    if level in ('administrator', 'administrator_session'):
        add(401, 'not_authorized')
    if getattr(resource, 'query', {}).get(method):
        add(422, 'unprocessable')
    if getattr(resource, 'schemas', {}).get(method):
        for status, name in (
            (400, 'bad_request'),
            (403, 'cross_site_form'),
            (413, 'too_large'),
            (415, 'unsupported_media_type'),
            (422, 'unprocessable'),
        ):
            add(status, name)
    if getattr(resource, 'rate_limits', {}).get(method):
        add(429, 'rate_limited')
    for status, name in EVERYWHERE.items():
        statuses.setdefault(status, [name])
    return dict(sorted(statuses.items()))


def _header(name, required):
    return {'$ref': f'#/components/headers/{name}' + ('' if required else '.optional')}


def _header_components():
    components = {}
    for name, (description, schema) in HEADERS.items():
        components[name] = {
            'description': description,
            'required': True,
            'schema': schema,
        }
        if name in TOKEN_HEADERS:
            components[f'{name}.optional'] = {
                'description': (
                    f'{description} Sent when the request used the token headers, or '
                    'signed in.'
                ),
                'required': False,
                'schema': schema,
            }
    return components


def _response(names, status, level):
    headers = {'X-Request-Id': _header('X-Request-Id', True)}
    # Successes of token-authenticated requests echo the token (SPEC 3): not for
    # api_access_token callers, so not required; not after a sign-out, which revoked it.
    echoed = (
        200 <= status < 300 and level != 'public' and not NOT_ECHOED.intersection(names)
    )
    for name in names:
        for header in RESPONSES[name][2]:
            headers[header] = _header(
                header, level == 'public' or header not in TOKEN_HEADERS
            )
    if echoed:
        for header in TOKEN_HEADERS:
            headers.setdefault(header, _header(header, False))
    response = {
        'description': ' Or: '.join(RESPONSES[name][0] for name in names),
        # Read (and removed) by describe(), which picks the example.
        'x-names': names,
        'headers': headers,
    }
    bodies = [RESPONSES[name][1] for name in names if RESPONSES[name][1]]
    if bodies:
        schemas = [{'$ref': _component_ref(body, None)} for body in bodies]
        response['content'] = {
            'application/json': {
                'schema': schemas[0] if len(schemas) == 1 else {'anyOf': schemas}
            }
        }
    return response


def _operation(path_template, resource, method, schemas):
    level = access_level(resource, method)
    schema_name = getattr(resource, 'schemas', {}).get(method)
    path, parameters = _path(path_template)
    query = getattr(resource, 'query', {}).get(method)
    if query:
        parameters += [
            {
                'name': name,
                'in': 'query',
                'required': False,
                'description': prop.get('description', ''),
                'schema': {
                    key: value
                    for key, value in _rewrite(prop, query).items()
                    if key != 'description'
                },
            }
            for name, prop in schemas[query]['properties'].items()
        ]
    summary, description = prose(resource, method)
    security = {
        'public': [],
        'optional': [*_SIGNED_IN, {}],
        'session': _SESSION,
        'administrator_session': _SESSION,
        'enrolment': _ENROLMENT,
    }.get(level, _SIGNED_IN)
    scope = scope_for(resource, method)
    if scope is not None:
        security = [*_SIGNED_IN, _PERSONAL, *security[len(_SIGNED_IN) :]]
        description += f' Personal access tokens need the `{scope}` scope.'
    elif security:
        description += ' Not for personal access tokens.'
    operation = {
        'operationId': f'{method.lower()}{re.sub(r"[^a-z0-9]+", "_", path)}'.rstrip(
            '_'
        ),
        'summary': summary or f'{method} {path}',
        'description': description,
        'security': security,
        'parameters': parameters,
        'responses': {
            str(status): _response(names, status, level)
            for status, names in _statuses(resource, method, level).items()
        },
    }
    if scope is not None:
        operation['x-personal-access-token-scope'] = scope
    if schema_name:
        # JSON only: forms carry the same fields in Rails' bracket notation, which no
        # OpenAPI encoding describes (DESCRIPTION, docs/clients.md). A multipart body is
        # named in the description: with a second media type, generators fail on a
        # required body (openapi-python-client 0.29 types it without importing Unset).
        if method in getattr(resource, 'multipart', ()):
            operation['description'] += (
                ' As `multipart/form-data`, its parts are those of '
                f'`schemas/{schema_name}_multipart.json`.'
            )
        # An empty body counts as {}: required only when {} is not a valid body.
        schema = schemas[schema_name]
        operation['requestBody'] = {
            'required': bool(schema.get('required') or schema.get('minProperties')),
            'content': {
                'application/json': {'schema': {'$ref': _COMPONENTS + schema_name}}
            },
        }
    return operation


def build(route_table, schemas):
    """The document for ``route_table`` ([(template, resource)]); ``schemas`` by
    file stem.
    """
    paths = {}
    for template, resource in route_table:
        if getattr(resource, 'undocumented', False):
            continue
        path, _ = _path(template)
        # HEAD mirrors GET (app.answer_head_like_get) and is left out.
        for method in sorted(set(getattr(resource, 'access', {})) - {'HEAD'}):
            paths.setdefault(path, {})[method.lower()] = _operation(
                template, resource, method, schemas
            )
    available = components(schemas)
    return describe(
        {
            'openapi': '3.1.0',
            'info': {
                'title': 'Frontdesk accounts API',
                'version': VERSION,
                'description': DESCRIPTION,
            },
            'servers': SERVERS,
            'paths': paths,
            'components': {
                'schemas': {
                    name: available[name] for name in sorted(_used(paths, available))
                },
                'headers': _header_components(),
                'securitySchemes': SECURITY_SCHEMES,
            },
        }
    )
