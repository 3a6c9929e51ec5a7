"""Who is calling (TokenAuth) and may they (RequireAccess).

Each resource declares ``access = {'GET': 'member', ...}`` with one level per method:

- ``public``: nobody is looked up (health checks, sign-in);
- ``optional``: the caller is looked up when credentials are sent (sign-up);
- ``user``: any signed-in user;
- ``session``: a user signed in with the token headers; ``api_access_token`` is refused
  with the 403 of SPEC 3.3 (credential actions: the access token itself, sessions);
- ``enrolment``: as ``session``, or the ``mfa_token`` header of an account's MFA
  requirement (SPEC 12), which reaches nothing else (the MFA endpoints);
- ``member``: a member of the account in the route's ``account_id`` (404 otherwise;
  a suspended member gets 403 ``membership_suspended``, SPEC 18, whatever the
  credential: ``membership_role`` below is the one check);
- ``administrator``: an administrator of that account (an agent gets the role 401);
- ``administrator_session``: as ``administrator``, signed in with the token headers:
  what touches the security of members (their sessions, the audit log) is refused to
  integration credentials with the 403 of ``session`` (SPEC 3.4).

Some fields of a body are security settings although the rest of it is not: a resource
lists them per method in ``session_fields`` (``{'PUT': ('enforce_mfa',)}``), and a body
that carries one needs the token headers too (RequireSessionFields, after the body is
parsed). Likewise a profile endpoint that acts on a membership names the account in the
body and declares where (``account_in_body``): RequireBodyMembership holds it to the
same membership check (and to a personal access token's accounts).

A method with a responder but no declaration is refused, so forgetting fails closed.

Personal access tokens (SPEC 17) reach a method only through the scope the resource
declares for it next to ``access``: ``scopes = {'GET': 'account:read', ...}``. A method
without a scope is refused to them with the 403 of ``session`` (every security route
is such a method), so a new endpoint is closed to them until it says otherwise. A write
scope includes its read scope. A token limited to some accounts (``account_ids``) gets
403 ``insufficient_scope`` on the routes of any other account, before the membership is
looked at; the membership itself is the one a session has (``membership_role``), from
the same stored document; an account named in the body (``account_in_body``) is held
to the same rules once the body is parsed. The profile's access_token is refused on the
routes of the accounts that set ``restrict_legacy_access_token`` (403
``legacy_token_disabled``).

A member of an account that requires MFA, without MFA, is refused everywhere but the
``enrolment`` endpoints and sign-out with 403 ``mfa_enrollment_required``, whatever the
credential (SPEC 12): the one place that rule lives is RequireAccess below.
"""

import hmac
import logging
import re
from typing import NamedTuple

import orjson

import db
import errors
from services import addresses
from services import audit
from services import sessions
import tokens
import userdoc

log = logging.getLogger('frontdesk')
LEVELS = (
    'public',
    'optional',
    'user',
    'session',
    'enrolment',
    'member',
    'administrator',
    'administrator_session',
)
# The scopes of a personal access token (SPEC 17), and the read scope each write one
# includes. schemas/access_token_create.json lists the same (a test holds them equal).
SCOPES = ('profile:read', 'profile:write', 'account:read', 'account:write')
IMPLIED = {'profile:write': 'profile:read', 'account:write': 'account:read'}
# The levels a scope may be declared for: the others are for a signed-in session only.
SCOPED_LEVELS = ('optional', 'user', 'member', 'administrator')
# What an answer to a personal access token never carries (SPEC 17), and how a JSON
# body that carries one looks (a string value; PostgreSQL writes ' : ' between key and
# value, orjson ':').
CREDENTIAL_FIELDS = ('access_token', 'pubsub_token')
_CARRIES_CREDENTIAL = re.compile(rb'"(?:access_token|pubsub_token)"\s*:\s*"')


_EMPTY = frozenset()


