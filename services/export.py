"""A person's data, exported (SPEC 20): GET /api/v1/profile/export.

EXPORTED says, per table, which part of the document holds its rows and which columns
each row carries (under the column's own name); EXCLUDED names every column of those
tables the document withholds, with the reason, which the document repeats under
``withheld``. tests/test_export.py derives from the database catalogue every table and
column that holds a user's data and fails while one is in neither.
"""

import orjson

from services import audit
from services import security_mail
from services import sessions

# The most audit events, and the most mails, one document lists (newest first; the
# *_truncated flag says more exist). The retention window bounds both, but not enough:
# a targeted user's wrong passwords alone may write 350,000 rows a year. A row is at
# most about 1 KB (a User-Agent is cut at 512 characters), so one document stays under
# some 100 MB of text, held about three times over (the database's, Python's, the
# bytes sent).
MAX_ROWS = 50_000

_USER_LINK = ('user_id',)
_TIMES = ('created_at', 'expires_at')
# table: {part of the document: the columns its rows carry}.
EXPORTED = {
    'users': {
        'profile': (
            'id',
            'name',
            'display_name',
            'email',
            'unconfirmed_email',
            'confirmed_at',
            'custom_attributes',
            'ui_settings',
            'message_signature',
            'avatar',
            'created_at',
            'updated_at',
            'last_sign_in_at',
        ),
        'mfa': ('mfa_enabled_at', 'otp_last_step'),
    },
    'mfa_recovery_codes': {
        'mfa.recovery_codes': ('id', *_USER_LINK, 'used_at', 'created_at')
    },
    'account_users': {
        'memberships': (
            'id',
            'account_id',
            *_USER_LINK,
            'role',
            'status',
            'availability',
            'auto_offline',
            'active_at',
            'created_at',
            'updated_at',
        )
    },
    'user_tokens': {
        'sessions': (
            'id',
            *_USER_LINK,
            'client',
            'sign_in_method',
            'created_at',
            'last_used_at',
            'authenticated_at',
            'expires_at',
            'used',
            'ip_address',
            'user_agent',
            'client_name',
            'browser_name',
            'browser_version',
            'platform_name',
            'platform_version',
            'device_name',
            'sso_account_id',
            'sso_sub',
            'sso_sid',
        )
    },
    'personal_access_tokens': {
        'personal_access_tokens': (
            'id',
            *_USER_LINK,
            'name',
            'scopes',
            'account_ids',
            *_TIMES,
            'last_used_at',
            'last_used_ip',
        )
    },
    'one_time_tokens': {
        'links': (
            'id',
            *_USER_LINK,
            'purpose',
            'email',
            *_TIMES,
            'failed_attempts',
            'mfa_enabled_at',
            'sso_account_id',
            'sso_sub',
            'sso_sid',
            'idp_second_factor',
        )
    },
    'email_change_requests': {
        'email_change_requests': ('id', *_USER_LINK, 'created_at')
    },
    'sso_flows': {
        'sso_sign_ins_in_progress': ('account_id', 'email', 'target', *_TIMES)
    },
    'accounts': {
        'account_deletions_requested': (
            'id',
            'name',
            'deletion_requested_by',
            'deletion_requested_at',
            'deletion_due_at',
        )
    },
    'account_deletions': {
        'account_deletions_done': (
            'account_id',
            'scheduled_by',
            'scheduled_at',
            'deleted_at',
            'reason',
        )
    },
    'audit_events': {
        'audit_events': (
            'id',
            'created_at',
            'event',
            'actor_id',
            'subject_id',
            'account_id',
            'ip_address',
            'user_agent',
            'session_id',
            'details',
        )
    },
    'mail_outbox': {
        'mails': (
            'id',
            'kind',
            'to_address',
            'subject',
            'status',
            'message_id',
            'created_at',
            'sent_at',
        )
    },
}

