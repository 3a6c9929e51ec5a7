"""An account's single sign-on settings (SPEC 19): GET, PUT, DELETE
/api/v1/accounts/{id}/sso_settings for administrators with a session; the issuer's
discovery read from a forged provider on loopback (tests/support/fake_idp.py) and
refused for every fault; no call to a private or special-use address; the proof of a
mailbox for each domain claimed, one account per domain, a race between two accounts;
the secret sealed and never answered; audit events and mail to every administrator."""

import contextlib
import socket
import threading
import time

import psycopg
import pytest

from services import sso_providers
from tests.smtp_server import deliver
from tests.support.database import waiting_for
from tests.support.fake_idp import DISCOVERY
from tests.support.fake_idp import fake_idp
from tests.support.servers import free_port
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.sso import unique_domain
from tests.test_access_tokens import bearer
from tests.test_access_tokens import new_token

SECRET = 'client-secret-Vq8Lm2Xz7Rt4Kp9Wn3'
ROLE = {'error': 'You are not authorized to do this action'}
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
NOT_FOUND = {'error': 'Resource could not be found'}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
UNAVAILABLE = {'error': 'Single sign-on is not available. Please configure SECRET_KEY.'}
UPDATED = "An account's single sign-on settings were changed"
DELETED = "An account's single sign-on settings were removed"


def url(account_id):
    return f'/api/v1/accounts/{account_id}/sso_settings'


def body(issuer, domains, **fields):
    return {
        'sso_settings': {
            'issuer': issuer,
            'client_id': 'frontdesk',
            'client_secret': SECRET,
            'allowed_domains': domains,
            **fields,
        }
    }


def move_to(conn, user, domain, confirmed=True):
    """Give ``user`` an address in ``domain`` (confirmed or not); the token headers
    follow it (uid)."""
    user.email = f'{user.email.partition("@")[0]}@{domain}'
    conn.execute(
        'UPDATE users SET email = %s,'
        ' confirmed_at = CASE WHEN %s THEN now() END WHERE id = %s',
        (user.email, confirmed, user.id),
    )
    return user


def provider_row(conn, account_id):
    return conn.execute(
        'SELECT * FROM sso_providers WHERE account_id = %s', (account_id,)
    ).fetchone()


def domains_of(conn, account_id):
    return [
        row['domain']
        for row in conn.execute(
            'SELECT domain FROM sso_domains WHERE account_id = %s ORDER BY domain',
            (account_id,),
        )
    ]


def events(conn, account_id):
    return conn.execute(
        'SELECT event, actor_id, subject_id, account_id, details FROM audit_events'
        " WHERE account_id = %s AND event LIKE 'sso_settings_%%' ORDER BY id",
        (account_id,),
    ).fetchall()


def assert_nothing_stored(conn, account_id):
    assert provider_row(conn, account_id) is None
    assert domains_of(conn, account_id) == []
    assert events(conn, account_id) == []


@pytest.fixture
def app(make_testapp):
    """The app with providers on loopback allowed (the fake provider's)."""
    return make_testapp(OIDC_ALLOW_PRIVATE_ISSUERS='true')


@pytest.fixture
def idp():
    with fake_idp() as idp:
        yield idp


@pytest.fixture
def domain(admin, conn):
    """A domain of the administrator's confirmed address."""
    domain = unique_domain()
    move_to(conn, admin, domain)
    return domain


# --- set, read, change, delete --------------------------------------------------------


