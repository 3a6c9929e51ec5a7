"""The stored user document (migration 0014, userdoc.py) stays what user_json() built.

Every authenticated read returns ``users.doc`` as the triggers left it, finished by
userdoc.render. These tests make each kind of write that feeds the document and compare
GET /api/v1/profile with user_json(), the function that built it per read before issue
19 and is still in the schema, run at the same moment; then the interleavings of two
writers of one document.
"""

import threading

import orjson
import psycopg
import pytest

from tests.support.database import waiting_for
from tests.support.users import TEST_SECRET_KEY


def reference(conn, user_id, config):
    """What user_json() builds for the user now (availability_status at now())."""
    return conn.execute(
        'SELECT user_json(%s, %s)::text AS doc', (user_id, config.avatar_url_prefix)
    ).fetchone()['doc']


def assert_same(testapp, conn, config, user):
    served = testapp.get('/api/v1/profile', headers=user.headers).json
    assert served == orjson.loads(reference(conn, user.id, config))
    return served


def test_every_write_that_feeds_the_document(
    testapp, conn, config, admin, make_account, make_user
):
    headers = admin.headers
    assert_same(testapp, conn, config, admin)
    # the profile, its settings and signature
    testapp.put_json(
        '/api/v1/profile',
        {
            'profile': {
                'display_name': 'Neo',
                'message_signature': 'sig',
                'ui_settings': {'k': 1},
                'phone_number': '+15550001',
            }
        },
        headers=headers,
    )
    served = assert_same(testapp, conn, config, admin)
    assert served['display_name'] == 'Neo'
    # the account: a rename reaches every member's document
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'name': 'Renamed'},
        headers=headers,
    )
    served = assert_same(testapp, conn, config, admin)
    assert served['accounts'][0]['name'] == 'Renamed'
    # a second membership (a new account of one's own) and the active account
    other = make_account('Other')
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s, %s)',
        (other, admin.id, 'agent'),
    )
    assert len(assert_same(testapp, conn, config, admin)['accounts']) == 2
    testapp.put_json(
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': other}},
        headers=headers,
    )
    assert assert_same(testapp, conn, config, admin)['account_id'] == other
    # availability, auto_offline, update_active_at
    testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'availability': 'busy', 'account_id': admin.account_id}},
        headers=headers,
    )
    testapp.post_json(
        '/api/v1/profile/auto_offline',
        {'profile': {'auto_offline': False, 'account_id': admin.account_id}},
        headers=headers,
    )
    testapp.post(
        f'/api/v1/accounts/{admin.account_id}/update_active_at', headers=headers
    )
    served = assert_same(testapp, conn, config, admin)
    entry = next(a for a in served['accounts'] if a['id'] == admin.account_id)
    assert (entry['availability'], entry['auto_offline']) == ('busy', False)
    # the role, and losing a membership
    conn.execute(
        'UPDATE account_users SET role = %s WHERE account_id = %s AND user_id = %s',
        ('administrator', other, admin.id),
    )
    assert_same(testapp, conn, config, admin)
    conn.execute(
        'DELETE FROM account_users WHERE account_id = %s AND user_id = %s',
        (other, admin.id),
    )
    assert len(assert_same(testapp, conn, config, admin)['accounts']) == 1
    # a member of the account sees the rename too
    agent = make_user(account_id=admin.account_id)
    assert assert_same(testapp, conn, config, agent)['accounts'][0]['name'] == (
        'Renamed'
    )


def test_availability_status_follows_the_clock(testapp, conn, config, admin):
    """Online and seen 4 minutes ago is online; seen 6 minutes ago is offline, with no
    write in between: the read finishes the status against its own time."""
    for minutes, expected in ((4, 'online'), (6, 'offline')):
        conn.execute(
            'UPDATE account_users SET availability = %s, auto_offline = true,'
            ' active_at = now() - make_interval(mins => %s) WHERE user_id = %s',
            ('online', minutes, admin.id),
        )
        served = assert_same(testapp, conn, config, admin)
        assert served['accounts'][0]['availability_status'] == expected


def test_the_avatar_url_and_mfa_enforcement(
    make_testapp, conn, config, admin, tmp_path
):
    app = make_testapp(SECRET_KEY=TEST_SECRET_KEY)
    conn.execute("UPDATE users SET avatar = 'abc.png' WHERE id = %s", (admin.id,))
    served = assert_same(app, conn, config, admin)
    assert served['avatar_url'] == config.avatar_url_prefix + 'abc.png'
    # Enforcing MFA on the account reaches the member's stored flags: the next request
    # is refused until enrolment (SPEC 12).
    conn.execute(
        'UPDATE accounts SET enforce_mfa = true WHERE id = %s', (admin.account_id,)
    )
    answer = app.get('/api/v1/profile', headers=admin.headers, status=403)
    assert answer.json['error_code'] == 'mfa_enrollment_required'
    conn.execute(
        'UPDATE accounts SET enforce_mfa = false WHERE id = %s', (admin.account_id,)
    )
    assert_same(app, conn, config, admin)


def _rename_in_thread(url, account_id, name, started):
    def rename():
        with psycopg.connect(url, autocommit=True) as other:
            started.set()
            other.execute(
                'UPDATE accounts SET name = %s WHERE id = %s', (name, account_id)
            )

    thread = threading.Thread(target=rename)
    thread.start()
    return thread


@pytest.mark.parametrize('first', ['membership', 'rename'])
def test_a_rename_and_a_new_member_at_once(
    direct_database_url, conn, config, make_account, make_user, first
):
    """A new membership and a rename of its account, in either order, each waiting for
    the other's commit: the new member's document ends with the new name."""
    account_id = make_account('Before')
    user = make_user()
    with psycopg.connect(direct_database_url) as writer:
        started = threading.Event()
        if first == 'membership':
            writer.execute(
                'INSERT INTO account_users (account_id, user_id) VALUES (%s, %s)',
                (account_id, user.id),
            )
            thread = _rename_in_thread(
                direct_database_url, account_id, 'After', started
            )
            started.wait()
            _wait_until(lambda: waiting_for(conn, writer.info.backend_pid))
            writer.commit()
        else:
            rename = psycopg.connect(direct_database_url)
            rename.execute(
                'UPDATE accounts SET name = %s WHERE id = %s', ('After', account_id)
            )

            def insert():
                writer.execute(
                    'INSERT INTO account_users (account_id, user_id) VALUES (%s, %s)',
                    (account_id, user.id),
                )
                writer.commit()

            thread = threading.Thread(target=insert)
            thread.start()
            _wait_until(lambda: waiting_for(conn, rename.info.backend_pid))
            rename.commit()
            rename.close()
        thread.join(timeout=30)
        assert not thread.is_alive()
    doc = conn.execute('SELECT doc FROM users WHERE id = %s', (user.id,)).fetchone()
    assert [a['name'] for a in doc['doc']['accounts']] == ['After']


def _wait_until(condition):
    """Poll a condition PostgreSQL reports (a backend waiting on a lock)."""
    for _ in range(3000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError('the second writer never waited for the first')
