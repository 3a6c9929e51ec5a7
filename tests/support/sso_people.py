"""People and organisations of single sign-on made as people make them (SPEC 19), over
real HTTP against a running Frontdesk, for tests/test_sso_e2e.py and
tests/sso_login_url.py.

An organisation: its administrator signs up with an address in the organisation's own
domain and confirms it with the mailed link (the proof of a mailbox there that SPEC 19
asks before an account may claim a domain), registers Frontdesk at the real provider
(tests/support/oidc_provider.py) with the URIs Frontdesk names, and saves the settings
with ``PUT /api/v1/accounts/{id}/sso_settings``. Mailed links are read from mail_outbox
(``conn``: a connection of the test's own to DATABASE_URL), as the reference harness
does.
"""

import dataclasses
import re
import time
import urllib.parse

import pyotp

from tests.support.servers import http
from tests.support.sso import unique_domain
from tests.support.sso_browser import SsoBrowser

PASSWORD = 'orange tulip 77 x'
SESSION_HEADERS = ('access-token', 'client', 'uid')


def session_of(answer):
    """The token headers of a sign-in's answer, as a client sends them back."""
    return {name: answer.headers[name] for name in SESSION_HEADERS}


def mailed_token(conn, address, param):
    """The token of the newest mail to ``address`` whose link carries ``param``."""
    for row in conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s ORDER BY id DESC',
        (address,),
    ):
        body = row['text_body'] if isinstance(row, dict) else row[0]
        found = re.search(rf'[?&]{param}=([A-Za-z0-9_-]+)', body or '')
        if found:
            return found.group(1)
    raise AssertionError(f'no mail to {address} with a {param} link')


def sign_up(base, address, name='Ada Lovelace', password=PASSWORD):
    """POST /api/v1/accounts as the reference sign-up page does: (its answer's data,
    session headers)."""
    answer = http(
        'POST',
        base + '/api/v1/accounts',
        {
            'account_name': f'{name} Ltd',
            'email': address,
            'user_full_name': name,
            'password': password,
        },
    )
    assert answer.status == 200, (answer.status, answer.body[:500])
    return answer.json['data'], session_of(answer)


def sign_up_confirmed(base, conn, address, name='Ada Lovelace', password=PASSWORD):
    """Sign up and open the mailed confirmation link: (account id, the link's
    session headers)."""
    data, _ = sign_up(base, address, name, password)
    token = mailed_token(conn, address, 'confirmation_token')
    answer = http('POST', base + '/auth/confirmation', {'confirmation_token': token})
    assert answer.status == 200, (answer.status, answer.body[:500])
    return data['account_id'], session_of(answer)


def enable_mfa(base, headers, password=PASSWORD):
    """Turn MFA on as the profile page does; return the authenticator (pyotp.TOTP)."""
    started = http(
        'POST', base + '/api/v1/profile/mfa', {'password': password}, headers=headers
    )
    assert started.status == 200, (started.status, started.body[:500])
    totp = pyotp.parse_uri(started.json['provisioning_url'])
    verified = http(
        'POST',
        base + '/api/v1/profile/mfa/verify',
        {'otp_code': totp.now()},
        headers=headers,
    )
    assert verified.status == 200 and verified.json['enabled'], verified.body[:500]
    return totp


def later_code(totp):
    """The code of the step after now: a code is accepted once, and never one of a
    step before the last one used, so after enrolling with the code of now the next
    sign-in sends this one (accepted one step either side of the server's now)."""
    return totp.at(time.time() + totp.interval)


@dataclasses.dataclass
class Org:
    """An account with single sign-on through ``provider`` for ``domain``."""

    base: str
    provider: object
    domain: str
    account_id: int
    admin_email: str
    admin_headers: dict
    settings: dict  # the answer of the PUT

    def address(self, prefix='someone'):
        return f'{prefix}-{time.monotonic_ns()}@{self.domain}'

    def person(self, prefix='someone', name='Grace Hopper', amr=None):
        """A person the provider knows (signing in there by typing the address)."""
        address = self.address(prefix)
        self.provider.add_account(address, name, amr=amr)
        return address

    def put_settings(self, **fields):
        answer = http(
            'PUT',
            f'{self.base}/api/v1/accounts/{self.account_id}/sso_settings',
            {'sso_settings': fields},
            headers=self.admin_headers,
        )
        assert answer.status == 200, (answer.status, answer.body[:500])
        self.settings = answer.json
        return answer.json

    def sign_in(self, address, browser=None, **options):
        """The whole flow in ``browser`` (a new one unless given): its SsoResult."""
        browser = browser or SsoBrowser()
        return browser.sign_in(self.base, address, self.provider, **options)


def make_org(base, conn, provider, **settings):
    """An organisation whose administrator set single sign-on up over the API;
    ``settings`` (jit_provisioning, enforce, trust_idp_mfa) go into the PUT."""
    domain = unique_domain()
    admin_email = f'admin-{time.monotonic_ns()}@{domain}'
    account_id, headers = sign_up_confirmed(base, conn, admin_email, 'Ada Admin')
    client_id, client_secret = provider.register_client(
        base + '/omniauth/oidc/callback', base + '/auth/oidc/backchannel_logout'
    )
    org = Org(base, provider, domain, account_id, admin_email, headers, {})
    answer = org.put_settings(
        issuer=provider.issuer,
        client_id=client_id,
        client_secret=client_secret,
        allowed_domains=[domain],
        **settings,
    )
    # What Frontdesk tells the administrator to register is what was registered.
    assert answer['sso_settings']['redirect_uri'] == base + '/omniauth/oidc/callback'
    assert answer['sso_settings']['backchannel_logout_uri'] == (
        base + '/auth/oidc/backchannel_logout'
    ), answer
    return org


def token_sign_in(base, result):
    """POST /auth/sign_in as the login page does with the final redirect's query."""
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(result.location).query))
    return http(
        'POST',
        base + '/auth/sign_in',
        {
            'email': params['email'],
            'password': '',
            'sso_auth_token': params['sso_auth_token'],
        },
    )