# The rows of the look-ups below (sql/queries/auth.sql), as db.Lookup reads them: times
# in seconds since the epoch; the stored document as sent, for orjson; the client as
# bytes, for the constant-time comparison with the header.
class TokenRow(NamedTuple):
    id: int
    client: bytes
    expires_at: float
    idle_for: float
    used: bool
    now: float
    doc: bytes


class AccessTokenRow(NamedTuple):
    now: float
    doc: bytes


class PersonalTokenRow(NamedTuple):
    id: int
    scopes: list
    account_ids: list | None
    stale: bool
    now: float
    doc: bytes


class Caller:
    """The authenticated user: ids and roles for the access rules, and the user JSON."""

    __slots__ = (
        'id',
        'email',
        'doc_text',
        'roles',
        'suspended',
        'token',
        'session_id',
        'mfa_enabled',
        'enrollment_required',
        'setup',
        'personal_token_id',
        'scopes',
        'token_accounts',
        'legacy_refused',
    )

    def __init__(
        self,
        doc,
        token=None,
        session_id=None,
        doc_text=None,
        setup=False,
        personal_token=None,
        legacy=False,
    ):
        self.id = doc['id']
        self.email = doc['email']
        self.mfa_enabled = doc.get('mfa_enabled', False)
        # An account of the user requires MFA and it is off (SPEC 12).
        self.enrollment_required = doc.get('_mfa_required', False) and not (
            self.mfa_enabled
        )
        # Authenticated with the mfa_token of an enrolment requirement (``enrolment``
        # only).
        self.setup = setup
        # {account id: role} of the active memberships, and the suspended ones apart
        # (SPEC 18): membership_role below refuses those.
        accounts = doc.get('accounts', ())
        self.roles = {
            entry['id']: entry['role']
            for entry in accounts
            if entry['membership_status'] == 'active'
        }
        self.suspended = (
            frozenset(entry['id'] for entry in accounts) - self.roles.keys()
            if len(self.roles) < len(accounts)
            else _EMPTY
        )
        # The user JSON when the resource declared it wants it (``caller_document``).
        self.doc_text = doc_text
        # The tokens.Session of the token headers it authenticated with, if it did.
        self.token = token
        self.session_id = session_id
        # A personal access token, (id, scopes, account_ids): its scopes (write ones
        # with the read ones they include) and the accounts it is limited to (None:
        # every account of the user). The roles above are the user's, from the same
        # stored document a session reads.
        self.personal_token_id = self.scopes = self.token_accounts = None
        if personal_token is not None:
            self.personal_token_id, granted, account_ids = personal_token
            self.scopes = frozenset(granted).union(
                IMPLIED[scope] for scope in granted if scope in IMPLIED
            )
            if account_ids is not None:
                self.token_accounts = frozenset(account_ids)
        # The profile's access_token (``legacy``): the accounts that no longer take it.
        refused = doc.get('_legacy_refused') if legacy else None
        self.legacy_refused = frozenset(refused) if refused else _EMPTY


def _forwarded_header(req, name):
    """``api_access_token`` or ``mfa_token``, when the peer is one of
    FORWARDED_ALLOW_IPS.

    NOTE: gunicorn passes the underscore spelling only from those peers
    (gunicorn.conf.py, docs/security.md), but the hyphenated one (``Api-Access-Token``)
    is an ordinary header that reaches the WSGI environ under the same name from anyone.
    The documented rule is that a client talking to gunicorn directly from elsewhere
    cannot use these headers, so both spellings are held to it here; through nginx (a
    trusted peer) both still work.
    """
    return req.get_header(name) if req.context.get('from_trusted_proxy') else None


def _integration_credential(req):
    """(credential, whether it came as ``Authorization: Bearer``): Bearer first, else
    ``api_access_token``; (None, False) when neither is sent."""
    scheme, _, credential = (req.auth or '').partition(' ')
    if scheme.lower() == 'bearer' and credential.strip():
        return credential.strip(), True
    return _forwarded_header(req, 'api_access_token'), False


def access_level(resource, method):
    if method == 'OPTIONS':
        return 'public'
    return getattr(resource, 'access', {}).get(method)


