"""The main flows over real HTTP against real gunicorn started from gunicorn.conf.py."""

import json

import pytest

from tests.support.servers import http
from tests.support.servers import raw_request
from tests.support.users import unique_email


def token_headers(answer):
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


def test_sign_up_sign_in_and_account_endpoints_over_http(gunicorn_url, make_user, conn):
    email = unique_email('http')
    signup = http(
        'POST',
        gunicorn_url + '/api/v1/accounts',
        {
            'account_name': 'Over HTTP',
            'email': email,
            'user_full_name': 'Hugh',
            'password': 'over http 1',
        },
    )
    assert signup.status == 200
    for name in ('access-token', 'token-type', 'client', 'expiry', 'uid'):
        assert signup.headers[name]
    account_id = signup.json['data']['account_id']
    headers = token_headers(signup)

    profile = http('GET', gunicorn_url + '/api/v1/profile', headers=headers)
    assert profile.status == 200 and profile.json['email'] == email
    assert profile.headers['access-token'] == headers['access-token']

    account = http(
        'GET', f'{gunicorn_url}/api/v1/accounts/{account_id}', headers=headers
    )
    assert account.status == 200 and account.json['name'] == 'Over HTTP'
    updated = http(
        'PATCH',
        f'{gunicorn_url}/api/v1/accounts/{account_id}',
        {'name': 'Renamed'},
        headers=headers,
    )
    assert updated.status == 200 and updated.json['name'] == 'Renamed'
    keys = http(
        'GET',
        f'{gunicorn_url}/api/v1/accounts/{account_id}/cache_keys',
        headers=headers,
    )
    assert (
        keys.headers['cache-control']
        == 'max-age=10, private, stale-while-revalidate=300'
    )
    assert (
        http(
            'POST',
            f'{gunicorn_url}/api/v1/accounts/{account_id}/update_active_at',
            headers=headers,
        ).json
        == {}
    )

    # The api_access_token header has underscores; gunicorn must pass it (header_map).
    by_access_token = http(
        'GET',
        gunicorn_url + '/api/v1/profile',
        headers={'api_access_token': profile.json['access_token']},
    )
    assert by_access_token.status == 200 and by_access_token.json['email'] == email

    conn.execute('UPDATE users SET confirmed_at = now() WHERE email = %s', (email,))
    signed_in = http(
        'POST',
        gunicorn_url + '/auth/sign_in',
        {'email': email, 'password': 'over http 1'},
    )
    assert signed_in.status == 200

    stranger = make_user()
    assert (
        http(
            'GET',
            f'{gunicorn_url}/api/v1/accounts/{account_id}',
            headers=stranger.headers,
        ).status
        == 404
    )

    assert http(
        'DELETE', gunicorn_url + '/auth/sign_out', headers=token_headers(signed_in)
    ).json == {'success': True}
    assert (
        http(
            'GET', gunicorn_url + '/api/v1/profile', headers=token_headers(signed_in)
        ).status
        == 401
    )
    assert http('GET', gunicorn_url + '/api/v1/profile', headers=headers).status == 200


# Header names with underscores, and gunicorn's own error pages.


def test_api_access_token_still_works_with_underscores_dropped(gunicorn_url, make_user):
    user = make_user()
    for name in ('api_access_token', 'Api-Access-Token'):
        answer = http(
            'GET', gunicorn_url + '/api/v1/profile', headers={name: user.access_token}
        )
        assert answer.status == 200 and answer.json['email'] == user.email


def test_a_clients_x_real_ip_with_underscores_does_not_count(base_env, make_user):
    """An X_Real_IP header must not merge with (or stand in for) X-Real-IP."""
    from tests.support.servers import run_gunicorn

    user = make_user()
    with run_gunicorn({**base_env, 'RATE_LIMITS': 'on'}, workers=1) as base:
        # The test's requests come from 127.0.0.1, a trusted proxy: a fresh X-Real-IP
        # each time means a fresh bucket, so only X_Real_IP could make them collide.
        forged = '198.51.100.77'
        statuses = []
        for index in range(6):
            request = (
                'POST /auth/sign_in HTTP/1.1\r\nHost: x\r\n'
                f'Content-Type: application/json\r\nX-Real-IP: 10.77.{index}.1\r\n'
                f'X_Real_IP: {forged}\r\nContent-Length: {{n}}\r\n'
                'Connection: close\r\n\r\n'
            )
            body = '{"email": "%s", "password": "wrong"}' % user.email
            status, _, _ = raw_request(
                base, request.format(n=len(body)).encode() + body.encode()
            )
            statuses.append(status)
        assert statuses == [401] * 6
        # And X_Real_IP alone is no address at all: the peer's own is used.
        answer = http('GET', base + '/healthz', headers={'X_Real_IP': forged})
        assert answer.status == 200


@pytest.mark.parametrize(
    'request_bytes, status',
    [
        (b'GET /' + b'a' * 9000 + b' HTTP/1.1\r\nHost: x\r\n\r\n', 414),
        (b'GET / HTTP/1.1\r\nHost: x\r\nX-Big: ' + b'b' * 9000 + b'\r\n\r\n', 431),
        (
            b'GET / HTTP/1.1\r\nHost: x\r\n'
            + b''.join(b'X-H%d: 1\r\n' % i for i in range(150))
            + b'\r\n',
            431,
        ),
        (b'NOT A REQUEST LINE\r\n\r\n', 400),
    ],
    ids=['long-line', 'big-header', 'many-headers', 'bad-line'],
)
def test_gunicorns_own_refusals_are_json(gunicorn_url, request_bytes, status):
    got, headers, body = raw_request(gunicorn_url, request_bytes)
    assert got == status
    assert headers['content-type'] == 'application/json; charset=utf-8'
    assert headers['x-content-type-options'] == 'nosniff' and headers['x-request-id']
    message = json.loads(body)['message']
    assert message and '<' not in message and 'aaaa' not in message
