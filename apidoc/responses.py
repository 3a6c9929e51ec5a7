"""The responses an operation can answer, and the headers they carry.

A resource declares the statuses only it can answer (``responses = {'GET': {200:
'user'}}``) by a name of RESPONSES; engine.py adds the middleware's from the resource's
other declarations, and EVERYWHERE to every operation.
"""

from tokens import TOKEN_HEADERS

_BODIES = 'response_bodies.json#/$defs/'
_ERRORS = 'response_errors.json#/$defs/'
_MFA = 'response_mfa.json#/$defs/'

# name: (description, body schema, headers besides X-Request-Id)
RESPONSES = {
    'health': ('The process runs.', _BODIES + 'health', ()),
    'ready': (
        'The database answers and every migration is applied.',
        _BODIES + 'ready',
        (),
    ),
    'not_ready': (
        'The database does not answer, or migrations are pending.',
        _BODIES + 'not_ready',
        ('Retry-After',),
    ),
    'openapi': ('This document.', _BODIES + 'openapi', ()),
    'api_info': (
        'The version, and whether the database answers (200 either way).',
        _BODIES + 'api_info',
        (),
    ),
    'user': ('The user (SPEC 5.1).', 'response_user.json', ()),
    'account': ('The account (SPEC 5.2).', 'response_account.json', ()),
    'cache_keys': (
        "The account's cache keys.",
        _BODIES + 'cache_keys',
        ('Cache-Control',),
    ),
    'empty': ('Done.', _BODIES + 'empty', ()),
    'deletion_toggled': (
        "The account's deletion is scheduled, or cancelled (or already was).",
        _BODIES + 'deletion_toggled',
        (),
    ),
    # No body at all (None): the document says so with no content.
    'no_content': ('Done; no body.', None, ()),
    'signed_in': (
        'Signed in: the user, and the five headers of a new token (of the caller, when '
        'already signed in).',
        _BODIES + 'signed_in',
        TOKEN_HEADERS,
    ),
    'signed_out': (
        'The token is revoked (and not echoed).',
        _BODIES + 'signed_out',
        (),
    ),
    'token_valid': ('The credentials are valid.', _BODIES + 'token_valid', ()),
    'password_policy': (
        'The password rules (SPEC 15).',
        _BODIES + 'password_policy',
        (),
    ),
    'reset_requested': (
        'A reset link is mailed if the address belongs to a user.',
        _BODIES + 'reset_requested',
        (),
    ),
    'sessions': (
        "The caller's sessions, most recently active first.",
        _BODIES + 'sessions',
        (),
    ),
    'revoked': ('Sessions ended.', _BODIES + 'revoked', ()),
    'member_signed_out': (
        "The member's sessions ended (and when the member is the caller, the caller's: "
        'its token is then not echoed).',
        _BODIES + 'revoked',
        (),
    ),
    'sessions_limit_reached': (
        "At the session limit (a browser's sign-in): pick sessions to end and sign in "
        'again.',
        _BODIES + 'sessions_limit_reached',
        (),
    ),
    'cannot_revoke_current': (
        'The session of this request cannot be ended here (sign out instead).',
        _ERRORS + 'cannot_revoke_current',
        (),
    ),
    'agents': (
        'Every member of the account, by name.',
        _BODIES + 'agents',
        (),
    ),
    'agent': (
        'The member, with the membership status now theirs.',
        _BODIES + 'agent',
        (),
    ),
    'audit_events': (
        'One page of audit events, newest first.',
        _BODIES + 'audit_events',
        (),
    ),
    'personal_access_tokens': (
        "The caller's live personal access tokens, newest first; never a secret.",
        _BODIES + 'personal_access_tokens',
        (),
    ),
    'personal_access_token_created': (
        'Created: the token is in this answer and nowhere else, ever.',
        _BODIES + 'personal_access_token_created',
        (),
    ),
    'account_personal_access_tokens': (
        "The live personal access tokens of the account's members that can reach it.",
        _BODIES + 'account_personal_access_tokens',
        (),
    ),
    'profile_export': (
        'Everything stored about the caller, as a download (SPEC 20); never a secret '
        'nor a digest of one.',
        'response_export.json',
        ('Content-Disposition',),
    ),
    'insufficient_scope': (
        'A personal access token without the scope this needs (required_scope), or '
        'limited to other accounts.',
        _ERRORS + 'insufficient_scope',
        (),
    ),
    'legacy_token_disabled': (
        "The profile's access_token, on a route of an account that set "
        'restrict_legacy_access_token: use a personal access token.',
        _ERRORS + 'legacy_token_disabled',
        (),
    ),
    'bad_request': (
        'The body is not valid JSON (NUL characters and lone surrogates included), or '
        'a multipart body cannot be parsed.',
        _ERRORS + 'message',
        (),
    ),
    'unauthenticated': (
        'No valid credentials: missing, malformed, unknown, expired or revoked alike.',
        _ERRORS + 'unauthenticated',
        (),
    ),
    'not_authorized': (
        'Signed in, but the role may not do this.',
        _ERRORS + 'not_authorized',
        (),
    ),
    'needs_session': (
        'A credential action (the access token, sessions, MFA, e-mail or password) '
        'needs the token headers of a sign-in; api_access_token is refused. A personal '
        'access token gets it wherever no scope opens the route to it.',
        _ERRORS + 'needs_session',
        (),
    ),
    'reauthentication_required': (
        'An e-mail change needs the current password in the body, or a session '
        'that checked a password or second factor within REAUTH_WINDOW_MINUTES.',
        _ERRORS + 'reauthentication_required',
        (),
    ),
    'cross_site_form': (
        'A form body (urlencoded or multipart) whose Origin is neither FRONTEND_URL '
        'nor one of CORS_ALLOWED_ORIGINS (SPEC 3.4).',
        _ERRORS + 'cross_site_form',
        (),
    ),
    'invalid_login': (
        'Wrong e-mail or password; or, with error_code user_not_confirmed, an '
        'unconfirmed address.',
        _ERRORS + 'invalid_login',
        (),
    ),
    'invalid_token': ('No valid credentials.', _ERRORS + 'invalid_token', ()),
    'account_suspended': (
        'Right credentials, but every membership of the user is suspended (SPEC 18): '
        'no session, no challenge, nothing changed.',
        _ERRORS + 'account_suspended',
        (),
    ),
    'sso_required': (
        "Right credentials, but the address's domain belongs to an account that "
        'enforces single sign-on (SPEC 19): sign in through its provider. No session.',
        _ERRORS + 'sso_required',
        (),
    ),
    'backchannel_invalid': (
        'The logout token is missing, malformed, not signed by a configured provider '
        'for its audience, too old, replayed, or not a logout token (OpenID Connect '
        'Back-Channel Logout 1.0, 2.8).',
        _ERRORS + 'invalid_request',
        (),
    ),
    'backchannel_done': (
        'Every session of that provider session (sid), or with only sub every '
        'single-sign-on session of that subject, has ended.',
        _BODIES + 'empty',
        (),
    ),
    'membership_suspended': (
        "The caller's membership of that account is suspended (SPEC 18).",
        _ERRORS + 'membership_suspended',
        (),
    ),
    'sign_up_refused': (
        'Sign-up refused for its parameters (SPEC 4.1).',
        _ERRORS + 'message',
        (),
    ),
    'not_found': (
        'Not found: an account the caller is not a member of, or sign-up disabled.',
        _ERRORS + 'not_found',
        (),
    ),
    'too_large': (
        'The body is over its limit: 1 MiB for JSON, '
        'AVATAR_MAX_BYTES + 64 KiB for multipart.',
        _ERRORS + 'too_large',
        (),
    ),
    'unsupported_media_type': (
        'The body is neither application/json nor application/x-www-form-urlencoded '
        '(nor multipart/form-data where that is accepted).',
        _ERRORS + 'message',
        (),
    ),
    'unprocessable': ('Validation failed.', _ERRORS + 'unprocessable', ()),
    'administers_accounts': (
        'The caller is the last active administrator of accounts that have other '
        'members (SPEC 20): their account_ids; nothing changed.',
        _ERRORS + 'administers_accounts',
        (),
    ),
    'rate_limited': (
        'Too many requests (SPEC 7), or a sixth e-mail change within 24 hours '
        '(SPEC 3.3).',
        _ERRORS + 'retry_later',
        ('Retry-After',),
    ),
    'internal_error': (
        'A bug; the traceback is in the log under request_id.',
        _ERRORS + 'internal_error',
        (),
    ),
    'unavailable': (
        'The database is unreachable.',
        _ERRORS + 'unavailable',
        ('Retry-After',),
    ),
    # Two-factor sign-in (SPEC 12).
    'mfa_status': ("The caller's two-factor sign-in.", _MFA + 'status', ()),
    'mfa_provisioning': (
        'Enrolment started: the secret, shown once.',
        _MFA + 'provisioning',
        (),
    ),
    'mfa_enabled': (
        'MFA is on; every other session and the access token are revoked; the recovery '
        'codes, shown once.',
        _MFA + 'enabled',
        (),
    ),
    'mfa_backup_codes': (
        'New recovery codes, shown once; the old ones no longer work.',
        _MFA + 'new_backup_codes',
        (),
    ),
    'mfa_disabled': (
        'MFA is off; every other session and the access token are revoked.',
        _MFA + 'disabled',
        (),
    ),
    'mfa_challenge': (
        'Right, but a second factor (mfa_required) or an enrolment '
        '(mfa_setup_required) comes first: no token headers.',
        _MFA + 'challenge',
        (),
    ),
    'mfa_unavailable': (
        'The server has no SECRET_KEY.',
        _ERRORS + 'mfa_unavailable',
        (),
    ),
    'mfa_enrollment_required': (
        'An account of the caller requires two-factor sign-in, and it is off.',
        _ERRORS + 'mfa_enrollment_required',
        (),
    ),
    'invalid_mfa_token': (
        'The mfa_token is unknown, used, expired or has had 5 wrong codes.',
        _ERRORS + 'invalid_mfa_token',
        (),
    ),
    'invalid_code': (
        'Wrong code (counted against the mfa_token).',
        _ERRORS + 'invalid_code',
        (),
    ),
    # Single sign-on (SPEC 19); its redirects have no body.
    'sso_redirect': (
        'A redirect, its address in Location: to the identity provider, or to the '
        'login page (with an sso_auth_token, or an error code).',
        None,
        ('Location',),
    ),
    'sso_settings': (
        "The account's single sign-on settings; never the client secret.",
        'response_sso_settings.json',
        (),
    ),
    'sso_unavailable': (
        'The server has no SECRET_KEY to encrypt the client secret with.',
        _ERRORS + 'sso_unavailable',
        (),
    ),
    'bad_gateway': (
        'From nginx (deploy/nginx.conf): gunicorn does not answer.',
        _ERRORS + 'unavailable',
        ('Retry-After',),
    ),
    'gateway_timeout': (
        'From nginx (deploy/nginx.conf): gunicorn answers too slowly.',
        _ERRORS + 'unavailable',
        ('Retry-After',),
    ),
}