def test_an_administrator_sets_reads_and_removes_the_settings(
    app, admin, domain, idp, conn, config
):
    assert app.get(url(admin.account_id), headers=admin.headers, status=404).json == (
        NOT_FOUND
    )
    answer = app.put_json(
        url(admin.account_id),
        body(idp.issuer, [domain], jit_provisioning=True),
        headers=admin.headers,
        status=200,
    )
    expected = {
        'sso_settings': {
            'issuer': idp.issuer,
            'client_id': 'frontdesk',
            'client_secret_set': True,
            'allowed_domains': [domain],
            'jit_provisioning': True,
            'enforce': False,
            'trust_idp_mfa': False,
            'redirect_uri': 'http://frontdesk.test/omniauth/oidc/callback',
            'backchannel_logout_uri': 'http://frontdesk.test/auth/oidc/backchannel_logout',
        }
    }
    assert answer.json == expected
    assert answer.headers['access-token'] == admin.token
    got = app.get(url(admin.account_id), headers=admin.headers, status=200)
    assert got.json == expected
    for text in (answer.body, got.body):
        assert SECRET.encode() not in text
    # The discovery document is stored; the secret only sealed, for this account.
    stored = provider_row(conn, admin.account_id)
    assert stored['discovery'] == idp.discovery
    assert SECRET.encode() not in bytes(stored['client_secret_encrypted'])
    assert sso_providers.client_secret(config, stored) == SECRET
    assert domains_of(conn, admin.account_id) == [domain]
    assert [method for method, path, *_ in idp.requests] == ['GET']
    assert idp.requests[0][1] == DISCOVERY

    assert app.delete(
        url(admin.account_id), headers=admin.headers, status=204
    ).body == (b'')
    assert provider_row(conn, admin.account_id) is None
    assert domains_of(conn, admin.account_id) == []
    app.get(url(admin.account_id), headers=admin.headers, status=404)
    assert app.delete(
        url(admin.account_id), headers=admin.headers, status=404
    ).json == (NOT_FOUND)


def test_domains_are_stored_sorted_and_once_and_replaced_as_a_set(
    app, admin, make_user, idp, conn
):
    first, second, third = sorted(unique_domain() for _ in range(3))
    move_to(conn, admin, second)
    for other in (first, third):
        move_to(
            conn, make_user(account_id=admin.account_id, role='administrator'), other
        )
    answer = app.put_json(
        url(admin.account_id),
        body(idp.issuer, [third, first, third]),
        headers=admin.headers,
    )
    assert answer.json['sso_settings']['allowed_domains'] == [first, third]
    answer = app.put_json(
        url(admin.account_id), body(idp.issuer, [second, first]), headers=admin.headers
    )
    assert answer.json['sso_settings']['allowed_domains'] == [first, second]
    assert domains_of(conn, admin.account_id) == [first, second]


def test_a_put_without_a_secret_keeps_the_stored_one(
    app, admin, domain, idp, conn, config
):
    no_secret = body(idp.issuer, [domain])
    del no_secret['sso_settings']['client_secret']
    # None stored yet: the secret is required.
    refused = app.put_json(
        url(admin.account_id), no_secret, headers=admin.headers, status=422
    )
    assert refused.json == {'message': "Client secret can't be blank"}
    assert_nothing_stored(conn, admin.account_id)
    app.put_json(
        url(admin.account_id), body(idp.issuer, [domain]), headers=admin.headers
    )
    for keep in (no_secret, body(idp.issuer, [domain], client_secret=None)):
        keep['sso_settings']['enforce'] = True
        answer = app.put_json(url(admin.account_id), keep, headers=admin.headers)
        assert answer.json['sso_settings']['enforce'] is True
        stored = provider_row(conn, admin.account_id)
        assert sso_providers.client_secret(config, stored) == SECRET
    app.put_json(
        url(admin.account_id),
        body(idp.issuer, [domain], client_secret='another secret'),
        headers=admin.headers,
    )
    stored = provider_row(conn, admin.account_id)
    assert sso_providers.client_secret(config, stored) == 'another secret'
    # A boolean left out of a PUT is false again: the body is the whole settings.
    assert provider_row(conn, admin.account_id)['enforce'] is False


def test_a_new_issuer_drops_the_cached_keys_and_the_same_one_keeps_them(
    app, admin, domain, idp, conn
):
    app.put_json(
        url(admin.account_id), body(idp.issuer, [domain]), headers=admin.headers
    )
    conn.execute(
        'UPDATE sso_providers SET jwks = %s, jwks_fetched_at = now()'
        ' WHERE account_id = %s',
        ('{"keys": []}', admin.account_id),
    )
    app.put_json(
        url(admin.account_id), body(idp.issuer, [domain]), headers=admin.headers
    )
    assert provider_row(conn, admin.account_id)['jwks'] == {'keys': []}
    with fake_idp() as other:
        app.put_json(
            url(admin.account_id), body(other.issuer, [domain]), headers=admin.headers
        )
        stored = provider_row(conn, admin.account_id)
    assert stored['issuer'] == other.issuer
    assert stored['discovery'] == other.discovery
    assert stored['jwks'] is None and stored['jwks_fetched_at'] is None


