"""The OpenAPI 3.1 document, built once from ``schemas/`` and the route table.

Each resource already declares, per method, its access level, its request schema and
whether it takes multipart; its responder's docstring is the operation's summary and
description. It also declares ``responses = {'GET': {200: 'user'}}``:
the statuses only it can answer, by a name of RESPONSES below. The statuses the
middleware answers follow from the other declarations (a schema means 400/413/415/422,
a signed-in access level 401...), so nothing is written down twice.

The schema files go under ``components/schemas``: each file that describes a body as
``<file stem>``, each entry of a file's ``$defs`` as ``<file stem>.<name>``, their
relative ``$ref``s rewritten to point there (components()).
"""

import copy
import inspect
import re

from config import VERSION
from middleware.auth import access_level
from middleware.auth import scope_for
from middleware.auth import SCOPED_LEVELS
from middleware.routing import PathId
from tokens import TOKEN_HEADERS

OPENAPI_PATH = '/api/v1/openapi.json'
_BODIES = 'response_bodies.json#/$defs/'
_ERRORS = 'response_errors.json#/$defs/'
_MFA = 'response_mfa.json#/$defs/'

# name: (description, body schema, headers besides X-Request-Id)
RESPONSES = {
    'health': ('The process runs.', _BODIES + 'health', ()),
    'ready': (
        'The database answers and every migration is applied.',
        _BODIES + 'ready',
        (),
    ),
    'not_ready': (
        'The database does not answer, or migrations are pending.',
        _BODIES + 'not_ready',
        ('Retry-After',),
    ),
    'openapi': ('This document.', _BODIES + 'openapi', ()),
    'api_info': (
        'The version, and whether the database answers (200 either way).',
        _BODIES + 'api_info',
        (),
    ),
    'user': ('The user (SPEC 5.1).', 'response_user.json', ()),
    'account': ('The account (SPEC 5.2).', 'response_account.json', ()),
    'cache_keys': (
        "The account's cache keys.",
        _BODIES + 'cache_keys',
        ('Cache-Control',),
    ),
    'empty': ('Done.', _BODIES + 'empty', ()),
    'deletion_toggled': (
        "The account's deletion is scheduled, or cancelled (or already was).",
        _BODIES + 'deletion_toggled',
        (),
    ),
    # No body at all (None): the document says so with no content.
    'no_content': ('Done; no body.', None, ()),
    'signed_in': (
        'Signed in: the user, and the five headers of a new token (of the caller, when '
        'already signed in).',
        _BODIES + 'signed_in',
        TOKEN_HEADERS,
    ),
    'signed_out': (
        'The token is revoked (and not echoed).',
        _BODIES + 'signed_out',
        (),
    ),
    'token_valid': ('The credentials are valid.', _BODIES + 'token_valid', ()),
    'password_policy': (
        'The password rules (SPEC 15).',
        _BODIES + 'password_policy',
        (),
    ),
    'reset_requested': (
        'A reset link is mailed if the address belongs to a user.',
        _BODIES + 'reset_requested',
        (),
    ),
    'sessions': (
        "The caller's sessions, most recently active first.",
        _BODIES + 'sessions',
        (),
    ),
    'revoked': ('Sessions ended.', _BODIES + 'revoked', ()),
    'member_signed_out': (
        "The member's sessions ended (and when the member is the caller, the caller's: "
        'its token is then not echoed).',
        _BODIES + 'revoked',
        (),
    ),
    'sessions_limit_reached': (
        "At the session limit (a browser's sign-in): pick sessions to end and sign in "
        'again.',
        _BODIES + 'sessions_limit_reached',
        (),
    ),
    'cannot_revoke_current': (
        'The session of this request cannot be ended here (sign out instead).',
        _ERRORS + 'cannot_revoke_current',
        (),
    ),
    'agents': (
        'Every member of the account, by name.',
        _BODIES + 'agents',
        (),
    ),
    'agent': (
        'The member, with the membership status now theirs.',
        _BODIES + 'agent',
        (),
    ),
    'audit_events': (
        'One page of audit events, newest first.',
        _BODIES + 'audit_events',
        (),
    ),
    'personal_access_tokens': (
        "The caller's live personal access tokens, newest first; never a secret.",
        _BODIES + 'personal_access_tokens',
        (),
    ),
    'personal_access_token_created': (
        'Created: the token is in this answer and nowhere else, ever.',
        _BODIES + 'personal_access_token_created',
        (),
    ),
    'account_personal_access_tokens': (
        "The live personal access tokens of the account's members that can reach it.",
        _BODIES + 'account_personal_access_tokens',
        (),
    ),
    'profile_export': (
        'Everything stored about the caller, as a download (SPEC 20); never a secret '
        'nor a digest of one.',
        'response_export.json',
        ('Content-Disposition',),
    ),
    'insufficient_scope': (
        'A personal access token without the scope this needs (required_scope), or '
        'limited to other accounts.',
        _ERRORS + 'insufficient_scope',
        (),
    ),
    'legacy_token_disabled': (
        "The profile's access_token, on a route of an account that set "
        'restrict_legacy_access_token: use a personal access token.',
        _ERRORS + 'legacy_token_disabled',
        (),
    ),
    'bad_request': (
        'The body is not valid JSON (NUL characters and lone surrogates included), or '
        'a multipart body cannot be parsed.',
        _ERRORS + 'message',
        (),
    ),
    'unauthenticated': (
        'No valid credentials: missing, malformed, unknown, expired or revoked alike.',
        _ERRORS + 'unauthenticated',
        (),
    ),
    'not_authorized': (
        'Signed in, but the role may not do this.',
        _ERRORS + 'not_authorized',
        (),
    ),
    'needs_session': (
        'A credential action (the access token, sessions, MFA, e-mail or password) '
        'needs the token headers of a sign-in; api_access_token is refused. A personal '
        'access token gets it wherever no scope opens the route to it.',
        _ERRORS + 'needs_session',
        (),
    ),
    'reauthentication_required': (
        'An e-mail change needs the current password in the body, or a session '
        'that checked a password or second factor within REAUTH_WINDOW_MINUTES.',
        _ERRORS + 'reauthentication_required',
        (),
    ),
    'cross_site_form': (
        'A form body (urlencoded or multipart) whose Origin is neither FRONTEND_URL '
        'nor one of CORS_ALLOWED_ORIGINS (SPEC 3.4).',
        _ERRORS + 'cross_site_form',
        (),
    ),
    'invalid_login': (
        'Wrong e-mail or password; or, with error_code user_not_confirmed, an '
        'unconfirmed address.',
        _ERRORS + 'invalid_login',
        (),
    ),
    'invalid_token': ('No valid credentials.', _ERRORS + 'invalid_token', ()),
    'account_suspended': (
        'Right credentials, but every membership of the user is suspended (SPEC 18): '
        'no session, no challenge, nothing changed.',
        _ERRORS + 'account_suspended',
        (),
    ),
    'sso_required': (
        "Right credentials, but the address's domain belongs to an account that "
        'enforces single sign-on (SPEC 19): sign in through its provider. No session.',
        _ERRORS + 'sso_required',
        (),
    ),
    'backchannel_invalid': (
        'The logout token is missing, malformed, not signed by a configured provider '
        'for its audience, too old, replayed, or not a logout token (OpenID Connect '
        'Back-Channel Logout 1.0, 2.8).',
        _ERRORS + 'invalid_request',
        (),
    ),
    'backchannel_done': (
        'Every session of that provider session (sid), or with only sub every '
        'single-sign-on session of that subject, has ended.',
        _BODIES + 'empty',
        (),
    ),
    'membership_suspended': (
        "The caller's membership of that account is suspended (SPEC 18).",
        _ERRORS + 'membership_suspended',
        (),
    ),
    'sign_up_refused': (
        'Sign-up refused for its parameters (SPEC 4.1).',
        _ERRORS + 'message',
        (),
    ),
    'not_found': (
        'Not found: an account the caller is not a member of, or sign-up disabled.',
        _ERRORS + 'not_found',
        (),
    ),
    'too_large': (
        'The body is over its limit: 1 MiB for JSON, '
        'AVATAR_MAX_BYTES + 64 KiB for multipart.',
        _ERRORS + 'too_large',
        (),
    ),
    'unsupported_media_type': (
        'The body is neither application/json nor application/x-www-form-urlencoded '
        '(nor multipart/form-data where that is accepted).',
        _ERRORS + 'message',
        (),
    ),
    'unprocessable': ('Validation failed.', _ERRORS + 'unprocessable', ()),
    'administers_accounts': (
        'The caller is the last active administrator of accounts that have other '
        'members (SPEC 20): their account_ids; nothing changed.',
        _ERRORS + 'administers_accounts',
        (),
    ),
    'rate_limited': (
        'Too many requests (SPEC 7), or a sixth e-mail change within 24 hours '
        '(SPEC 3.3).',
        _ERRORS + 'retry_later',
        ('Retry-After',),
    ),
    'internal_error': (
        'A bug; the traceback is in the log under request_id.',
        _ERRORS + 'internal_error',
        (),
    ),
    'unavailable': (
        'The database is unreachable.',
        _ERRORS + 'unavailable',
        ('Retry-After',),
    ),
    # Two-factor sign-in (SPEC 12).
    'mfa_status': ("The caller's two-factor sign-in.", _MFA + 'status', ()),
    'mfa_provisioning': (
        'Enrolment started: the secret, shown once.',
        _MFA + 'provisioning',
        (),
    ),
    'mfa_enabled': (
        'MFA is on; every other session and the access token are revoked; the recovery '
        'codes, shown once.',
        _MFA + 'enabled',
        (),
    ),
    'mfa_backup_codes': (
        'New recovery codes, shown once; the old ones no longer work.',
        _MFA + 'new_backup_codes',
        (),
    ),
    'mfa_disabled': (
        'MFA is off; every other session and the access token are revoked.',
        _MFA + 'disabled',
        (),
    ),
    'mfa_challenge': (
        'Right, but a second factor (mfa_required) or an enrolment '
        '(mfa_setup_required) comes first: no token headers.',
        _MFA + 'challenge',
        (),
    ),
    'mfa_unavailable': (
        'The server has no SECRET_KEY.',
        _ERRORS + 'mfa_unavailable',
        (),
    ),
    'mfa_enrollment_required': (
        'An account of the caller requires two-factor sign-in, and it is off.',
        _ERRORS + 'mfa_enrollment_required',
        (),
    ),
    'invalid_mfa_token': (
        'The mfa_token is unknown, used, expired or has had 5 wrong codes.',
        _ERRORS + 'invalid_mfa_token',
        (),
    ),
    'invalid_code': (
        'Wrong code (counted against the mfa_token).',
        _ERRORS + 'invalid_code',
        (),
    ),
    # Single sign-on (SPEC 19); its redirects have no body.
    'sso_redirect': (
        'A redirect, its address in Location: to the identity provider, or to the '
        'login page (with an sso_auth_token, or an error code).',
        None,
        ('Location',),
    ),
    'sso_settings': (
        "The account's single sign-on settings; never the client secret.",
        'response_sso_settings.json',
        (),
    ),
    'sso_unavailable': (
        'The server has no SECRET_KEY to encrypt the client secret with.',
        _ERRORS + 'sso_unavailable',
        (),
    ),
    'bad_gateway': (
        'From nginx (deploy/nginx.conf): gunicorn does not answer.',
        _ERRORS + 'unavailable',
        ('Retry-After',),
    ),
    'gateway_timeout': (
        'From nginx (deploy/nginx.conf): gunicorn answers too slowly.',
        _ERRORS + 'unavailable',
        ('Retry-After',),
    ),
}

