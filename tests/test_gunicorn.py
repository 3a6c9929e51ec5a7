"""The main flows over real HTTP against real gunicorn started from gunicorn.conf.py."""

from tests.conftest import http
from tests.conftest import unique_email


def token_headers(answer):
    return {name: answer.headers[name] for name in ('access-token', 'client', 'uid')}


def test_sign_up_sign_in_and_account_endpoints_over_http(gunicorn_url, make_user, conn):
    email = unique_email('http')
    signup = http('POST', gunicorn_url + '/api/v1/accounts', {
        'account_name': 'Over HTTP', 'email': email, 'user_full_name': 'Hugh', 'password': 'over http 1'})
    assert signup.status == 200
    for name in ('access-token', 'token-type', 'client', 'expiry', 'uid'):
        assert signup.headers[name]
    account_id = signup.json['data']['account_id']
    headers = token_headers(signup)

    profile = http('GET', gunicorn_url + '/api/v1/profile', headers=headers)
    assert profile.status == 200 and profile.json['email'] == email
    assert profile.headers['access-token'] == headers['access-token']

    account = http('GET', f'{gunicorn_url}/api/v1/accounts/{account_id}', headers=headers)
    assert account.status == 200 and account.json['name'] == 'Over HTTP'
    updated = http('PATCH', f'{gunicorn_url}/api/v1/accounts/{account_id}', {'name': 'Renamed'}, headers=headers)
    assert updated.status == 200 and updated.json['name'] == 'Renamed'
    keys = http('GET', f'{gunicorn_url}/api/v1/accounts/{account_id}/cache_keys', headers=headers)
    assert keys.headers['cache-control'] == 'max-age=10, private, stale-while-revalidate=300'
    assert http('POST', f'{gunicorn_url}/api/v1/accounts/{account_id}/update_active_at', headers=headers).json == {}

    # The api_access_token header has underscores; gunicorn must pass it (header_map).
    by_access_token = http('GET', gunicorn_url + '/api/v1/profile',
                           headers={'api_access_token': profile.json['access_token']})
    assert by_access_token.status == 200 and by_access_token.json['email'] == email

    conn.execute('UPDATE users SET confirmed_at = now() WHERE email = %s', (email,))
    signed_in = http('POST', gunicorn_url + '/auth/sign_in', {'email': email, 'password': 'over http 1'})
    assert signed_in.status == 200

    stranger = make_user()
    assert http('GET', f'{gunicorn_url}/api/v1/accounts/{account_id}', headers=stranger.headers).status == 404

    assert http('DELETE', gunicorn_url + '/auth/sign_out', headers=token_headers(signed_in)).json == {'success': True}
    assert http('GET', gunicorn_url + '/api/v1/profile', headers=token_headers(signed_in)).status == 401
    assert http('GET', gunicorn_url + '/api/v1/profile', headers=headers).status == 200
