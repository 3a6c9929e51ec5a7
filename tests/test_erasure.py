"""Erasing yourself, DELETE /api/v1/profile (SPEC 20), behind the recent
authentication of SPEC 3.4.

What a user sees: the statuses and bodies, the rows left (or not), the mail received on
a real SMTP server, and that the address can sign up again.
"""

import datetime
import threading

import psycopg
from psycopg.rows import dict_row
import pyotp
import pytest

from services import deletion
from services import guessing
from services import mfa
from services import sessions
from tests.smtp_server import deliver
from tests.support.database import waiting_for
from tests.support.erasure import Person
from tests.support.erasure import traces
from tests.support.users import unique_email
from tests.test_avatars import encode
from tests.test_avatars import picture
from tests.test_avatars import upload
from tests.test_mfa import enable
from tests.test_purge import footprint
from tests.test_purge import unique_name
from tests.test_suspension import reactivate
from tests.test_suspension import suspend

PROFILE = '/api/v1/profile'
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
REAUTHENTICATE = {
    'error': 'Sign in again to change this',
    'error_code': 'reauthentication_required',
}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
INVALID_PASSWORD = {'message': 'Invalid current password'}
INVALID_CREDENTIALS = {'message': 'Invalid credentials or verification code'}
TRANSFER_FIRST = 'Transfer or delete the accounts you administer first'


def erase(testapp, user, body=None, status=200, headers=None):
    body = {'password': user.password} if body is None else body
    return testapp.delete_json(
        PROFILE,
        body,
        headers=user.headers if headers is None else headers,
        status=status,
    )


def user_exists(conn, user_id):
    return conn.execute('SELECT 1 FROM users WHERE id = %s', (user_id,)).fetchone()


def outbox_rows(conn, address):
    return conn.execute(
        'SELECT kind, status FROM mail_outbox WHERE to_address = %s ORDER BY id',
        (address,),
    ).fetchall()


def wrong_checks(conn, kind, user_id):
    row = conn.execute(
        'SELECT sum(hits) AS n FROM rate_limit_counters WHERE bucket = %s'
        ' AND expires_at > now()',
        (f'{kind}|user={user_id}',),
    ).fetchone()
    return row['n'] or 0


def test_erasing_yourself_ends_every_credential_and_frees_the_address(
    testapp, make_user, conn
):
    user = make_user()
    assert erase(testapp, user).json == {}

    assert user_exists(conn, user.id) is None
    # The old session and the API token are dead.
    assert testapp.get(PROFILE, headers=user.headers, status=401).json == (
        UNAUTHENTICATED
    )
    testapp.get(PROFILE, headers={'api_access_token': user.access_token}, status=401)
    # The address can sign up again.
    signed_up = testapp.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Again',
            'email': user.email,
            'user_full_name': 'Back Again',
            'password': 'a brand new passphrase',
        },
    ).json
    assert signed_up['data']['email'] == user.email
    assert signed_up['data']['id'] != user.id


def test_a_wrong_or_missing_password_erases_nothing_and_spends_the_budget(
    testapp, make_user, conn
):
    user = make_user()
    assert erase(testapp, user, {'password': 'not it'}, 422).json == INVALID_PASSWORD
    assert wrong_checks(conn, 'password', user.id) == 1
    # No password: refused without a check (nothing was guessed).
    assert erase(testapp, user, {}, 422).json == INVALID_PASSWORD
    assert erase(testapp, user, {'password': ''}, 422).json == INVALID_PASSWORD
    assert wrong_checks(conn, 'password', user.id) == 1
    assert user_exists(conn, user.id)
    testapp.get(PROFILE, headers=user.headers, status=200)


def test_the_password_budget_is_the_one_of_every_password_check(
    testapp, make_user, conn
):
    """Ten wrong passwords anywhere (here: the profile's password change), then the
    right one is a 429 here too."""
    user = make_user()
    for _ in range(guessing.BUDGETS['password'].limit):
        testapp.put_json(
            PROFILE,
            {
                'profile': {
                    'current_password': 'wrong guess',
                    'password': 'another passphrase 9',
                    'password_confirmation': 'another passphrase 9',
                }
            },
            headers=user.headers,
            status=422,
        )
    erase(testapp, user, status=429)
    assert user_exists(conn, user.id)