def test_the_body_is_validated_field_by_field(app, admin, domain, idp, conn):
    def refused(doc):
        return app.put_json(
            url(admin.account_id), doc, headers=admin.headers, status=422
        ).json

    assert refused({})['attributes'] == ['sso_settings']
    assert refused({'sso_settings': None})['attributes'] == ['sso_settings']
    missing = body(idp.issuer, [domain])
    del missing['sso_settings']['issuer']
    assert refused(missing)['message'] == "Issuer can't be blank"
    assert refused(body(idp.issuer, []))['message'] == "Allowed domains can't be blank"
    assert refused(body(idp.issuer, domain))['attributes'] == ['allowed_domains']
    assert refused(body(idp.issuer, [domain], enforce='yes'))['message'] == (
        'Enforce must be true or false'
    )
    assert refused(body(idp.issuer, [domain], client_id=''))['attributes'] == [
        'client_id'
    ]
    assert idp.requests == []
    assert_nothing_stored(conn, admin.account_id)


# --- the provider's discovery document ------------------------------------------------


def _html(idp):
    idp.answers[DISCOVERY] = (200, 'text/html', b'<html>sign in</html>')


def _error(idp):
    idp.answers[DISCOVERY] = (500, 'text/html', b'<html>oops</html>')


def _other_issuer(idp):
    idp.discovery['issuer'] = 'https://elsewhere.example'


def _no_jwks_uri(idp):
    del idp.discovery['jwks_uri']


def _no_code(idp):
    idp.discovery['response_types_supported'] = ['id_token', 'token id_token']


def _no_s256(idp):
    idp.discovery['code_challenge_methods_supported'] = ['plain']


@pytest.mark.parametrize(
    ('fault', 'says'),
    [
        (_html, 'did not answer JSON'),
        (_error, 'answered HTTP 500'),
        (_other_issuer, "names the issuer 'https://elsewhere.example'"),
        (_no_jwks_uri, 'has no jwks_uri'),
        (_no_code, 'does not support the "code" response type'),
        (_no_s256, 'does not support PKCE S256'),
    ],
)
def test_a_provider_that_fails_discovery_is_refused(
    app, admin, domain, idp, conn, fault, says
):
    fault(idp)
    refused = app.put_json(
        url(admin.account_id),
        body(idp.issuer, [domain]),
        headers=admin.headers,
        status=422,
    ).json
    assert set(refused) == {'message'}
    assert refused['message'].startswith('The issuer cannot be used: ')
    assert says in refused['message']
    assert len(idp.requests) == 1
    assert_nothing_stored(conn, admin.account_id)


def test_a_provider_that_refuses_the_connection_is_refused(app, admin, domain, conn):
    issuer = f'http://127.0.0.1:{free_port()}'  # nothing listens there
    refused = app.put_json(
        url(admin.account_id), body(issuer, [domain]), headers=admin.headers, status=422
    ).json
    assert set(refused) == {'message'}
    assert refused['message'].startswith('The issuer cannot be used: ')
    assert 'is unreachable' in refused['message']
    assert_nothing_stored(conn, admin.account_id)


def test_a_slow_provider_is_refused_at_the_deadline_and_holds_no_one_else(
    base_env, admin, domain, idp, conn
):
    """Real gunicorn with 2 workers: while one waits for the provider (which answers
    after 8 s), the other answers; the wait ends in a 422 at the 5 s deadline, and no
    database transaction is held open meanwhile."""
    # Far longer than the 5 s deadline: an answer before it proves the deadline.
    idp.delays[DISCOVERY] = 60
    env = {**base_env, 'OIDC_ALLOW_PRIVATE_ISSUERS': 'true'}
    with run_gunicorn(env, workers=2) as base:
        outcome = {}

        def put():
            outcome['answer'] = http(
                'PUT',
                base + url(admin.account_id),
                body(idp.issuer, [domain]),
                headers=admin.headers,
            )

        worker = threading.Thread(target=put)
        worker.start()
        deadline = time.monotonic() + 5
        while not idp.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert idp.requests, 'the provider was never asked'
        # While that worker waits on the provider, the other answers.
        meanwhile = http('GET', base + url(admin.account_id), headers=admin.headers)
        assert meanwhile.status == 404
        # Another administrator action, which takes the account's row first
        # (services/memberships.py): the waiting request does not hold it.
        renamed = http(
            'PUT',
            base + f'/api/v1/accounts/{admin.account_id}',
            {'name': 'Renamed meanwhile'},
            headers=admin.headers,
        )
        assert renamed.status == 200
        assert 'answer' not in outcome, 'answered only after the waiting PUT'
        # Nor any transaction.
        assert (
            conn.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE state LIKE 'idle in"
                " transaction%%' AND datname = current_database()"
            ).fetchone()['n']
            == 0
        )
        worker.join(timeout=15)
    answer = outcome['answer']
    assert answer.status == 422
    assert 'did not answer within 5 s' in answer.json['message']
    # Let go by its own deadline, not by the provider, which had not answered.
    assert DISCOVERY not in idp.finished
    assert_nothing_stored(conn, admin.account_id)