# Successes after which the caller's token may be gone, so it is not echoed.
_NOT_ECHOED = {'signed_out', 'member_signed_out'}

# Answered by the service as a whole, unless a resource declares the status itself.
_EVERYWHERE = {
    500: 'internal_error',
    502: 'bad_gateway',
    503: 'unavailable',
    504: 'gateway_timeout',
}

HEADERS = {
    'X-Request-Id': (
        "The request id (nginx's, else a new one); the log lines of the request "
        'carry it.',
        {'type': 'string', 'pattern': '^[A-Za-z0-9._:-]{1,128}$'},
    ),
    'Retry-After': (
        'Seconds to wait before trying again.',
        {'type': 'string', 'pattern': '^[0-9]+$'},
    ),
    'Cache-Control': (
        'Clients and proxies may keep the keys briefly.',
        {'type': 'string', 'const': 'max-age=10, private, stale-while-revalidate=300'},
    ),
    'access-token': (
        'The token; send it back as the access-token header.',
        {'type': 'string', 'minLength': 1},
    ),
    'token-type': ('Always Bearer.', {'type': 'string', 'const': 'Bearer'}),
    'client': (
        'The client (device) id of the token.',
        {'type': 'string', 'minLength': 1},
    ),
    'expiry': (
        'When the token expires, in epoch seconds.',
        {'type': 'string', 'pattern': '^[0-9]+$'},
    ),
    'uid': ("The user's e-mail address.", {'type': 'string', 'minLength': 1}),
    'Location': ('Where the browser goes next.', {'type': 'string', 'minLength': 1}),
    'Content-Disposition': (
        'A download, and the name to save it under.',
        {
            'type': 'string',
            'pattern': '^attachment; filename="frontdesk-export-[0-9]+\\.json"$',
        },
    ),
}

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

    if level in (
        'user',
        'session',
        'enrolment',
        'member',
        'administrator',
        'administrator_session',
    ):
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
    for status, name in _EVERYWHERE.items():
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
        200 <= status < 300
        and level != 'public'
        and not _NOT_ECHOED.intersection(names)
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


