"""Scheduling and cancelling an account's deletion (SPEC 20):
POST /enterprise/api/v1/accounts/{id}/toggle_deletion, as the reference dashboard's
account settings call it; the schedule in the account's columns and in the
custom_attributes the dashboard reads; an account PUT that can neither set nor clear
it; the audit events and the mail to every administrator. The dashboard's own code
drives it in test_deletion_schedule_client.py."""

import datetime
import re
import threading

import psycopg
from psycopg.rows import dict_row
import pytest

from services import deletion
from tests.smtp_server import deliver
from tests.support.database import waiting_for
from tests.test_access_tokens import bearer
from tests.test_access_tokens import new_token

MARKED = {'message': 'Account marked for deletion'}
UNMARKED = {'message': 'Account unmarked for deletion'}
ROLE = {'error': 'You are not authorized to do this action'}
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
NOT_FOUND = {'error': 'Resource could not be found'}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
SUSPENDED = {
    'error': 'Your access to this account is suspended',
    'error_code': 'membership_suspended',
}
SCHEDULED = 'An account is scheduled for deletion'
CANCELLED = "An account's scheduled deletion was cancelled"
ISO_SECONDS = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ')
KEYS = ('marked_for_deletion_at', 'marked_for_deletion_reason')


def url(account_id):
    return f'/enterprise/api/v1/accounts/{account_id}/toggle_deletion'


def toggle(testapp, user, action_type, account_id=None, status=200):
    return testapp.post_json(
        url(account_id or user.account_id),
        {'action_type': action_type},
        headers=user.headers,
        status=status,
    )


def schedule(conn, account_id):
    return conn.execute(
        'SELECT deletion_due_at, deletion_requested_at, deletion_requested_by,'
        ' custom_attributes FROM accounts WHERE id = %s',
        (account_id,),
    ).fetchone()


def attributes(testapp, user):
    return testapp.get(
        f'/api/v1/accounts/{user.account_id}', headers=user.headers
    ).json['custom_attributes']


def events(conn, account_id):
    return conn.execute(
        'SELECT event, actor_id, account_id, details FROM audit_events'
        " WHERE account_id = %s AND event LIKE 'account_deletion_%%' ORDER BY id",
        (account_id,),
    ).fetchall()


def iso(moment):
    return moment.astimezone(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def mails(inbox, base_env, address, subject):
    deliver(base_env, inbox.port)
    return [item for item in inbox.to(address) if item.message['Subject'] == subject]


def test_delete_schedules_the_account_grace_days_from_now(testapp, admin, conn):
    testapp.patch_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'timezone': 'Europe/Paris'},
        headers=admin.headers,
    )
    assert toggle(testapp, admin, 'delete').json == MARKED

    row = schedule(conn, admin.account_id)
    # Whole seconds, ACCOUNT_DELETION_GRACE_DAYS (7) after the request.
    due, asked = row['deletion_due_at'], row['deletion_requested_at']
    assert due.microsecond == 0
    assert datetime.timedelta(days=7) - datetime.timedelta(seconds=1) < due - asked
    assert due - asked <= datetime.timedelta(days=7)
    assert row['deletion_requested_by'] == admin.id
    # The account JSON the dashboard reads: the same instant, as Ruby's Time#iso8601.
    shown = attributes(testapp, admin)
    assert shown == {
        'timezone': 'Europe/Paris',
        'marked_for_deletion_at': iso(due),
        'marked_for_deletion_reason': 'manual_deletion',
    }
    assert ISO_SECONDS.fullmatch(shown['marked_for_deletion_at'])


@pytest.mark.parametrize('days', [1, 30])
def test_the_grace_period_is_the_setting(make_testapp, admin, conn, days):
    app = make_testapp(ACCOUNT_DELETION_GRACE_DAYS=str(days))
    toggle(app, admin, 'delete')
    row = schedule(conn, admin.account_id)
    gap = row['deletion_due_at'] - row['deletion_requested_at']
    assert datetime.timedelta(days=days, seconds=-1) < gap
    assert gap <= datetime.timedelta(days=days)


