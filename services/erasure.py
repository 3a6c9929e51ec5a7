"""DELETE /api/v1/profile: a person erases themselves (SPEC 20).

What proves it is the owner (SPEC 3.4) is what a stolen session does not carry: the
current password in the body, and with two-factor sign-in a code as well (each check
spends its per-user guessing budget, services/guessing.py, through the same functions
as every other check: services/mfa.py). A user without a password (provisioned by
single sign-on, SPEC 19) proves it with the session itself: it must have been signed in
(through the provider, or with a second factor) within REAUTH_WINDOW_MINUTES, and a
second factor is still asked for when they have one.

One transaction, in the lock order of services/memberships.py: the accounts of the
caller's memberships, the memberships, the user row. So two administrators of one
account who erase themselves at once queue on the account row, and the second sees the
first one gone: the last active administrator of an account that has other members is
refused (422 with those accounts' ids) and nothing changes. Otherwise the memberships
end, each account left is told (an audit row that names nobody), an account left with no
member is scheduled for deletion as an administrator's request would be (by nobody),
the person is erased by the one eraser (services/deletion.py, the purge's), and the
farewell mail is queued last, after the eraser removed every other mail to them (its
outbox row goes once it is sent, services/outbox.py). The avatar file goes after the
commit.
"""

import errors
from services import audit
from services import deletion
from services import guessing
from services import mfa
from services import security_mail
from services import sessions

# accounts.custom_attributes' marked_for_deletion_reason, and the compliance row's
# reason, of an account whose last member erased themselves.
LAST_MEMBER_ERASED = 'last_member_erased'


def _given(doc, key):
    value = doc.get(key)
    return isinstance(value, str) and bool(value.strip())


def erase_self(conn, queries, config, caller, doc, facts=None):
    """Erase the signed-in ``caller`` (a session, never an integration credential),
    behind the checks of ``doc`` (``password``, ``otp_code``, ``backup_code``).

    Runs its own transaction inside the guessing guard, whose counts stick when a wrong
    password rolls the transaction back.
    """
    kinds = tuple(
        kind
        for kind, sent in (
            ('password', _given(doc, 'password')),
            ('second_factor', _given(doc, 'otp_code') or _given(doc, 'backup_code')),
        )
        if sent
    )
    with guessing.guard(conn, queries, config, caller.id, kinds, facts) as checks:
        with conn.transaction():
            erased = _erase(conn, queries, config, caller, doc, facts, checks)
    deletion.remove_files(config, erased)
    return erased


def _erase(conn, queries, config, caller, doc, facts, checks):
    params = {'user_id': caller.id}
    conn.execute(queries['erasure.lock_accounts'], params)
    conn.execute(queries['erasure.lock_memberships'], params)
    user = conn.execute(queries['mfa.lock_user'], params).fetchone()
    # The caller's session outlived whatever committed while the locks waited (a reset,
    # a lockout, the owner ending sessions): else the 401 of a revoked credential.
    sessions.require_kept(conn, queries, caller.id, caller.token.client)
    blocking = [
        row['account_id']
        for row in conn.execute(queries['erasure.blocking_accounts'], params)
    ]
    if blocking:
        # Before any password check: a refusal for another reason runs no bcrypt.
        raise errors.AdministersAccounts(blocking)
    _check_owner(conn, queries, config, caller, user, doc, checks)
    left = conn.execute(queries['erasure.end_memberships'], params).fetchall()
    _schedule_deletion(
        conn, queries, config, [row['account_id'] for row in left if row['emptied']]
    )
    for row in left:
        # facts=None: no address, device or session of the erased person.
        audit.record(
            conn,
            queries,
            'member_erased',
            account_id=row['account_id'],
            details={'account_left_without_members': row['emptied']},
        )
    erased = deletion.erase_user(conn, queries, config, caller.id)
    # The farewell belongs to nobody (user_id None): the users row is gone. The worker
    # deletes this kind's row once it is sent or given up (outbox.FORGOTTEN_ONCE_SENT).
    security_mail.send(
        conn,
        queries,
        config,
        'account_erased',
        user_id=None,
        to_address=user['email'],
        name=user['name'],
        facts=facts,
        extra={
            'advice': (
                'If this was not you, whoever did it knew your password (and your '
                'second factor, if you had one). The account cannot be restored; you '
                'may sign up again with this address.'
            ),
            'link': (f'{config.frontend_url}/app/auth/signup', 'Sign up again'),
        },
    )
    return erased


def _check_owner(conn, queries, config, caller, user, doc, checks):
    """The recent authentication of SPEC 3.4 for an erasure: the password (and a second
    factor when the user has one) in the body; for a user without a password, a
    session signed in within REAUTH_WINDOW_MINUTES (and the second factor, if any)."""
    password, otp_code, backup_code = (
        doc.get('password'),
        doc.get('otp_code'),
        doc.get('backup_code'),
    )
    if user['encrypted_password'] is None:
        sessions.require_recent_authentication(
            conn, queries, config, caller.id, caller.session_id
        )
        if user['enabled'] and not (
            (_given(doc, 'otp_code') or _given(doc, 'backup_code'))
            and checks.note(
                'second_factor',
                mfa.second_factor(conn, queries, config, user, otp_code, backup_code),
            )
        ):
            raise errors.Unprocessable(message=mfa.INVALID_CODE)
    elif user['enabled']:
        mfa.check_password_and_factor(
            conn, queries, config, user, password, otp_code, backup_code, checks
        )
    else:
        mfa.check_current_password(user, password, checks)


def _schedule_deletion(conn, queries, config, account_ids):
    """An account left with no member is scheduled for deletion (SPEC 20) as an
    administrator's request is (accounts.schedule_deletion), by nobody; one already
    scheduled keeps its date."""
    for account_id in account_ids:
        conn.execute(
            queries['accounts.schedule_deletion'],
            {
                'account_id': account_id,
                'grace_days': config.account_deletion_grace_days,
                'requested_by': None,
                'reason': LAST_MEMBER_ERASED,
            },
        )