# --- issuers inside the service's own network -----------------------------------------


@contextlib.contextmanager
def listening_on_loopback():
    """One port listening on 127.0.0.1 and ::1, never accepting: a connection made to
    it waits in the backlog, where ``attempts()`` finds it."""
    v4 = socket.create_server(('127.0.0.1', 0))
    port = v4.getsockname()[1]
    v6 = socket.create_server(('::1', port), family=socket.AF_INET6)
    sockets = (v4, v6)

    def attempts():
        made = 0
        for sock in sockets:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                while True:
                    sock.accept()[0].close()
                    made += 1
        return made

    try:
        yield port, attempts
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize(
    ('issuer', 'says'),
    [
        ('https://127.0.0.1:{port}/', 'private or special-use address'),
        ('https://localhost:{port}', 'private or special-use address'),
        ('https://[::1]:{port}', 'private or special-use address'),
        # Never reached even without the guard's help here: no test sends traffic to a
        # private range.
        ('https://10.1.2.3', 'private or special-use address'),
        ('http://example.com', 'must be an https URL'),
    ],
    ids=['ipv4-loopback', 'localhost', 'ipv6-loopback', 'private-10', 'http'],
)
def test_an_issuer_in_the_services_own_network_is_refused_uncalled(
    testapp, admin, domain, conn, issuer, says
):
    """OIDC_ALLOW_PRIVATE_ISSUERS unset (the session's app): 422, and no connection
    is even attempted."""
    with listening_on_loopback() as (port, attempts):
        refused = testapp.put_json(
            url(admin.account_id),
            body(issuer.format(port=port), [domain]),
            headers=admin.headers,
            status=422,
        ).json
        assert attempts() == 0
    assert set(refused) == {'message'}
    assert says in refused['message']
    assert_nothing_stored(conn, admin.account_id)


# --- the domains an account may claim -------------------------------------------------


def test_a_domain_needs_a_confirmed_administrator_address_in_it(
    app, admin, make_user, idp, conn
):
    agent_domain, unconfirmed_domain, suspended_domain = (
        unique_domain() for _ in range(3)
    )
    move_to(conn, make_user(account_id=admin.account_id), agent_domain)
    move_to(
        conn,
        make_user(account_id=admin.account_id, role='administrator'),
        unconfirmed_domain,
        confirmed=False,
    )
    suspended = make_user(account_id=admin.account_id, role='administrator')
    move_to(conn, suspended, suspended_domain)
    conn.execute(
        "UPDATE account_users SET status = 'suspended' WHERE user_id = %s",
        (suspended.id,),
    )
    own = unique_domain()
    move_to(conn, admin, own)
    for domain in (
        agent_domain,
        unconfirmed_domain,
        suspended_domain,
        'sub.' + own,  # exactly the domain: not a subdomain of it
        own.partition('.')[2],  # nor its parent
    ):
        refused = app.put_json(
            url(admin.account_id),
            body(idp.issuer, [own, domain]),
            headers=admin.headers,
            status=422,
        ).json
        assert refused == {
            'message': 'Allowed domains need an administrator of this account with a '
            f'confirmed address in each: none has one in {domain}'
        }
    assert idp.requests == []  # refused before the provider is asked
    assert_nothing_stored(conn, admin.account_id)


