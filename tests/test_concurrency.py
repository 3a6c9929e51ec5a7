"""Concurrent requests of one user, with real threads against real gunicorn."""

import threading
import time

import psycopg
import pytest

from services import passwords
from tests.support.database import waiting_for
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.users import insert_personal_tokens
from tests.support.users import PASSWORD
from tests.support.users import unique_email
from tests.test_confirmations import queued_token
from tests.test_confirmations import RESET_REQUESTED
from tests.test_credentials import INVALID_LOGIN
from tests.test_mfa import Authenticator
from tests.test_mfa import enable
from tests.test_suspension import interleave
from tests.test_suspension import sessions_of
from tests.test_suspension import signing_in


def token_headers(answer):
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


def in_parallel(count, action):
    results = [None] * count
    barrier = threading.Barrier(count)

    def run(index):
        barrier.wait()
        results[index] = action(index)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.fixture(scope='module')
def service(base_env):
    with run_gunicorn(base_env, workers=3) as base:
        yield base


def test_simultaneous_sign_ins_all_get_working_tokens(service, make_user, conn):
    user = make_user()
    answers = in_parallel(
        16,
        lambda _: signing_in(service, user)(),
    )
    assert [answer.status for answer in answers] == [200] * 16
    assert len({answer.headers['client'] for answer in answers}) == 16
    assert len({answer.headers['access-token'] for answer in answers}) == 16
    for answer in answers:
        assert (
            http(
                'GET', service + '/api/v1/profile', headers=token_headers(answer)
            ).status
            == 200
        )
    assert sessions_of(conn, user) == 17


@pytest.mark.parametrize('round_', range(3))
def test_a_password_change_racing_sign_ins_leaves_no_old_password_session(
    service, make_user, conn, round_
):
    user = make_user()
    # A costlier hash widens the window between a sign-in's password check and its
    # token.
    conn.execute(
        'UPDATE users SET encrypted_password = %s WHERE id = %s',
        (passwords.hash_password(PASSWORD, 9), user.id),
    )
    new_password = 'the new password 2'

    def act(index):
        if index == 0:
            return http(
                'PUT',
                service + '/api/v1/profile',
                {
                    'profile': {
                        'current_password': PASSWORD,
                        'password': new_password,
                        'password_confirmation': new_password,
                    }
                },
                headers=user.headers,
            )
        return signing_in(service, user)()

    answers = in_parallel(10, act)
    assert answers[0].status == 200
    assert {answer.status for answer in answers[1:]} <= {200, 401}
    # Whatever order things happened in, no session opened with the old password
    # survives.
    for answer in answers[1:]:
        if answer.status == 200:
            assert (
                http(
                    'GET', service + '/api/v1/profile', headers=token_headers(answer)
                ).status
                == 401
            )
        else:
            assert answer.json == {
                'success': False,
                'errors': ['Invalid login credentials. Please try again.'],
            }
    assert http('GET', service + '/api/v1/profile', headers=user.headers).status == 200
    tokens = conn.execute(
        'SELECT client FROM user_tokens WHERE user_id = %s', (user.id,)
    ).fetchall()
    assert [row['client'] for row in tokens] == [user.client]
    assert (
        http(
            'POST',
            service + '/auth/sign_in',
            {'email': user.email, 'password': new_password},
        ).status
        == 200
    )
    assert signing_in(service, user)().status == 401


def test_parallel_sign_ins_keep_to_the_maximum(base_env, make_user, conn):
    user = make_user()
    with run_gunicorn({**base_env, 'MAX_USER_SESSIONS': '4'}, workers=3) as base:
        answers = in_parallel(
            12,
            lambda _: signing_in(base, user)(),
        )
        assert [answer.status for answer in answers] == [200] * 12
        assert sessions_of(conn, user) == 4
        working = sum(
            http('GET', base + '/api/v1/profile', headers=token_headers(answer)).status
            == 200
            for answer in answers
        )
        assert working == 4


# Personal access tokens (SPEC 17).

TOKENS = '/api/v1/profile/access_tokens'


