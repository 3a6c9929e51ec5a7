"""Scheduling and cancelling an account's deletion (SPEC 20), as the reference
dashboard's account settings call it (POST .../toggle_deletion).

The schedule is three columns of the account, which the purge reads, and two keys of
its custom_attributes, which the dashboard shows; one statement writes both
(sql/queries/accounts.sql). Until the date the account works as before. Scheduling and
cancelling are each an audit event and a security e-mail to every active administrator:
a deletion someone else scheduled must not go unnoticed, and neither may its
cancellation, which keeps an account its administrators meant to close.
"""

from services import audit
from services import memberships
from services import security_mail

DELETE = 'delete'
UNDELETE = 'undelete'
MANUAL_DELETION = 'manual_deletion'
# What the reference answers (enterprise/api/v1/accounts_controller.rb); a repeated
# request answers the same.
MESSAGES = {
    DELETE: 'Account marked for deletion',
    UNDELETE: 'Account unmarked for deletion',
}


def settings_link(config, account_id):
    """The reference dashboard's account settings page, whose "Delete account" section
    cancels a scheduled deletion."""
    return f'{config.frontend_url}/app/accounts/{account_id}/settings/general'


def toggle(conn, queries, config, account_id, action_type, facts):
    """Schedule (DELETE) or cancel (UNDELETE) the deletion of ``account_id`` for the
    administrator of ``facts``, in the caller's transaction; the answer's message.

    Doing what is already done (scheduling a scheduled account, cancelling where
    nothing is scheduled) changes nothing, and writes and mails nothing.
    """
    memberships.hold_as_administrator(conn, queries, account_id, facts.caller_id)
    if action_type == DELETE:
        row = conn.execute(
            queries['accounts.schedule_deletion'],
            {
                'account_id': account_id,
                'grace_days': config.account_deletion_grace_days,
                'requested_by': facts.caller_id,
                'reason': MANUAL_DELETION,
            },
        ).fetchone()
        event = 'account_deletion_scheduled'
    else:
        row = conn.execute(
            queries['accounts.cancel_deletion'], {'account_id': account_id}
        ).fetchone()
        event = 'account_deletion_cancelled'
    if row is not None:
        _announce(
            conn, queries, config, account_id, event, row['deletion_due_at'], facts
        )
    return MESSAGES[action_type]


def _announce(conn, queries, config, account_id, event, due, facts):
    details = {'deletion_due_at': due}
    if event == 'account_deletion_scheduled':
        details['reason'] = MANUAL_DELETION
    audit.record(
        conn, queries, event, account_id=account_id, facts=facts, details=details
    )
    when = f'{due[:10]} {due[11:19]} UTC' if due else 'not set'
    link = (settings_link(config, account_id), 'Open the account settings')
    cancel = (
        'POST /enterprise/api/v1/accounts/'
        f'{account_id}/toggle_deletion {{"action_type": "undelete"}}'
    )
    if event == 'account_deletion_scheduled':
        lines = [f'By: {facts.caller_email}', f'Deletion on: {when}']
        advice = (
            'Until then the account works as before, and any administrator can cancel '
            'the deletion: in the account settings (link below), section "Delete '
            f'account", or through the API with {cancel}. On that date the account, '
            'its memberships, settings and audit log are deleted for good, and members '
            'who belong to no other account are erased. If you did not expect this, '
            'cancel it and check the audit log of the account.'
        )
    else:
        lines = [f'By: {facts.caller_email}', f'The deletion was due on: {when}']
        advice = (
            'The account stays, with its members and settings. If you and your fellow '
            'administrators expected this, there is nothing to do. If not, schedule '
            'the deletion again from the account settings (link below), and check '
            'the audit log of the account: whoever cancelled it is one of its '
            'administrators.'
        )
    security_mail.send_to_administrators(
        conn,
        queries,
        config,
        event,
        account_id,
        facts,
        {'lines': lines, 'advice': advice, 'link': link},
    )