def test_integration_credentials_cannot_erase(testapp, make_user, conn):
    user = make_user()
    api = {'api_access_token': user.access_token}
    assert erase(testapp, user, headers=api, status=403).json == NEEDS_SESSION
    created = testapp.post_json(
        '/api/v1/profile/access_tokens',
        {
            'name': 'everything',
            'scopes': [
                'profile:read',
                'profile:write',
                'account:read',
                'account:write',
            ],
            'expires_in_days': 30,
        },
        headers=user.headers,
        status=201,
    ).json
    bearer = {'Authorization': f'Bearer {created["token"]}'}
    assert erase(testapp, user, headers=bearer, status=403).json == NEEDS_SESSION
    assert user_exists(conn, user.id)


def test_an_mfa_user_needs_the_password_and_a_second_factor(testapp, make_user, conn):
    user = make_user()
    app, backup_codes = enable(testapp, user)
    # Without a code: refused before any check.
    assert erase(testapp, user, status=422).json == INVALID_CREDENTIALS
    assert wrong_checks(conn, 'password', user.id) == 0
    # A wrong code.
    body = {'password': user.password, 'otp_code': '000000'}
    assert erase(testapp, user, body, 422).json == INVALID_CREDENTIALS
    assert wrong_checks(conn, 'second_factor', user.id) == 1
    # A right code with a wrong password checks no code.
    body = {'password': 'not it', 'otp_code': app.code(0)}
    assert erase(testapp, user, body, 422).json == INVALID_CREDENTIALS
    assert wrong_checks(conn, 'password', user.id) == 1
    assert user_exists(conn, user.id)
    # Both right.
    erase(testapp, user, {'password': user.password, 'otp_code': app.code(1)})
    assert user_exists(conn, user.id) is None


def test_a_recovery_code_serves_as_the_second_factor(testapp, make_user, conn):
    user = make_user()
    _, backup_codes = enable(testapp, user)
    erase(testapp, user, {'password': user.password, 'backup_code': backup_codes[0]})
    assert user_exists(conn, user.id) is None


def test_a_user_without_a_password_needs_a_recent_sign_in(testapp, make_user, conn):
    """Single sign-on's users have no password: a session that signed in (through
    the provider) within REAUTH_WINDOW_MINUTES is what proves it is them."""
    user = make_user()
    conn.execute('UPDATE users SET encrypted_password = NULL WHERE id = %s', (user.id,))
    conn.execute(
        'UPDATE user_tokens SET authenticated_at = now() - %s WHERE client = %s',
        (datetime.timedelta(hours=1), user.client),
    )
    assert erase(testapp, user, {}, 403).json == REAUTHENTICATE
    # A password sent proves nothing for a user who has none.
    assert erase(testapp, user, {'password': 'anything'}, 403).json == REAUTHENTICATE
    assert user_exists(conn, user.id)
    conn.execute(
        'UPDATE user_tokens SET authenticated_at = now() WHERE client = %s',
        (user.client,),
    )
    erase(testapp, user, {})
    assert user_exists(conn, user.id) is None


def test_the_last_administrator_of_an_account_with_members_is_refused(
    testapp, admin, make_account, make_user, conn
):
    other = make_account('Other')
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s,'
        " 'administrator')",
        (other, admin.id),
    )
    make_user(account_id=admin.account_id)
    make_user(account_id=other)
    answer = erase(testapp, admin, status=422).json
    assert answer == {
        'message': TRANSFER_FIRST,
        'account_ids': sorted([admin.account_id, other]),
    }
    # Refused before the password is checked: a wrong one is the same 422.
    assert (
        erase(testapp, admin, {'password': 'not it'}, 422).json['message']
        == TRANSFER_FIRST
    )
    assert wrong_checks(conn, 'password', admin.id) == 0
    assert user_exists(conn, admin.id)
    # A second active administrator there: the caller may go; a suspended one does not
    # count.
    second = make_user(account_id=admin.account_id, role='administrator')
    conn.execute(
        "UPDATE account_users SET status = 'suspended' WHERE user_id = %s", (second.id,)
    )
    assert erase(testapp, admin, status=422).json['account_ids'] == sorted(
        [admin.account_id, other]
    )
    conn.execute(
        "UPDATE account_users SET status = 'active' WHERE user_id = %s", (second.id,)
    )
    assert erase(testapp, admin, status=422).json['account_ids'] == [other]


