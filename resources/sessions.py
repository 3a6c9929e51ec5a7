"""Sessions: /auth/sign_in, /auth/sign_out, /auth/validate_token (devise_token_auth
style), the caller's own under /api/v1/profile/sessions, and a member's for
administrators."""

import falcon

import errors
from resources import JSON
from resources import send_json_text
from resources import send_outcome
from services import addresses
from services import audit
from services import credentials
from services import memberships
from services import sessions
from services import sign_in

INVALID_TOKEN = {'success': False, 'errors': ['Invalid login credentials']}
CANNOT_REVOKE_CURRENT = {'error': 'You cannot revoke the current session.'}


def record_refusal(pool, queries, req):
    """The hook of ``SignIn.when_rate_limited``: a refused sign-in is a failed one
    (SPEC 14)."""
    doc = req.context.get('doc')
    email = doc.get('email') if isinstance(doc, dict) else None
    sign_in.record_failure(
        pool, queries, addresses.normalise(email), 'rate_limited', req.context.facts
    )


class SignIn:
    """Sign in with e-mail and password; for an MFA user, then with a code
    (SPEC 3.1, 12)."""

    access = {'POST': 'public'}
    responses = {
        'POST': {
            200: 'signed_in',
            206: 'mfa_challenge',
            400: 'invalid_code',
            401: (
                'invalid_login',
                'invalid_mfa_token',
                'account_suspended',
                'sso_required',
            ),
            409: 'sessions_limit_reached',
        }
    }
    schemas = {'POST': 'sign_in'}
    # The password step and the code step are counted apart (SPEC 7 and 12).
    rate_limits = {
        'POST': (
            ('ip', 5, 5 * 60, '!doc.mfa_token'),
            ('email', 10, 15 * 60),
            ('ip', 10, 60, 'doc.mfa_token'),
            ('mfa_token', 10, 60),
        )
    }
    # Hook: RateLimit calls it before the 429.
    when_rate_limited = {'POST': record_refusal}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Sign in

        E-mail (any case) and password of a confirmed user. Wrong e-mail or password are
        the same 401; an unconfirmed address is a 401 with `error_code:
        user_not_confirmed`. 5 tries per IP per 5 minutes, 10 per address per 15
        minutes. Answers with the five token headers (`access-token`, `token-type`,
        `client`, `expiry`, `uid`). A user with two-factor sign-in gets 206
        `{"mfa_required": true, "mfa_token"}` and no token headers instead; the second
        request sends `mfa_token` with `otp_code` (or `backup_code`; an empty one counts
        as absent) and signs in, at the session limit ending the least recently active
        session (bad code 400, counted: 5 per token; bad, used or expired token 401; 10
        per IP and 10 per token a minute). A member of an account that requires MFA,
        without it, gets 206 `{"mfa_setup_required": true, "mfa_token"}`: that token, as
        the `mfa_token` header, reaches only `/api/v1/profile/mfa*`. A user whose every
        membership an administrator suspended gets 401 `account_suspended` for the right
        password (and at the second step), and no session. Where an account's single
        sign-on is enforced for the address's domain, the right password answers 401
        `sso_required` (a wrong one the usual 401), except for an administrator of that
        account with MFA (break glass): the 206, and at the second step a session that
        every administrator of the account is mailed about. Single sign-on ends here:
        `email` with the `sso_auth_token` of the callback's redirect (no password, or an
        empty one) is answered as a password sign-in; a bad, used, expired or another
        user's token is the 401 of a wrong password.
        """
        doc = req.context.doc
        way_in = sign_in.with_password
        if doc.get('mfa_token') is not None:
            way_in = sign_in.second_step
        elif doc.get('sso_auth_token'):
            # An empty one is absent: the reference login page sends it with every
            # password.
            way_in = sign_in.with_sso_token
        outcome = way_in(
            self._pool, self._queries, self._config, doc, req.context.facts
        )
        send_outcome(resp, outcome)


class SignOut:
    access = {'DELETE': 'user'}
    # A member who must enrol in MFA first may still sign out.
    before_enrolment = True
    responses = {'DELETE': {200: 'signed_out'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries

    def on_delete(self, req, resp):
        """Sign out

        Revokes the token of the request; it gets 401 afterwards. Needs the token
        headers.
        """
        caller = req.context.caller
        if caller.token is None:
            # api_access_token is no sign-in: there is nothing to sign out of, and a
            # success would let its holder believe something was revoked (SPEC 3.3).
            raise errors.Unauthenticated()
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                self._queries['sessions.revoke'],
                {'user_id': caller.id, 'client': caller.token.client},
            )
            audit.record(conn, self._queries, 'signed_out', facts=req.context.facts)
        # The token is gone: echoing it back would hand out a dead credential.
        caller.token = None
        resp.media = {'success': True}


class ValidateToken:
    access = {'GET': 'optional'}
    scopes = {'GET': 'profile:read'}
    caller_document = {'GET'}
    responses = {'GET': {200: 'token_valid', 401: 'invalid_token'}}

    def on_get(self, req, resp):
        """Check your token

        The user JSON when the credentials are valid, else 401.
        """
        caller = req.context.caller
        if caller is None:
            raise errors.Unauthenticated(INVALID_TOKEN)
        # Wrapped in "payload", as the reference system answers and its dashboard reads
        # it.
        body = caller.doc_text.encode('utf-8')
        resp.data = b'{"payload":{"success":true,"data":%s}}' % body
        resp.content_type = JSON


class ProfileSessionCollection:
    """GET and DELETE /api/v1/profile/sessions: the caller's sessions; end all but this
    one."""

    access = {'GET': 'session', 'DELETE': 'session'}
    responses = {'GET': {200: 'sessions'}, 'DELETE': {200: 'revoked'}}
    schemas = {'DELETE': 'profile_sessions_delete'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp):
        """List your sessions

        One entry per sign-in (device), most recently active first, unexpired only;
        `current` marks this one. Browser, platform and device come from the User-Agent
        of the sign-in. Token headers only (403 with `api_access_token`).
        """
        caller = req.context.caller
        with self._pool.connection() as conn:
            row = sessions.list_for(
                conn, self._queries, self._config, caller.id, caller.session_id
            )
        send_json_text(resp, row['sessions'])

    def on_delete(self, req, resp):
        """End every other session

        Signs out every device but this one; 200 `{"revoked": N}`. With the body
        `{"include_access_token": true}` the API access token is replaced too (the old
        one stops working at once; you get the e-mail of a replaced token); no body:
        sessions only. Token headers only (403 with `api_access_token`).
        """
        with self._pool.connection() as conn, conn.transaction():
            revoked = credentials.end_other_sessions(
                conn,
                self._queries,
                self._config,
                req.context.caller,
                req.context.doc.get('include_access_token') is True,
                req.context.facts,
            )
        resp.media = {'revoked': revoked}


class ProfileSessionItem:
    """DELETE /api/v1/profile/sessions/{session_id}: end one other session of the
    caller."""

    access = {'DELETE': 'session'}
    responses = {
        'DELETE': {200: 'empty', 404: 'not_found', 422: 'cannot_revoke_current'}
    }

    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries

    def on_delete(self, req, resp, session_id):
        """End one session

        Signs that device out; 200 `{}`. This session itself is a 422 (sign out
        instead); another user's or an unknown id is a 404. Token headers only.
        """
        caller = req.context.caller
        if session_id == caller.session_id:
            raise errors.APIError(falcon.HTTP_422, CANNOT_REVOKE_CURRENT)
        with self._pool.connection() as conn, conn.transaction():
            if not sessions.revoke_one(
                conn, self._queries, caller.id, session_id, req.context.facts
            ):
                raise errors.NotFound()
        resp.media = {}


class MemberSessions:
    """DELETE .../agents/{user_id}/sessions: an administrator signs a member out
    everywhere."""

    access = {'DELETE': 'administrator_session'}
    responses = {'DELETE': {200: 'member_signed_out', 404: 'not_found'}}
    query = {'DELETE': 'member_sessions_query'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_delete(self, req, resp, account_id, user_id):
        """Sign a member out everywhere

        Ends every session of that member (and its access token with
        `?include_access_token=true`); 200 `{"revoked": N}`. Not a member: 404.
        Administrators of the account only (an agent gets 401 with the role body).
        """
        caller = req.context.caller
        include_access_token = req.context.query.get('include_access_token') is True
        with self._pool.connection() as conn, conn.transaction():
            memberships.hold_as_administrator(
                conn, self._queries, account_id, caller.id
            )
            member = sessions.end_member_sessions(
                conn,
                self._queries,
                self._config,
                account_id,
                user_id,
                include_access_token,
                req.context.facts,
            )
        if member is None:
            raise errors.NotFound()
        if user_id == caller.id:
            caller.token = (
                None  # ended too: echoing it would hand out a dead credential
            )
        resp.media = {'revoked': member['revoked']}
