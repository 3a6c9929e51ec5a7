"""The Frontdesk WSGI application: ``create_app()`` wires config, pool, middleware,
routes.
"""

import falcon

import apidoc
from bodies import JSON_BODY_LIMIT
from bodies import JSONHandler
from bodies import MULTIPART_OVERHEAD
from bodies import too_large
import config as config_module
import db
import errors
from forms import FormHandler
import logs
from middleware.access import LEVELS
from middleware.access import RequireAccess
from middleware.access import RequireBodyMembership
from middleware.access import RequireSessionFields
from middleware.access import SCOPED_LEVELS
from middleware.access import SCOPES
from middleware.access_log import AccessLog
from middleware.auth import TokenAuth
from middleware.cors import CORS
from middleware.cross_site import RefuseCrossSiteForms
from middleware.drain import DrainRequestBody
from middleware.headers import SecurityHeaders
from middleware.rate_limit import RateLimit
from middleware.request_facts import GatherRequestFacts
from middleware.request_id import RequestId
from middleware.routing import FORMAT_SUFFIX
from middleware.routing import PathId
from middleware.routing import RailsPaths
from middleware.validation import JSONSchemaValidation
from resources import access_tokens
from resources import accounts
from resources import audit_events
from resources import backchannel
from resources import confirmations
from resources import docs
from resources import health
from resources import JSON
from resources import members
from resources import mfa
from resources import openapi
from resources import password_policy
from resources import profile
from resources import sessions
from resources import sso
from resources import sso_settings
from services import passwords
from validators import load_validators

ACCOUNT = '/api/v1/accounts/{account_id:id}'
# The reference dashboard's enterprise API (SPEC 20), where its "Delete account" calls.
ENTERPRISE_ACCOUNT = '/enterprise' + ACCOUNT


