"""Tags and examples: what a reader of /api/v1/docs needs beyond the shapes.

tests/test_openapi.py validates every example against its schema, and checks that no
operation lacks them. The summary and description of each operation are the
responder's docstring (engine.prose()).
"""

import copy

TAGS = [
    {
        'name': 'Sign-up and accounts',
        'description': (
            'Sign up (a user, an account and its administrator membership in one '
            'request), read and change an account, its cache keys and the heartbeat.'
        ),
    },
    {
        'name': 'Profile',
        'description': (
            "The caller's own user: name, e-mail, password, avatar, availability, "
            'settings per account.'
        ),
    },
    {
        'name': 'Sessions and confirmation',
        'description': 'Sign in and out, check a token, confirm an address, '
        'reset a forgotten password. Links to confirm and reset arrive by e-mail.',
    },
    {
        'name': 'Tokens for integrations',
        'description': (
            'Personal access tokens: scoped, expiring, limited to some accounts, shown '
            'once and stored only as a digest; your own, and for administrators those '
            "of their account's members."
        ),
    },
    {
        'name': 'Operations',
        'description': 'Health, readiness and this description; no credentials needed.',
    },
]
_TAG_PREFIXES = (
    ('/api/v1/accounts', 'Sign-up and accounts'),
    ('/enterprise/api/v1/accounts', 'Sign-up and accounts'),
    ('/api/v1/profile', 'Profile'),
    ('/api/v1/password_policy', 'Profile'),
    ('/auth/', 'Sessions and confirmation'),
    ('/resend_confirmation', 'Sessions and confirmation'),
    ('/api/v1/auth/', 'Sessions and confirmation'),
    ('/omniauth/', 'Sessions and confirmation'),
)


def tag_for(path):
    if '/access_tokens' in path:
        return 'Tokens for integrations'
    return next(
        (tag for prefix, tag in _TAG_PREFIXES if path.startswith(prefix)), 'Operations'
    )


_NOW = '2026-01-15T09:30:00.000Z'
_MEMBERSHIP = {
    'id': 42,
    'name': 'Acme',
    'status': 'active',
    'locale': 'en',
    'active_at': _NOW,
    'role': 'administrator',
    'permissions': ['administrator'],
    'availability': 'online',
    'availability_status': 'online',
    'auto_offline': True,
    'membership_status': 'active',
}
_USER = {
    'id': 7,
    'name': 'Ada Lovelace',
    'display_name': None,
    'available_name': 'Ada Lovelace',
    'email': 'ada@example.com',
    'unconfirmed_email': None,
    'uid': 'ada@example.com',
    'provider': 'email',
    'confirmed': True,
    'access_token': 'x3M9mXGvT5Qm0dJf2pWq8sLk',
    'account_id': 42,
    'role': 'administrator',
    'avatar_url': '',
    'custom_attributes': {},
    'ui_settings': {'theme': 'dark'},
    'message_signature': None,
    'accounts': [_MEMBERSHIP],
    'created_at': _NOW,
    'type': None,
    'inviter_id': None,
    'pubsub_token': 'b1Xr4UqE2Yt7NwZc5VhK9pLa',
    'mfa_enabled': False,
}
_SESSION_EXAMPLE = {
    'id': 91,
    'client_name': 'Firefox on Windows',
    'browser_name': 'Firefox',
    'browser_version': '128.0',
    'platform_name': 'Windows',
    'platform_version': '10',
    'device_name': None,
    'ip_address': '203.0.113.9',
    'city': None,
    'country': None,
    'country_code': None,
    'created_at': _NOW,
    'last_activity_at': _NOW,
    'expires_at': '2026-03-16T09:30:00.000Z',
    'current': True,
    'sign_in_method': 'password',
}
_CACHE_KEYS = {'label': '1768469400', 'inbox': '0000000000', 'team': '0000000000'}
_RECOVERY_CODES = [
    '7KQ2M9XW',
    'B3NV6HTZ',
    'Q0RST4VW',
    'XYZ23AB4',
    'C5DEF6GH',
    'JKMN7PQR',
    'ST8VWX9Y',
    'Z01234AB',
    'H5J6K7M8',
    'N9P0Q1R2',
]