# --------------------------------------------------------------------------------------
# Issue 11: what a reader of /api/v1/docs needs beyond the shapes: tags and examples
# (tests/test_openapi.py validates every example against its schema, and checks that no
# operation lacks them). The summary and description of each operation are the
# responder's docstring (prose() above).

TAGS = [
    {
        'name': 'Sign-up and accounts',
        'description': (
            'Sign up (a user, an account and its administrator membership in one '
            'request), read and change an account, its cache keys and the heartbeat.'
        ),
    },
    {
        'name': 'Profile',
        'description': (
            "The caller's own user: name, e-mail, password, avatar, availability, "
            'settings per account.'
        ),
    },
    {
        'name': 'Sessions and confirmation',
        'description': 'Sign in and out, check a token, confirm an address, '
        'reset a forgotten password. Links to confirm and reset arrive by e-mail.',
    },
    {
        'name': 'Tokens for integrations',
        'description': (
            'Personal access tokens: scoped, expiring, limited to some accounts, shown '
            'once and stored only as a digest; your own, and for administrators those '
            "of their account's members."
        ),
    },
    {
        'name': 'Operations',
        'description': 'Health, readiness and this description; no credentials needed.',
    },
]
_TAG_PREFIXES = (
    ('/api/v1/accounts', 'Sign-up and accounts'),
    ('/enterprise/api/v1/accounts', 'Sign-up and accounts'),
    ('/api/v1/profile', 'Profile'),
    ('/api/v1/password_policy', 'Profile'),
    ('/auth/', 'Sessions and confirmation'),
    ('/resend_confirmation', 'Sessions and confirmation'),
    ('/api/v1/auth/', 'Sessions and confirmation'),
    ('/omniauth/', 'Sessions and confirmation'),
)


