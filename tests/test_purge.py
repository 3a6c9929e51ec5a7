"""The purge of scheduled accounts (SPEC 20): ``manage.py purge-accounts`` and the mail
worker's hourly run, one transaction per account.

Accounts are scheduled here by writing what the dashboard's toggle writes (the 0021
columns and the two custom_attributes keys), with a date already past. Concurrency and
crashes are made deterministic with row locks the test holds: a purge blocks at a known
point (pg_stat_activity says when), and is let go or killed there.
"""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psycopg
from psycopg.rows import dict_row
import pytest

import config as config_module
import db
from services import deletion
from services import outbox
from tests.smtp_server import deliver
from tests.smtp_server import deliver_mail_command
from tests.smtp_server import smtp_env
from tests.support import ROOT
from tests.support.database import waiting_for
from tests.support.erasure import Person
from tests.support.erasure import traces
from tests.support.servers import free_port
from tests.support.users import unique_email
from tests.test_avatars import encode
from tests.test_avatars import picture
from tests.test_avatars import upload
from tests.test_mail import enqueue
from tests.test_mfa import enable
from tests.test_suspension import reactivate
from tests.test_suspension import suspend

WAIT_SECONDS = 30


def schedule(conn, account_id, requested_by=None, reason='manual_deletion', ago=1):
    """Schedule ``account_id``'s deletion with a date ``ago`` minutes past, as the
    dashboard's toggle would have a week before."""
    conn.execute(
        'UPDATE accounts'
        '   SET deletion_due_at = now() - make_interval(mins => %(ago)s),'
        "       deletion_requested_at = now() - interval '7 days',"
        '       deletion_requested_by = %(by)s::bigint,'
        '       custom_attributes = custom_attributes || jsonb_build_object('
        "           'marked_for_deletion_at',"
        '           iso8601(now() - make_interval(mins => %(ago)s)),'
        "           'marked_for_deletion_reason', %(reason)s::text)"
        ' WHERE id = %(id)s',
        {'ago': ago, 'by': requested_by, 'reason': reason, 'id': account_id},
    )


def purge(config, queries):
    """purge_due in this process, on a connection of its own."""
    with db.connect(config, autocommit=True, row_factory=dict_row) as own:
        return deletion.purge_due(config, queries, own)