def test_an_account_left_without_members_is_scheduled_for_deletion(
    testapp, admin, make_account, make_user, conn, config
):
    shared = make_account('Shared')
    agent = make_user(account_id=shared)
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s,'
        " 'agent')",
        (admin.account_id, agent.id),
    )
    # The administrator belongs to both.
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s,'
        " 'administrator')",
        (shared, admin.id),
    )
    erase(testapp, agent)
    erase(testapp, admin)
    rows = {
        row['id']: row
        for row in conn.execute(
            'SELECT id, deletion_due_at, deletion_requested_at, deletion_requested_by,'
            ' custom_attributes, now() AS now FROM accounts WHERE id = ANY(%s)',
            ([admin.account_id, shared],),
        )
    }
    emptied = rows[admin.account_id]
    grace = datetime.timedelta(days=config.account_deletion_grace_days)
    assert emptied['deletion_requested_by'] is None
    assert emptied['deletion_requested_at'] is not None
    due = emptied['deletion_due_at']
    assert due - emptied['deletion_requested_at'] <= grace
    assert emptied['deletion_requested_at'] + grace - due < datetime.timedelta(
        seconds=1
    )
    assert emptied['custom_attributes'] == {
        'marked_for_deletion_at': due.astimezone(datetime.UTC).strftime(
            '%Y-%m-%dT%H:%M:%SZ'
        ),
        'marked_for_deletion_reason': 'last_member_erased',
    }
    # The shared account lost its last member too.
    assert rows[shared]['deletion_due_at'] is not None
    # Each account they left has one row that names nobody.
    events = conn.execute(
        'SELECT account_id, actor_id, subject_id, ip_address, user_agent, session_id,'
        " details FROM audit_events WHERE event = 'member_erased'"
        ' AND account_id = ANY(%s) ORDER BY id',
        ([admin.account_id, shared],),
    ).fetchall()
    left = [
        (e['account_id'], e['details']['account_left_without_members']) for e in events
    ]
    # The agent's erasure left both with the administrator; the administrator's, empty.
    assert sorted(left[:2]) == [(admin.account_id, False), (shared, False)]
    assert sorted(left[2:]) == [(admin.account_id, True), (shared, True)]
    assert {
        (e['actor_id'], e['subject_id'], e['ip_address'], e['user_agent'])
        for e in events
    } == {(None, None, None, None)}


def test_two_last_administrators_erasing_at_once_leave_one(
    testapp, admin, make_user, conn, direct_database_url
):
    """Each passes the last-administrator rule alone; at once, the account row
    serialises them and the second is refused, so the agent keeps an
    administrator."""
    second = make_user(account_id=admin.account_id, role='administrator')
    agent = make_user(account_id=admin.account_id)
    answers = {}
    # The first erasure holds the account row until this connection lets go.
    # direct_database_url, not conn.info.dsn: that leaves the password out, which the
    # private cluster of scripts/test asks for.
    with psycopg.connect(direct_database_url, autocommit=False) as blocker:
        blocker.execute(
            'SELECT id FROM accounts WHERE id = %s FOR NO KEY UPDATE',
            (admin.account_id,),
        )

        def run(user):
            answers[user.id] = erase(testapp, user, status='*').status_int

        threads = [threading.Thread(target=run, args=(u,)) for u in (admin, second)]
        for thread in threads:
            thread.start()
        # Both wait for the account row (erasure.lock_accounts): one behind the
        # blocker, the other behind it.
        while len(waiting_at_the_account_row(conn)) < 2:
            assert all(thread.is_alive() for thread in threads), answers
        blocker.rollback()
    for thread in threads:
        thread.join()
    assert sorted(answers.values()) == [200, 422]
    administrators = conn.execute(
        'SELECT user_id FROM account_users WHERE account_id = %s'
        " AND role = 'administrator'",
        (admin.account_id,),
    ).fetchall()
    assert len(administrators) == 1
    assert testapp.get(PROFILE, headers=agent.headers).json['id'] == agent.id