def test_a_repeated_delete_keeps_the_date_and_mails_nobody_again(
    testapp, admin, conn, inbox, base_env
):
    toggle(testapp, admin, 'delete')
    # As if it had been scheduled two days ago: a second request must not move it.
    conn.execute(
        "UPDATE accounts SET deletion_due_at = deletion_due_at - interval '2 days',"
        " deletion_requested_at = deletion_requested_at - interval '2 days',"
        ' custom_attributes = custom_attributes || jsonb_build_object('
        "'marked_for_deletion_at', to_char((deletion_due_at - interval '2 days')"
        ' AT TIME ZONE \'UTC\', \'YYYY-MM-DD"T"HH24:MI:SS"Z"\')) WHERE id = %s',
        (admin.account_id,),
    )
    before = schedule(conn, admin.account_id)
    assert toggle(testapp, admin, 'delete').json == MARKED
    assert schedule(conn, admin.account_id) == before
    assert attributes(testapp, admin)['marked_for_deletion_at'] == iso(
        before['deletion_due_at']
    )
    assert [event['event'] for event in events(conn, admin.account_id)] == [
        'account_deletion_scheduled'
    ]
    assert len(mails(inbox, base_env, admin.email, SCHEDULED)) == 1


def test_undelete_removes_the_schedule_and_keeps_the_rest(testapp, admin, conn):
    testapp.patch_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'industry': 'Retail'},
        headers=admin.headers,
    )
    toggle(testapp, admin, 'delete')
    assert toggle(testapp, admin, 'undelete').json == UNMARKED
    row = schedule(conn, admin.account_id)
    assert (
        row['deletion_due_at'],
        row['deletion_requested_at'],
        row['deletion_requested_by'],
    ) == (None, None, None)
    assert attributes(testapp, admin) == {'industry': 'Retail'}
    # Nothing scheduled: the same answer, and nothing written.
    assert toggle(testapp, admin, 'undelete').json == UNMARKED
    assert [event['event'] for event in events(conn, admin.account_id)] == [
        'account_deletion_scheduled',
        'account_deletion_cancelled',
    ]
    # And it can be scheduled again, from now.
    toggle(testapp, admin, 'delete')
    assert schedule(conn, admin.account_id)['deletion_requested_by'] == admin.id


def test_keys_without_a_schedule_are_removed_by_undelete(testapp, admin, conn):
    """Data from elsewhere: the dashboard would show the keys as a schedule."""
    conn.execute(
        'UPDATE accounts SET custom_attributes = %s::jsonb WHERE id = %s',
        (
            '{"marked_for_deletion_at": "2026-01-01T00:00:00Z", "a": 1}',
            admin.account_id,
        ),
    )
    toggle(testapp, admin, 'undelete')
    assert attributes(testapp, admin) == {'a': 1}


def test_the_account_works_as_before_during_the_grace_period(testapp, admin, make_user):
    agent = make_user(account_id=admin.account_id)
    agent.account_id = admin.account_id
    toggle(testapp, admin, 'delete')
    account = f'/api/v1/accounts/{admin.account_id}'
    assert testapp.get(account, headers=agent.headers).json['custom_attributes'][
        'marked_for_deletion_reason'
    ] == ('manual_deletion')
    testapp.post(account + '/update_active_at', headers=agent.headers, status=200)
    renamed = testapp.patch_json(account, {'name': 'Still here'}, headers=admin.headers)
    assert renamed.json['name'] == 'Still here'
    assert set(KEYS) <= set(renamed.json['custom_attributes'])
    profile = testapp.get('/api/v1/profile', headers=agent.headers).json
    assert [entry['id'] for entry in profile['accounts']] == [admin.account_id]


# An account PUT can neither set nor clear the schedule.


def test_a_put_cannot_schedule_a_deletion(testapp, admin, conn):
    forged = {
        'marked_for_deletion_at': '2026-01-01T00:00:00Z',
        'marked_for_deletion_reason': 'manual_deletion',
    }
    for method in ('put_json', 'patch_json'):
        answer = getattr(testapp, method)(
            f'/api/v1/accounts/{admin.account_id}',
            {'name': 'Acme', 'custom_attributes': forged, **forged},
            headers=admin.headers,
        )
        assert not set(KEYS) & set(answer.json['custom_attributes'])
    assert not set(KEYS) & set(attributes(testapp, admin))
    assert schedule(conn, admin.account_id)['deletion_due_at'] is None


