"""SPEC section 7: limits counted in PostgreSQL, keyed by nginx's X-Real-IP and by
e-mail."""

import random

import pytest

from tests.support.users import unique_email
from tests.support.users import unique_ip

RETRY_LATER = {'message': 'Retry later'}


@pytest.fixture
def limited(make_testapp):
    return make_testapp(RATE_LIMITS='on')


def sign_in(app, email, ip, status, extra=None):
    headers = {'X-Real-IP': ip, **(extra or {})}
    return app.post_json(
        '/auth/sign_in',
        {'email': email, 'password': 'wrong password'},
        headers=headers,
        status=status,
    )


def test_sign_in_allows_five_per_ip_then_429_with_retry_after(limited, make_user):
    ip, user = unique_ip(), make_user()
    for _ in range(5):
        sign_in(limited, user.email, ip, 401)
    resp = sign_in(limited, user.email, ip, 429)
    assert resp.json == RETRY_LATER
    assert 1 <= int(resp.headers['Retry-After']) <= 300
    # Another address is not affected.
    sign_in(limited, user.email, unique_ip(), 401)


def test_x_forwarded_for_never_resets_the_limit(limited, make_user):
    ip, user = unique_ip(), make_user()
    for index in range(5):
        sign_in(limited, user.email, ip, 401, {'X-Forwarded-For': f'192.0.2.{index}'})
    sign_in(limited, user.email, ip, 429, {'X-Forwarded-For': '192.0.2.200'})


def test_x_real_ip_from_an_untrusted_peer_is_not_believed(limited, make_user):
    user = make_user()
    peer = {'REMOTE_ADDR': unique_ip()}
    for _ in range(5):
        limited.post_json(
            '/auth/sign_in',
            {'email': user.email, 'password': 'x'},
            headers={'X-Real-IP': unique_ip()},
            extra_environ=peer,
            status=401,
        )
    limited.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': 'x'},
        headers={'X-Real-IP': unique_ip()},
        extra_environ=peer,
        status=429,
    )


def test_sign_in_allows_ten_per_email_across_addresses(limited, make_user):
    user = make_user()
    for _ in range(10):
        sign_in(limited, f'  {user.email.upper()} ', unique_ip(), 401)
    sign_in(limited, user.email, unique_ip(), 429)
    # The right password does not get past the limit either, and another address's
    # e-mail is free.
    limited.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': user.password},
        headers={'X-Real-IP': unique_ip()},
        status=429,
    )
    sign_in(limited, make_user().email, unique_ip(), 401)


def test_sign_up_allows_five_per_ip(limited, conn):
    ip = unique_ip()
    emails = [unique_email('limited') for _ in range(6)]
    for email in emails[:5]:
        limited.post_json(
            '/api/v1/accounts',
            {
                'account_name': 'A',
                'email': email,
                'user_full_name': 'U',
                'password': 'a long passphrase',
            },
            headers={'X-Real-IP': ip},
            status=200,
        )
    resp = limited.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'A',
            'email': emails[5],
            'user_full_name': 'U',
            'password': 'a long passphrase',
        },
        headers={'X-Real-IP': ip},
        status=429,
    )
    assert resp.json == RETRY_LATER
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM users WHERE email = %s', (emails[5],)
        ).fetchone()['n']
        == 0
    )


def test_expired_counters_are_cleaned_up_by_later_hits(limited, make_user, conn):
    # A hit deletes at most 20 expired counters, any 20; the earlier tests of this
    # database (one per pytest-xdist worker, minutes of them) leave more than that once
    # their windows end, and one hit need not reach this test's. Start with none.
    conn.execute('DELETE FROM rate_limit_counters WHERE expires_at < now()')
    conn.execute(
        'INSERT INTO rate_limit_counters (bucket, window_start, hits, expires_at)'
        " VALUES ('old', now() - interval '2 hours', 3, now() - interval '1 hour')"
    )
    sign_in(limited, make_user().email, unique_ip(), 401)
    assert (
        conn.execute(
            "SELECT count(*) AS n FROM rate_limit_counters WHERE bucket = 'old'"
        ).fetchone()['n']
        == 0
    )


def test_limits_are_off_when_configured(testapp, make_user):
    ip, user = unique_ip(), make_user()
    for _ in range(6):
        sign_in(testapp, user.email, ip, 401)
    # Beyond the 5 per IP; the user's own guessing budget (10) still holds
    # (test_guessing.py).


