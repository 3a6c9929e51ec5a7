"""Security e-mails (SPEC 14), queued in the outbox in the transaction of their event.

Each names the time, the IP address and the device of the request that caused it, and
says what to do if it was not the user (services/mail.py renders them).
"""

import datetime

from services import devices
from services import mail

# kind: (subject, what happened)
KINDS = {
    'password_changed': (
        'Your password was changed',
        'The password of your Frontdesk account was changed.',
    ),
    'password_reset': (
        'Your password was reset',
        'The password of your Frontdesk account was reset with a link sent to this '
        'address.',
    ),
    'new_device_sign_in': (
        'New sign-in to your account',
        'Your Frontdesk account was signed in to from a device it has not been used on '
        'in the last 90 days.',
    ),
    'access_token_reset': (
        'Your access token was reset',
        'The API access token of your Frontdesk account was replaced; integrations '
        'using the old one stopped working.',
    ),
    'personal_access_token_created': (
        'A personal access token was created',
        'A personal access token was created for your Frontdesk account. Whoever holds '
        'it can use the API as you, within its scopes, until it expires or is revoked.',
    ),
    'personal_access_token_revoked': (
        'A personal access token was revoked',
        'A personal access token of your Frontdesk account was revoked; integrations '
        'using it stopped working.',
    ),
    'sessions_ended_by_administrator': (
        'You were signed out everywhere',
        'An administrator ended every session of your Frontdesk account.',
    ),
    'member_suspended': (
        'Your access to an account was suspended',
        'An administrator suspended your access to an account on Frontdesk.',
    ),
    'member_reactivated': (
        'Your access to an account is back',
        'An administrator reactivated your access to an account on Frontdesk.',
    ),
    'mfa_enabled': (
        'Two-factor sign-in was turned on',
        'Two-factor sign-in was turned on for your Frontdesk account.',
    ),
    'mfa_disabled': (
        'Two-factor sign-in was turned off',
        'Two-factor sign-in was turned off for your Frontdesk account.',
    ),
    'mfa_recovery_code_used': (
        'A recovery code was used',
        'A recovery code was used to sign in to your Frontdesk account.',
    ),
    'mfa_backup_codes_regenerated': (
        'New recovery codes were made',
        'New recovery codes were made for your Frontdesk account; the old ones '
        'no longer work.',
    ),
    'password_guesses_exhausted': (
        'Someone is guessing your password',
        'Ten wrong passwords were tried for your Frontdesk account; password checks '
        'are refused for the next 15 minutes.',
    ),
    'second_factor_guesses_exhausted': (
        'Someone is guessing your verification codes',
        'Ten wrong verification or recovery codes were tried for your Frontdesk '
        'account; code checks are refused for the rest of the hour. Whoever '
        'tried them knows your password.',
    ),
}


def origin(facts, when=None):
    """The time, IP address and device of a request's RequestFacts (or None)."""
    device = devices.request_device(facts)
    return {
        'when': when or datetime.datetime.now(datetime.timezone.utc),
        'ip_address': device['ip_address'],
        'device': devices.describe(device),
    }


def send_to_user(conn, queries, config, kind, user_id, facts=None, extra=None):
    """send() to ``user_id`` at their current address, under their name."""
    contact = conn.execute(queries['users.contact'], {'user_id': user_id}).fetchone()
    send(
        conn,
        queries,
        config,
        kind,
        user_id=user_id,
        to_address=contact['email'],
        name=contact['name'],
        facts=facts,
        extra=extra,
    )


def send(
    conn, queries, config, kind, *, user_id, to_address, name, facts=None, extra=None
):
    """Queue one security e-mail (SPEC 14) through the outbox.

    ``extra``: ``lines`` (more sentences, e.g. who did it), ``subject`` or ``what`` to
    override the kind's, ``advice`` and ``link`` (url, text) to replace the sign-in link
    and what to do, or any of ``when``, ``ip_address``, ``device`` to override what the
    request says. ``user_id`` is the recipient's (kept for the callers' symmetry with
    audit.record; the message itself needs only the address).
    """
    extra = dict(extra or {})
    subject, what = KINDS[kind]
    notice = mail.security_notice(
        config,
        kind,
        to_address,
        name,
        extra.pop('subject', subject),
        extra.pop('what', what),
        {
            **origin(facts),
            **{
                key: extra[key]
                for key in ('when', 'ip_address', 'device')
                if key in extra
            },
        },
        advice=extra.get('advice'),
        lines=extra.get('lines', ()),
        link=extra.get('link'),
    )
    conn.execute(queries['mail.enqueue'], notice)