def tag_for(path):
    if '/access_tokens' in path:
        return 'Tokens for integrations'
    return next(
        (tag for prefix, tag in _TAG_PREFIXES if path.startswith(prefix)), 'Operations'
    )


_NOW = '2026-01-15T09:30:00.000Z'
_MEMBERSHIP = {
    'id': 42,
    'name': 'Acme',
    'status': 'active',
    'locale': 'en',
    'active_at': _NOW,
    'role': 'administrator',
    'permissions': ['administrator'],
    'availability': 'online',
    'availability_status': 'online',
    'auto_offline': True,
    'membership_status': 'active',
}
_USER = {
    'id': 7,
    'name': 'Ada Lovelace',
    'display_name': None,
    'available_name': 'Ada Lovelace',
    'email': 'ada@example.com',
    'unconfirmed_email': None,
    'uid': 'ada@example.com',
    'provider': 'email',
    'confirmed': True,
    'access_token': 'x3M9mXGvT5Qm0dJf2pWq8sLk',
    'account_id': 42,
    'role': 'administrator',
    'avatar_url': '',
    'custom_attributes': {},
    'ui_settings': {'theme': 'dark'},
    'message_signature': None,
    'accounts': [_MEMBERSHIP],
    'created_at': _NOW,
    'type': None,
    'inviter_id': None,
    'pubsub_token': 'b1Xr4UqE2Yt7NwZc5VhK9pLa',
    'mfa_enabled': False,
}
_SESSION_EXAMPLE = {
    'id': 91,
    'client_name': 'Firefox on Windows',
    'browser_name': 'Firefox',
    'browser_version': '128.0',
    'platform_name': 'Windows',
    'platform_version': '10',
    'device_name': None,
    'ip_address': '203.0.113.9',
    'city': None,
    'country': None,
    'country_code': None,
    'created_at': _NOW,
    'last_activity_at': _NOW,
    'expires_at': '2026-03-16T09:30:00.000Z',
    'current': True,
    'sign_in_method': 'password',
}
_CACHE_KEYS = {'label': '1768469400', 'inbox': '0000000000', 'team': '0000000000'}
_RECOVERY_CODES = [
    '7KQ2M9XW',
    'B3NV6HTZ',
    'Q0RST4VW',
    'XYZ23AB4',
    'C5DEF6GH',
    'JKMN7PQR',
    'ST8VWX9Y',
    'Z01234AB',
    'H5J6K7M8',
    'N9P0Q1R2',
]

