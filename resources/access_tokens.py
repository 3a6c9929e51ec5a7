"""/api/v1/profile/access_tokens[/{token_id}] and
/api/v1/accounts/{account_id}/access_tokens[/{token_id}]: personal access tokens
(SPEC 17).

Token routes are account security (SPEC 3.4): a signed-in session only, never an
integration credential (api_access_token or a personal access token itself).
"""

import falcon

import errors
from resources import send_json_text
from services import memberships
from services import personal_tokens


class PersonalAccessTokenCollection:
    """The caller's tokens (GET, without secrets); a new one (POST, shown once)."""

    access = {'GET': 'session', 'POST': 'session'}
    responses = {
        'GET': {200: 'personal_access_tokens'},
        'POST': {
            201: 'personal_access_token_created',
            403: 'reauthentication_required',
        },
    }
    schemas = {'POST': 'access_token_create'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp):
        """List your personal access tokens

        Your live tokens, newest first, with their scopes, accounts, expiry and last use
        (`last_used_at`, `last_used_ip`: written at most every 5 minutes); never the
        token. Token headers only.
        """
        with self._pool.connection() as conn:
            doc = personal_tokens.list_for(conn, self._queries, req.context.caller.id)
        send_json_text(resp, doc)

    def on_post(self, req, resp):
        """Create a personal access token

        A token for an integration: `name`, `scopes`, `account_ids` (null: every
        account of yours, present and future) and `expires_in_days` (1 to 366). The
        `token` is in this answer only: store it now. Needs a session that checked the
        password or a second factor within the last 15 minutes
        (`REAUTH_WINDOW_MINUTES`; else 403 `reauthentication_required`: sign in again)
        and a confirmed address; at most 50 live tokens. You get a security e-mail.
        """
        caller = req.context.caller
        with self._pool.connection() as conn, conn.transaction():
            created = personal_tokens.create(
                conn,
                self._queries,
                self._config,
                caller.id,
                caller.session_id,
                req.context.doc,
                req.context.facts,
            )
        resp.status = falcon.HTTP_201
        resp.media = created


class PersonalAccessTokenItem:
    """DELETE: the caller revokes one of theirs; another user's or unknown: 404."""

    access = {'DELETE': 'session'}
    responses = {'DELETE': {200: 'empty', 404: 'not_found'}}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_delete(self, req, resp, token_id):
        """Revoke a personal access token

        It stops working at once; 200 `{}`. Not one of yours: 404. You get a security
        e-mail. Token headers only.
        """
        with self._pool.connection() as conn, conn.transaction():
            if not personal_tokens.revoke(
                conn,
                self._queries,
                self._config,
                req.context.caller.id,
                token_id,
                req.context.facts,
            ):
                raise errors.NotFound()
        resp.media = {}


class AccountPersonalAccessTokens:
    """GET: the live tokens of the account's members that can reach it."""

    access = {'GET': 'administrator_session'}
    responses = {'GET': {200: 'account_personal_access_tokens'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries

    def on_get(self, req, resp, account_id):
        """Your members' personal access tokens

        The live tokens of members of the account that can reach it (restricted to it,
        or to every account of their user), with last use; never the token.
        Administrators of the account only (an agent gets 401 with the role body); token
        headers only.
        """
        with self._pool.connection() as conn:
            doc = personal_tokens.list_for_account(conn, self._queries, account_id)
        send_json_text(resp, doc)


class AccountPersonalAccessTokenItem:
    """DELETE: an administrator revokes a member's token that can reach the account."""

    access = {'DELETE': 'administrator_session'}
    responses = {'DELETE': {200: 'empty', 404: 'not_found'}}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_delete(self, req, resp, account_id, token_id):
        """Revoke a member's personal access token

        One of the tokens the list shows; it stops working at once (everywhere) and its
        owner gets a security e-mail naming you. 200 `{}`; any other id: 404.
        Administrators of the account only (an agent gets 401 with the role body); token
        headers only.
        """
        with self._pool.connection() as conn, conn.transaction():
            memberships.hold_as_administrator(
                conn, self._queries, account_id, req.context.caller.id
            )
            if not personal_tokens.revoke_for_account(
                conn,
                self._queries,
                self._config,
                account_id,
                token_id,
                req.context.facts,
            ):
                raise errors.NotFound()
        resp.media = {}
