"""Security e-mails (SPEC 14), queued in the outbox in the transaction of their event.

Each names the time, the IP address and the device of the request that caused it, and
says what to do if it was not the user (services/mail.py renders them).
"""

import datetime

from services import addresses
from services import devices
from services import mail
import tokens

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
    # SPEC 19: to every administrator of the account.
    'sso_settings_updated': (
        "An account's single sign-on settings were changed",
        'An administrator changed the single sign-on settings of an account you '
        'administer on Frontdesk: its members may now sign in through this identity '
        'provider.',
    ),
    'sso_settings_deleted': (
        "An account's single sign-on settings were removed",
        'An administrator removed the single sign-on settings of an account you '
        'administer on Frontdesk: its members sign in with passwords again.',
    ),
    # SPEC 20: to every administrator of the account.
    'account_deletion_scheduled': (
        'An account is scheduled for deletion',
        'An administrator scheduled the deletion of an account you administer on '
        'Frontdesk.',
    ),
    'account_deletion_cancelled': (
        "An account's scheduled deletion was cancelled",
        'An administrator cancelled the scheduled deletion of an account you '
        'administer on Frontdesk.',
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
    # SPEC 3.4 rule 1: the facts that follow are the sign-up's (send_sign_up_notice).
    'sign_up_confirmed': (
        'Your e-mail address is confirmed',
        'This e-mail address is now confirmed for your Frontdesk account. The '
        'account was signed up at this time, from this IP address and device:',
    ),
    # SPEC 19: to every administrator of an account that enforces single sign-on.
    'sso_break_glass': (
        'An administrator signed in without single sign-on',
        'An administrator of your Frontdesk account signed in with a password and a '
        'second factor, although the account requires single sign-on (break glass).',
    ),
    # SPEC 20: the last mail to an erased person's address. Its outbox row goes once it
    # is sent or given up (services/outbox.FORGOTTEN_ONCE_SENT).
    'account_erased': (
        'Your Frontdesk account was erased',
        'Your Frontdesk account and everything stored about you were erased at your '
        'request, with your password (and your second factor, if you had one). This '
        'cannot be undone.',
    ),
    'second_factor_guesses_exhausted': (
        'Someone is guessing your verification codes',
        'Ten wrong verification or recovery codes were tried for your Frontdesk '
        'account; code checks are refused for the rest of the hour. Whoever '
        'tried them knows your password.',
    ),
    # SPEC 20: GET /api/v1/profile/export.
    'profile_exported': (
        'A copy of your data was downloaded',
        'A copy of everything Frontdesk stores about your account (profile, '
        'memberships, sessions, tokens, security events, mails) was downloaded.',
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


def send_to_administrators(conn, queries, config, kind, account_id, facts, extra):
    """send() to every active administrator of ``account_id``, each message naming the
    account first."""
    for admin in conn.execute(
        queries['memberships.administrators_to_tell'], {'account_id': account_id}
    ).fetchall():
        send(
            conn,
            queries,
            config,
            kind,
            user_id=admin['id'],
            to_address=admin['email'],
            name=admin['name'],
            facts=facts,
            extra={
                **extra,
                'lines': [
                    mail.FromRequest('Account: ', admin['account_name']),
                    *extra.get('lines', ()),
                ],
            },
        )


def send(
    conn, queries, config, kind, *, user_id, to_address, name, facts=None, extra=None
):
    """Queue one security e-mail (SPEC 14) through the outbox.

    ``extra``: ``lines`` (more sentences, e.g. who did it), ``subject`` or ``what`` to
    override the kind's, ``advice`` and ``link`` (url, text) to replace the sign-in link
    and what to do, or any of ``when``, ``ip_address``, ``device`` to override what the
    request says. ``user_id`` is the recipient's: the outbox row is theirs
    (mail_outbox.user_id), which their erasure and their export go by.
    """
    extra = dict(extra or {})
    subject, what = KINDS[kind]
    notice = mail.security_notice(
        config,
        kind,
        user_id,
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


def sign_up_notice(conn, queries, config, confirmed, presented):
    """The notice a user's first confirmation mails (SPEC 3.4 rule 1), for
    send_sign_up_notice; None when none is due.

    ``confirmed``: the confirmations.confirm row; ``presented``: the sign-in
    credentials the confirming request carries, (access-token, client, uid) each (its
    token headers, the reference dashboard's cookie). None is due when this is not the
    user's first confirmation (a confirmed user's new address: its old address can
    still undo the change, SPEC 3.3), or when one of those is a live session of the
    user: the sign-up's own browser confirming. Called before the confirmation's
    credential change, which ends every session.
    """
    if not confirmed['first_confirmation']:
        return None
    origin_row = conn.execute(
        queries['confirmations.sign_up_origin'],
        {
            'user_id': confirmed['user_id'],
            'digests': [tokens.digest(token) for token, _, _ in presented],
            'clients': [client for _, client, _ in presented],
            'uids': [addresses.normalise(uid) for _, _, uid in presented],
            'uid': confirmed['previous_email'],
            'idle_seconds': config.idle_seconds,
        },
    ).fetchone()
    return None if origin_row['carries_session'] else origin_row


def send_sign_up_notice(conn, queries, config, notice):
    """Mail ``notice`` (sign_up_notice's): the address is confirmed, when and from
    which device the account was signed up, and a reset link for whoever did not choose
    its password.

    After the credential change, which would void the link. Not bounded per address
    (mail.enqueue_with_token), so that nobody who spent the address's mails of the hour
    can keep it from the owner who has just proved the mailbox: one per user, as a
    first confirmation happens once, and each answers a confirmation mail that counted.
    """
    if notice is None:
        return
    link = mail.reset_link(conn, queries, config, notice['id'], notice['email'])
    send(
        conn,
        queries,
        config,
        'sign_up_confirmed',
        user_id=notice['id'],
        to_address=notice['email'],
        name=notice['name'],
        extra={
            'when': notice['signed_up_at'],
            'ip_address': notice['ip_address'],
            'device': devices.describe(notice),
            'advice': (
                'If you signed up and chose the password, there is nothing to do. If '
                "you did not sign up, or did not choose this account's password, "
                'choose a new password with the link below within 6 hours: it works '
                'once, and ends every session and token of the account.'
            ),
            'link': (link, 'Choose a new password'),
        },
    )
