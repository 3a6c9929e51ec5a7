"""The error shapes of SPEC.md section 0, and the handlers that produce them.

Every error leaves through ``serialize`` so the body is JSON whatever the client
accepts. Responders raise the classes below; Falcon's own errors (unknown route,
malformed JSON, wrong content type, body too large) and database errors are mapped
to the same shapes here, in one place.
"""

import logging
import traceback

import falcon
import orjson
import psycopg

from logs import escape

log = logging.getLogger('frontdesk')

NOT_FOUND_BODY = {'error': 'Resource could not be found'}
UNAUTHENTICATED_BODY = {'errors': ['You need to sign in or sign up before continuing.']}
FORBIDDEN_ROLE_BODY = {'error': 'You are not authorized to do this action'}
NEEDS_SESSION_BODY = {'error': 'This action needs a signed-in session'}
MFA_UNAVAILABLE_BODY = {
    'error': 'MFA feature is not available. Please configure SECRET_KEY.'
}
SSO_UNAVAILABLE_BODY = {
    'error': 'Single sign-on is not available. Please configure SECRET_KEY.'
}
MFA_ENROLLMENT_REQUIRED_BODY = {
    'error': 'Your account requires two-factor sign-in: enable it first',
    'error_code': 'mfa_enrollment_required',
}
INVALID_MFA_TOKEN_BODY = {'error': 'Invalid or expired MFA token'}
INVALID_CODE_BODY = {'error': 'Invalid verification code'}
REAUTHENTICATION_REQUIRED_BODY = {
    'error': 'Sign in again to change this',
    'error_code': 'reauthentication_required',
}
INSUFFICIENT_SCOPE_ERROR = 'This token does not allow this action'
LEGACY_TOKEN_DISABLED_BODY = {
    'error': 'This account no longer accepts the profile access token: use a '
    'personal access token',
    'error_code': 'legacy_token_disabled',
}
MEMBERSHIP_SUSPENDED_BODY = {
    'error': 'Your access to this account is suspended',
    'error_code': 'membership_suspended',
}
ACCOUNT_SUSPENDED_BODY = {
    'success': False,
    'error_code': 'account_suspended',
    'errors': [
        'Your access has been suspended by an administrator of every account you '
        'belong to'
    ],
}
TRANSFER_FIRST_MESSAGE = 'Transfer or delete the accounts you administer first'
RETRY_AFTER_SECONDS = '5'


class APIError(falcon.HTTPError):
    """An HTTP error whose body is exactly ``body``."""

    def __init__(self, status, body, headers=None):
        super().__init__(status, headers=headers)
        self.body = body

    def to_dict(self, obj_type=dict):
        return obj_type(self.body)


class NotFound(APIError):
    def __init__(self):
        super().__init__(falcon.HTTP_404, NOT_FOUND_BODY)


class Unauthenticated(APIError):
    def __init__(self, body=UNAUTHENTICATED_BODY):
        super().__init__(falcon.HTTP_401, body)


class NotAuthorized(APIError):
    """Signed in, but the role may not do this (SPEC 3.2: 401, not 403)."""

    def __init__(self):
        super().__init__(falcon.HTTP_401, FORBIDDEN_ROLE_BODY)


class NeedsSession(APIError):
    """A credential action attempted with ``api_access_token`` (SPEC 3.3)."""

    def __init__(self):
        super().__init__(falcon.HTTP_403, NEEDS_SESSION_BODY)


class InsufficientScope(APIError):
    """A personal access token outside its scopes or accounts (SPEC 17)."""

    def __init__(self, required_scope):
        super().__init__(
            falcon.HTTP_403,
            {
                'error': INSUFFICIENT_SCOPE_ERROR,
                'error_code': 'insufficient_scope',
                'required_scope': required_scope,
            },
        )


class LegacyTokenDisabled(APIError):
    """The profile access_token on a route of an account that retired it (SPEC 17)."""

    def __init__(self):
        super().__init__(falcon.HTTP_403, LEGACY_TOKEN_DISABLED_BODY)


class ReauthenticationRequired(APIError):
    """A change that needs a recent password or second-factor check (SPEC 3.4).

    Or the current password in the body, where the endpoint takes one.
    """

    def __init__(self):
        super().__init__(falcon.HTTP_403, REAUTHENTICATION_REQUIRED_BODY)


