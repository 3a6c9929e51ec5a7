"""Mail to one address is bounded per address, whoever asks (SPEC 3.4), even with
RATE_LIMITS=off.

At most 5 confirmation, reset or resend mails, or notices that someone tried to use the
address, per address per hour; beyond, the answer
is the same and no mail is queued. Anonymous requests never spend a user's e-mail-change
quota.
"""

from tests.support.users import unique_email
from tests.support.users import unique_ip


def pending_mails(conn, address):
    return conn.execute(
        'SELECT count(*) AS n FROM mail_outbox'
        " WHERE to_address = %s AND status = 'pending'",
        (address,),
    ).fetchone()['n']


def public_resend(testapp, email):
    answer = testapp.post_json(
        '/resend_confirmation', {'email': email}, headers={'X-Real-IP': unique_ip()}
    )
    assert answer.json == {}


def reset_request(testapp, email):
    return testapp.post_json(
        '/auth/password', {'email': email}, headers={'X-Real-IP': unique_ip()}
    ).json


def change_email(testapp, user, address, status=200):
    return testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': address}},
        headers=user.headers,
        status=status,
    )


def test_five_reset_or_resend_mails_per_address_an_hour_from_any_address(
    testapp, make_user, conn
):
    user = make_user(confirmed=False)
    answers = []
    for _ in range(4):
        answers.append(reset_request(testapp, user.email))
        public_resend(testapp, user.email)
    # Every answer is the one of an address that is mailed.
    assert all(answer == answers[0] for answer in answers)
    assert pending_mails(conn, user.email) == 5
    # The link of the fifth mail still works: what was not sent replaced nothing.
    last = conn.execute(
        "SELECT kind FROM mail_outbox WHERE to_address = %s AND status = 'pending'"
        ' ORDER BY id DESC LIMIT 1',
        (user.email,),
    ).fetchone()['kind']
    purpose = 'reset_password' if last == 'reset_password' else 'confirmation'
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM one_time_tokens'
            ' WHERE user_id = %s AND purpose = %s',
            (user.id, purpose),
        ).fetchone()['n']
        == 1
    )
    # An hour later the address may be mailed again.
    conn.execute(
        "UPDATE rate_limit_counters SET window_start = window_start - interval '1 day',"
        " expires_at = expires_at - interval '1 day' WHERE bucket = %s",
        (f'mail|to={user.email}',),
    )
    reset_request(testapp, user.email)
    assert pending_mails(conn, user.email) == 6


def test_email_changes_of_many_users_to_one_address_mail_it_five_times_an_hour(
    testapp, make_user, conn
):
    target = unique_email('target')
    for _ in range(7):
        change_email(testapp, make_user(), target)
    assert pending_mails(conn, target) == 5


def test_notices_that_someone_tried_to_use_an_address_count_against_its_hour(
    testapp, make_user, conn
):
    owner = make_user(confirmed=False)
    for _ in range(3):
        change_email(testapp, make_user(), owner.email)
    for _ in range(4):
        public_resend(testapp, owner.email)
    for _ in range(2):
        change_email(testapp, make_user(), owner.email)
    kinds = conn.execute(
        'SELECT kind, status FROM mail_outbox WHERE to_address = %s ORDER BY id',
        (owner.email,),
    ).fetchall()
    assert [(row['kind'], row['status']) for row in kinds] == [
        *[('address_taken_notice', 'pending')] * 3,
        *[('confirmation', 'pending')] * 2,
        *[('confirmation', 'suppressed')] * 2,
        *[('address_taken_notice', 'suppressed')] * 2,
    ]


def test_anonymous_resends_never_spend_the_users_email_change_quota(testapp, make_user):
    user = make_user()
    change_email(testapp, user, unique_email('pending'))
    for _ in range(6):
        public_resend(testapp, user.email)
    # Four more changes of the five a day remain the user's own.
    for _ in range(4):
        change_email(testapp, user, unique_email('next'))
    change_email(testapp, user, unique_email('sixth'), status=429)


def test_a_resend_spends_the_quota_alike_for_a_free_and_a_taken_pending_address(
    testapp, make_user
):
    free, taken, owner = make_user(), make_user(), make_user()
    change_email(testapp, free, unique_email('free'))
    change_email(testapp, taken, owner.email)
    for user in (free, taken):
        for _ in range(4):
            testapp.post(
                '/api/v1/profile/resend_confirmation', headers=user.headers, status=200
            )
    # Both used their five: the 429 tells nobody which pending address was taken.
    change_email(testapp, free, unique_email('again'), status=429)
    change_email(testapp, taken, unique_email('again'), status=429)
