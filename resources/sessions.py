"""/auth/sign_in, /auth/sign_out and /auth/validate_token (devise_token_auth style)."""


import errors
import tokens
from resources import JSON
from resources import send_json_text
from services import addresses
from services import passwords
from services import sessions

INVALID_LOGIN = {'success': False, 'errors': ['Invalid login credentials. Please try again.']}
INVALID_TOKEN = {'success': False, 'errors': ['Invalid login credentials']}


def _unconfirmed(email):
    return {
        'success': False,
        'error_code': 'user_not_confirmed',
        'errors': [f"A confirmation email was sent to your account at '{email}'. You must follow the "
                   'instructions in the email before your account can be activated'],
    }


class SignIn:
    access = {'POST': 'public'}
    responses = {'POST': {200: 'signed_in', 401: 'invalid_login'}}
    schemas = {'POST': 'sign_in'}
    rate_limits = {'POST': (('ip', 5, 5 * 60), ('email', 10, 15 * 60))}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        email = req.context.doc.get('email', '')
        password = req.context.doc.get('password', '')
        user = None
        if addresses.is_valid(email):
            with self._pool.connection() as conn:
                user = conn.execute(self._queries['users.for_sign_in'],
                                    {'email': addresses.normalise(email)}).fetchone()
        # An unknown address (or a user without a password, after an e-mail revert) costs
        # one bcrypt check too, so timing does not reveal it.
        hashed = (user and user['encrypted_password']) or passwords.dummy_hash(self._config.bcrypt_rounds)
        matches = passwords.check_password(password, hashed)
        if user is None or user['encrypted_password'] is None or not matches:
            raise errors.Unauthenticated(INVALID_LOGIN)
        if user['confirmed_at'] is None:
            raise errors.Unauthenticated(_unconfirmed(user['email']))
        try:
            with self._pool.connection() as conn:
                with conn.transaction():
                    token, client, expires_at = sessions.issue(
                        conn, self._queries, self._config, user['id'], verified_hash=hashed)
                doc = conn.execute(self._queries['users.document'], {
                    'user_id': user['id'], 'avatar_url_prefix': self._config.avatar_url_prefix,
                }).fetchone()['doc']
        except sessions.PasswordChanged:
            raise errors.Unauthenticated(INVALID_LOGIN) from None
        tokens.set_headers(resp, token, client, expires_at, user['email'])
        send_json_text(resp, doc, key='data')


class SignOut:
    access = {'DELETE': 'user'}
    responses = {'DELETE': {200: 'signed_out'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._revoke_sql = queries['sessions.revoke']

    def on_delete(self, req, resp):
        caller = req.context.caller
        if caller.token is None:
            # api_access_token is no sign-in: there is nothing to sign out of, and a
            # success would let its holder believe something was revoked (SPEC 3.3).
            raise errors.Unauthenticated()
        with self._pool.connection() as conn:
            conn.execute(self._revoke_sql, {'user_id': caller.id, 'client': caller.token[1]})
        # The token is gone: echoing it back would hand out a dead credential.
        caller.token = None
        resp.media = {'success': True}


class ValidateToken:
    access = {'GET': 'optional'}
    caller_document = {'GET'}
    responses = {'GET': {200: 'token_valid', 401: 'invalid_token'}}

    def on_get(self, req, resp):
        caller = req.context.caller
        if caller is None:
            raise errors.Unauthenticated(INVALID_TOKEN)
        # Wrapped in "payload", as the reference system answers and its dashboard reads it.
        body = caller.doc_text.encode('utf-8')
        resp.data = b'{"payload":{"success":true,"data":%s}}' % body
        resp.content_type = JSON