def scope_for(resource, method):
    """The scope a personal access token needs for ``method``; None: it may not."""
    return getattr(resource, 'scopes', {}).get(method)


def _withhold_credentials(node):
    """Blank CREDENTIAL_FIELDS wherever they are in a JSON document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CREDENTIAL_FIELDS:
                node[key] = None
            elif isinstance(value, (dict, list)):
                _withhold_credentials(value)
    elif isinstance(node, list):
        for value in node:
            _withhold_credentials(value)


class TokenAuth:
    """Resolve the token headers, ``api_access_token`` or ``Authorization: Bearer``
    into ``req.context.caller``.

    ``api_access_token`` carries the profile's access_token or a personal access token
    (SPEC 17), Bearer only the latter; a personal access token whose checksum fails is
    refused before any database look-up. Resources whose answer is the caller's own
    user JSON declare the methods in ``caller_document``; the lookup then renders it in
    the same round trip.

    A missing, malformed, unknown, expired or revoked credential leaves the caller
    None; RequireAccess then answers the one 401 that never says which part was wrong.
    Answers to a personal access token have every CREDENTIAL_FIELDS value blanked.
    """

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._avatar_url_prefix = config.avatar_url_prefix
        self._by_token = db.Lookup(
            'user_for_token', queries['auth.user_for_token'], config, TokenRow
        )
        self._by_access_token = db.Lookup(
            'user_for_access_token',
            queries['auth.user_for_access_token'],
            config,
            AccessTokenRow,
        )
        self._by_personal_token = db.Lookup(
            'user_for_personal_token',
            queries['auth.user_for_personal_token'],
            config,
            PersonalTokenRow,
        )
        self._touch_personal_sql = queries['auth.touch_personal_token']
        self._touch_sql = queries['auth.touch_token']
        self._expire_idle_sql = queries['auth.expire_idle']
        self._idle_seconds = config.idle_seconds
        self._touch_after_seconds = sessions.touch_after(config).total_seconds()
        self._by_setup_token_sql = queries['auth.user_for_setup_token']

    def process_resource(self, req, resp, resource, params):
        req.context.caller = None
        level = access_level(resource, req.method)
        if level in (None, 'public'):
            return
        # The WSGI names: req.get_header would derive them from these on each call.
        env = req.env
        token, client, uid = (
            env.get('HTTP_ACCESS_TOKEN'),
            env.get('HTTP_CLIENT'),
            env.get('HTTP_UID'),
        )
        with_doc = req.method in getattr(resource, 'caller_document', ())
        if token and client and uid:
            req.context.caller = self._session(token, client, uid, with_doc)
            return
        credential, bearer = _integration_credential(req)
        if credential:
            req.context.caller = self._integration(
                credential, bearer, req.context.client_ip, with_doc
            )
        elif level == 'enrolment' and (
            setup_token := _forwarded_header(req, 'mfa_token')
        ):
            with self._pool.connection() as conn:
                row = conn.execute(
                    self._by_setup_token_sql, {'digest': tokens.digest(setup_token)}
                ).fetchone()
            req.context.caller = Caller(row, setup=True) if row else None

    def _integration(self, credential, bearer, client_ip, with_doc):
        """The profile's access_token, or a personal access token: one look-up."""
        if credential.startswith(tokens.PERSONAL_PREFIX):
            return self._personal(credential, client_ip, with_doc)
        # Bearer is for personal access tokens only; PostgreSQL text holds no NUL.
        if bearer or '\x00' in credential:
            return None
        with db.borrow(self._pool) as conn:
            row = self._by_access_token.fetchone(conn, credential)
        if row is None:
            return None
        doc = userdoc.parse(row.doc)
        return self._with_doc(Caller(doc, legacy=True), doc, row.now, with_doc)

    def _personal(self, credential, client_ip, with_doc):
        if not tokens.is_personal_token(credential):
            return None  # a typo or a forgery: no database look-up
        with db.borrow(self._pool) as conn:
            row = self._by_personal_token.fetchone(conn, tokens.digest(credential))
            if row is None:
                return None
            if row.stale:
                conn.execute(
                    self._touch_personal_sql,
                    {
                        'token_id': row.id,
                        'ip_address': client_ip[: audit.IP_ADDRESS_LIMIT]
                        if client_ip
                        else None,
                    },
                )
        doc = userdoc.parse(row.doc)
        caller = Caller(doc, personal_token=(row.id, row.scopes, row.account_ids))
        # Blanked before it is rendered; process_response would find it anyway.
        doc['access_token'] = doc['pubsub_token'] = None
        return self._with_doc(caller, doc, row.now, with_doc)

    def _with_doc(self, caller, doc, now, with_doc):
        if with_doc:
            caller.doc_text = userdoc.render(
                doc, userdoc.from_epoch(now), self._avatar_url_prefix
            )
        return caller

    def _session(self, token, client, uid, with_doc):
        with db.borrow(self._pool) as conn:
            row = self._by_token.fetchone(conn, tokens.digest(token))
            if row is None:
                return None
            doc = userdoc.parse(row.doc)
            # The digest found the row; client and uid must match too, compared in
            # constant time so a response's timing tells nothing about either.
            client_ok = hmac.compare_digest(
                row.client, client.encode('utf-8', 'surrogatepass')
            )
            uid_ok = hmac.compare_digest(
                doc['email'].encode(),
                addresses.normalise(uid).encode('utf-8', 'surrogatepass'),
            )
            if not (client_ok and uid_ok):
                return None
            if row.idle_for >= self._idle_seconds:
                conn.execute(
                    self._expire_idle_sql,
                    {'token_id': row.id, 'idle_seconds': self._idle_seconds},
                )
                return None
            refresh = row.idle_for > self._touch_after_seconds
            if refresh or not row.used:
                conn.execute(self._touch_sql, {'token_id': row.id, 'refresh': refresh})
        caller = Caller(
            doc,
            token=tokens.Session(token, row.client.decode(), row.expires_at),
            session_id=row.id,
        )
        return self._with_doc(caller, doc, row.now, with_doc)

    def process_response(self, req, resp, resource, req_succeeded):
        caller = req.context.get('caller')
        if caller is None:
            return
        if caller.token is not None and resp.status_code < 400:
            tokens.set_headers(resp, caller.token, caller.email)
        if caller.scopes is not None:
            # A read-only token must not read the full-power one (SPEC 17).
            if resp.data and _CARRIES_CREDENTIAL.search(resp.data):
                doc = orjson.loads(resp.data)
                _withhold_credentials(doc)
                resp.data = orjson.dumps(doc)
            elif resp.media is not None:
                _withhold_credentials(resp.media)