def purge_command(env):
    """A real ``manage.py purge-accounts`` (not waited for)."""
    return subprocess.Popen(
        [sys.executable, 'manage.py', 'purge-accounts'],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(proc):
    """(stdout, stderr) of a purge-accounts that must have succeeded; the counts."""
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert 'Traceback' not in stderr
    counts = stdout.split('purge-accounts: ')[1].split()
    return int(counts[0]), int(counts[3])


def due_count(conn):
    return conn.execute(
        'SELECT count(*) AS n FROM accounts WHERE deletion_due_at <= now()'
    ).fetchone()['n']


def member_of(conn, user_id):
    return sorted(
        row['account_id']
        for row in conn.execute(
            'SELECT account_id FROM account_users WHERE user_id = %s', (user_id,)
        )
    )


def exists(conn, table, column, value):
    return (
        conn.execute(
            f'SELECT count(*) AS n FROM {table} WHERE {column} = %s', (value,)
        ).fetchone()['n']
        > 0
    )


def compliance_row(conn, account_id):
    return conn.execute(
        'SELECT account_id, deleted_at, scheduled_at, scheduled_by, reason'
        ' FROM account_deletions WHERE account_id = %s',
        (account_id,),
    ).fetchone()


def holding(direct_database_url, statement, params):
    """A connection of the test's own, in a transaction that holds the row locks of
    ``statement`` (a SELECT ... FOR UPDATE) until it is rolled back."""
    holder = psycopg.connect(direct_database_url, row_factory=dict_row)
    rows = holder.execute(statement, params).fetchall()
    assert rows, statement
    return holder


def blocked_by(conn, holder, count=1):
    """The backends held up by ``holder``'s locks, once there are ``count``: those
    that wait for it, and those that wait behind them (a second waiter for a row lock
    waits for the first, which holds the row's place in the queue)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        pids = waiting_for(conn, holder.info.backend_pid)
        pids += [later for pid in pids for later in waiting_for(conn, pid)]
        if len(pids) >= count or time.monotonic() > deadline:
            assert len(pids) == count, pids
            return pids
        time.sleep(0.02)


def gone_from_the_server(conn, pids):
    """Wait until the backends ``pids`` (of a killed purge) have ended: what they held
    is then let go."""
    deadline = time.monotonic() + WAIT_SECONDS
    while conn.execute(
        'SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY (%s)', (pids,)
    ).fetchone()['n']:
        assert time.monotonic() < deadline, pids
        time.sleep(0.02)


def killed_while_waiting(conn, base_env, direct_database_url, statement, params):
    """Start a purge, let it block on the row locks ``statement`` takes (held by the
    test), SIGKILL it there, and return once the server has ended its backend."""
    holder = holding(direct_database_url, statement, params)
    proc = purge_command(base_env)
    try:
        pids = blocked_by(conn, holder)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        holder.rollback()
        holder.close()
    gone_from_the_server(conn, pids)


def state_of_account(conn, account_id):
    """What a purge changes about one account, for 'whole or gone'."""
    return {
        'account': exists(conn, 'accounts', 'id', account_id),
        'memberships': conn.execute(
            'SELECT count(*) AS n FROM account_users WHERE account_id = %s',
            (account_id,),
        ).fetchone()['n'],
        'audit': exists(conn, 'audit_events', 'account_id', account_id),
        'compliance': compliance_row(conn, account_id) is not None,
    }


def unique_name(prefix):
    return f'{prefix} {uuid.uuid4().hex}'


def signed_in(testapp, user):
    """A password sign-in of ``user`` through the API: a session with an address and a
    device, and its audit row."""
    answer = testapp.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': user.password},
        headers={'User-Agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0'},
    )
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


def footprint(testapp, conn, user, account_ids):
    """Leave what a person who uses Frontdesk leaves: a session, an avatar file, a
    personal access token limited to ``account_ids``, MFA with recovery codes, a wrong
    password (a guessing counter and an audit row), a reset link and its mail. Returns
    the avatar's file name."""
    signed_in(testapp, user)
    upload(testapp, user, encode(picture(), 'PNG'))
    testapp.post_json(
        '/api/v1/profile/access_tokens',
        {
            'name': 'CI',
            'scopes': ['profile:read', 'account:read'],
            'expires_in_days': 30,
            'account_ids': account_ids,
        },
        headers=user.headers,
        status=201,
    )
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': 'wrong 1'}, status=401
    )
    testapp.post_json('/auth/password', {'email': user.email})
    enable(testapp, user)
    return conn.execute(
        'SELECT avatar FROM users WHERE id = %s', (user.id,)
    ).fetchone()['avatar']