_DIGEST = 'a digest of a secret: it proves nothing to you and helps a guesser'
_ACCOUNT = (
    "the account's own settings, shared by its members, not yours: a member reads "
    'them with GET /api/v1/accounts/{id}'
)
_BUDGET = (
    'a counter of the rate limits and guessing budgets, keyed by user id or address: '
    'how many requests in a window, nothing you gave; kept at most 30 days'
)
_FLOW = 'a secret of a sign-in in progress at the identity provider, 10 minutes long'
# (table, column): why the document does not carry it.
EXCLUDED = {
    ('users', 'encrypted_password'): 'a secret: the digest of your password',
    ('users', 'otp_secret'): 'a secret: the key of your authenticator app',
    ('users', 'access_token'): (
        'a secret: your API access token (the profile shows it; it is a credential)'
    ),
    ('users', 'pubsub_token'): 'a secret: a credential of the realtime channel',
    ('users', 'doc'): (
        'a copy of the fields above rendered for answers, with the two tokens'
    ),
    ('user_tokens', 'token_digest'): _DIGEST,
    ('personal_access_tokens', 'token_digest'): _DIGEST,
    ('one_time_tokens', 'token_digest'): _DIGEST,
    ('mfa_recovery_codes', 'code_digest'): _DIGEST,
    ('mfa_recovery_codes', 'salt'): 'the salt of a recovery code digest',
    ('mail_outbox', 'text_body'): (
        'the text of a mail: it may hold a live link (reset, confirmation), which is a '
        'credential; the mail is in your mailbox'
    ),
    ('mail_outbox', 'html_body'): 'as text_body',
    ('mail_outbox', 'user_id'): (
        'whose mail it is: yours (user_id above) for every mail listed, none for a '
        'mail written before mails named their owner, listed by its address'
    ),
    ('mail_outbox', 'attempts'): "the mail worker's delivery bookkeeping",
    ('mail_outbox', 'next_attempt_at'): "the mail worker's delivery bookkeeping",
    ('mail_outbox', 'last_error'): (
        "the mail worker's delivery bookkeeping: the SMTP server's last refusal"
    ),
    ('sso_flows', 'id_digest'): _DIGEST,
    ('sso_flows', 'state_digest'): _DIGEST,
    ('sso_flows', 'nonce'): _FLOW,
    ('sso_flows', 'code_verifier'): _FLOW,
    ('rate_limit_counters', 'bucket'): _BUDGET,
    ('rate_limit_counters', 'window_start'): _BUDGET,
    ('rate_limit_counters', 'hits'): _BUDGET,
    ('rate_limit_counters', 'expires_at'): _BUDGET,
    ('accounts', 'support_email'): (
        "the account's support address, set by its administrators: the account's, "
        'not a person'
    ),
    **{
        ('accounts', column): _ACCOUNT
        for column in (
            'locale',
            'domain',
            'auto_resolve_duration',
            'custom_attributes',
            'status',
            'label_cache_key',
            'inbox_cache_key',
            'team_cache_key',
            'created_at',
            'updated_at',
            'features',
            'enforce_mfa',
            'restrict_legacy_access_token',
        )
    },
}
_WITHHELD = orjson.dumps(
    {f'{table}.{column}': reason for (table, column), reason in EXCLUDED.items()}
).decode()


def export(conn, queries, config, user_id, session_id, facts, head=False):
    """The JSON text of everything stored about ``user_id``, with its audit event and
    security e-mail, in the caller's transaction.

    The session must have checked a password or second factor within
    REAUTH_WINDOW_MINUTES (SPEC 3.4): a stolen session alone cannot take a copy of
    everything. ``head``: a HEAD request, which gets the same checks and ``{}``:
    nothing is read, recorded or mailed for a download that does not happen.
    """
    sessions.require_recent_authentication(conn, queries, config, user_id, session_id)
    if head:
        return '{}'
    doc = conn.execute(
        queries['export.document'],
        {
            'user_id': user_id,
            'session_id': session_id,
            'retention_days': config.audit_retention_days,
            'max_rows': MAX_ROWS,
            'withheld': _WITHHELD,
        },
    ).fetchone()['doc']
    audit.record(conn, queries, 'profile_exported', subject_id=user_id, facts=facts)
    security_mail.send_to_user(
        conn, queries, config, 'profile_exported', user_id, facts
    )
    return doc