def _refuse_unenrolled(caller, resource):
    """403 ``mfa_enrollment_required`` for a member of an account that requires MFA,
    without MFA, unless the resource declares ``before_enrolment`` (SPEC 12)."""
    if caller.enrollment_required and not getattr(resource, 'before_enrolment', False):
        raise errors.MFAEnrollmentRequired()


def _check_scope(caller, resource, method):
    """A personal access token's scope for ``method`` (None for other credentials).

    No scope declared: the 403 of ``session`` (SPEC 3.4: security routes, and every
    route not yet opened to such tokens); a scope it lacks: 403 insufficient_scope.
    """
    if caller.scopes is None:
        return None
    scope = scope_for(resource, method)
    if scope is None:
        raise errors.NeedsSession()
    if scope not in caller.scopes:
        raise errors.InsufficientScope(scope)
    return scope


def check_account_reach(caller, account_id, scope):
    """What a credential may do in account ``account_id`` beyond the membership rules,
    checked before them: a personal access token limited to other accounts gets 403
    insufficient_scope (so it learns nothing of the user's other memberships); the
    profile's access_token, on an account of the user's that retired it, 403
    legacy_token_disabled.
    """
    if caller.token_accounts is not None and account_id not in caller.token_accounts:
        raise errors.InsufficientScope(scope)
    if account_id in caller.legacy_refused:
        raise errors.LegacyTokenDisabled()