_TOKEN_EXAMPLE = 'fdpat_8fK2mQ9xLp4Rt7Vw1Zc3Hb6Nd0Gs5Ja21cTAj9'
_PERSONAL_TOKEN = {
    'id': 12,
    'name': 'Billing sync',
    'scopes': ['account:read', 'profile:read'],
    'account_ids': [42],
    'expires_at': '2026-04-15T09:30:00.000Z',
    'created_at': _NOW,
    'last_used_at': _NOW,
    'last_used_ip': '203.0.113.20',
}

# Response examples by RESPONSES name.
EXAMPLES = {
    'health': {'status': 'ok'},
    'ready': {'status': 'ready'},
    'not_ready': {
        'message': 'Service temporarily unavailable',
        'database': True,
        'pending_migrations': ['0005_example'],
    },
    'openapi': {
        'openapi': '3.1.0',
        'info': {'title': 'Frontdesk accounts API', 'version': '1'},
        'paths': {},
        'components': {},
    },
    'user': _USER,
    'account': {
        'id': 42,
        'name': 'Acme Inc',
        'locale': 'en',
        'domain': None,
        'support_email': None,
        'auto_resolve_duration': None,
        'status': 'active',
        'custom_attributes': {'timezone': 'Europe/Paris'},
        'created_at': _NOW,
        'cache_keys': _CACHE_KEYS,
        'features': {},
        'latest_chatwoot_version': None,
        'enforce_mfa': False,
        'restrict_legacy_access_token': False,
    },
    'cache_keys': {'cache_keys': _CACHE_KEYS},
    'empty': {},
    'deletion_toggled': {'message': 'Account marked for deletion'},
    'signed_in': {'data': _USER},
    'signed_out': {'success': True},
    'token_valid': {'payload': {'success': True, 'data': _USER}},
    'password_policy': {
        'min_length': 8,
        'max_bytes': 72,
        'checks': ['common', 'personal', 'reuse'],
    },
    'sessions': [_SESSION_EXAMPLE],
    'revoked': {'revoked': 2},
    'sessions_limit_reached': {
        'sessions_limit_reached': True,
        'sessions': [{**_SESSION_EXAMPLE, 'current': False}],
    },
    'member_signed_out': {'revoked': 3},
    'agent': {
        'id': 8,
        'account_id': 42,
        'name': 'Grace Hopper',
        'available_name': 'Grace',
        'email': 'grace@example.com',
        'role': 'agent',
        'confirmed': True,
        'availability_status': 'offline',
        'auto_offline': True,
        'thumbnail': '',
        'membership_status': 'suspended',
        'mfa_enabled': False,
        'last_sign_in_at': _NOW,
    },
    'agents': [
        {
            'id': 7,
            'account_id': 42,
            'name': 'Ada Lovelace',
            'available_name': 'Ada Lovelace',
            'email': 'ada@example.com',
            'role': 'administrator',
            'confirmed': True,
            'availability_status': 'online',
            'auto_offline': True,
            'thumbnail': '/avatars/Xk3v9Qp2.png',
            'membership_status': 'active',
            'mfa_enabled': True,
            'last_sign_in_at': _NOW,
        }
    ],
    'cannot_revoke_current': {'error': 'You cannot revoke the current session.'},
    'audit_events': {
        'events': [
            {
                'id': 1201,
                'created_at': _NOW,
                'event': 'sign_in_succeeded',
                'actor_id': 7,
                'subject_id': 7,
                'account_id': None,
                'ip_address': '203.0.113.9',
                'user_agent': (
                    'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) '
                    'Gecko/20100101 Firefox/128.0'
                ),
                'session_id': 91,
                'details': {},
            }
        ],
        'next_before': None,
    },
    'api_info': {
        'version': '1.0.0',
        'timestamp': _NOW,
        'queue_services': 'ok',
        'data_services': 'ok',
    },
    'reset_requested': {
        'message': (
            'If ada@example.com is registered, a link to reset the password '
            'is on its way.'
        )
    },
    'mfa_status': {
        'feature_available': True,
        'enabled': True,
        'backup_codes_generated': True,
        'backup_codes_remaining': 9,
    },
    'mfa_provisioning': {
        'provisioning_url': 'otpauth://totp/Frontdesk:ada%40example.com?'
        'secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Frontdesk',
        'secret': 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
    },
    'mfa_enabled': {'enabled': True, 'backup_codes': _RECOVERY_CODES},
    'mfa_backup_codes': {'backup_codes': _RECOVERY_CODES},
    'mfa_disabled': {'enabled': False},
    'mfa_challenge': {
        'mfa_required': True,
        'mfa_token': 'Qm7Xv2Lp9Ta4Rz1Kc8Wn5Hb3Jd6Fs0Ge2Yu4Io7Pq1A',
    },
    'mfa_unavailable': {
        'error': 'MFA feature is not available. Please configure SECRET_KEY.'
    },
    'mfa_enrollment_required': {
        'error': 'Your account requires two-factor sign-in: enable it first',
        'error_code': 'mfa_enrollment_required',
    },
    'invalid_mfa_token': {'error': 'Invalid or expired MFA token'},
    'sso_settings': {
        'sso_settings': {
            'issuer': 'https://login.example.com/realms/acme',
            'client_id': 'frontdesk',
            'client_secret_set': True,
            'allowed_domains': ['acme.example'],
            'jit_provisioning': True,
            'enforce': False,
            'trust_idp_mfa': False,
            'redirect_uri': 'https://desk.acme.example/omniauth/oidc/callback',
            'backchannel_logout_uri': (
                'https://desk.acme.example/auth/oidc/backchannel_logout'
            ),
        }
    },
    'sso_unavailable': {
        'error': 'Single sign-on is not available. Please configure SECRET_KEY.'
    },
    'personal_access_tokens': [_PERSONAL_TOKEN],
    'profile_export': {
        'format': 'frontdesk-export/1',
        'user_id': 7,
        'exported_at': _NOW,
        'retention_days': 365,
        'withheld': {
            'users.encrypted_password': 'a secret: the digest of your password',
        },
        'profile': {
            'id': 7,
            'name': 'Ada Lovelace',
            'display_name': None,
            'email': 'ada@example.com',
            'unconfirmed_email': None,
            'confirmed_at': _NOW,
            'custom_attributes': {},
            'ui_settings': {'theme': 'dark'},
            'message_signature': None,
            'avatar': None,
            'created_at': _NOW,
            'updated_at': _NOW,
            'last_sign_in_at': _NOW,
        },
        'mfa': {
            'enabled': False,
            'mfa_enabled_at': None,
            'otp_last_step': None,
            'recovery_codes_remaining': 0,
            'recovery_codes': [],
        },
        'memberships': [
            {
                'id': 3,
                'account_id': 42,
                'account_name': 'Acme',
                'user_id': 7,
                'role': 'administrator',
                'status': 'active',
                'availability': 'online',
                'auto_offline': True,
                'active_at': _NOW,
                'created_at': _NOW,
                'updated_at': _NOW,
            }
        ],
        'sessions': [
            {
                'id': 91,
                'user_id': 7,
                'client': 'Qm7Xv2Lp9Ta4Rz1Kc8Wn5H',
                'current': True,
                'sign_in_method': 'password',
                'created_at': _NOW,
                'last_used_at': _NOW,
                'authenticated_at': _NOW,
                'expires_at': '2026-03-16T09:30:00.000Z',
                'used': True,
                'ip_address': '203.0.113.9',
                'user_agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0',
                'client_name': 'Firefox on Linux',
                'browser_name': 'Firefox',
                'browser_version': '128.0',
                'platform_name': 'Linux',
                'platform_version': None,
                'device_name': None,
                'sso_account_id': None,
                'sso_sub': None,
                'sso_sid': None,
            }
        ],
        'personal_access_tokens': [{**_PERSONAL_TOKEN, 'user_id': 7}],
        'links': [],
        'email_change_requests': [],
        'sso_sign_ins_in_progress': [],
        'account_deletions_requested': [],
        'account_deletions_done': [],
        'audit_events': [],
        'audit_events_truncated': False,
        'mails': [
            {
                'id': 55,
                'kind': 'new_device_sign_in',
                'to_address': 'ada@example.com',
                'subject': 'New sign-in to your account',
                'status': 'sent',
                'message_id': '<55.1768469400@frontdesk.example>',
                'created_at': _NOW,
                'sent_at': _NOW,
            }
        ],
        'mails_truncated': False,
    },
    'personal_access_token_created': {
        key: value
        for key, value in {**_PERSONAL_TOKEN, 'token': _TOKEN_EXAMPLE}.items()
        if not key.startswith('last_used')
    },
    'account_personal_access_tokens': [{**_PERSONAL_TOKEN, 'user_id': 7}],
    'insufficient_scope': {
        'error': 'This token does not allow this action',
        'error_code': 'insufficient_scope',
        'required_scope': 'account:write',
    },
    'legacy_token_disabled': {
        'error': 'This account no longer accepts the profile access token: use a '
        'personal access token',
        'error_code': 'legacy_token_disabled',
    },
    'invalid_code': {'error': 'Invalid verification code'},
    'bad_request': {'message': 'The body is not valid JSON'},
    'unauthenticated': {
        'errors': ['You need to sign in or sign up before continuing.']
    },
    'not_authorized': {'error': 'You are not authorized to do this action'},
    'needs_session': {'error': 'This action needs a signed-in session'},
    'reauthentication_required': {
        'error': 'Sign in again to change this',
        'error_code': 'reauthentication_required',
    },
    'cross_site_form': {'error': 'Cross-site form refused'},
    'invalid_login': {
        'success': False,
        'errors': ['Invalid login credentials. Please try again.'],
    },
    'invalid_token': {'success': False, 'errors': ['Invalid login credentials']},
    'account_suspended': {
        'success': False,
        'error_code': 'account_suspended',
        'errors': [
            'Your access has been suspended by an administrator of every account you '
            'belong to'
        ],
    },
    'sso_required': {
        'success': False,
        'errors': ["Sign in with your organisation's single sign-on"],
        'error_code': 'sso_required',
    },
    'backchannel_done': {},
    'backchannel_invalid': {'error': 'invalid_request'},
    'membership_suspended': {
        'error': 'Your access to this account is suspended',
        'error_code': 'membership_suspended',
    },
    'sign_up_refused': {
        'message': 'You have already signed up for an account with ada@example.com'
    },
    'not_found': {'error': 'Resource could not be found'},
    'too_large': {'message': 'Request body is too large (maximum is 1048576 bytes)'},
    'unsupported_media_type': {'message': 'Content-Type must be application/json'},
    'unprocessable': {
        'message': "Name can't be blank, Locale is not included in the list",
        'attributes': ['name', 'locale'],
    },
    'rate_limited': {'message': 'Retry later'},
    'internal_error': {
        'message': 'Internal server error',
        'request_id': '5f0c6b1e2a9d4c7e8b3a1f2d4e6c8a0b',
    },
    'unavailable': {'message': 'Service temporarily unavailable'},
    'administers_accounts': {
        'message': 'Transfer or delete the accounts you administer first',
        'account_ids': [42],
    },
    'bad_gateway': {'message': 'Service temporarily unavailable'},
    'gateway_timeout': {'message': 'Service temporarily unavailable'},
}