def test_a_token_revoked_while_in_use_stops_at_the_revocation(service, make_user, conn):
    """Four clients use a token without pause, each request stamping its last use (the
    row's lock) while the owner revokes it: no error, every request that began after
    the revocation answered is refused, every one that ended before it was served."""
    user = make_user()
    created = http(
        'POST',
        service + TOKENS,
        {'name': 'busy', 'scopes': ['profile:read'], 'expires_in_days': 1},
        headers=user.headers,
    )
    assert created.status == 201
    token = {'Authorization': f'Bearer {created.json["token"]}'}
    results, stop, served = [], threading.Event(), threading.Semaphore(0)

    def use():
        while not stop.is_set():
            began = time.monotonic()
            answer = http('GET', service + '/api/v1/profile', headers=token)
            results.append((began, time.monotonic(), answer.status))
            if answer.status == 200:
                served.release()

    def stamp_every_time():
        # Every request then writes last_used_at: the race with the DELETE is on the
        # row's lock each time, not once in 5 minutes.
        while not stop.is_set():
            conn.execute(
                'UPDATE personal_access_tokens SET last_used_at = NULL WHERE id = %s',
                (created.json['id'],),
            )

    threads = [threading.Thread(target=use) for _ in range(4)]
    threads.append(threading.Thread(target=stamp_every_time))
    for thread in threads:
        thread.start()
    try:
        for _ in range(20):  # the clients are in full swing
            assert served.acquire(timeout=30)
        revoke_began = time.monotonic()
        revoked = http(
            'DELETE', f'{service}{TOKENS}/{created.json["id"]}', headers=user.headers
        )
        revoke_ended = time.monotonic()
        assert revoked.status == 200
        deadline = time.monotonic() + 30
        while not any(began > revoke_ended for began, _, _ in results):
            assert time.monotonic() < deadline, 'the clients stopped'
            time.sleep(0.01)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert {status for _, _, status in results} <= {200, 401}
    assert all(status == 401 for began, _, status in results if began > revoke_ended)
    assert all(status == 200 for _, ended, status in results if ended < revoke_began)
    assert http('GET', service + '/api/v1/profile', headers=token).status == 401


def test_parallel_creations_keep_to_fifty_live_tokens(service, make_user, conn):
    user = make_user()
    insert_personal_tokens(conn, user.id, 47)
    answers = in_parallel(
        8,
        lambda index: http(
            'POST',
            service + TOKENS,
            {'name': f'p{index}', 'scopes': ['profile:read'], 'expires_in_days': 1},
            headers=user.headers,
        ),
    )
    assert sorted(answer.status for answer in answers) == [201] * 3 + [422] * 5
    live = conn.execute(
        'SELECT count(*) AS n FROM personal_access_tokens WHERE user_id = %s',
        (user.id,),
    ).fetchone()['n']
    assert live == 50


# A personal access token minted while the mailbox takes the account back (SPEC 3.4,
# 17, 18): the creation authenticated before the reset or lockout committed, and waits
# for the user's row it holds. What it then mints must not outlive that change.


def _creating(service, user):
    return lambda: http(
        'POST',
        service + TOKENS,
        {'name': 'late', 'scopes': ['profile:read'], 'expires_in_days': 1},
        headers=user.headers,
    )


def _used_once(service, user):
    """Stamp the session as used now, so the creation's authentication writes nothing
    (and so waits for no row lock the test holds)."""
    assert http('GET', service + '/api/v1/profile', headers=user.headers).status == 200


def _personal_tokens_of(conn, user):
    return conn.execute(
        'SELECT count(*) AS n FROM personal_access_tokens WHERE user_id = %s',
        (user.id,),
    ).fetchone()['n']


def _resetting(service, conn, user):
    """The request that uses the reset link just mailed to ``user``."""
    http('POST', service + '/auth/password', {'email': user.email})
    reset = queued_token(conn, user.email, 'reset_password_token')
    return lambda: http(
        'PUT',
        service + '/auth/password',
        {'reset_password_token': reset, 'password': 'a brand new secret 7'},
    )


def test_a_token_created_while_a_password_reset_commits_dies_with_it(
    service, make_user, conn, direct_database_url
):
    """The reset holds the user's row and is about to revoke every session and token
    (it waits for the attacker's session row, which the test holds); a creation with
    that session, authenticated a moment earlier, waits for the user's row. The reset
    ends that session: the creation must not mint a token after it."""
    owner = make_user()
    _used_once(service, owner)
    resetting = _resetting(service, conn, owner)
    was_reset, created = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM user_tokens WHERE user_id = %s FOR UPDATE', (owner.id,)),
        (resetting, 'personal_tokens_revoked'),
        (_creating(service, owner), 'Serialises token issuance'),
    )
    assert was_reset.status == 200
    # The reset ended the session: the 401 of a revoked credential.
    assert created.status == 401, created.json
    assert _personal_tokens_of(conn, owner) == 0


