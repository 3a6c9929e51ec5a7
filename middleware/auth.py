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
same membership check.

A method with a responder but no declaration is refused, so forgetting fails closed.

A member of an account that requires MFA, without MFA, is refused everywhere but the
``enrolment`` endpoints and sign-out with 403 ``mfa_enrollment_required``, whatever the
credential (SPEC 12): the one place that rule lives is RequireAccess below.
"""

import hmac
import logging

import db
import errors
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


_NONE_SUSPENDED = frozenset()


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
    )

    def __init__(self, doc, token=None, session_id=None, doc_text=None, setup=False):
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
            else _NONE_SUSPENDED
        )
        # The user JSON when the resource declared it wants it (``caller_document``).
        self.doc_text = doc_text
        # (raw token, client, expires_at) when authenticated with the token headers.
        self.token = token
        self.session_id = session_id


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


def access_level(resource, method):
    if method == 'OPTIONS':
        return 'public'
    return getattr(resource, 'access', {}).get(method)


class TokenAuth:
    """Resolve the token headers or ``api_access_token`` into ``req.context.caller``.

    Resources whose answer is the caller's own user JSON declare the methods in
    ``caller_document``; the lookup then renders it in the same round trip.

    A missing, malformed, unknown, expired or revoked credential leaves the caller
    None; RequireAccess then answers the one 401 that never says which part was wrong.
    """

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._avatar_url_prefix = config.avatar_url_prefix
        self._by_token = db.Lookup(
            'user_for_token', queries['auth.user_for_token'], config
        )
        self._by_access_token_sql = queries['auth.user_for_access_token']
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
        token, client, uid = (
            req.get_header('access-token'),
            req.get_header('client'),
            req.get_header('uid'),
        )
        with_doc = req.method in getattr(resource, 'caller_document', ())
        if token and client and uid:
            req.context.caller = self._session(token, client, uid, with_doc)
        elif (
            api_token := _forwarded_header(req, 'api_access_token')
        ) and '\x00' not in api_token:  # PostgreSQL text holds no NUL: nobody's token
            with self._pool.connection() as conn:
                row = conn.execute(
                    self._by_access_token_sql, {'access_token': api_token}
                ).fetchone()
            req.context.caller = (
                self._caller(userdoc.parse(row['doc']), row, with_doc) if row else None
            )
        elif level == 'enrolment' and (
            setup_token := _forwarded_header(req, 'mfa_token')
        ):
            with self._pool.connection() as conn:
                row = conn.execute(
                    self._by_setup_token_sql, {'digest': tokens.digest(setup_token)}
                ).fetchone()
            req.context.caller = Caller(row, setup=True) if row else None

    def _caller(self, doc, row, with_doc):
        caller = Caller(doc)
        if with_doc:
            caller.doc_text = userdoc.render(doc, row['now'], self._avatar_url_prefix)
        return caller

    def _session(self, token, client, uid, with_doc):
        with self._pool.connection() as conn:
            row = self._by_token.fetchone(conn, tokens.digest(token))
            if row is None:
                return None
            token_id, stored_client, expires_at, idle_for, used, now, doc_text = row
            doc = userdoc.parse(doc_text)
            # The digest found the row; client and uid must match too, compared in
            # constant time so a response's timing tells nothing about either.
            client_ok = hmac.compare_digest(
                stored_client, client.encode('utf-8', 'surrogatepass')
            )
            uid_ok = hmac.compare_digest(
                doc['email'].encode(),
                uid.strip().lower().encode('utf-8', 'surrogatepass'),
            )
            if not (client_ok and uid_ok):
                return None
            token_id, idle_for = int(token_id), float(idle_for)
            if idle_for >= self._idle_seconds:
                conn.execute(
                    self._expire_idle_sql,
                    {'token_id': token_id, 'idle_seconds': self._idle_seconds},
                )
                return None
            refresh = idle_for > self._touch_after_seconds
            if refresh or used != b't':
                conn.execute(
                    self._touch_sql, {'token_id': token_id, 'refresh': refresh}
                )
        caller = Caller(
            doc,
            token=(token, stored_client.decode(), userdoc.from_epoch(expires_at)),
            session_id=token_id,
        )
        if with_doc:
            caller.doc_text = userdoc.render(
                doc, userdoc.from_epoch(now), self._avatar_url_prefix
            )
        return caller

    def process_response(self, req, resp, resource, req_succeeded):
        caller = req.context.get('caller')
        if caller is not None and caller.token is not None and resp.status_code < 400:
            token, client, expires_at = caller.token
            tokens.set_headers(resp, token, client, expires_at, caller.email)


def _refuse_unenrolled(caller, resource):
    """403 ``mfa_enrollment_required`` for a member of an account that requires MFA,
    without MFA, unless the resource declares ``before_enrolment`` (SPEC 12)."""
    if caller.enrollment_required and not getattr(resource, 'before_enrolment', False):
        raise errors.MFAEnrollmentRequired()


def membership_role(caller, account_id):
    """The caller's role in ``account_id``: 404 when not a member, 403
    ``membership_suspended`` when the membership is suspended (SPEC 18).

    The one membership check: routes with an account in the path (RequireAccess) and
    endpoints that name one in the body (RequireBodyMembership) both ask here, whatever
    the credential.
    """
    if account_id in caller.suspended:
        raise errors.MembershipSuspended()
    role = caller.roles.get(account_id)
    if role is None:
        raise errors.NotFound()
    return role


class RequireAccess:
    """Enforce ``resource.access`` for the caller TokenAuth resolved.

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
            # requirement too.
            if caller is not None:
                _refuse_unenrolled(caller, resource)
            return
        if caller is None:
            raise errors.Unauthenticated()
        if level == 'enrolment':
            if caller.token is None and not caller.setup:
                raise errors.NeedsSession()
            return
        _refuse_unenrolled(caller, resource)
        if level == 'user':
            return
        if level == 'session':
            if caller.token is None:
                raise errors.NeedsSession()
            return
        role = membership_role(caller, params['account_id'])
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
        if isinstance(value, int) and not isinstance(value, bool):
            membership_role(caller, value)
