"""May they: the access rules every request is held to, for the caller TokenAuth
(middleware/auth.py) resolved.

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

import logging

import errors
from services import audit

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


def access_level(resource, method):
    if method == 'OPTIONS':
        return 'public'
    return getattr(resource, 'access', {}).get(method)


def scope_for(resource, method):
    """The scope a personal access token needs for ``method``; None: it may not."""
    return getattr(resource, 'scopes', {}).get(method)


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