def test_a_member_left_with_no_account_is_erased_and_nothing_names_them(
    testapp, conn, config, queries, base_env, avatar_dir, make_account, make_user, inbox
):
    account_id = make_account(unique_name('Gone'))
    name = unique_name('Purged')
    person = make_user(account_id=account_id, role='administrator', name=name)
    colleague = make_user(account_id=account_id)
    # Audit rows where they act on someone else, and someone acts on them.
    person.account_id = account_id
    suspend(testapp, person, colleague.id)
    reactivate(testapp, person, colleague.id)
    # A new address: both addresses get mail, the old one a link. Enabling MFA (in
    # footprint) then voids the request: nothing ties the new address to them but
    # their mail to it.
    new_address = unique_email('moved')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': new_address}}, headers=person.headers
    )
    avatar = footprint(testapp, conn, person, [account_id])
    assert_voided(conn, person.id, new_address)
    deliver(base_env, inbox.port)  # what has been sent keeps no body, as in service
    assert inbox.to(person.email) and inbox.to(new_address)
    assert (avatar_dir / avatar).exists()
    schedule(conn, account_id, requested_by=person.id)
    # They also asked for another account's deletion, due next week: it stays
    # scheduled, without naming them.
    later_id = make_account()
    schedule(conn, later_id, requested_by=person.id, ago=-7 * 24 * 60)

    purged = purge(config, queries)

    assert purged['accounts'] >= 1 and purged['people'] >= 2
    assert not exists(conn, 'users', 'id', person.id)
    assert not exists(conn, 'users', 'id', colleague.id)
    assert not (avatar_dir / avatar).exists()
    row = compliance_row(conn, account_id)
    # Who asked is gone with them; when it was asked and why stay.
    assert row['scheduled_by'] is None and row['reason'] == 'manual_deletion'
    assert row['scheduled_at'] < row['deleted_at']
    assert conn.execute(
        'SELECT deletion_due_at > now() AS later, deletion_requested_by'
        ' FROM accounts WHERE id = %s',
        (later_id,),
    ).fetchone() == {'later': True, 'deletion_requested_by': None}
    found = traces(
        conn, Person(person.id, (person.email, new_address), name, avatar), avatar_dir
    )
    assert found == []
    # Their sessions, tokens and links no longer open anything.
    testapp.get('/api/v1/profile', headers=person.headers, status=401)
    testapp.get(
        '/api/v1/profile', headers={'api_access_token': person.access_token}, status=401
    )


def assert_voided(conn, user_id, address):
    """``user_id``'s change to ``address`` was voided: no pending address, no link to
    it; the mail of the request is still queued or sent, and theirs."""
    assert conn.execute(
        'SELECT unconfirmed_email FROM users WHERE id = %s', (user_id,)
    ).fetchone() == {'unconfirmed_email': None}
    assert not exists(conn, 'one_time_tokens', 'email', address)
    assert [
        (row['kind'], row['user_id'])
        for row in conn.execute(
            'SELECT kind, user_id FROM mail_outbox WHERE to_address = %s', (address,)
        )
    ] == [('confirmation', user_id)]


def test_a_voided_address_changes_confirmation_mail_goes_with_the_person(
    testapp, conn, config, queries, make_account, make_user
):
    account_id = make_account()
    person = make_user(account_id=account_id)
    new_address = unique_email('never-confirmed')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': new_address}}, headers=person.headers
    )
    enable(testapp, person)  # a credential change: the request is void
    assert_voided(conn, person.id, new_address)
    schedule(conn, account_id)

    purge(config, queries)

    assert not exists(conn, 'users', 'id', person.id)
    assert not exists(conn, 'mail_outbox', 'to_address', new_address)


def test_erasing_an_address_leaves_mail_to_or_naming_a_longer_one_alone(
    conn, config, queries, make_account, make_user
):
    """a@b.example is not named by aa@b.example nor by a@b.example.org; it is by
    "<A@B.example>" and by "a@b.example." ending a sentence."""
    account_id = make_account()
    person = make_user(account_id=account_id)
    longer = f'a{person.email}'
    # Nobody's (user_id NULL), as every row queued before the outbox named its owner.
    kept = [
        enqueue(conn, queries, longer),
        enqueue(conn, queries, unique_email('other'), body=f'By: {longer}'),
        enqueue(conn, queries, unique_email('other'), body=f'By: {person.email}.org'),
        enqueue(conn, queries, unique_email('other'), body=f'x{person.email}x'),
    ]
    gone = [
        enqueue(conn, queries, person.email),
        enqueue(conn, queries, unique_email('other'), body=f'By: {person.email}.'),
        enqueue(conn, queries, unique_email('other'), body=f'<{person.email.upper()}>'),
    ]
    schedule(conn, account_id)

    purge(config, queries)

    assert not exists(conn, 'users', 'id', person.id)
    assert [
        row['id']
        for row in conn.execute(
            'SELECT id FROM mail_outbox WHERE id = ANY (%s) ORDER BY id',
            (kept + gone,),
        )
    ] == kept