def test_a_put_cannot_cancel_or_move_a_scheduled_deletion(testapp, admin, conn):
    toggle(testapp, admin, 'delete')
    before = schedule(conn, admin.account_id)
    shown = attributes(testapp, admin)
    account = f'/api/v1/accounts/{admin.account_id}'
    for body in (
        {'custom_attributes': {}},
        {'custom_attributes': None},
        {
            'custom_attributes': {
                'marked_for_deletion_at': '2099-01-01T00:00:00Z',
                'marked_for_deletion_reason': 'other',
            }
        },
        {'marked_for_deletion_at': None, 'marked_for_deletion_reason': None},
        {'action_type': 'undelete'},
    ):
        testapp.put_json(account, body, headers=admin.headers, status=200)
    # Other custom attributes change; the schedule stays.
    answer = testapp.put_json(
        account,
        {'timezone': 'Asia/Tokyo', 'industry': 'Retail', 'company_size': '1-10'},
        headers=admin.headers,
    )
    assert answer.json['custom_attributes'] == {
        **shown,
        'timezone': 'Asia/Tokyo',
        'industry': 'Retail',
        'company_size': '1-10',
    }
    after = schedule(conn, admin.account_id)
    assert (
        after['deletion_due_at'],
        after['deletion_requested_at'],
        after['deletion_requested_by'],
    ) == (
        before['deletion_due_at'],
        before['deletion_requested_at'],
        before['deletion_requested_by'],
    )


# The body.


@pytest.mark.parametrize(
    'body, message',
    [
        ({'action_type': 'destroy'}, 'Action type is not included in the list'),
        ({'action_type': 'DELETE'}, 'Action type is not included in the list'),
        ({'action_type': ['delete']}, 'Action type must be a string'),
        ({}, "Action type can't be blank"),
    ],
)
def test_another_action_type_is_a_422(testapp, admin, conn, body, message):
    answer = testapp.post_json(
        url(admin.account_id), body, headers=admin.headers, status=422
    )
    assert answer.json == {'message': message, 'attributes': ['action_type']}
    assert schedule(conn, admin.account_id)['deletion_due_at'] is None


def test_a_form_body_and_the_json_suffix_work_as_for_every_route(testapp, admin, conn):
    testapp.post(
        url(admin.account_id) + '.json',
        'action_type=delete',
        headers=admin.headers,
        content_type='application/x-www-form-urlencoded',
        status=200,
    )
    assert schedule(conn, admin.account_id)['deletion_requested_by'] == admin.id


# Who may.


def test_only_administrators_with_a_session_may(testapp, admin, make_user, conn):
    agent = make_user(account_id=admin.account_id)
    agent.account_id = admin.account_id
    stranger = make_user()
    target = url(admin.account_id)
    body = {'action_type': 'delete'}
    assert testapp.post_json(target, body, status=401).json == UNAUTHENTICATED
    assert (
        testapp.post_json(target, body, headers=agent.headers, status=401).json == ROLE
    )
    assert (
        testapp.post_json(target, body, headers=stranger.headers, status=404).json
        == NOT_FOUND
    )
    for headers in (
        {'api_access_token': admin.access_token},
        bearer(
            new_token(
                testapp,
                admin,
                scopes=['account:write', 'profile:write'],
            )
        ),
    ):
        answer = testapp.post_json(target, body, headers=headers, status=403)
        assert answer.json == NEEDS_SESSION
    # An unknown account is the 404 of one the caller is not a member of.
    testapp.post_json(url(2**62), body, headers=admin.headers, status=404)
    assert schedule(conn, admin.account_id)['deletion_due_at'] is None


def test_a_suspended_administrator_may_not(testapp, admin, make_user, conn):
    fellow = make_user(account_id=admin.account_id, role='administrator')
    conn.execute(
        "UPDATE account_users SET status = 'suspended'"
        ' WHERE account_id = %s AND user_id = %s',
        (admin.account_id, fellow.id),
    )
    answer = testapp.post_json(
        url(admin.account_id),
        {'action_type': 'delete'},
        headers=fellow.headers,
        status=403,
    )
    assert answer.json == SUSPENDED
    assert schedule(conn, admin.account_id)['deletion_due_at'] is None