_TOKEN_EXAMPLE = 'fdpat_8fK2mQ9xLp4Rt7Vw1Zc3Hb6Nd0Gs5Ja21cTAj9'
_PERSONAL_TOKEN = {
    'id': 12,
    'name': 'Billing sync',
    'scopes': ['account:read', 'profile:read'],
    'account_ids': [42],
    'expires_at': '2026-04-15T09:30:00.000Z',
    'created_at': _NOW,
    'last_used_at': _NOW,
    'last_used_ip': '203.0.113.20',
}

# Response examples by RESPONSES name.
EXAMPLES = {
    'health': {'status': 'ok'},
    'ready': {'status': 'ready'},
    'not_ready': {
        'message': 'Service temporarily unavailable',
        'database': True,
        'pending_migrations': ['0005_example'],
    },
    'openapi': {
        'openapi': '3.1.0',
        'info': {'title': 'Frontdesk accounts API', 'version': '1'},
        'paths': {},
        'components': {},
    },
    'user': _USER,
    'account': {
        'id': 42,
        'name': 'Acme Inc',
        'locale': 'en',
        'domain': None,
        'support_email': None,
        'auto_resolve_duration': None,
        'status': 'active',
        'custom_attributes': {'timezone': 'Europe/Paris'},
        'created_at': _NOW,
        'cache_keys': _CACHE_KEYS,
        'features': {},
        'latest_chatwoot_version': None,
        'enforce_mfa': False,
        'restrict_legacy_access_token': False,
    },
    'cache_keys': {'cache_keys': _CACHE_KEYS},
    'empty': {},
    'deletion_toggled': {'message': 'Account marked for deletion'},
    'signed_in': {'data': _USER},
    'signed_out': {'success': True},
    'token_valid': {'payload': {'success': True, 'data': _USER}},
    'password_policy': {
        'min_length': 8,
        'max_bytes': 72,
        'checks': ['common', 'personal', 'reuse'],
    },
    'sessions': [_SESSION_EXAMPLE],
    'revoked': {'revoked': 2},
    'sessions_limit_reached': {
        'sessions_limit_reached': True,
        'sessions': [{**_SESSION_EXAMPLE, 'current': False}],
    },
    'member_signed_out': {'revoked': 3},
    'agent': {
        'id': 8,
        'account_id': 42,
        'name': 'Grace Hopper',
        'available_name': 'Grace',
        'email': 'grace@example.com',
        'role': 'agent',
        'confirmed': True,
        'availability_status': 'offline',
        'auto_offline': True,
        'thumbnail': '',
        'membership_status': 'suspended',
        'mfa_enabled': False,
        'last_sign_in_at': _NOW,
    },
    'agents': [
        {
            'id': 7,
            'account_id': 42,
            'name': 'Ada Lovelace',
            'available_name': 'Ada Lovelace',
            'email': 'ada@example.com',
            'role': 'administrator',
            'confirmed': True,
            'availability_status': 'online',
            'auto_offline': True,
            'thumbnail': '/avatars/Xk3v9Qp2.png',
            'membership_status': 'active',
            'mfa_enabled': True,
            'last_sign_in_at': _NOW,
        }
    ],
    'cannot_revoke_current': {'error': 'You cannot revoke the current session.'},
    'audit_events': {
        'events': [
            {
                'id': 1201,
                'created_at': _NOW,
                'event': 'sign_in_succeeded',
                'actor_id': 7,
                'subject_id': 7,
                'account_id': None,
                'ip_address': '203.0.113.9',
                'user_agent': (
                    'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) '
                    'Gecko/20100101 Firefox/128.0'
                ),
                'session_id': 91,
                'details': {},
            }
        ],
        'next_before': None,
    },
    'api_info': {
        'version': '1.0.0',
        'timestamp': _NOW,
        'queue_services': 'ok',
        'data_services': 'ok',
    },
    'reset_requested': {
        'message': (
            'If ada@example.com is registered, a link to reset the password '
            'is on its way.'
        )
    },
    'mfa_status': {
        'feature_available': True,
        'enabled': True,
        'backup_codes_generated': True,
        'backup_codes_remaining': 9,
    },
    'mfa_provisioning': {
        'provisioning_url': 'otpauth://totp/Frontdesk:ada%40example.com?'
        'secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Frontdesk',
        'secret': 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
    },
    'mfa_enabled': {'enabled': True, 'backup_codes': _RECOVERY_CODES},
    'mfa_backup_codes': {'backup_codes': _RECOVERY_CODES},
    'mfa_disabled': {'enabled': False},
    'mfa_challenge': {
        'mfa_required': True,
        'mfa_token': 'Qm7Xv2Lp9Ta4Rz1Kc8Wn5Hb3Jd6Fs0Ge2Yu4Io7Pq1A',
    },
    'mfa_unavailable': {
        'error': 'MFA feature is not available. Please configure SECRET_KEY.'
    },
    'mfa_enrollment_required': {
        'error': 'Your account requires two-factor sign-in: enable it first',
        'error_code': 'mfa_enrollment_required',
    },
    'invalid_mfa_token': {'error': 'Invalid or expired MFA token'},
    'sso_settings': {
        'sso_settings': {
            'issuer': 'https://login.example.com/realms/acme',
            'client_id': 'frontdesk',
            'client_secret_set': True,
            'allowed_domains': ['acme.example'],
            'jit_provisioning': True,
            'enforce': False,
            'trust_idp_mfa': False,
            'redirect_uri': 'https://desk.acme.example/omniauth/oidc/callback',
            'backchannel_logout_uri': (
                'https://desk.acme.example/auth/oidc/backchannel_logout'
            ),
        }
    },
    'sso_unavailable': {
        'error': 'Single sign-on is not available. Please configure SECRET_KEY.'
    },
    'personal_access_tokens': [_PERSONAL_TOKEN],
    'profile_export': {
        'format': 'frontdesk-export/1',
        'user_id': 7,
        'exported_at': _NOW,
        'retention_days': 365,
        'withheld': {
            'users.encrypted_password': 'a secret: the digest of your password',
        },
        'profile': {
            'id': 7,
            'name': 'Ada Lovelace',
            'display_name': None,
            'email': 'ada@example.com',
            'unconfirmed_email': None,
            'confirmed_at': _NOW,
            'custom_attributes': {},
            'ui_settings': {'theme': 'dark'},
            'message_signature': None,
            'avatar': None,
            'created_at': _NOW,
            'updated_at': _NOW,
            'last_sign_in_at': _NOW,
        },
        'mfa': {
            'enabled': False,
            'mfa_enabled_at': None,
            'otp_last_step': None,
            'recovery_codes_remaining': 0,
            'recovery_codes': [],
        },
        'memberships': [
            {
                'id': 3,
                'account_id': 42,
                'account_name': 'Acme',
                'user_id': 7,
                'role': 'administrator',
                'status': 'active',
                'availability': 'online',
                'auto_offline': True,
                'active_at': _NOW,
                'created_at': _NOW,
                'updated_at': _NOW,
            }
        ],
        'sessions': [
            {
                'id': 91,
                'user_id': 7,
                'client': 'Qm7Xv2Lp9Ta4Rz1Kc8Wn5H',
                'current': True,
                'sign_in_method': 'password',
                'created_at': _NOW,
                'last_used_at': _NOW,
                'authenticated_at': _NOW,
                'expires_at': '2026-03-16T09:30:00.000Z',
                'used': True,
                'ip_address': '203.0.113.9',
                'user_agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0',
                'client_name': 'Firefox on Linux',
                'browser_name': 'Firefox',
                'browser_version': '128.0',
                'platform_name': 'Linux',
                'platform_version': None,
                'device_name': None,
                'sso_account_id': None,
                'sso_sub': None,
                'sso_sid': None,
            }
        ],
        'personal_access_tokens': [{**_PERSONAL_TOKEN, 'user_id': 7}],
        'links': [],
        'email_change_requests': [],
        'sso_sign_ins_in_progress': [],
        'account_deletions_requested': [],
        'account_deletions_done': [],
        'audit_events': [],
        'audit_events_truncated': False,
        'mails': [
            {
                'id': 55,
                'kind': 'new_device_sign_in',
                'to_address': 'ada@example.com',
                'subject': 'New sign-in to your account',
                'status': 'sent',
                'message_id': '<55.1768469400@frontdesk.example>',
                'created_at': _NOW,
                'sent_at': _NOW,
            }
        ],
        'mails_truncated': False,
    },
    'personal_access_token_created': {
        key: value
        for key, value in {**_PERSONAL_TOKEN, 'token': _TOKEN_EXAMPLE}.items()
        if not key.startswith('last_used')
    },
    'account_personal_access_tokens': [{**_PERSONAL_TOKEN, 'user_id': 7}],
    'insufficient_scope': {
        'error': 'This token does not allow this action',
        'error_code': 'insufficient_scope',
        'required_scope': 'account:write',
    },
    'legacy_token_disabled': {
        'error': 'This account no longer accepts the profile access token: use a '
        'personal access token',
        'error_code': 'legacy_token_disabled',
    },
    'invalid_code': {'error': 'Invalid verification code'},
    'bad_request': {'message': 'The body is not valid JSON'},
    'unauthenticated': {
        'errors': ['You need to sign in or sign up before continuing.']
    },
    'not_authorized': {'error': 'You are not authorized to do this action'},
    'needs_session': {'error': 'This action needs a signed-in session'},
    'reauthentication_required': {
        'error': 'Sign in again to change this',
        'error_code': 'reauthentication_required',
    },
    'cross_site_form': {'error': 'Cross-site form refused'},
    'invalid_login': {
        'success': False,
        'errors': ['Invalid login credentials. Please try again.'],
    },
    'invalid_token': {'success': False, 'errors': ['Invalid login credentials']},
    'account_suspended': {
        'success': False,
        'error_code': 'account_suspended',
        'errors': [
            'Your access has been suspended by an administrator of every account you '
            'belong to'
        ],
    },
    'sso_required': {
        'success': False,
        'errors': ["Sign in with your organisation's single sign-on"],
        'error_code': 'sso_required',
    },
    'backchannel_done': {},
    'backchannel_invalid': {'error': 'invalid_request'},
    'membership_suspended': {
        'error': 'Your access to this account is suspended',
        'error_code': 'membership_suspended',
    },
    'sign_up_refused': {
        'message': 'You have already signed up for an account with ada@example.com'
    },
    'not_found': {'error': 'Resource could not be found'},
    'too_large': {'message': 'Request body is too large (maximum is 1048576 bytes)'},
    'unsupported_media_type': {'message': 'Content-Type must be application/json'},
    'unprocessable': {
        'message': "Name can't be blank, Locale is not included in the list",
        'attributes': ['name', 'locale'],
    },
    'rate_limited': {'message': 'Retry later'},
    'internal_error': {
        'message': 'Internal server error',
        'request_id': '5f0c6b1e2a9d4c7e8b3a1f2d4e6c8a0b',
    },
    'unavailable': {'message': 'Service temporarily unavailable'},
    'administers_accounts': {
        'message': 'Transfer or delete the accounts you administer first',
        'account_ids': [42],
    },
    'bad_gateway': {'message': 'Service temporarily unavailable'},
    'gateway_timeout': {'message': 'Service temporarily unavailable'},
}