def test_password_reset_requests_allow_five_per_ip(limited, make_user, conn):
    ip, user = unique_ip(), make_user()
    for _ in range(5):
        limited.post_json(
            '/auth/password',
            {'email': user.email},
            headers={'X-Real-IP': ip},
            status=200,
        )
    assert (
        limited.post_json(
            '/auth/password',
            {'email': user.email},
            headers={'X-Real-IP': ip},
            status=429,
        ).json
        == RETRY_LATER
    )
    queued = conn.execute(
        'SELECT count(*) AS n FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'reset_password'",
        (user.email,),
    ).fetchone()['n']
    assert queued == 5


def test_resend_confirmation_allows_five_per_ip(limited, make_user):
    ip, user = unique_ip(), make_user(confirmed=False)
    for _ in range(5):
        limited.post(
            '/api/v1/profile/resend_confirmation',
            headers={**user.headers, 'X-Real-IP': ip},
            status=200,
        )
    limited.post(
        '/api/v1/profile/resend_confirmation',
        headers={**user.headers, 'X-Real-IP': ip},
        status=429,
    )


def fresh_ipv6_64():
    """A random /64 in the documentation prefix, as 'hhhh:hhhh:hhhh:hhhh'."""
    return '2001:db8:%x:%x' % (random.randrange(1, 0xFFFF), random.randrange(1, 0xFFFF))


def test_ipv6_clients_share_the_bucket_of_their_64(limited, make_user):
    prefix, user = fresh_ipv6_64(), make_user()
    # Five addresses of one /64, each new: walking the /64 does not get around the
    # limit.
    for host in range(1, 6):
        sign_in(limited, user.email, f'{prefix}::{host:x}', 401)
    sign_in(limited, user.email, f'{prefix}:ffff:ffff:ffff:ffff', 429)
    # The next /64 is another subscriber.
    sign_in(limited, user.email, fresh_ipv6_64() + '::1', 401)


def test_spellings_of_one_address_share_a_bucket(limited, make_user):
    user = make_user()
    prefix = fresh_ipv6_64()
    groups = prefix.split(':')
    spellings = [
        f'{prefix}::1',
        ':'.join(group.zfill(4) for group in groups) + ':0:0:0:1',
        f'{prefix.upper()}::0001',
        f'{prefix}:0::1',
        f'{prefix}:0000:0000:0000:0001',
    ]
    for spelling in spellings:
        sign_in(limited, user.email, spelling, 401)
    sign_in(limited, user.email, f'{prefix}::1', 429)


def test_an_ipv4_mapped_address_is_its_ipv4_address(limited, make_user):
    ip, user = unique_ip(), make_user()
    for spelling in (ip, f'::ffff:{ip}', f'::FFFF:{ip}', ip, f'0:0:0:0:0:ffff:{ip}'):
        sign_in(limited, user.email, spelling, 401)
    sign_in(limited, user.email, ip, 429)


def test_avatar_uploads_allow_ten_per_user_per_hour(limited, make_user):
    from tests.test_avatars import encode
    from tests.test_avatars import picture

    user, other = make_user(), make_user()
    image = encode(picture(), 'PNG')
    for index in range(10):
        # A new address each time: the limit follows the user, not the address.
        limited.put(
            '/api/v1/profile',
            upload_files=[('profile[avatar]', 'a.png', image)],
            headers={**user.headers, 'X-Real-IP': unique_ip()},
            status=200,
        )
    answer = limited.patch(
        '/api/v1/profile',
        upload_files=[('profile[avatar]', 'a.png', image)],
        headers={**user.headers, 'X-Real-IP': unique_ip()},
        status=429,
    )
    assert answer.json == RETRY_LATER and int(answer.headers['Retry-After']) <= 3600
    # Profile updates without a file, and other users' uploads, are not counted.
    limited.put_json(
        '/api/v1/profile',
        {'profile': {'name': 'Still Fine'}},
        headers=user.headers,
        status=200,
    )
    limited.put(
        '/api/v1/profile',
        params=[('profile[name]', 'Multipart')],
        headers=user.headers,
        content_type='multipart/form-data',
        status=200,
    )
    limited.put(
        '/api/v1/profile',
        upload_files=[('profile[avatar]', 'a.png', image)],
        headers=other.headers,
        status=200,
    )