def test_a_domain_belongs_to_one_account(
    app, admin, domain, make_account, make_user, idp, conn
):
    other = make_user(account_id=make_account('Other'), role='administrator')
    other_account = conn.execute(
        'SELECT account_id FROM account_users WHERE user_id = %s', (other.id,)
    ).fetchone()['account_id']
    # Someone of the other account with an address there: the first claim stands.
    move_to(conn, other, domain)
    app.put_json(url(other_account), body(idp.issuer, [domain]), headers=other.headers)
    refused = app.put_json(
        url(admin.account_id),
        body(idp.issuer, [domain]),
        headers=admin.headers,
        status=422,
    ).json
    assert refused == {
        'message': f'Allowed domains already belong to another account: {domain}'
    }
    assert_nothing_stored(conn, admin.account_id)
    assert domains_of(conn, other_account) == [domain]


def test_two_accounts_racing_for_a_domain_end_in_one_422(
    app, admin, domain, make_account, make_user, idp, conn, direct_database_url
):
    """The other account's claim commits while this PUT waits for its row: the PUT
    answers 422 naming the domain (not the 500 of a unique violation), and stores
    nothing."""
    rival = make_account('Rival')
    outcome = {}
    with psycopg.connect(direct_database_url) as other:
        with other.transaction():
            other.execute(
                'INSERT INTO sso_providers (account_id, issuer, client_id,'
                ' client_secret_encrypted, discovery)'
                " VALUES (%s, %s, 'x', '\\x00', '{}')",
                (rival, idp.issuer),
            )
            other.execute(
                'INSERT INTO sso_domains (domain, account_id) VALUES (%s, %s)',
                (domain, rival),
            )
            blocker = other.info.backend_pid

            def put():
                outcome['answer'] = app.put_json(
                    url(admin.account_id),
                    body(idp.issuer, [domain]),
                    headers=admin.headers,
                    expect_errors=True,
                )

            worker = threading.Thread(target=put)
            worker.start()
            deadline = time.monotonic() + 10
            while not waiting_for(conn, blocker, 'INSERT INTO sso_domains'):
                assert time.monotonic() < deadline, 'the PUT never waited'
                time.sleep(0.05)
        worker.join(timeout=10)
    answer = outcome['answer']
    assert answer.status_int == 422
    assert answer.json == {
        'message': f'Allowed domains already belong to another account: {domain}'
    }
    assert_nothing_stored(conn, admin.account_id)
    assert domains_of(conn, rival) == [domain]


@pytest.mark.parametrize(
    'bad',
    ['Example.COM', 'localhost', '10.1.2.3', 'exa_mple.com', '-a.example.com', 'a..b'],
)
def test_domains_are_lower_case_dns_names(app, admin, domain, idp, conn, bad):
    refused = app.put_json(
        url(admin.account_id),
        body(idp.issuer, [domain, bad]),
        headers=admin.headers,
        status=422,
    ).json
    assert refused == {
        'message': 'Allowed domains is invalid',
        'attributes': ['allowed_domains'],
    }
    assert idp.requests == []
    assert_nothing_stored(conn, admin.account_id)


def test_at_most_50_domains(app, admin, domain, idp, conn):
    many = [f'd{index}.{domain}' for index in range(50)] + [domain]
    refused = app.put_json(
        url(admin.account_id), body(idp.issuer, many), headers=admin.headers, status=422
    ).json
    assert refused['message'] == 'Allowed domains is too long (maximum is 50 items)'
    assert_nothing_stored(conn, admin.account_id)


# --- who may -------------------------------------------------------------------------


def test_only_administrators_with_a_session_reach_the_settings(
    app, admin, domain, make_user, make_account, idp, conn
):
    app.put_json(
        url(admin.account_id), body(idp.issuer, [domain]), headers=admin.headers
    )
    agent = make_user(account_id=admin.account_id)
    stranger = make_user(account_id=make_account())
    token = new_token(app, admin, scopes=['account:write', 'profile:write'])
    path = url(admin.account_id)
    put = body(idp.issuer, [domain], enforce=True)
    refusals = (
        (agent.headers, 401, ROLE),
        (stranger.headers, 404, NOT_FOUND),
        ({'api_access_token': admin.access_token}, 403, NEEDS_SESSION),
        (bearer(token), 403, NEEDS_SESSION),
        ({'api_access_token': token}, 403, NEEDS_SESSION),
        ({}, 401, UNAUTHENTICATED),
    )
    for headers, status, expected in refusals:
        assert app.get(path, headers=headers, status=status).json == expected
        assert app.put_json(path, put, headers=headers, status=status).json == expected
        assert app.delete(path, headers=headers, status=status).json == expected
    stored = provider_row(conn, admin.account_id)
    assert stored['enforce'] is False
    assert [row['event'] for row in events(conn, admin.account_id)] == [
        'sso_settings_updated'
    ]