# Request body examples by schema file stem.
REQUEST_EXAMPLES = {
    'profile_delete': {'password': 'a long passphrase', 'otp_code': '123456'},
    'account_create': {
        'account_name': 'Acme',
        'email': 'ada@example.com',
        'user_full_name': 'Ada Lovelace',
        'password': 'a long passphrase',
        'locale': 'en',
    },
    'account_toggle_deletion': {'action_type': 'delete'},
    'account_update': {
        'name': 'Acme Inc',
        'timezone': 'Europe/Paris',
        'auto_resolve_duration': 7,
    },
    'profile_update': {
        'profile': {
            'display_name': 'Ada L.',
            'ui_settings': {'theme': 'dark'},
            'phone_number': '+33123456789',
        }
    },
    'profile_availability': {'profile': {'account_id': 42, 'availability': 'busy'}},
    'profile_auto_offline': {'profile': {'account_id': 42, 'auto_offline': False}},
    'profile_active_account': {'profile': {'account_id': 42}},
    'sign_in': {'email': 'ada@example.com', 'password': 'a long passphrase'},
    'confirmation_create': {'confirmation_token': 'q8Zp3X0yT1rW6sV9uB2nM5kJ4hG7fD0c'},
    'password_reset_create': {'email': 'ada@example.com'},
    'resend_confirmation': {'email': 'ada@example.com'},
    'email_revert': {'token': 'Zr5Tq8Wm1Kp4Xn7Bv0Cy3Hd6Fj9Lg2Sa'},
    'mfa_revert': {'token': 'Hd6Fj9Lg2SaZr5Tq8Wm1Kp4Xn7Bv0Cy3'},
    'mfa_enable': {},
    'access_token_create': {
        'name': 'Billing sync',
        'scopes': ['account:read', 'profile:read'],
        'account_ids': [42],
        'expires_in_days': 90,
    },
    'mfa_verify': {'otp_code': '492039'},
    'mfa_backup_codes': {'otp_code': '492039'},
    'mfa_disable': {'password': 'a long passphrase', 'otp_code': '492039'},
    'profile_sessions_delete': {'include_access_token': True},
    'sso_start': {'email': 'ada@example.com', 'target': 'web'},
    'sso_settings': {
        'sso_settings': {
            'issuer': 'https://login.example.com/realms/acme',
            'client_id': 'frontdesk',
            'client_secret': 'pX8v2Lq9Tz4Rk7Wm1Nc5Hb3Jd6Fs0Ga',
            'allowed_domains': ['acme.example'],
            'jit_provisioning': True,
        }
    },
    'password_reset_update': {
        'reset_password_token': 'Lk2Jh5Gf8Ds1Az4Xc7Vb0Nm3Qw6Er9Ty',
        'password': 'a new long passphrase',
        'password_confirmation': 'a new long passphrase',
    },
}


def describe(document):
    """Add tags and examples to a built document, in place."""
    document['tags'] = TAGS
    for path, operations in document['paths'].items():
        for operation in operations.values():
            operation['tags'] = [tag_for(path)]
            content = (
                operation.get('requestBody', {})
                .get('content', {})
                .get('application/json')
            )
            stem = content and content['schema']['$ref'].rpartition('/')[2]
            # Copies: a reader of the document that fills an example in (a test tool
            # in the same process) must not change every other document built later.
            if stem in REQUEST_EXAMPLES:
                content['example'] = copy.deepcopy(REQUEST_EXAMPLES[stem])
            for response in operation['responses'].values():
                name = response.pop('x-names')[0]
                if name in EXAMPLES and 'content' in response:
                    response['content']['application/json']['example'] = copy.deepcopy(
                        EXAMPLES[name]
                    )
    return document