def test_mail_of_someone_else_to_an_address_now_the_erased_persons_stays(
    conn, config, queries, make_account, make_user
):
    account_id = make_account()
    person, earlier = make_user(account_id=account_id), make_user()
    # Sent to the address when it was to be the other user's, who never confirmed it.
    theirs = enqueue(conn, queries, person.email, user_id=earlier.id)
    schedule(conn, account_id)

    purge(config, queries)

    assert not exists(conn, 'users', 'id', person.id)
    assert exists(conn, 'mail_outbox', 'id', theirs)


def test_a_member_of_another_account_keeps_everything_but_this_membership(
    testapp, conn, config, queries, avatar_dir, make_account, make_user
):
    gone_id, kept_id = make_account(), make_account()
    member = make_user(account_id=gone_id)
    kept_admin = make_user(account_id=kept_id, role='administrator')
    kept_admin.account_id = kept_id
    conn.execute(
        'INSERT INTO account_users (account_id, user_id) VALUES (%s, %s)',
        (kept_id, member.id),
    )
    avatar = footprint(testapp, conn, member, [gone_id, kept_id])
    testapp.post_json(
        '/api/v1/profile/access_tokens',
        {
            'name': 'Only the gone one',
            'scopes': ['account:read'],
            'expires_in_days': 30,
            'account_ids': [gone_id],
        },
        headers=member.headers,
        status=201,
    )
    suspend(testapp, kept_admin, member.id)
    reactivate(testapp, kept_admin, member.id)
    before = {
        table: conn.execute(
            f'SELECT count(*) AS n FROM {table} WHERE user_id = %s', (member.id,)
        ).fetchone()['n']
        for table in (
            'user_tokens',
            'one_time_tokens',
            'mfa_recovery_codes',
            'personal_access_tokens',
        )
    }
    user_before = conn.execute(
        'SELECT email, name, otp_secret, mfa_enabled_at, avatar, access_token'
        ' FROM users WHERE id = %s',
        (member.id,),
    ).fetchone()
    kept_audit = conn.execute(
        'SELECT id FROM audit_events WHERE account_id = %s ORDER BY id', (kept_id,)
    ).fetchall()
    schedule(conn, gone_id, requested_by=member.id)

    purge(config, queries)

    assert compliance_row(conn, gone_id)['scheduled_by'] == member.id
    assert member_of(conn, member.id) == [kept_id]
    assert {
        table: conn.execute(
            f'SELECT count(*) AS n FROM {table} WHERE user_id = %s', (member.id,)
        ).fetchone()['n']
        for table in before
    } == before
    assert (
        conn.execute(
            'SELECT email, name, otp_secret, mfa_enabled_at, avatar, access_token'
            ' FROM users WHERE id = %s',
            (member.id,),
        ).fetchone()
        == user_before
    )
    assert (avatar_dir / avatar).exists()
    # The grants to the purged account went; a token limited to it alone is limited
    # to no account now (never to every account).
    assert sorted(
        tuple(row['account_ids'])
        for row in conn.execute(
            'SELECT account_ids FROM personal_access_tokens WHERE user_id = %s',
            (member.id,),
        )
    ) == [(), (kept_id,)]
    assert (
        conn.execute(
            'SELECT id FROM audit_events WHERE account_id = %s ORDER BY id', (kept_id,)
        ).fetchall()
        == kept_audit
    )
    assert not exists(conn, 'audit_events', 'account_id', gone_id)
    # They still sign in, and their session still works.
    testapp.get('/api/v1/profile', headers=member.headers, status=200)