def waiting_at_the_account_row(conn):
    """The backends of this database waiting for a lock in erasure.lock_accounts."""
    return conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database() AND position('FROM accounts a' in query) > 0"
    ).fetchall()


def test_the_address_gets_a_mail_whose_row_goes_once_sent(
    testapp, make_user, conn, base_env, inbox
):
    user = make_user()
    erase(testapp, user)
    assert outbox_rows(conn, user.email) == [
        {'kind': 'account_erased', 'status': 'pending'}
    ]
    deliver(base_env, inbox.port)
    [mail] = inbox.to(user.email)
    assert mail.message['Subject'] == 'Your Frontdesk account was erased'
    assert 'cannot be undone' in mail.text
    assert 'http://frontdesk.test/app/auth/signup' in mail.text
    assert outbox_rows(conn, user.email) == []


def test_a_farewell_the_server_refuses_for_good_leaves_no_row(
    testapp, make_user, conn, base_env, inbox
):
    user = make_user()
    erase(testapp, user)
    inbox.refuse[user.email] = '550 5.1.1 No such mailbox'
    deliver(base_env, inbox.port)
    assert inbox.to(user.email) == []
    assert outbox_rows(conn, user.email) == []


def test_nothing_names_an_erased_person(
    testapp,
    conn,
    config,
    pool,
    queries,
    base_env,
    avatar_dir,
    make_account,
    make_user,
    inbox,
):
    """Sessions, a personal access token, MFA with recovery codes, an avatar, audit
    rows (theirs, and of what they did to a colleague), a reset link and its mail, a
    pending address change: after the erasure and the farewell's delivery, nothing in
    any table or in AVATAR_DIR names them (tests/support/erasure.py)."""
    account_id = make_account(unique_name('Team'))
    name = unique_name('Erased')
    person = make_user(account_id=account_id, role='administrator', name=name)
    person.account_id = account_id
    colleague = make_user(account_id=account_id)
    suspend(testapp, person, colleague.id)
    reactivate(testapp, person, colleague.id)
    conn.execute(
        "UPDATE account_users SET role = 'administrator' WHERE user_id = %s",
        (colleague.id,),
    )
    avatar = footprint(testapp, conn, person, [account_id])
    # Another device signed in since (issued as a sign-in issues it).
    with pool.connection() as own:
        token_, client, _ = sessions.issue(own, queries, config, person.id)
    other_session = {'access-token': token_, 'client': client, 'uid': person.email}
    testapp.get(PROFILE, headers=other_session, status=200)
    token = testapp.post_json(
        '/api/v1/profile/access_tokens',
        {'name': 'Zapier', 'scopes': ['profile:read'], 'expires_in_days': 30},
        headers=person.headers,
        status=201,
    ).json['token']
    new_address = unique_email('moving')
    testapp.put_json(
        PROFILE, {'profile': {'email': new_address}}, headers=person.headers
    )
    deliver(base_env, inbox.port)
    assert inbox.to(person.email) and inbox.to(new_address)
    assert (avatar_dir / avatar).exists()
    stored = conn.execute(
        'SELECT otp_secret FROM users WHERE id = %s', (person.id,)
    ).fetchone()['otp_secret']
    code = pyotp.TOTP(mfa.unseal(config, person.id, stored)).now()

    erase(testapp, person, {'password': person.password, 'otp_code': code})
    deliver(base_env, inbox.port)

    [farewell] = [
        m for m in inbox.to(person.email) if m.message['Subject'].endswith('erased')
    ]
    assert name in farewell.text
    assert not (avatar_dir / avatar).exists()
    found = traces(
        conn, Person(person.id, (person.email, new_address), name, avatar), avatar_dir
    )
    assert found == []
    for headers in (
        person.headers,
        other_session,
        {'api_access_token': person.access_token},
        {'Authorization': f'Bearer {token}'},
    ):
        testapp.get(PROFILE, headers=headers, status=401)
    # The colleague stays, the account's administrator now, with the account's trail
    # of what was done to them (who did it no longer said).
    assert conn.execute(
        'SELECT role, status FROM account_users WHERE account_id = %s',
        (account_id,),
    ).fetchall() == [{'role': 'administrator', 'status': 'active'}]
    trail = conn.execute(
        'SELECT event, actor_id FROM audit_events WHERE subject_id = %s'
        " AND event IN ('member_suspended', 'member_reactivated') ORDER BY id",
        (colleague.id,),
    ).fetchall()
    assert trail == [
        {'event': 'member_suspended', 'actor_id': None},
        {'event': 'member_reactivated', 'actor_id': None},
    ]