# Request body examples by schema file stem.
REQUEST_EXAMPLES = {
    'profile_delete': {'password': 'a long passphrase', 'otp_code': '123456'},
    'account_create': {
        'account_name': 'Acme',
        'email': 'ada@example.com',
        'user_full_name': 'Ada Lovelace',
        'password': 'a long passphrase',
        'locale': 'en',
    },
    'account_toggle_deletion': {'action_type': 'delete'},
    'account_update': {
        'name': 'Acme Inc',
        'timezone': 'Europe/Paris',
        'auto_resolve_duration': 7,
    },
    'profile_update': {
        'profile': {
            'display_name': 'Ada L.',
            'ui_settings': {'theme': 'dark'},
            'phone_number': '+33123456789',
        }
    },
    'profile_availability': {'profile': {'account_id': 42, 'availability': 'busy'}},
    'profile_auto_offline': {'profile': {'account_id': 42, 'auto_offline': False}},
    'profile_active_account': {'profile': {'account_id': 42}},
    'sign_in': {'email': 'ada@example.com', 'password': 'a long passphrase'},
    'confirmation_create': {'confirmation_token': 'q8Zp3X0yT1rW6sV9uB2nM5kJ4hG7fD0c'},
    'password_reset_create': {'email': 'ada@example.com'},
    'resend_confirmation': {'email': 'ada@example.com'},
    'email_revert': {'token': 'Zr5Tq8Wm1Kp4Xn7Bv0Cy3Hd6Fj9Lg2Sa'},
    'mfa_revert': {'token': 'Hd6Fj9Lg2SaZr5Tq8Wm1Kp4Xn7Bv0Cy3'},
    'mfa_enable': {},
    'access_token_create': {
        'name': 'Billing sync',
        'scopes': ['account:read', 'profile:read'],
        'account_ids': [42],
        'expires_in_days': 90,
    },
    'mfa_verify': {'otp_code': '492039'},
    'mfa_backup_codes': {'otp_code': '492039'},
    'mfa_disable': {'password': 'a long passphrase', 'otp_code': '492039'},
    'profile_sessions_delete': {'include_access_token': True},
    'sso_start': {'email': 'ada@example.com', 'target': 'web'},
    'sso_settings': {
        'sso_settings': {
            'issuer': 'https://login.example.com/realms/acme',
            'client_id': 'frontdesk',
            'client_secret': 'pX8v2Lq9Tz4Rk7Wm1Nc5Hb3Jd6Fs0Ga',
            'allowed_domains': ['acme.example'],
            'jit_provisioning': True,
        }
    },
    'password_reset_update': {
        'reset_password_token': 'Lk2Jh5Gf8Ds1Az4Xc7Vb0Nm3Qw6Er9Ty',
        'password': 'a new long passphrase',
        'password_confirmation': 'a new long passphrase',
    },
}


def describe(document):
    """Add tags and examples to a built document, in place."""
    document['tags'] = TAGS
    for path, operations in document['paths'].items():
        for operation in operations.values():
            operation['tags'] = [tag_for(path)]
            content = (
                operation.get('requestBody', {})
                .get('content', {})
                .get('application/json')
            )
            stem = content and content['schema']['$ref'].rpartition('/')[2]
            # Copies: a reader of the document that fills an example in (a test tool
            # in the same process) must not change every other document built later.
            if stem in REQUEST_EXAMPLES:
                content['example'] = copy.deepcopy(REQUEST_EXAMPLES[stem])
            for response in operation['responses'].values():
                name = response.pop('x-names')[0]
                if name in EXAMPLES and 'content' in response:
                    response['content']['application/json']['example'] = copy.deepcopy(
                        EXAMPLES[name]
                    )
    return document