def test_a_reset_committing_during_a_sign_in_leaves_the_old_password_no_challenge(
    service, testapp, make_user, conn, direct_database_url
):
    """An MFA user's sign-in has checked the old password and waits for the user's row,
    which a reset of that user took first; the reset commits a new password. The
    second step's challenge would be issued after the reset voided every other one:
    the sign-in is the 401 of a wrong password instead."""
    user = make_user()
    enable(testapp, user)
    resetting = _resetting(service, conn, user)
    was_reset, signed_in = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (user.id,)),
        (resetting, 'The user row of a one-time link'),
        (signing_in(service, user), 'Serialises token issuance'),
    )
    assert was_reset.status == 206
    assert (signed_in.status, signed_in.json) == (401, INVALID_LOGIN)


def test_mfa_turned_on_during_a_sign_in_leaves_it_no_session(
    service, testapp, make_user, conn, direct_database_url
):
    """A sign-in has checked the password, found MFA off and waits for the user's row,
    which the user's own MFA verification took first; MFA comes on. The session would
    skip the second factor (SPEC 12): the sign-in is refused instead."""
    user = make_user()
    started = testapp.post_json(
        '/api/v1/profile/mfa', {'password': user.password}, headers=user.headers
    ).json
    app = Authenticator(started['provisioning_url'])

    def verifying():
        return http(
            'POST',
            service + '/api/v1/profile/mfa/verify',
            {'otp_code': app.code(-1)},
            headers=user.headers,
        )

    verified, signed_in = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (user.id,)),
        (verifying, 'Every check of a code holds this lock'),
        (signing_in(service, user), 'Serialises token issuance'),
    )
    assert verified.status == 200 and verified.json['enabled'] is True
    assert (signed_in.status, signed_in.json) == (401, INVALID_LOGIN)
    assert sessions_of(conn, user) == 1


def test_an_administrator_ending_sessions_and_a_sign_in_of_that_member_both_complete(
    service, admin, make_user, conn, direct_database_url
):
    """One lock order for a user's row and their sessions: the row first (a sign-in
    takes it, then makes room among the sessions). The member's sign-in waits for the
    member's row (the test holds it), then an administrator ends the member's sessions
    with their access token (SPEC 13) and waits for that row too, behind the sign-in.
    Had the administrator's request deleted the sessions before taking the row, the
    sign-in would next wait to drop the expired session it deleted: each would hold what
    the other waits for, PostgreSQL would end one as a deadlock, and its client would
    get a 503. Taking the row first, the sign-in runs whole, then the administrator's
    request, which ends the new session too."""
    member = make_user(account_id=admin.account_id)
    assert signing_in(service, member)().status == 200
    # An expired session, which the next sign-in drops to make room.
    conn.execute(
        "UPDATE user_tokens SET expires_at = now() - interval '1 minute'"
        ' WHERE user_id = %s AND client = %s',
        (member.id, member.headers['client']),
    )
    signed_in, ended = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (member.id,)),
        (
            signing_in(service, member),
            'Serialises token issuance',
        ),
        (
            lambda: http(
                'DELETE',
                service
                + f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/sessions'
                + '?include_access_token=true',
                headers=admin.headers,
            ),
            # Wherever it waits for the member's row.
            '',
        ),
    )
    assert signed_in.status == 200, signed_in.json
    # The other session and the sign-in's: the administrator came second.
    assert (ended.status, ended.json) == (200, {'revoked': 2})
    assert (
        http(
            'GET', service + '/api/v1/profile', headers=token_headers(signed_in)
        ).status
        == 401
    )
    assert sessions_of(conn, member) == 0