def test_the_instance_administrator_is_mailed_the_account_and_when_no_names(
    conn, queries, base_env, make_account, make_user, inbox
):
    account_name = unique_name('Company')
    account_id = make_account(account_name)
    name = unique_name('Someone')
    member = make_user(account_id=account_id, role='administrator', name=name)
    schedule(conn, account_id, requested_by=member.id)
    admin_address = unique_email('instance-admin')
    config = config_module.load(
        smtp_env(base_env, inbox.port, INSTANCE_ADMIN_EMAIL=admin_address.upper())
    )

    purge(config, queries)
    deliver(base_env, inbox.port)

    deleted_at = compliance_row(conn, account_id)['deleted_at']
    message = inbox.one_to(admin_address)
    assert message.message['Subject'] == f'Account {account_id} was deleted'
    when = deleted_at.strftime('%Y-%m-%d %H:%M:%S UTC')
    assert f'Account {account_id} was deleted on {when}' in message.text
    for named in (account_name, name, member.email, member.email.split('@')[0]):
        assert named.lower() not in (message.text + message.html).lower()


def test_without_instance_admin_email_no_mail_is_queued(
    conn, config, queries, make_account, make_user
):
    assert config.instance_admin_email is None
    account_id = make_account()
    make_user(account_id=account_id)
    last = conn.execute('SELECT max(id) AS id FROM mail_outbox').fetchone()['id'] or 0
    schedule(conn, account_id)
    purge(config, queries)
    assert compliance_row(conn, account_id)['reason'] == 'manual_deletion'
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM mail_outbox'
            " WHERE id > %s AND kind = 'account_purged'",
            (last,),
        ).fetchone()['n']
        == 0
    )


def test_an_account_not_yet_due_or_unscheduled_stays(
    conn, config, queries, make_account, make_user
):
    later, never = make_account(), make_account()
    for account_id in (later, never):
        make_user(account_id=account_id)
    schedule(conn, later, ago=-60)  # due in an hour
    purge(config, queries)
    for account_id in (later, never):
        assert state_of_account(conn, account_id)['account']
        assert compliance_row(conn, account_id) is None


def test_the_reason_is_the_schedules_and_a_last_members_erasure_has_no_requester(
    conn, config, queries, make_account
):
    manual, erased, unknown = make_account(), make_account(), make_account()
    schedule(conn, manual, reason='manual_deletion')
    schedule(conn, erased, reason='last_member_erased')
    schedule(conn, unknown, reason='inactivity')
    purge(config, queries)
    assert [compliance_row(conn, a)['reason'] for a in (manual, erased, unknown)] == [
        'manual_deletion',
        'last_member_erased',
        'last_member_erased',  # nobody asked: no requester
    ]


# --- two purges at once -----------------------------------------------------------


def test_two_purges_at_once_delete_each_account_once(
    conn, base_env, make_account, make_user
):
    accounts = [make_account() for _ in range(8)]
    for account_id in accounts:
        make_user(account_id=account_id)
        schedule(conn, account_id)
    due = due_count(conn)
    purges = [purge_command(base_env) for _ in range(2)]
    counts = [finished(proc) for proc in purges]
    assert sum(accounts for accounts, _ in counts) == due
    for account_id in accounts:
        assert state_of_account(conn, account_id) == {
            'account': False,
            'memberships': 0,
            'audit': False,
            'compliance': True,
        }


def test_a_second_purge_skips_the_account_the_first_holds_and_does_the_rest(
    conn, base_env, direct_database_url, make_account, make_user
):
    accounts = [make_account() for _ in range(4)]
    members = [make_user(account_id=account_id) for account_id in accounts]
    for minutes, account_id in zip((40, 30, 20, 10), accounts):
        schedule(conn, account_id, ago=minutes)
    due = due_count(conn)
    # The first purge takes the first account due, then waits for its member.
    holder = holding(
        direct_database_url,
        'SELECT id FROM users WHERE id = %s FOR UPDATE',
        (members[0].id,),
    )
    first = purge_command(base_env)
    try:
        blocked_by(conn, holder)
        second = purge_command(base_env)
        assert finished(second) == (due - 1, due - 1)
    finally:
        holder.rollback()
        holder.close()
    assert finished(first) == (1, 1)
    assert all(compliance_row(conn, account_id) for account_id in accounts)