def test_without_secret_key_settings_cannot_be_written(
    make_testapp, admin, domain, idp, conn
):
    app = make_testapp(SECRET_KEY='', OIDC_ALLOW_PRIVATE_ISSUERS='true')
    assert app.put_json(
        url(admin.account_id),
        body(idp.issuer, [domain]),
        headers=admin.headers,
        status=403,
    ).json == (UNAVAILABLE)
    assert idp.requests == []
    assert_nothing_stored(conn, admin.account_id)
    # Reading and removing need no key.
    app.get(url(admin.account_id), headers=admin.headers, status=404)
    app.delete(url(admin.account_id), headers=admin.headers, status=404)


# --- audit and mail ------------------------------------------------------------------


def test_every_change_is_audited_and_mailed_to_every_administrator(
    app, admin, domain, make_user, idp, conn, inbox, base_env
):
    conn.execute(
        'UPDATE accounts SET name = %s WHERE id = %s',
        ('Visit evil.example/login\u202e now', admin.account_id),
    )
    fellow = make_user(account_id=admin.account_id, role='administrator')
    agent = make_user(account_id=admin.account_id)
    app.put_json(
        url(admin.account_id), body(idp.issuer, [domain]), headers=admin.headers
    )
    update = body(idp.issuer, [domain], enforce=True)
    del update['sso_settings']['client_secret']
    app.put_json(url(admin.account_id), update, headers=admin.headers)
    app.delete(url(admin.account_id), headers=admin.headers, status=204)

    created, changed, deleted = events(conn, admin.account_id)
    common = {
        'actor_id': admin.id,
        'subject_id': admin.id,
        'account_id': admin.account_id,
    }
    facts = {'issuer': idp.issuer, 'allowed_domains': [domain]}
    assert created == {
        **common,
        'event': 'sso_settings_updated',
        'details': {
            'created': True,
            'fields': [
                'issuer',
                'client_id',
                'client_secret',
                'allowed_domains',
                'jit_provisioning',
                'enforce',
                'trust_idp_mfa',
            ],
            **facts,
        },
    }
    assert changed['details'] == {'created': False, 'fields': ['enforce'], **facts}
    assert deleted == {**common, 'event': 'sso_settings_deleted', 'details': facts}
    stored = conn.execute(
        'SELECT details::text FROM audit_events WHERE account_id = %s'
        " AND event LIKE 'sso_%%'",
        (admin.account_id,),
    ).fetchall()
    assert not any(SECRET in row['details'] for row in stored)

    deliver(base_env, inbox.port)
    for person in (admin, fellow):
        got = [item.message['Subject'] for item in inbox.to(person.email)]
        assert got.count(UPDATED) == 2 and got.count(DELETED) == 1, got
    assert inbox.to(agent.email) == []
    [first, *_] = [item for item in inbox.to(fellow.email)]
    assert 'Account: Visit evil.example/login now' in first.text
    assert f'Identity provider: {idp.issuer}' in first.text
    assert f'Domains: {domain}' in first.text
    assert f'By: {admin.email}' in first.text
    for text in (first.html, first.text):
        assert '\u202e' not in text
        assert SECRET not in text
    # Inert in HTML: neither the account's name nor the issuer is a link.
    assert 'evil.example/login' not in first.html
    assert idp.issuer not in first.html


# --- a real provider ------------------------------------------------------------------


def test_the_real_providers_discovery_is_taken(app, admin, domain, oidc_provider, conn):
    """The suite's oidc-provider (tests/support/oidc_provider.py) passes every check of
    discovery, and what it published is what is stored."""
    client_id, client_secret = oidc_provider.register_client(
        'http://frontdesk.test/omniauth/oidc/callback',
        'http://frontdesk.test/auth/oidc/backchannel_logout',
    )
    answer = app.put_json(
        url(admin.account_id),
        body(
            oidc_provider.issuer,
            [domain],
            client_id=client_id,
            client_secret=client_secret,
        ),
        headers=admin.headers,
    )
    assert answer.json['sso_settings']['issuer'] == oidc_provider.issuer
    assert answer.json['sso_settings']['client_id'] == client_id
    assert provider_row(conn, admin.account_id)['discovery'] == oidc_provider.discovery