def test_a_password_reset_and_an_access_token_reset_of_that_user_both_complete(
    service, make_user, conn, direct_database_url
):
    """One lock order for a user's row and their one-time links: the row first (a
    credential change takes it, then voids the user's links). The owner's session
    replaces the access token and waits for the user's row (the test holds it); then a
    reset link of that user is used, and waits for the row too, behind it. Had the reset
    used its link up before taking the row, the credential change would next wait to
    void the link the reset deleted: each would hold what the other waits for,
    PostgreSQL would end one as a deadlock, and its client would get a 503. Taking the
    row first, the access token reset runs whole and voids the link, as it would have
    one request earlier: the reset is the 422 of a used link, and changes nothing."""
    owner = make_user()
    _used_once(service, owner)
    resetting = _resetting(service, conn, owner)
    replaced, was_reset = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (owner.id,)),
        (
            lambda: http(
                'POST',
                service + '/api/v1/profile/reset_access_token',
                headers=owner.headers,
            ),
            # Its recent authentication is asked under the row's lock (SPEC 3.4).
            'Serialises token issuance',
        ),
        # Wherever it waits for the user's row.
        (resetting, ''),
    )
    assert replaced.status == 200, replaced.json
    assert (was_reset.status, was_reset.json) == (422, {'message': 'Invalid token'})
    assert http('GET', service + '/api/v1/profile', headers=owner.headers).status == 200
    assert signing_in(service, owner)().status == 200


def _resending(service, user):
    return lambda: http('POST', service + '/resend_confirmation', {'email': user.email})


def _confirming(service, token):
    return lambda: http(
        'POST', service + '/auth/confirmation', {'confirmation_token': token}
    )


def test_a_confirmation_and_a_resend_of_that_link_both_complete(
    service, make_user, conn, direct_database_url
):
    """The lock order of a one-time link's use: the user's row, then the link. A resend
    (anyone may ask, signed out) waits for the user's row (the test holds it), then a
    confirmation with the link it replaces waits for the row too, behind it. Had the
    confirmation used its link up before taking the row, the resend would next wait to
    replace the link the confirmation deleted: each would hold what the other waits
    for, PostgreSQL would end one as a deadlock, and its client would get a 503. Taking
    the row first, the resend runs whole and replaces the link, as it would have one
    request earlier: the old link is the 422 of a used one, and the new one confirms."""
    user = make_user(confirmed=False)
    assert _resending(service, user)().status == 200
    old = queued_token(conn, user.email, 'confirmation_token')
    resent, confirmed = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (user.id,)),
        (_resending(service, user), 'revert_until'),
        # Wherever it waits for the user's row.
        (_confirming(service, old), ''),
    )
    assert (resent.status, resent.json) == (200, {})
    assert (confirmed.status, confirmed.json) == (422, {'message': 'Invalid token'})
    new = queued_token(conn, user.email, 'confirmation_token')
    assert new != old
    assert _confirming(service, new)().status == 200


def _reverting(service, token):
    return lambda: http('POST', service + '/auth/email_revert', {'token': token})


def test_two_email_revert_links_of_one_user_used_at_once_both_complete(
    service, make_user, conn, direct_database_url
):
    """The lock order of a one-time link's use: the user's row, then the links. Two
    e-mail changes mailed the old address two revert links; the older one is used and
    waits for the user's row (the test holds it), then the newer one, behind it. Using
    a link up deletes it and the user's later revert links (SPEC 3.4). Had the older
    one's use deleted its link before taking the row, it would next wait for the newer
    link, which the other use had deleted before waiting for the row: each would hold
    what the other waits for, PostgreSQL would end one as a deadlock, and its client
    would get a 503. Taking the row first, the older link undoes both changes, and the
    newer one is the 422 of a used link."""
    owner = make_user()
    links = []
    for _ in range(2):
        changed = http(
            'PUT',
            service + '/api/v1/profile',
            {'profile': {'email': unique_email()}},
            headers=owner.headers,
        )
        assert changed.status == 200, changed.json
        links.append(queued_token(conn, owner.email, 'token'))
    older, newer = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (owner.id,)),
        (_reverting(service, links[0]), ''),
        (_reverting(service, links[1]), ''),
    )
    assert (older.status, older.json) == (200, {})
    assert (newer.status, newer.json) == (422, {'message': 'Invalid token'})
    row = conn.execute(
        'SELECT email, unconfirmed_email FROM users WHERE id = %s', (owner.id,)
    ).fetchone()
    assert row == {'email': owner.email, 'unconfirmed_email': None}
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM one_time_tokens WHERE user_id = %s'
            " AND purpose = 'email_revert'",
            (owner.id,),
        ).fetchone()['n']
        == 0
    )