# Audit and mail.


def test_both_are_audited(testapp, admin, conn):
    toggle(testapp, admin, 'delete')
    due = iso(schedule(conn, admin.account_id)['deletion_due_at'])
    toggle(testapp, admin, 'undelete')
    assert events(conn, admin.account_id) == [
        {
            'event': 'account_deletion_scheduled',
            'actor_id': admin.id,
            'account_id': admin.account_id,
            'details': {'deletion_due_at': due, 'reason': 'manual_deletion'},
        },
        {
            'event': 'account_deletion_cancelled',
            'actor_id': admin.id,
            'account_id': admin.account_id,
            'details': {'deletion_due_at': due},
        },
    ]
    # In the account's audit log, which its administrators read.
    log = testapp.get(
        f'/api/v1/accounts/{admin.account_id}/audit_events',
        {'event': 'account_deletion_scheduled'},
        headers=admin.headers,
    ).json['events']
    assert [event['details']['deletion_due_at'] for event in log] == [due]


def test_every_administrator_is_mailed_the_date_and_how_to_cancel(
    testapp, admin, make_user, conn, inbox, base_env
):
    conn.execute(
        'UPDATE accounts SET name = %s WHERE id = %s',
        ('Visit evil.example/login\u202e now', admin.account_id),
    )
    fellow = make_user(account_id=admin.account_id, role='administrator')
    agent = make_user(account_id=admin.account_id)
    suspended = make_user(account_id=admin.account_id, role='administrator')
    conn.execute(
        "UPDATE account_users SET status = 'suspended' WHERE user_id = %s",
        (suspended.id,),
    )
    toggle(testapp, admin, 'delete')
    due = schedule(conn, admin.account_id)['deletion_due_at']
    when = due.astimezone(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')
    settings = f'http://frontdesk.test/app/accounts/{admin.account_id}/settings/general'
    for user in (admin, fellow):
        (message,) = mails(inbox, base_env, user.email, SCHEDULED)
        text = message.text
        assert f'Deletion on: {when}' in text and f'By: {admin.email}' in text
        assert 'Account: Visit evil.example/login now' in text
        assert f'Open the account settings: {settings}' in text
        assert 'section "Delete account"' in text
        assert (
            f'POST /enterprise/api/v1/accounts/{admin.account_id}/toggle_deletion'
            ' {"action_type": "undelete"}'
        ) in text
        assert 'evil.example/login' not in message.html
        assert f'href="{settings}"' in message.html
    for user in (agent, suspended):
        assert mails(inbox, base_env, user.email, SCHEDULED) == []

    toggle(testapp, fellow, 'undelete', account_id=admin.account_id)
    for user in (admin, fellow):
        (message,) = mails(inbox, base_env, user.email, CANCELLED)
        assert f'The deletion was due on: {when}' in message.text
        assert f'By: {fellow.email}' in message.text
        assert 'schedule the deletion again' in message.text
    for user in (agent, suspended):
        assert mails(inbox, base_env, user.email, CANCELLED) == []


def test_a_request_that_waited_for_the_purge_finds_the_account_gone(
    testapp, admin, make_account, conn, config, queries, direct_database_url
):
    """An administrator's request let in while the account was being purged waits for
    the account row (memberships.hold_as_administrator); once the purge commits the
    account is gone: the 404 of an account one is not a member of, not the 403 of a
    suspension. (The administrator belongs to another account, so is not erased.)"""
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role)'
        " VALUES (%s, %s, 'agent')",
        (make_account(), admin.id),
    )
    toggle(testapp, admin, 'delete')
    answers = []
    with psycopg.connect(direct_database_url, row_factory=dict_row) as purge:
        assert deletion.purge_account(purge, queries, config, admin.account_id) == []
        thread = threading.Thread(
            target=lambda: answers.append(
                toggle(testapp, admin, 'undelete', status='*')
            )
        )
        thread.start()
        while not waiting_for(conn, purge.info.backend_pid):
            assert thread.is_alive(), answers
        purge.commit()
    thread.join()
    assert [(answer.status_int, answer.json) for answer in answers] == [
        (404, NOT_FOUND)
    ]