# Successes after which the caller's token may be gone, so it is not echoed.
NOT_ECHOED = {'signed_out', 'member_signed_out'}

# Answered by the service as a whole, unless a resource declares the status itself.
EVERYWHERE = {
    500: 'internal_error',
    502: 'bad_gateway',
    503: 'unavailable',
    504: 'gateway_timeout',
}

HEADERS = {
    'X-Request-Id': (
        "The request id (nginx's, else a new one); the log lines of the request "
        'carry it.',
        {'type': 'string', 'pattern': '^[A-Za-z0-9._:-]{1,128}$'},
    ),
    'Retry-After': (
        'Seconds to wait before trying again.',
        {'type': 'string', 'pattern': '^[0-9]+$'},
    ),
    'Cache-Control': (
        'Clients and proxies may keep the keys briefly.',
        {'type': 'string', 'const': 'max-age=10, private, stale-while-revalidate=300'},
    ),
    'access-token': (
        'The token; send it back as the access-token header.',
        {'type': 'string', 'minLength': 1},
    ),
    'token-type': ('Always Bearer.', {'type': 'string', 'const': 'Bearer'}),
    'client': (
        'The client (device) id of the token.',
        {'type': 'string', 'minLength': 1},
    ),
    'expiry': (
        'When the token expires, in epoch seconds.',
        {'type': 'string', 'pattern': '^[0-9]+$'},
    ),
    'uid': ("The user's e-mail address.", {'type': 'string', 'minLength': 1}),
    'Location': ('Where the browser goes next.', {'type': 'string', 'minLength': 1}),
    'Content-Disposition': (
        'A download, and the name to save it under.',
        {
            'type': 'string',
            'pattern': '^attachment; filename="frontdesk-export-[0-9]+\\.json"$',
        },
    ),
}
