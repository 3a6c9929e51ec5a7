"""/api/v1/accounts/{account_id}/sso_settings: an account's OpenID Connect provider,
for its administrators (SPEC 19).

Account security, so token headers only (SPEC 3.4): integration credentials get the
403 of ``administrator_session``. services/sso_settings.py says why a PUT is three
steps, and why the provider is called with no database connection held.
"""

import falcon

import errors
from services import sso_settings


class SSOSettings:
    access = {
        'GET': 'administrator_session',
        'PUT': 'administrator_session',
        'DELETE': 'administrator_session',
    }
    responses = {
        'GET': {200: 'sso_settings'},
        'PUT': {200: 'sso_settings', 403: 'sso_unavailable', 422: 'unprocessable'},
        'DELETE': {204: 'no_content'},
    }
    schemas = {'PUT': 'sso_settings'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp, account_id):
        """Read the account's single sign-on settings

        The provider, its domains and options; `client_secret_set` instead of the
        secret; `redirect_uri` and `backchannel_logout_uri` to register at the
        provider. None stored: 404. Administrators of the account only (an agent gets
        401 with the role body), with the token headers of a sign-in.
        """
        with self._pool.connection() as conn:
            settings = sso_settings.read(conn, self._queries, self._config, account_id)
        if settings is None:
            raise errors.NotFound()
        resp.media = {'sso_settings': settings}

    def on_put(self, req, resp, account_id):
        """Set the account's single sign-on settings

        Replaces them whole (a boolean left out is false; a `client_secret` left out
        keeps the stored one). The issuer's discovery document is read (5 s at most)
        and checked; each domain must be lower-case, another account's provider's
        none, and one of this account's administrators must have a confirmed address
        in it. Any failure is a 422 naming it, and nothing is stored. Audited and
        mailed to every administrator. Needs `SECRET_KEY` on the server (403
        otherwise). Token headers only.
        """
        sso_settings.require_available(self._config)
        settings = sso_settings.checked(self._config, req.context.doc['sso_settings'])
        with self._pool.connection() as conn:
            sso_settings.precheck(conn, self._queries, account_id, settings)
        # No connection held while the provider answers (or does not).
        discovery = sso_settings.discover(self._config, settings['issuer'])
        with self._pool.connection() as conn, conn.transaction():
            saved = sso_settings.save(
                conn,
                self._queries,
                self._config,
                account_id,
                settings,
                discovery,
                req.context.facts,
            )
        resp.media = {'sso_settings': saved}

    def on_delete(self, req, resp, account_id):
        """Remove the account's single sign-on settings

        The provider and its domains go; its members sign in with passwords again.
        204; none stored: 404. Audited and mailed to every administrator. Token
        headers only.
        """
        with self._pool.connection() as conn, conn.transaction():
            deleted = sso_settings.delete(
                conn, self._queries, self._config, account_id, req.context.facts
            )
        if not deleted:
            raise errors.NotFound()
        resp.status = falcon.HTTP_204
