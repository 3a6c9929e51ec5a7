"""Single sign-on (SPEC 19): /api/v1/auth/saml_login and /auth/sso start a flow,
/omniauth/oidc/callback ends it. Every answer is a redirect."""

import falcon

from resources import presented_sessions
from services import sso

_START_LIMITS = (('ip', 20, 5 * 60),)


def send_redirect(resp, config, redirect, clear_cookie=False):
    """302 to ``redirect.location``; set its fd_sso cookie, or clear it."""
    resp.status = falcon.HTTP_302
    resp.set_header('Location', redirect.location)
    # No body, and not the JSON of the app's default media type.
    resp.content_type = falcon.MEDIA_TEXT
    resp.cache_control = ['no-store']
    if redirect.cookie is not None:
        resp.set_cookie(
            sso.COOKIE,
            redirect.cookie,
            max_age=sso.FLOW_SECONDS,
            path=sso.CALLBACK_PATH,
            secure=config.frontend_url.startswith('https:'),
            http_only=True,
            same_site='Lax',
        )
    elif clear_cookie:
        resp.unset_cookie(sso.COOKIE, path=sso.CALLBACK_PATH)


class SamlLogin:
    """The reference dashboard's SSO page posts its form here."""

    access = {'POST': 'public'}
    responses = {'POST': {302: 'sso_redirect'}}
    schemas = {'POST': 'sso_start'}
    rate_limits = {'POST': _START_LIMITS}
    # It only starts a redirect: nothing changes for whoever is signed in, so a form
    # from another site may post it (SPEC 19; middleware/cross_site.py).
    cross_site_forms = {'POST'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Start single sign-on

        The form (or JSON) `email` and `target` (`web`, the default, or `mobile`).
        302 to the authorization endpoint of the identity provider of the address's
        domain, with an `fd_sso` cookie for the callback (10 minutes); no provider:
        302 to `<FRONTEND_URL>/app/login?error=saml-not-enabled`. 20 per IP per 5
        minutes.
        """
        doc = req.context.doc
        redirect = sso.start(
            self._pool,
            self._queries,
            self._config,
            doc.get('email'),
            doc.get('target'),
        )
        send_redirect(resp, self._config, redirect)


class SSOStart:
    """The same start as SamlLogin, for clients that open a URL."""

    access = {'GET': 'public'}
    responses = {'GET': {302: 'sso_redirect'}}
    query = {'GET': 'sso_start'}
    rate_limits = {'GET': _START_LIMITS}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp):
        """Start single sign-on (a link)

        As `POST /api/v1/auth/saml_login`, with `email` and `target` in the query.
        """
        query = req.context.query
        redirect = sso.start(
            self._pool,
            self._queries,
            self._config,
            query.get('email'),
            query.get('target'),
        )
        send_redirect(resp, self._config, redirect)


class OIDCCallback:
    """Where the identity provider sends the browser back."""

    access = {'GET': 'public'}
    responses = {'GET': {302: 'sso_redirect'}}
    rate_limits = {'GET': (('ip', 30, 5 * 60),)}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp):
        """Finish single sign-on

        The provider's `code` and `state` (or `error`), with the `fd_sso` cookie of
        the start. 302 to `<FRONTEND_URL>/app/login?email=...&sso_auth_token=...`
        (target `mobile`: `chatwootapp://auth/saml?email=...&sso_auth_token=...`),
        whose token signs in once within 5 minutes (`POST /auth/sign_in`). Any
        failure: 302 to `<FRONTEND_URL>/app/login?error=saml-authentication-failed`
        (or `error=no-account-found`), with an audit event saying why. 30 per IP per
        5 minutes.
        """
        params = {key: req.get_param(key) for key in ('code', 'state', 'error')}
        redirect = sso.callback(
            self._pool,
            self._queries,
            self._config,
            params,
            req.cookies.get(sso.COOKIE),
            req.context.facts,
            presented_sessions(req),
        )
        send_redirect(resp, self._config, redirect, clear_cookie=True)
