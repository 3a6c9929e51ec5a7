"""Steps shared by several resources and the CLI: each needs a few queries in one
transaction with a little Python between them (hashing, tokens, rendering mail).

The modules fall in the five parts of PARTS, and IMPORTS_REFUSED says which part may
not import which (tests/test_layers.py holds every import to both).
"""

# NOTE: devices is audit's: it reads what a request says about its device, for audit
# rows, sessions and security e-mails, and imports only audit; in credentials, mail
# (security_mail) could not use it.
PARTS = {
    # sign_in signs up too (users, captcha): accounts'. export reads every part's rows
    # (SPEC 20); deletion: the purge of accounts and the one eraser of people (SPEC 20);
    # erasure: DELETE /api/v1/profile, around that eraser.
    # deletion_schedule: scheduling and cancelling an account's deletion (SPEC 20).
    'accounts': (
        'profiles',
        'users',
        'avatars',
        'captcha',
        'memberships',
        'sign_in',
        'export',
        'deletion',
        'deletion_schedule',
        'erasure',
    ),
    'credentials': (
        'credentials',
        'passwords',
        'sessions',
        'mfa',
        'guessing',
        'personal_tokens',
    ),
    'mail': ('addresses', 'mail', 'outbox', 'security_mail'),
    'audit': ('audit', 'devices'),
    # Single sign-on (SPEC 19): the provider's HTTP and tokens, settings, the flow.
    'sso': (
        'oidc_http',
        'oidc_tokens',
        'sso_providers',
        'sso_settings',
        'sso_enforcement',
        'sso_logout',
        'sso',
    ),
}
# importing part: the parts it never imports.
IMPORTS_REFUSED = {
    'credentials': ('accounts',),
    'mail': ('credentials',),
    'audit': ('credentials',),
}