def membership_role(caller, account_id):
    """The caller's role in ``account_id``: 404 when not a member, 403
    ``membership_suspended`` when the membership is suspended (SPEC 18).

    The one membership check: routes with an account in the path (RequireAccess) and
    endpoints that name one in the body (RequireBodyMembership) both ask here, whatever
    the credential (a personal access token's accounts narrow it, SPEC 17).
    """
    if account_id in caller.suspended:
        raise errors.MembershipSuspended()
    role = caller.roles.get(account_id)
    if role is None:
        raise errors.NotFound()
    return role


class RequireAccess:
    """Enforce ``resource.access`` (and ``resource.scopes``) for the caller TokenAuth
    resolved.

    A role refusal is logged and written to the audit log (SPEC 14).
    """

    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries

    def process_resource(self, req, resp, resource, params):
        level = access_level(resource, req.method)
        if level is None:
            if not hasattr(resource, f'on_{req.method.lower()}'):
                # no responder: Falcon's 405, answered as the 404 of an unknown route
                return
            raise errors.NotAuthorized()
        if level == 'public':
            return
        caller = req.context.caller
        if level == 'optional':
            # Optional credentials that are sent are held to the account's MFA
            # requirement too, and a personal access token to its scopes.
            if caller is not None:
                _refuse_unenrolled(caller, resource)
                _check_scope(caller, resource, req.method)
            return
        if caller is None:
            raise errors.Unauthenticated()
        if level == 'enrolment':
            if caller.token is None and not caller.setup:
                raise errors.NeedsSession()
            return
        _refuse_unenrolled(caller, resource)
        scope = _check_scope(caller, resource, req.method)
        if level == 'user':
            return
        if level == 'session':
            if caller.token is None:
                raise errors.NeedsSession()
            return
        account_id = params['account_id']
        check_account_reach(caller, account_id, scope)
        role = membership_role(caller, account_id)
        if level == 'administrator_session' and caller.token is None:
            raise errors.NeedsSession()
        if (
            level in ('administrator', 'administrator_session')
            and role != 'administrator'
        ):
            log.warning(
                'refused %s %s to user %s (role %s) request_id=%s',
                req.method,
                req.uri_template,
                caller.id,
                role,
                req.context.request_id,
            )
            with self._pool.connection() as conn:
                audit.record(
                    conn,
                    self._queries,
                    'access_refused',
                    account_id=params['account_id'],
                    facts=req.context.facts,
                    details={
                        'method': req.method,
                        'route': req.uri_template,
                        'role': role,
                    },
                )
            raise errors.NotAuthorized()


class RequireSessionFields:
    """Refuse ``resource.session_fields`` in a body sent without the token headers.

    Runs after the body is parsed (JSONSchemaValidation): the rest of such a body is
    open to the level the method declares, these fields are not (SPEC 3.4).
    """

    def process_resource(self, req, resp, resource, params):
        fields = getattr(resource, 'session_fields', {}).get(req.method)
        caller = req.context.get('caller')
        if not fields or caller is None or caller.token is not None:
            return
        doc = req.context.get('doc')
        if isinstance(doc, dict) and any(field in doc for field in fields):
            raise errors.NeedsSession()


class RequireBodyMembership:
    """Hold an account named in the body to the membership check of the access matrix.

    A profile endpoint that acts on one of the caller's memberships names its account in
    the body (``{"profile": {"account_id": 42}}``) and declares where, per method:
    ``account_in_body = {'POST': ('profile', 'account_id')}``. Runs after the body is
    validated; the answers are those of an account in the route (404 not a member, 403
    suspended).
    """

    def process_resource(self, req, resp, resource, params):
        path = getattr(resource, 'account_in_body', {}).get(req.method)
        caller = req.context.get('caller')
        if not path or caller is None:
            return
        value = req.context.get('doc')
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        # Validated: an integer, or a float JSON Schema counts as one (30.0), which the
        # resource reads as that integer.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            check_account_reach(caller, int(value), scope_for(resource, req.method))
            membership_role(caller, int(value))