class MembershipSuspended(APIError):
    """The caller's membership of the account the request names is suspended
    (SPEC 18)."""

    def __init__(self):
        super().__init__(falcon.HTTP_403, MEMBERSHIP_SUSPENDED_BODY)


class SessionsLimitReached(APIError):
    """A browser's password sign-in at MAX_USER_SESSIONS (SPEC 13): ``sessions`` is the
    list to pick from, for ``revoke_session_id`` or ``revoke_all_sessions``."""

    def __init__(self, sessions):
        super().__init__(
            falcon.HTTP_409, {'sessions_limit_reached': True, 'sessions': sessions}
        )


class AccountSuspended(APIError):
    """A sign-in (or a link that would sign in) of a user whose every membership is
    suspended (SPEC 18)."""

    def __init__(self):
        super().__init__(falcon.HTTP_401, ACCOUNT_SUSPENDED_BODY)


class MFAUnavailable(APIError):
    """An MFA endpoint called while SECRET_KEY is unset (SPEC 12)."""

    def __init__(self):
        super().__init__(falcon.HTTP_403, MFA_UNAVAILABLE_BODY)


class SSOUnavailable(APIError):
    """Single sign-on settings written while SECRET_KEY is unset: the client secret
    could not be sealed (SPEC 19, as MFAUnavailable for SPEC 12)."""

    def __init__(self):
        super().__init__(falcon.HTTP_403, SSO_UNAVAILABLE_BODY)


class MFAEnrollmentRequired(APIError):
    """A member of an account that requires MFA, without it, outside the MFA
    endpoints."""

    def __init__(self):
        super().__init__(falcon.HTTP_403, MFA_ENROLLMENT_REQUIRED_BODY)


class InvalidMFAToken(APIError):
    """The second sign-in step with an unknown, used, expired or exhausted mfa_token."""

    def __init__(self):
        super().__init__(falcon.HTTP_401, INVALID_MFA_TOKEN_BODY)


class InvalidCode(APIError):
    """The second sign-in step with a wrong code (counted against the mfa_token)."""

    def __init__(self):
        super().__init__(falcon.HTTP_400, INVALID_CODE_BODY)


class BadRequest(APIError):
    def __init__(self, message):
        super().__init__(falcon.HTTP_400, {'message': message})


class Forbidden(APIError):
    def __init__(self, message):
        super().__init__(falcon.HTTP_403, {'message': message})


class Unprocessable(APIError):
    """A 422. ``errors`` is a list of (attribute, full message) pairs."""

    def __init__(self, errors=(), message=None):
        errors = list(errors)
        body = {'message': message or ', '.join(text for _, text in errors)}
        if errors or message is None:
            body['attributes'] = list(dict.fromkeys(attr for attr, _ in errors))
        super().__init__(falcon.HTTP_422, body)

    @classmethod
    def field(cls, attribute, message):
        return cls([(attribute, message)])


class AdministersAccounts(APIError):
    """Erasing oneself while the last active administrator of accounts that have other
    members (SPEC 20): ``account_ids`` are those accounts."""

    def __init__(self, account_ids):
        super().__init__(
            falcon.HTTP_422,
            {'message': TRANSFER_FIRST_MESSAGE, 'account_ids': list(account_ids)},
        )


class Unavailable(APIError):
    def __init__(self):
        super().__init__(
            falcon.HTTP_503,
            {'message': 'Service temporarily unavailable'},
            headers={'Retry-After': RETRY_AFTER_SECONDS},
        )


class TooManyRequests(APIError):
    def __init__(self, retry_after):
        super().__init__(
            falcon.HTTP_429,
            {'message': 'Retry later'},
            headers={'Retry-After': str(retry_after)},
        )


def _body_for(req, ex):
    if isinstance(ex, APIError):
        return ex.body
    status = ex.status_code
    if status in (404, 405):
        return NOT_FOUND_BODY
    if status == 401:
        return UNAUTHENTICATED_BODY
    if status == 413:
        return {'message': ex.description or 'Request body is too large'}
    if status == 500:
        return {
            'message': 'Internal server error',
            'request_id': req.context.get('request_id'),
        }
    return {'message': ex.description or ex.title}