def _put_name(testapp, user):
    return testapp.put_json(
        PROFILE, {'profile': {'name': 'Racer'}}, headers=user.headers, status='*'
    )


def _put_avatar(testapp, user):
    return upload(testapp, user, encode(picture(), 'PNG'), status='*')


def _remove_avatar(testapp, user):
    return testapp.delete(PROFILE + '/avatar', headers=user.headers, status='*')


def _start_mfa(testapp, user):
    return testapp.post_json(
        PROFILE + '/mfa', {'password': user.password}, headers=user.headers, status='*'
    )


def _sign_in(testapp, user):
    return testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}, status='*'
    )


@pytest.mark.parametrize(
    'change', [_put_name, _put_avatar, _remove_avatar, _start_mfa, _sign_in]
)
def test_a_request_that_waited_for_an_erasure_is_a_401_and_leaves_no_file(
    testapp, make_user, conn, config, queries, avatar_dir, direct_database_url, change
):
    """A request let in just before the erasure committed (the access rules found the
    session, or the password matched), and that then waited for the user row it held,
    finds no user: the 401 of a credential that is gone (not a 500), no session is
    minted, and no avatar file is stored for nobody."""
    user = make_user()
    files = set(avatar_dir.iterdir())
    answers = []
    with psycopg.connect(direct_database_url, row_factory=dict_row) as eraser:
        assert deletion.erase_user(eraser, queries, config, user.id) is not None
        thread = threading.Thread(
            target=lambda: answers.append(change(testapp, user).status_int)
        )
        thread.start()
        while not waiting_for(conn, eraser.info.backend_pid):
            assert thread.is_alive(), answers
        eraser.commit()
    thread.join()
    assert answers == [401]
    assert set(avatar_dir.iterdir()) == files


def test_an_address_you_only_asked_for_is_not_yours_to_erase(
    testapp, admin, make_user, conn
):
    """An address change to a taken address leaves the same pending state as to a free
    one (SPEC 3.3, no oracle). Erasing that user must not treat the other user's address
    as theirs: the mail to it or naming it (an administrator's notice "By: <address>"),
    and its per-address mail bound, stay."""
    other_admin = make_user(account_id=admin.account_id, role='administrator')
    testapp.post_json('/auth/password', {'email': admin.email})
    testapp.post_json(
        f'/enterprise/api/v1/accounts/{admin.account_id}/toggle_deletion',
        {'action_type': 'delete'},
        headers=admin.headers,
    )
    taker = make_user()
    testapp.put_json(
        PROFILE,
        {'profile': {'email': admin.email, 'current_password': taker.password}},
        headers=taker.headers,
    )
    assert testapp.get(PROFILE, headers=taker.headers).json['unconfirmed_email'] == (
        admin.email
    )

    def kept():
        return (
            conn.execute(
                'SELECT to_address, kind FROM mail_outbox'
                ' WHERE lower(to_address) = %(a)s OR text_body ILIKE %(named)s'
                ' ORDER BY id',
                {'a': admin.email, 'named': f'%{admin.email}%'},
            ).fetchall(),
            conn.execute(
                'SELECT bucket, hits FROM rate_limit_counters WHERE bucket = %s',
                (f'mail|to={admin.email}',),
            ).fetchall(),
        )

    before = kept()
    assert {row['to_address'] for row in before[0]} >= {admin.email, other_admin.email}
    assert before[1]
    erase(testapp, taker)
    assert kept() == before