def routes(pool, queries, config, validators):
    """Every route and its resource; the access matrix is what these declare."""
    table = [
        ('/healthz', health.Health()),
        ('/readyz', health.Ready(pool, queries)),
        ('/api', health.ApiInfo(pool, queries)),
        (ACCOUNT, accounts.AccountItem(pool, queries, config, validators)),
        (ACCOUNT + '/cache_keys', accounts.AccountCacheKeys(pool, queries)),
        (ACCOUNT + '/update_active_at', accounts.AccountActiveAt(pool, queries)),
        (
            ENTERPRISE_ACCOUNT + '/toggle_deletion',
            accounts.AccountDeletion(pool, queries, config),
        ),
        ('/api/v1/profile', profile.Profile(pool, queries, config, validators)),
        ('/api/v1/profile/avatar', profile.ProfileAvatar(pool, queries, config)),
        (
            '/api/v1/profile/availability',
            profile.ProfileMembershipSetting(
                pool,
                queries,
                config,
                'availability',
                'profile_availability',
                queries['profile.set_availability'],
            ),
        ),
        (
            '/api/v1/profile/auto_offline',
            profile.ProfileMembershipSetting(
                pool,
                queries,
                config,
                'auto_offline',
                'profile_auto_offline',
                queries['profile.set_auto_offline'],
            ),
        ),
        (
            '/api/v1/profile/set_active_account',
            profile.ProfileActiveAccount(pool, queries),
        ),
        (
            '/api/v1/profile/reset_access_token',
            profile.ProfileAccessToken(pool, queries, config),
        ),
        ('/api/v1/profile/export', profile.ProfileExport(pool, queries, config)),
        (
            '/api/v1/profile/sessions',
            sessions.ProfileSessionCollection(pool, queries, config),
        ),
        (
            '/api/v1/profile/sessions/{session_id:id}',
            sessions.ProfileSessionItem(pool, queries),
        ),
        (
            '/api/v1/profile/audit_events',
            audit_events.ProfileAuditEvents(pool, queries),
        ),
        (
            '/api/v1/profile/access_tokens',
            access_tokens.PersonalAccessTokenCollection(pool, queries, config),
        ),
        (
            '/api/v1/profile/access_tokens/{token_id:id}',
            access_tokens.PersonalAccessTokenItem(pool, queries, config),
        ),
        (
            ACCOUNT + '/access_tokens',
            access_tokens.AccountPersonalAccessTokens(pool, queries),
        ),
        (
            ACCOUNT + '/access_tokens/{token_id:id}',
            access_tokens.AccountPersonalAccessTokenItem(pool, queries, config),
        ),
        (ACCOUNT + '/audit_events', audit_events.AccountAuditEvents(pool, queries)),
        (
            ACCOUNT + '/agents/{user_id:id}/sessions',
            sessions.MemberSessions(pool, queries, config),
        ),
        (ACCOUNT + '/agents', members.AgentCollection(pool, queries, config)),
        (ACCOUNT + '/sso_settings', sso_settings.SSOSettings(pool, queries, config)),
        (
            ACCOUNT + '/agents/{user_id:id}/suspend',
            members.MemberStatus(pool, queries, config, 'suspended'),
        ),
        (
            ACCOUNT + '/agents/{user_id:id}/reactivate',
            members.MemberStatus(pool, queries, config, 'active'),
        ),
        ('/api/v1/profile/mfa', mfa.MFA(pool, queries, config)),
        (
            '/api/v1/profile/mfa/verify',
            mfa.MFACodeAction(pool, queries, config, 'verify'),
        ),
        (
            '/api/v1/profile/mfa/backup_codes',
            mfa.MFACodeAction(pool, queries, config, 'backup_codes'),
        ),
        ('/auth/sign_in', sessions.SignIn(pool, queries, config)),
        ('/auth/sign_out', sessions.SignOut(pool, queries)),
        ('/auth/validate_token', sessions.ValidateToken()),
        ('/auth/confirmation', confirmations.Confirmation(pool, queries, config)),
        ('/auth/password', confirmations.Password(pool, queries, config, validators)),
        (
            '/api/v1/profile/resend_confirmation',
            confirmations.ResendConfirmation(pool, queries, config),
        ),
        (
            '/resend_confirmation',
            confirmations.PublicResendConfirmation(pool, queries, config),
        ),
        (
            '/auth/email_revert',
            confirmations.RevertLink(pool, queries, config, 'email_revert'),
        ),
        (
            '/auth/mfa_revert',
            confirmations.RevertLink(pool, queries, config, 'mfa_revert'),
        ),
        ('/api/v1/password_policy', password_policy.PasswordPolicy(config)),
        ('/api/v1/auth/saml_login', sso.SamlLogin(pool, queries, config)),
        ('/auth/sso', sso.SSOStart(pool, queries, config)),
        ('/omniauth/oidc/callback', sso.OIDCCallback(pool, queries, config)),
        (
            '/auth/oidc/backchannel_logout',
            backchannel.BackchannelLogout(pool, queries, config),
        ),
    ]
    # ENABLE_ACCOUNT_SIGNUP=false: the route does not exist, so it is the 404 of an
    # unknown route before anything about the request is looked at (SPEC 4.1 step 1).
    if config.signup_enabled:
        table.append(
            (
                '/api/v1/accounts',
                accounts.AccountCollection(pool, queries, config, validators),
            )
        )
    table += [
        (docs.DOCS_PATH, docs.DocsPage()),
        (docs.DOCS_PATH + '/assets/{name}', docs.DocsAsset()),
    ]
    # Last: it describes every route above, and itself.
    table.append((apidoc.OPENAPI_PATH, openapi.OpenAPIDocument(table, validators)))
    return table


def answer_head_like_get(resource):
    """HEAD on every GET route (SPEC 16), declared as GET is, in this one place.

    Every per-method declaration of the resource (``access``, ``query``,
    ``caller_document``, ``rate_limits``...) gets for HEAD what it says for GET. Falcon
    sends no body for HEAD but keeps the headers GET would send.
    """
    if not hasattr(resource, 'on_get') or hasattr(resource, 'on_head'):
        return
    resource.on_head = resource.on_get
    for name in {*vars(type(resource)), *vars(resource)}:
        declared = getattr(resource, name)
        if isinstance(declared, dict) and 'GET' in declared:
            setattr(resource, name, {**declared, 'HEAD': declared['GET']})
        elif isinstance(declared, (tuple, frozenset, set)) and 'GET' in declared:
            setattr(resource, name, type(declared)([*declared, 'HEAD']))