def serialize(req, resp, ex):
    """The one error serializer: JSON always, in the shapes of section 0."""
    resp.data = orjson.dumps(_body_for(req, ex))
    resp.content_type = 'application/json; charset=utf-8'
    resp.append_header('Vary', 'Accept')


def _method_not_allowed(req, resp, ex, params):
    # The reference system routes by method and path together: a known path with an
    # unknown method is an unknown route, a 404, not a 405 with an Allow header.
    raise NotFound()


def _media_error(req, resp, ex, params):
    # Falcon's messages here are safe and specific ("Could not parse JSON body - ...").
    raise BadRequest(ex.description or 'Could not parse the request body')


def _database_unavailable(req, resp, ex, params):
    log.warning(
        'database unavailable: %s request_id=%s',
        type(ex).__name__,
        req.context.get('request_id'),
    )
    raise Unavailable()


def _transaction_rolled_back(req, resp, ex, params):
    # PostgreSQL rolled the whole transaction back to break a deadlock or a
    # serialization conflict: nothing was written and the same request may be sent
    # again, so the client gets the 503 of section 0 with Retry-After, not a 500. Every
    # transaction here takes its row locks in one order (services/memberships.py), so a
    # deadlock is still a bug: logged as an error with where it happened, not as the
    # database being away.
    frames = ''.join(traceback.format_tb(ex.__traceback__))
    log.error(
        'transaction rolled back: %s sqlstate=%s on %s %s request_id=%s\n%s',
        type(ex).__name__,
        ex.sqlstate,
        req.method,
        escape(req.path),
        req.context.get('request_id'),
        frames,
    )
    raise Unavailable()


def _unique_violation(req, resp, ex, params):
    # Two users racing for one address (confirming an e-mail change, say) meet at this
    # constraint. Any other unique violation is a bug and stays a 500.
    if ex.diag.constraint_name == 'users_email_key':
        raise Unprocessable.field('email', 'Email has already been taken')
    _unexpected(req, resp, ex, params)


def _check_violation(req, resp, ex, params):
    # The merged ui_settings is measured in the row itself (migration 0006), so two
    # concurrent updates cannot together pass the cap.
    if ex.diag.constraint_name == 'users_ui_settings_size':
        raise Unprocessable.field('ui_settings', 'Ui settings is too large')
    _unexpected(req, resp, ex, params)


def _unexpected(req, resp, ex, params):
    if isinstance(ex, falcon.HTTPError):
        raise ex
    request_id = req.context.get('request_id')
    if isinstance(ex, psycopg.Error):
        # A database message can quote the failing row ("Failing row contains (...)"),
        # digests and hashes included: log where it failed, not what it said.
        frames = ''.join(traceback.format_tb(ex.__traceback__))
        log.error(
            'unhandled %s sqlstate=%s constraint=%s on %s %s request_id=%s\n%s',
            type(ex).__name__,
            ex.sqlstate,
            ex.diag.constraint_name,
            req.method,
            escape(req.path),
            request_id,
            frames,
        )
    else:
        log.exception(
            'unhandled %s on %s %s request_id=%s',
            type(ex).__name__,
            req.method,
            escape(req.path),
            request_id,
        )
    raise falcon.HTTPInternalServerError()


def install(app):
    """Register the serializer and the handlers on ``app``."""
    app.set_error_serializer(serialize)
    # Falcon picks the most specific class registered for an exception, whatever the
    # order; psycopg_pool.PoolTimeout is an OperationalError, so it is a 503 too.
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPMethodNotAllowed, _method_not_allowed)
    app.add_error_handler(falcon.MediaMalformedError, _media_error)
    app.add_error_handler(falcon.MediaNotFoundError, _media_error)
    app.add_error_handler(psycopg.OperationalError, _database_unavailable)
    # SQLSTATE class 40; psycopg makes each its own subclass of OperationalError.
    app.add_error_handler(
        (
            psycopg.errors.TransactionRollback,
            psycopg.errors.SerializationFailure,
            psycopg.errors.DeadlockDetected,
        ),
        _transaction_rolled_back,
    )
    app.add_error_handler(psycopg.errors.UniqueViolation, _unique_violation)
    app.add_error_handler(psycopg.errors.CheckViolation, _check_violation)