def test_two_purges_of_two_accounts_sharing_a_member_erase_them_exactly_once(
    conn, base_env, direct_database_url, make_account, make_user
):
    first_id, second_id = make_account(), make_account()
    shared = make_user(account_id=first_id)
    conn.execute(
        'INSERT INTO account_users (account_id, user_id) VALUES (%s, %s)',
        (second_id, shared.id),
    )
    own = [make_user(account_id=first_id), make_user(account_id=second_id)]
    schedule(conn, first_id, ago=20)
    schedule(conn, second_id, ago=10)
    assert due_count(conn) == 2
    # Each purge takes one account (SKIP LOCKED) and waits at the shared member.
    holder = holding(
        direct_database_url,
        'SELECT id FROM users WHERE id = %s FOR UPDATE',
        (shared.id,),
    )
    try:
        purges = [purge_command(base_env) for _ in range(2)]
        blocked_by(conn, holder, count=2)
    finally:
        holder.rollback()
        holder.close()
    counts = [finished(proc) for proc in purges]
    # Two accounts, three people: each one-account member, and the shared one once.
    assert sorted(counts) == [(1, 1), (1, 2)]
    for user in (shared, *own):
        assert not exists(conn, 'users', 'id', user.id)
    assert compliance_row(conn, first_id) and compliance_row(conn, second_id)


# --- a purge killed half-way ----------------------------------------------------------


def test_a_purge_killed_between_accounts_leaves_each_whole_or_gone(
    conn, base_env, direct_database_url, make_account, make_user
):
    first_id, second_id = make_account(), make_account()
    first_member = make_user(account_id=first_id)
    second_member = make_user(account_id=second_id)
    schedule(conn, first_id, ago=20)
    schedule(conn, second_id, ago=10)
    whole = state_of_account(conn, second_id)
    # The purge commits the first account, takes the second and waits for its member.
    killed_while_waiting(
        conn,
        base_env,
        direct_database_url,
        'SELECT id FROM users WHERE id = %s FOR UPDATE',
        (second_member.id,),
    )

    assert compliance_row(conn, first_id) is not None
    assert not exists(conn, 'users', 'id', first_member.id)
    assert state_of_account(conn, second_id) == whole
    assert member_of(conn, second_member.id) == [second_id]

    assert finished(purge_command(base_env))[0] >= 1
    assert compliance_row(conn, second_id) is not None
    assert not exists(conn, 'users', 'id', second_member.id)


def test_a_purge_killed_inside_an_account_leaves_it_whole(
    conn, queries, base_env, direct_database_url, make_account, make_user
):
    account_id = make_account()
    member = make_user(account_id=account_id)
    admin = make_user(account_id=account_id, role='administrator')
    admin.account_id = account_id
    enqueue(conn, queries, member.email)
    schedule(conn, account_id, requested_by=admin.id)
    conn.execute(
        'INSERT INTO audit_events (event, subject_id, account_id)'
        " VALUES ('test', %s, %s)",
        (member.id, account_id),
    )
    whole = state_of_account(conn, account_id)
    sessions = conn.execute(
        'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (member.id,)
    ).fetchone()['n']
    # The purge has deleted the memberships and the account, written the compliance
    # row and erased the account's audit rows, and waits, erasing the member, for
    # their mail.
    killed_while_waiting(
        conn,
        base_env,
        direct_database_url,
        'SELECT id FROM mail_outbox WHERE to_address = %s FOR UPDATE',
        (member.email,),
    )

    assert state_of_account(conn, account_id) == whole
    assert member_of(conn, member.id) == [account_id]
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (member.id,)
        ).fetchone()['n']
        == sessions
    )

    assert finished(purge_command(base_env))[0] >= 1
    assert state_of_account(conn, account_id) == {
        'account': False,
        'memberships': 0,
        'audit': False,
        'compliance': True,
    }
    for user in (member, admin):
        assert not exists(conn, 'users', 'id', user.id)
    assert not exists(conn, 'mail_outbox', 'to_address', member.email)