def check_access_declarations(route_table):
    """Refuse to boot when a responder has no access level, or a bad one; or when a
    scope (SPEC 17) is unknown or declared where no personal access token may go."""
    for template, resource in route_table:
        declared = getattr(resource, 'access', {})
        for method, scope in getattr(resource, 'scopes', {}).items():
            if scope not in SCOPES:
                raise RuntimeError(
                    f'{type(resource).__name__}: unknown scope {scope!r}'
                )
            if declared.get(method) not in SCOPED_LEVELS:
                raise RuntimeError(
                    f'{type(resource).__name__}: a scope for {method}, whose access '
                    f'level {declared.get(method)!r} is not for personal access tokens'
                )
        for method in falcon.COMBINED_METHODS:
            if hasattr(resource, f'on_{method.lower()}') and method not in declared:
                raise RuntimeError(
                    f'{type(resource).__name__}.on_{method.lower()} has no access level'
                )
        for level in declared.values():
            if level not in LEVELS:
                raise RuntimeError(
                    f'{type(resource).__name__}: unknown access level {level!r}'
                )
            if (
                level in ('member', 'administrator', 'administrator_session')
                and '{account_id' not in template
            ):
                raise RuntimeError(
                    f'{template}: {level} access needs an account_id in the route'
                )


def create_app(config=None, pool=None):
    """Build the app. Tests inject ``config`` and ``pool``; gunicorn calls it bare."""
    config = config or config_module.load_or_exit()
    logs.configure(config.log_format)
    pool = pool or db.create_pool(config)
    queries = db.load_queries()
    # Not checked here: that every query the code names exists, and that every schema
    # is a valid 2020-12 schema. Both are facts of the source tree, which the tests
    # check (test_layers, test_validators) before it ships; checked at each worker's
    # boot they were half of its 0.67 CPU-seconds (the tests start some 160 workers).
    validators = load_validators()
    # Read the common-password list now, not in the first request that needs it.
    passwords.common_passwords()
    route_table = routes(pool, queries, config, validators)
    for _, resource in route_table:
        answer_head_like_get(resource)
    check_access_declarations(route_table)

    middleware = [
        # First, so its line has the final status and the whole duration.
        AccessLog(),
        # Next, so its process_response runs after everything else answered.
        DrainRequestBody(config.avatar_max_bytes + MULTIPART_OVERHEAD),
        # Early, so that its headers go on every answer, errors and 404s included.
        SecurityHeaders(),
        RailsPaths(
            template for template, _ in route_table if template.endswith(FORMAT_SUFFIX)
        ),
        RequestId(config.forwarded_allow_ips),
        # Before anything reads the request on its behalf (SPEC 3.4).
        RefuseCrossSiteForms(config.frontend_url, config.cors_allowed_origins),
        TokenAuth(pool, queries, config),
        GatherRequestFacts(),
        RequireAccess(pool, queries),
        JSONSchemaValidation(validators, config.avatar_max_bytes),
        RequireSessionFields(),
        RequireBodyMembership(),
    ]
    if config.cors_allowed_origins:
        # Near the front: its process_response runs after the error serializer and the
        # others, so every answer, errors included, gets the headers.
        middleware.insert(1, CORS(config.cors_allowed_origins))
    if config.rate_limits:
        # After validation: the per-e-mail limit of sign-in reads the parsed body.
        middleware.append(RateLimit(pool, queries))
    app = falcon.App(media_type=JSON, middleware=middleware)
    json_handler = JSONHandler()
    # Multipart only reaches resources that list the method in ``multipart`` (the
    # avatar upload); JSONSchemaValidation answers 415 everywhere else. Form bodies are
    # accepted wherever JSON is (SPEC 11).
    app.req_options.media_handlers = falcon.media.Handlers(
        {
            falcon.MEDIA_JSON: json_handler,
            falcon.MEDIA_URLENCODED: FormHandler(JSON_BODY_LIMIT, too_large),
            falcon.MEDIA_MULTIPART: falcon.media.MultipartFormHandler(),
        }
    )
    app.resp_options.media_handlers = falcon.media.Handlers(
        {falcon.MEDIA_JSON: json_handler, JSON: json_handler}
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.router_options.converters['id'] = PathId
    errors.install(app)
    for template, resource in route_table:
        app.add_route(template, resource)
    return app