def test_a_password_reset_and_a_new_reset_link_for_that_user_both_complete(
    service, make_user, conn, direct_database_url
):
    """A reset link is used and waits for the user's row (the test holds it); then a
    new link is asked for, for that address, and waits for the row too, behind it. Had
    the request for a link deleted the user's earlier link (the one being used) before
    taking the row, which the new link's foreign key takes, the reset would next wait to
    delete that link: each would hold what the other waits for, PostgreSQL would end one
    as a deadlock, and its client would get a 503 (for the request for a link, an answer
    SPEC 3.3 gives alike for every address). Taking the row first, the reset runs whole,
    then the new link goes out."""
    owner = make_user()
    resetting = _resetting(service, conn, owner)
    was_reset, asked = interleave(
        direct_database_url,
        conn,
        ('SELECT id FROM users WHERE id = %s FOR UPDATE', (owner.id,)),
        (resetting, 'one-time link'),
        # Wherever it waits for the user's row.
        (lambda: http('POST', service + '/auth/password', {'email': owner.email}), ''),
    )
    assert was_reset.status == 200, was_reset.json
    assert (asked.status, asked.json) == (200, RESET_REQUESTED)
    assert (
        http(
            'POST',
            service + '/auth/sign_in',
            {'email': owner.email, 'password': 'a brand new secret 7'},
        ).status
        == 200
    )
    # The new link, mailed after the reset, works.
    new = queued_token(conn, owner.email, 'reset_password_token')
    answer = http(
        'PUT',
        service + '/auth/password',
        {'reset_password_token': new, 'password': 'another new secret 8'},
    )
    assert answer.status == 200, answer.json


def _answer_while_the_row_is_held(database_url, conn, user, request):
    """``request``'s answer, sent while the test holds ``user``'s row; an
    AssertionError if it waits for that row in one_time_tokens.lock_user instead."""
    with psycopg.connect(database_url) as holder:
        holder.execute('SELECT id FROM users WHERE id = %s FOR UPDATE', (user.id,))
        answers = []
        thread = threading.Thread(target=lambda: answers.append(request()))
        thread.start()
        while thread.is_alive():
            if waiting_for(conn, holder.info.backend_pid, 'one-time link'):
                holder.rollback()
                thread.join()
                raise AssertionError("it waited for the user's row")
            thread.join(0.01)
    return answers[0]


@pytest.mark.parametrize('link', ['of_another_purpose', 'expired'])
def test_a_link_that_cannot_be_used_takes_no_lock_on_its_users_row(
    service, make_user, conn, direct_database_url, link
):
    """Only a live link of the route's purpose locks its user's row: anyone holding an
    expired link, or one of another kind (a reset link sent to the confirmation route),
    gets the 422 of an unusable link at once, and holds nothing of the user's meanwhile
    (without a rate limit, a loop of them would keep the row busy for the owner's own
    requests and the account's updates)."""
    user = make_user(confirmed=False)
    if link == 'expired':
        assert (
            http('POST', service + '/resend_confirmation', {'email': user.email}).status
            == 200
        )
        token = queued_token(conn, user.email, 'confirmation_token')
        conn.execute(
            "UPDATE one_time_tokens SET expires_at = now() - interval '1 minute'"
            " WHERE user_id = %s AND purpose = 'confirmation'",
            (user.id,),
        )
    else:
        http('POST', service + '/auth/password', {'email': user.email})
        token = queued_token(conn, user.email, 'reset_password_token')
    answer = _answer_while_the_row_is_held(
        direct_database_url,
        conn,
        user,
        lambda: http(
            'POST', service + '/auth/confirmation', {'confirmation_token': token}
        ),
    )
    assert (answer.status, answer.json) == (422, {'message': 'Invalid token'})


def test_a_refused_new_password_holds_nothing_of_the_user_while_it_is_checked(
    service, make_user, conn, direct_database_url
):
    """The new password of a reset is checked (bcrypt, the breached-password lookup)
    before the user's row is locked: a refused one answers while the row is held
    elsewhere, and leaves the link working for a better password."""
    owner = make_user()
    http('POST', service + '/auth/password', {'email': owner.email})
    reset = queued_token(conn, owner.email, 'reset_password_token')
    answer = _answer_while_the_row_is_held(
        direct_database_url,
        conn,
        owner,
        # The current password: SPEC 15 refuses it.
        lambda: http(
            'PUT',
            service + '/auth/password',
            {'reset_password_token': reset, 'password': PASSWORD},
        ),
    )
    assert answer.status == 422, answer.json
    assert answer.json['attributes'] == ['password']
    answer = http(
        'PUT',
        service + '/auth/password',
        {'reset_password_token': reset, 'password': 'a brand new secret 7'},
    )
    assert answer.status == 200, answer.json
