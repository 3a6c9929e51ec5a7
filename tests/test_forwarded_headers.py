"""``api_access_token`` and ``mfa_token`` count only from FORWARDED_ALLOW_IPS, in
either spelling (docs/security.md): gunicorn drops the underscore spelling from other
peers, and the app refuses the hyphenated one (``Api-Access-Token``) from them alike."""

import pytest

from tests.support.servers import http
from tests.support.servers import run_gunicorn


@pytest.fixture(scope='module')
def untrusted_url(base_env):
    """gunicorn that trusts another proxy than the tests' own address (127.0.0.1)."""
    with run_gunicorn(
        {**base_env, 'FORWARDED_ALLOW_IPS': '192.0.2.1'}, workers=1
    ) as base:
        yield base


@pytest.mark.parametrize(
    'name', ['api_access_token', 'Api-Access-Token', 'API-ACCESS-TOKEN']
)
def test_the_api_access_token_of_an_untrusted_peer_is_no_credential(
    untrusted_url, make_user, name
):
    user = make_user()
    answer = http(
        'GET', untrusted_url + '/api/v1/profile', headers={name: user.access_token}
    )
    assert answer.status == 401
    # The token headers of a sign-in work from anywhere.
    assert (
        http('GET', untrusted_url + '/api/v1/profile', headers=user.headers).status
        == 200
    )


@pytest.mark.parametrize('name', ['api_access_token', 'Api-Access-Token'])
def test_the_api_access_token_of_a_trusted_proxy_counts_in_either_spelling(
    gunicorn_url, make_user, name
):
    user = make_user()
    answer = http(
        'GET', gunicorn_url + '/api/v1/profile', headers={name: user.access_token}
    )
    assert answer.status == 200 and answer.json['email'] == user.email
