"""Suspending and reactivating a member of an account (SPEC 18).

One transaction each, in this order of locks: the account row (two administrators
cannot suspend each other past the last one), then the membership, then the member's
user row (the lock a sign-in issues its session under,
services/sessions.refuse_locked_out), then their sessions and tokens. A member left
without an active membership is locked out in the same transaction
(services/credentials.lock_out).

The membership comes before the user row because every write of a membership takes
them in that order: the UPDATE locks the membership row, then the trigger that keeps
users.doc (migration 0014) the user row (the member's heartbeat, availability,
auto-offline, set_active_account). The other way round, a suspension and such a write
of the same membership could each hold the row the other waits for, and PostgreSQL
would end one of them as a deadlock (tests/test_suspension.py,
test_a_suspension_waiting_for_the_members_own_membership_write_completes). So:
accounts, then account_users, then users, then user_tokens and the rest; no
transaction may lock a user row and then a membership row of that user.

Every administrator action on an account (a change of it, ending a member's sessions,
revoking a member's token, suspending) starts at the account row and re-reads the
caller's standing there (hold_as_administrator), so one that waited for the caller's
own suspension is refused.
"""

import errors
from services import audit
from services import credentials
from services import mail
from services import security_mail

CANNOT_SUSPEND_SELF = 'You cannot suspend yourself'
LAST_ADMINISTRATOR = 'The last active administrator of the account cannot be suspended'
SUSPENDED = 'suspended'
ACTIVE = 'active'
# status: (audit event and security e-mail, what the mail adds)
ANNOUNCEMENTS = {
    SUSPENDED: (
        'member_suspended',
        'Until an administrator reactivates it, the account answers your requests '
        'with "Your access to this account is suspended". If you think this is a '
        'mistake, ask an administrator of the account.',
    ),
    ACTIVE: (
        'member_reactivated',
        'You can reach the account again. Sessions and tokens that ended with the '
        'suspension stay ended: sign in again, and make new tokens for integrations.',
    ),
}
LOCKED_OUT = (
    'This was your last active account: you were signed out everywhere, your API '
    'access token was replaced, and you cannot sign in until an administrator '
    'reactivates you.'
)


class NotAMember(Exception):
    """The user in the route is not a member of the account (404)."""


def refusal(conn, queries, account_id, user_id):
    """The error to answer when the caller's own write of their membership of
    ``account_id`` (heartbeat, availability, auto-offline, active account) found no
    active row: the access rules saw it active, and a suspension that committed while
    the write waited for the membership row (which a suspension takes first) is the
    403 of SPEC 18; otherwise the membership is gone (404). Only on that path: the
    success path asks nothing more.
    """
    row = conn.execute(
        queries['memberships.own_status'],
        {'account_id': account_id, 'user_id': user_id},
    ).fetchone()
    if row is not None and row['status'] == SUSPENDED:
        return errors.MembershipSuspended()
    return errors.NotFound()


def hold_as_administrator(conn, queries, account_id, caller_id):
    """Before an administrator's action on ``account_id``: take the account row, which
    a suspension takes first, then check the caller is still an active administrator.

    The access rules saw one before the request waited for that row; a suspension of
    the caller that committed meanwhile is the 403 of SPEC 18, and the action is not
    done (SPEC 3.4). The row serialises the account's administrator actions, so it
    comes first, in the order of the module docstring.
    """
    if (
        conn.execute(
            queries['memberships.lock_account'], {'account_id': account_id}
        ).fetchone()
        is None
    ):
        # Purged (SPEC 20) while the request waited for the row: no such account.
        raise errors.NotFound()
    if not conn.execute(
        queries['memberships.still_administrator'],
        {'account_id': account_id, 'user_id': caller_id},
    ).fetchone()['administrator']:
        raise errors.MembershipSuspended()


def set_status(conn, queries, config, account_id, user_id, status, facts):
    """Suspend (``SUSPENDED``) or reactivate (``ACTIVE``) member ``user_id`` of
    ``account_id`` on behalf of the caller of ``facts``, an administrator of it.

    Inside the caller's transaction. Setting the status a membership already has
    changes nothing and announces nothing. Raises NotAMember, or errors for the 422s
    (the caller themselves, the last active administrator). Returns the member as the
    agents list shows them.
    """
    hold_as_administrator(conn, queries, account_id, facts.caller_id)
    params = {'account_id': account_id, 'user_id': user_id}
    conn.execute(queries['memberships.lock_membership'], params)
    conn.execute(queries['users.lock_for_token'], {'user_id': user_id})
    member = conn.execute(queries['memberships.member_for_change'], params).fetchone()
    if member is None:
        raise NotAMember()
    if status == SUSPENDED:
        if (
            member['role'] == 'administrator'
            and member['status'] == ACTIVE
            and member['other_administrators'] == 0
        ):
            raise errors.Unprocessable.field('user_id', LAST_ADMINISTRATOR)
        if user_id == facts.caller_id:
            raise errors.Unprocessable.field('user_id', CANNOT_SUSPEND_SELF)
    changed = conn.execute(
        queries['memberships.set_status'],
        {'account_id': account_id, 'user_id': user_id, 'status': status},
    ).fetchone()
    if changed is not None:
        revoked = (
            credentials.lock_out(conn, queries, user_id)
            if status == SUSPENDED
            else None
        )
        _announce(
            conn, queries, config, account_id, user_id, member, status, revoked, facts
        )
    return conn.execute(
        queries['memberships.agent'],
        {
            'account_id': account_id,
            'user_id': user_id,
            'avatar_url_prefix': config.avatar_url_prefix,
        },
    ).fetchone()['doc']


def _announce(
    conn, queries, config, account_id, user_id, member, status, revoked, facts
):
    """The audit event and the member's e-mail of a suspension or reactivation."""
    event, advice = ANNOUNCEMENTS[status]
    locked_out = revoked is not None
    audit.record(
        conn,
        queries,
        event,
        subject_id=user_id,
        account_id=account_id,
        facts=facts,
        details={'locked_out': locked_out, 'sessions_ended': revoked or 0},
    )
    lines = [
        mail.FromRequest('Account: ', member['account_name']),
        f'By: {facts.caller_email}',
    ]
    if locked_out:
        lines.append(LOCKED_OUT)
    security_mail.send(
        conn,
        queries,
        config,
        event,
        user_id=user_id,
        to_address=member['email'],
        name=member['name'],
        facts=facts,
        extra={'lines': lines, 'advice': advice},
    )


def list_agents(conn, queries, config, account_id):
    """The members of the account as its administrators see them (JSON text)."""
    return conn.execute(
        queries['memberships.agents'],
        {'account_id': account_id, 'avatar_url_prefix': config.avatar_url_prefix},
    ).fetchone()['doc']
