"""The reference dashboard's own "Delete account" code against Frontdesk (SPEC 20).

tests/clients/toggle_deletion.mjs loads Chatwoot 4.15's CURRENT dashboard modules from
../shared/clients/chatwoot (byte for byte, with the harness's loader hooks and its
dashboard-kit.mjs) and drives the `accounts` store: toggleDeletion over
dashboard/api/enterprise/account.js, `get`, the record the account settings page reads,
a save of the settings form, the cancellation. The harness is read-only: it is copied
and its pinned packages installed, as its run.sh does for a read-only checkout.
"""

import datetime
import json
import os
import shutil
import subprocess

import pytest

from tests.support import ROOT
from tests.test_chatwoot_clients import as_url
from tests.test_chatwoot_clients import HARNESS

# Once, directly (tests/conftest.py): the subject is the dashboard's own code; the
# statements it reaches are tests/test_deletion_schedule.py's, through PgBouncer too.
pytestmark = pytest.mark.direct_only
DRIVER = ROOT / 'tests' / 'clients' / 'toggle_deletion.mjs'
ENDPOINT = '/enterprise/api/v1/accounts/{}/toggle_deletion'
MARKED = {'message': 'Account marked for deletion'}
UNMARKED = {'message': 'Account unmarked for deletion'}
KEYS = ('marked_for_deletion_at', 'marked_for_deletion_reason')


@pytest.fixture(scope='module')
def harness(tmp_path_factory):
    """A writable copy of the reference clients' harness, its packages installed."""
    assert HARNESS.exists(), (
        f'{HARNESS} is missing: the checkout needs shared/ beside it'
    )
    copy = tmp_path_factory.mktemp('chatwoot') / 'chatwoot'
    shutil.copytree(HARNESS.parent, copy, ignore=shutil.ignore_patterns('node_modules'))
    for path in (copy, *copy.rglob('*')):
        path.chmod(path.stat().st_mode | 0o200)
    subprocess.run(
        [
            'npm',
            'ci',
            '--prefer-offline',
            '--no-audit',
            '--no-fund',
            '--loglevel=error',
        ],
        cwd=copy,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return copy


def drive(harness, base, database_url):
    run = subprocess.run(
        [
            'node',
            '--import',
            (harness / 'harness' / 'register.mjs').as_uri(),
            str(DRIVER),
            str(harness),
            base,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, 'DATABASE_URL': as_url(database_url)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.long(12)
def test_the_dashboards_delete_account_schedules_shows_and_cancels(
    harness, gunicorn_url, direct_database_url, conn
):
    seen = drive(harness, gunicorn_url, direct_database_url)
    assert 'setup_problem' not in seen, seen
    account_id, steps = seen['account_id'], seen['steps']
    endpoint = ENDPOINT.format(account_id)

    assert steps['load']['error'] is None
    assert steps['load']['value']['marked_for_deletion_at'] is None

    # toggleDeletion: the enterprise endpoint, the reference's answer, no error.
    delete = steps['delete']
    assert delete['error'] is None, delete
    assert [
        (c['method'], c['url'], c['status'], c['data']) for c in delete['calls']
    ] == [('POST', endpoint, 200, MARKED)]
    assert delete['value']['is_updating'] is False

    # The settings page after accounts/get: the date and the reason, those of the
    # schedule (cancelled since: its audit event keeps them).
    shown = steps['reload']['value']
    user_id = conn.execute(
        'SELECT id FROM users WHERE email = %s', (seen['email'],)
    ).fetchone()['id']
    scheduled, cancelled = conn.execute(
        'SELECT event, actor_id, details FROM audit_events WHERE account_id = %s'
        " AND event LIKE 'account_deletion_%%' ORDER BY id",
        (account_id,),
    ).fetchall()
    due = scheduled['details']['deletion_due_at']
    assert scheduled == {
        'event': 'account_deletion_scheduled',
        'actor_id': user_id,
        'details': {'deletion_due_at': due, 'reason': 'manual_deletion'},
    }
    assert cancelled == {
        'event': 'account_deletion_cancelled',
        'actor_id': user_id,
        'details': {'deletion_due_at': due},
    }
    assert shown['marked_for_deletion_at'] == due
    assert shown['marked_for_deletion_reason'] == 'manual_deletion'
    assert shown['shown_date'] == due.replace('Z', '.000Z')
    # ACCOUNT_DELETION_GRACE_DAYS (7) from the sign-up, give or take the run.
    delay = datetime.datetime.fromisoformat(due) - datetime.datetime.now(
        datetime.timezone.utc
    )
    assert datetime.timedelta(days=6, hours=23) < delay <= datetime.timedelta(days=7)

    # Saving the settings form while scheduled renames the account, keeps the date.
    saved = steps['save settings']
    assert saved['error'] is None, saved
    assert saved['value']['name'].startswith('Leaving ')
    assert saved['value']['marked_for_deletion_at'] == shown['marked_for_deletion_at']
    # Deleting again keeps it too.
    again = steps['delete again']
    assert again['error'] is None and again['calls'][0]['data'] == MARKED
    assert again['value']['marked_for_deletion_at'] == shown['marked_for_deletion_at']

    # An action the endpoint does not know: the store action throws, as on any error.
    unknown = steps['unknown action']
    assert unknown['error'] is not None
    assert [(c['status'], c['data']) for c in unknown['calls']] == [
        (
            422,
            {
                'message': 'Action type is not included in the list',
                'attributes': ['action_type'],
            },
        )
    ]

    # Cancelled: both keys gone, in the store and after a new page load.
    undelete = steps['undelete']
    assert undelete['error'] is None, undelete
    assert undelete['calls'][0]['url'] == endpoint
    assert undelete['calls'][0]['data'] == UNMARKED
    for name in ('undelete', 'page load'):
        attributes = steps[name]['value']['custom_attributes']
        assert not set(KEYS) & set(attributes), (name, attributes)
    assert conn.execute(
        'SELECT deletion_due_at FROM accounts WHERE id = %s', (account_id,)
    ).fetchone() == {'deletion_due_at': None}

    # Both mailed to the administrator.
    assert [
        row['kind']
        for row in conn.execute(
            'SELECT kind FROM mail_outbox WHERE to_address = %s'
            " AND kind LIKE 'account_deletion_%%' ORDER BY id",
            (seen['email'],),
        )
    ] == ['account_deletion_scheduled', 'account_deletion_cancelled']