# --- the command, the worker ----------------------------------------------------------


def test_the_command_says_what_went_wrong_with_the_database(
    conn, base_env, app_database_url, make_account
):
    schedule(conn, make_account())
    refused = subprocess.run(
        [sys.executable, 'manage.py', 'purge-accounts'],
        cwd=ROOT,
        env={
            **os.environ,
            **base_env,
            'DATABASE_URL': app_database_url,
            'DB_PREPARED_STATEMENTS': 'on',
            'PGOPTIONS': '-c default_transaction_read_only=on',
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert 'purge-accounts: the database refused the purge' in refused.stderr
    assert 'read-only transaction' in refused.stderr
    assert 'Traceback' not in refused.stderr
    unreachable = subprocess.run(
        [sys.executable, 'manage.py', 'purge-accounts'],
        cwd=ROOT,
        env={
            **os.environ,
            **base_env,
            'DATABASE_URL': f'postgresql://nobody@127.0.0.1:{free_port()}/none',
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unreachable.returncode != 0
    assert 'manage.py purge-accounts: cannot reach the database' in unreachable.stderr
    finished(purge_command(base_env))  # the account scheduled above


def test_an_account_the_database_refuses_stays_whole_and_the_others_go(
    conn, base_env, make_account, make_user
):
    refused, other = make_account(), make_account()
    member = make_user(account_id=refused)
    schedule(conn, refused, ago=10)  # the older date: claimed first
    schedule(conn, other, ago=1)
    # A row the purge cannot delete, as a later table holding on to the account would.
    conn.execute(
        'CREATE FUNCTION test_purge_refuse() RETURNS trigger LANGUAGE plpgsql AS $$'
        " BEGIN RAISE EXCEPTION 'account % is held', OLD.id; END $$"
    )
    conn.execute(
        'CREATE TRIGGER test_purge_refuse BEFORE DELETE ON accounts FOR EACH ROW'
        f' WHEN (OLD.id = {int(refused)}) EXECUTE FUNCTION test_purge_refuse()'
    )
    try:
        proc = purge_command(base_env)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        conn.execute('DROP TRIGGER test_purge_refuse ON accounts')
        conn.execute('DROP FUNCTION test_purge_refuse()')
    assert proc.returncode == 1
    assert 'refused the purge of 1 account(s), left whole' in stderr
    assert f'account {refused} not purged' in stderr
    assert 'Traceback' not in stderr
    assert not exists(conn, 'accounts', 'id', other)  # the later one went all the same
    assert exists(conn, 'accounts', 'id', refused)
    assert member_of(conn, member.id) == [refused]
    # The next run tries it again.
    finished(purge_command(base_env))
    assert not exists(conn, 'accounts', 'id', refused)


def test_the_mail_worker_purges_when_it_starts_and_mails_the_instance_admin(
    conn, base_env, make_account, make_user, inbox
):
    account_id = make_account()
    make_user(account_id=account_id)
    schedule(conn, account_id)
    admin_address = unique_email('instance-admin')
    worker = deliver_mail_command(
        base_env, inbox.port, once=False, INSTANCE_ADMIN_EMAIL=admin_address
    )
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not inbox.to(admin_address) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(inbox.to(admin_address)) == 1
    finally:
        worker.send_signal(signal.SIGTERM)
    _, stderr = worker.communicate(timeout=30)
    assert 'Traceback' not in stderr
    assert compliance_row(conn, account_id) is not None


def test_the_worker_purges_at_its_start_then_once_each_interval():
    now = [100.0]
    every = outbox.Every(3600, clock=lambda: now[0])
    seen = []
    for step in (0, 1, 3598, 1, 0, 3599, 1, 7200):
        now[0] += step
        seen.append(every.due())
    assert seen == [True, False, False, True, False, False, True, True]


def test_a_failed_purge_is_logged_and_the_worker_goes_on_delivering(
    conn, queries, base_env, inbox, monkeypatch, caplog
):
    runs = []

    def failing(*args, **kwargs):
        runs.append(1)
        raise psycopg.errors.DeadlockDetected('deadlock detected')

    monkeypatch.setattr(deletion, 'purge_due', failing)
    config = config_module.load(smtp_env(base_env, inbox.port))
    stop = threading.Event()
    worker = threading.Thread(
        target=outbox.run, args=(config, queries), kwargs={'stop': stop}
    )
    worker.start()
    try:
        address = unique_email('after-purge')
        enqueue(conn, queries, address)
        deadline = time.monotonic() + WAIT_SECONDS
        while not inbox.to(address) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(inbox.to(address)) == 1
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert runs == [1]  # at the start; the next is an hour later
    assert 'account purge failed (DeadlockDetected' in caplog.text


# --- the application's role ---------------------------------------------------------


def test_the_app_role_cannot_erase_the_trail_of_a_live_account_or_person(
    database_url, conn, make_account, make_user
):
    account_id = make_account()
    user = make_user(account_id=account_id)
    conn.execute(
        'INSERT INTO audit_events (event, subject_id, account_id)'
        " VALUES ('test', %s, %s)",
        (user.id, account_id),
    )
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as app:
        with pytest.raises(psycopg.errors.RaiseException, match='is not purged'):
            app.execute('SELECT erase_account_trail(%s)', (account_id,))
        with pytest.raises(psycopg.errors.RaiseException, match='is not erased'):
            app.execute(
                'SELECT erase_user_trail(%s, %s::text[])', (user.id, [user.email])
            )
        # Deleting the account row is not enough: the compliance row must be there.
        with pytest.raises(psycopg.errors.RaiseException, match='is not purged'):
            with app.transaction():
                app.execute('DELETE FROM accounts WHERE id = %s', (account_id,))
                app.execute('SELECT erase_account_trail(%s)', (account_id,))
        # Nor may it rewrite a compliance row to name someone else, or remove it.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute('UPDATE account_deletions SET scheduled_by = NULL')
    assert exists(conn, 'accounts', 'id', account_id)
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM audit_events WHERE subject_id = %s', (user.id,)
        ).fetchone()['n']
        >= 1
    )


def test_the_app_role_cannot_erase_a_live_trail_by_naming_nobody(
    database_url, conn, make_account, make_user
):
    """erase_user_trail's check is that the user row is gone: any id nobody has passes
    it. What it then removes by the addresses given must be rows naming an address, not
    any row whose details hold the text given (a live account's, a live person's)."""
    account_id = make_account()
    user = make_user(account_id=account_id)
    conn.execute(
        'INSERT INTO audit_events (event, subject_id, account_id, details)'
        " VALUES ('test', %s, %s, %s)",
        (user.id, account_id, '{"session_ids": "evidence", "note": "1.2.3.4"}'),
    )
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as app:
        app.execute(
            'SELECT erase_user_trail(%s, %s::text[])',
            (-1, ['evidence', '1.2.3.4', None, '', 'not an@address', 'a@']),
        )
    assert (
        conn.execute(
            "SELECT count(*) AS n FROM audit_events WHERE event = 'test'"
            ' AND subject_id = %s',
            (user.id,),
        ).fetchone()['n']
        == 1
    )
