"""Back-channel logout (SPEC 19; OpenID Connect Back-Channel Logout 1.0): a provider's
signed logout token ends exactly the sessions it names, and nothing else ever does.

Logout tokens are signed by a forged provider on loopback (tests/support/fake_idp.py)
with its own key; sessions opened through single sign-on are made here by marking
sessions of users made with make_user as the flow marks its own (sign_in_method, the
provider's account, sid, sub), since opening them is the flow's business.
"""

import base64
import collections
import json
import time
import uuid

import pytest

import config as config_module
from resources.backchannel import BackchannelLogout
from services import sessions
from services import sso_logout
from tests.support.fake_idp import fake_idp
from tests.support.rate_windows import start_clear_of_a_window_boundary
from tests.support.sso import insert_provider
from tests.support.sso import unique_domain
from tests.support.users import unique_ip

INVALID = {'error': 'invalid_request'}
ROUTE = '/auth/oidc/backchannel_logout'
CLIENTS = ('frontdesk-a-', 'frontdesk-b-')
Accounts = collections.namedtuple('Accounts', 'a b client_a client_b')


@pytest.fixture(scope='module')
def idp():
    with fake_idp() as idp:
        yield idp


@pytest.fixture(scope='module')
def sso_env(base_env):
    return {**base_env, 'OIDC_ALLOW_PRIVATE_ISSUERS': 'true'}


@pytest.fixture
def app(make_testapp, sso_env):
    return make_testapp(OIDC_ALLOW_PRIVATE_ISSUERS='true')


@pytest.fixture
def provider(pool, sso_env):
    """provider(idp, client_id): a new account with its provider at that idp; the
    account id."""
    config = config_module.load(sso_env)

    def make(make_account, idp, client_id):
        account_id = make_account()
        with pool.connection() as conn:
            insert_provider(
                conn,
                config,
                account_id,
                idp.issuer,
                client_id,
                'secret',
                [unique_domain()],
            )
        return account_id

    return make


@pytest.fixture
def two_accounts(provider, make_account, idp):
    """Two accounts whose providers share the issuer (as Google's customers do), told
    apart by client id (this test's own: the forged provider serves the module)."""
    clients = CLIENTS[0] + uuid.uuid4().hex[:8], CLIENTS[1] + uuid.uuid4().hex[:8]
    return Accounts(
        provider(make_account, idp, clients[0]),
        provider(make_account, idp, clients[1]),
        *clients,
    )


def sso_session(pool, queries, config, user, account_id, sid=None, sub=None):
    """A new session of ``user`` as single sign-on through ``account_id``'s provider
    opens it; its sign-in headers."""
    with pool.connection() as conn, conn.transaction():
        issued = sessions.issue(conn, queries, config, user.id)
        conn.execute(
            "UPDATE user_tokens SET sign_in_method = 'sso', sso_account_id = %s,"
            ' sso_sid = %s, sso_sub = %s WHERE id = %s',
            (account_id, sid, sub, issued.id),
        )
    return {'access-token': issued[0], 'client': issued[1], 'uid': user.email}


def alive(app, headers):
    """Whether the session still signs in (a signed-in GET)."""
    answer = app.get('/api/v1/profile', headers=headers, expect_errors=True)
    return answer.status_int == 200


def claims(idp, client_id, **overrides):
    """A logout token's claims that pass every check; ``overrides`` (None removes)."""
    found = {
        'iss': idp.issuer,
        'aud': client_id,
        'iat': int(time.time()),
        'exp': int(time.time()) + 120,
        'jti': uuid.uuid4().hex,
        'events': {sso_logout.EVENT: {}},
        'sid': 'sid-' + uuid.uuid4().hex[:8],
    }
    found.update(overrides)
    return {key: value for key, value in found.items() if value is not None}


def log_out(app, token, status=200):
    answer = app.post(ROUTE, {'logout_token': token}, status=status)
    assert answer.headers['Cache-Control'] == 'no-store'
    assert answer.json == ({} if status == 200 else INVALID)
    return answer


def events(conn, event, account_id=None):
    return conn.execute(
        'SELECT subject_id, account_id, details FROM audit_events'
        ' WHERE event = %s AND account_id IS NOT DISTINCT FROM %s ORDER BY id',
        (event, account_id),
    ).fetchall()


def refusals(conn, reason):
    return conn.execute(
        "SELECT account_id FROM audit_events WHERE event = 'sso_backchannel_logout_"
        "refused' AND details->>'reason' = %s",
        (reason,),
    ).fetchall()


def test_a_sid_ends_exactly_the_sessions_of_that_provider_session(
    app, idp, two_accounts, make_user, pool, queries, config, conn
):
    account_a, account_b, client_a, client_b = two_accounts
    user = make_user(account_id=account_a)
    other = make_user(account_id=account_b)
    laptop = sso_session(pool, queries, config, user, account_a, 'sid-1', 'sub-u')
    phone = sso_session(pool, queries, config, user, account_a, 'sid-1', 'sub-u')
    elsewhere = sso_session(pool, queries, config, user, account_a, 'sid-2', 'sub-u')
    # The same sid from the other account's provider is another provider session.
    same_sid = sso_session(pool, queries, config, other, account_b, 'sid-1', 'sub-o')

    log_out(app, idp.sign(claims(idp, client_a, sid='sid-1', sub='sub-u')))

    assert not alive(app, laptop) and not alive(app, phone)
    assert alive(app, elsewhere) and alive(app, same_sid)
    assert alive(app, user.headers)  # the password session
    [event] = events(conn, 'sso_backchannel_logout', account_a)
    assert event['subject_id'] == user.id
    assert event['details'] == {'sessions_ended': 2, 'by': 'sid'}


def test_the_audience_picks_the_provider_among_those_of_one_issuer(
    app, idp, two_accounts, make_user, pool, queries, config
):
    account_a, account_b, client_a, client_b = two_accounts
    user = make_user(account_id=account_a)
    other = make_user(account_id=account_b)
    mine = sso_session(pool, queries, config, user, account_a, 'sid-x', 'sub-x')
    theirs = sso_session(pool, queries, config, other, account_b, 'sid-x', 'sub-x')

    log_out(app, idp.sign(claims(idp, client_b, sid='sid-x')))

    assert alive(app, mine) and not alive(app, theirs)


def test_a_sub_alone_ends_every_single_sign_on_session_of_that_subject(
    app, idp, two_accounts, make_user, pool, queries, config, conn
):
    account_a, account_b, client_a, client_b = two_accounts
    user = make_user(account_id=account_a)
    other = make_user(account_id=account_a)
    first = sso_session(pool, queries, config, user, account_a, 'sid-1', 'sub-u')
    second = sso_session(pool, queries, config, user, account_a, None, 'sub-u')
    another_subject = sso_session(pool, queries, config, other, account_a, 's', 'sub-o')
    other_provider = sso_session(pool, queries, config, user, account_b, 's', 'sub-u')

    log_out(app, idp.sign(claims(idp, client_a, sid=None, sub='sub-u')))

    assert not alive(app, first) and not alive(app, second)
    assert alive(app, another_subject) and alive(app, other_provider)
    assert alive(app, user.headers)  # not a single-sign-on session
    [event] = events(conn, 'sso_backchannel_logout', account_a)
    assert event['details'] == {'sessions_ended': 2, 'by': 'sub'}


def test_a_token_that_names_no_session_is_still_a_200(app, idp, two_accounts, conn):
    account_a, _, client_a, _ = two_accounts
    log_out(app, idp.sign(claims(idp, client_a, sid='nobody')))
    [event] = events(conn, 'sso_backchannel_logout', account_a)
    assert event['subject_id'] is None
    assert event['details'] == {'sessions_ended': 0, 'by': 'sid'}


def test_a_replayed_token_is_refused(
    app, idp, two_accounts, make_user, pool, queries, config, conn
):
    account_a, _, client_a, _ = two_accounts
    user = make_user(account_id=account_a)
    token = idp.sign(claims(idp, client_a, sid='sid-r'))
    sso_session(pool, queries, config, user, account_a, 'sid-r', 'sub-r')
    log_out(app, token)
    again = sso_session(pool, queries, config, user, account_a, 'sid-r', 'sub-r')

    log_out(app, token, status=400)

    assert alive(app, again)
    assert {'account_id': account_a} in refusals(conn, 'replayed')
    # The jti is kept until the token could not pass the iat check anyway.
    kept = conn.execute(
        'SELECT expires_at - now() AS left FROM sso_logout_tokens'
        ' WHERE account_id = %s',
        (account_a,),
    ).fetchone()
    assert 200 < kept['left'].total_seconds() <= sso_logout.KEEP_SECONDS


def test_expired_seen_tokens_are_pruned(app, idp, two_accounts, conn):
    account_a, _, client_a, _ = two_accounts
    conn.execute(
        'INSERT INTO sso_logout_tokens (account_id, jti, expires_at)'
        " VALUES (%s, 'old', now() - interval '1 second')",
        (account_a,),
    )
    log_out(app, idp.sign(claims(idp, client_a)))
    jtis = conn.execute(
        'SELECT jti FROM sso_logout_tokens WHERE account_id = %s', (account_a,)
    ).fetchall()
    assert len(jtis) == 1 and jtis[0]['jti'] != 'old'


@pytest.mark.parametrize(
    'overrides, reason',
    [
        ({'nonce': 'n-0123456789abcdef0123'}, 'nonce'),
        ({'events': None}, 'bad_claims'),
        ({'events': {'http://schemas.openid.net/event/other': {}}}, 'not_logout'),
        ({'events': {sso_logout.EVENT: 'yes'}}, 'not_logout'),
        ({'events': [sso_logout.EVENT]}, 'not_logout'),
        ({'sid': None}, 'no_subject'),
        ({'sid': 7}, 'no_subject'),
        ({'sid': 'x' * 256}, 'no_subject'),
        ({'jti': None}, 'bad_claims'),
        ({'jti': 'x' * 256}, 'bad_claims'),
        ({'jti': 12}, 'bad_claims'),
        ({'aud': 'someone-else'}, 'unknown_provider'),
        ({'aud': ['someone-else']}, 'unknown_provider'),
        ({'aud': None}, 'unknown_provider'),
        ({'iss': 'https://elsewhere.example.com'}, 'unknown_provider'),
        ({'iss': None}, 'unknown_provider'),
        ({'iss': 'nul\x00'}, 'unknown_provider'),
        # Times relative to when the test runs, not to when it was collected (a run of
        # the whole suite reaches it many minutes later).
        (lambda now: {'iat': now - 600, 'exp': None}, 'bad_iat'),
        (lambda now: {'iat': now + 600}, 'bad_claims'),
        ({'iat': None}, 'bad_claims'),
        (lambda now: {'exp': now - 10}, 'expired'),
    ],
)
def test_a_token_that_is_no_valid_logout_token_ends_nothing(
    app, idp, two_accounts, make_user, pool, queries, config, conn, overrides, reason
):
    if callable(overrides):
        overrides = overrides(int(time.time()))
    account_a, _, client_a, _ = two_accounts
    user = make_user(account_id=account_a)
    session = sso_session(pool, queries, config, user, account_a, 'sid-v', 'sub-v')
    # Each override leaves the sid alone unless it is the point.
    token = idp.sign(
        claims(idp, client_a, **{'sid': 'sid-v', 'sub': 'sub-v', **overrides})
    )
    if 'sid' in overrides:
        token = idp.sign(claims(idp, client_a, **{'sub': None, **overrides}))

    log_out(app, token, status=400)

    assert alive(app, session)
    # Until a provider is known, refusals share one audit row per address and hour.
    known = None if reason == 'unknown_provider' else account_a
    assert {'account_id': known} in refusals(conn, reason)
    assert events(conn, 'sso_backchannel_logout', account_a) == []


@pytest.mark.parametrize(
    'forge, reason',
    [
        (lambda idp, c: idp.unsigned(c), 'bad_alg'),
        (lambda idp, c: idp.hmac_with_public_key(c), 'bad_alg'),
        (lambda idp, c: idp.sign(c, key=idp.other_key), 'bad_signature'),
        (lambda idp, c: idp.sign(c, kid='k9', key=idp.other_key), 'unknown_key'),
        (lambda idp, c: idp.sign(c, kid=None, key=idp.other_key), 'bad_signature'),
        (lambda idp, c: idp.sign(c, alg='RS512'), 'bad_alg'),
        (lambda idp, c: idp.sign(c)[:-4] + 'AAAA', 'bad_signature'),
        (lambda idp, c: 'not.a.jwt', 'malformed'),
        (lambda idp, c: '', 'malformed'),
    ],
)
def test_a_forged_token_ends_nothing(
    app, idp, two_accounts, make_user, pool, queries, config, conn, forge, reason
):
    account_a, _, client_a, _ = two_accounts
    user = make_user(account_id=account_a)
    session = sso_session(pool, queries, config, user, account_a, 'sid-f', 'sub-f')

    log_out(app, forge(idp, claims(idp, client_a, sid='sid-f')), status=400)

    assert alive(app, session)
    known = None if reason == 'malformed' else account_a
    assert {'account_id': known} in refusals(conn, reason)


def test_headers_no_library_expects_are_refused_not_a_500(app, idp, two_accounts):
    """A header whose alg or kid is no string (a list, an object)."""
    _, _, client_a, _ = two_accounts

    def part(value):
        raw = json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b'=').decode()

    body = part(claims(idp, client_a))
    for header in (
        {'alg': ['RS256'], 'kid': 'k1'},
        {'alg': 'RS256', 'kid': {'a': 1}},
        {'alg': 'RS256', 'kid': ['k1']},
    ):
        log_out(app, f'{part(header)}.{body}.c2ln', status=400)


@pytest.mark.parametrize(
    'body, content_type',
    [
        (b'', 'application/x-www-form-urlencoded'),
        (b'logout_token=', 'application/x-www-form-urlencoded'),
        (b'logout_token=a&logout_token=b', 'application/x-www-form-urlencoded'),
        (b'other=1', 'application/x-www-form-urlencoded'),
        (b'logout_token=%ff%fe', 'application/x-www-form-urlencoded'),
        (b'\xff\xfe=\x00', 'application/x-www-form-urlencoded'),
        (b'&&==&', 'application/x-www-form-urlencoded'),
        (b'logout_token=' + b'a' * 40000, 'application/x-www-form-urlencoded'),
        (b'{"logout_token": "x"}', 'application/json'),
        (b'logout_token=x', 'text/plain'),
        (b'logout_token=x', None),
    ],
)
def test_a_malformed_request_is_invalid(app, body, content_type, conn):
    headers = {'Content-Type': content_type} if content_type else {}
    answer = app.request(
        ROUTE, method='POST', body=body, headers=headers, expect_errors=True
    )
    assert answer.status_int == 400, answer.body[:200]
    assert answer.json == INVALID
    assert answer.headers['Cache-Control'] == 'no-store'


def test_a_valid_token_in_a_form_with_a_charset_and_other_fields(
    app, idp, two_accounts, make_user, pool, queries, config
):
    account_a, _, client_a, _ = two_accounts
    user = make_user(account_id=account_a)
    session = sso_session(pool, queries, config, user, account_a, 'sid-c', 'sub-c')
    token = idp.sign(claims(idp, client_a, sid='sid-c'))
    app.request(
        ROUTE,
        method='POST',
        body=f'state=x&logout_token={token}'.encode(),
        headers={'Content-Type': 'application/x-www-form-urlencoded; charset=UTF-8'},
        status=200,
    )
    assert not alive(app, session)


def test_a_provider_whose_keys_do_not_come_is_a_400_within_the_deadline(
    app, provider, make_account, make_user, pool, queries, config, conn
):
    with fake_idp() as slow:
        client_id = 'frontdesk-' + uuid.uuid4().hex[:8]
        account_id = provider(make_account, slow, client_id)
        user = make_user(account_id=account_id)
        session = sso_session(pool, queries, config, user, account_id, 'sid-s', 'sub')
        # Far longer than the deadline: an answer before it proves the deadline.
        slow.delays['/jwks'] = 60
        log_out(app, slow.sign(claims(slow, client_id, sid='sid-s')), status=400)
        assert [r[1] for r in slow.requests].count('/jwks') == 1
        assert '/jwks' not in slow.finished
    assert alive(app, session)
    assert {'account_id': account_id} in refusals(conn, 'timeout')


def test_a_provider_whose_keys_are_an_error_page_is_a_400(
    app, provider, make_account, conn
):
    with fake_idp() as broken:
        client_id = 'frontdesk-' + uuid.uuid4().hex[:8]
        account_id = provider(make_account, broken, client_id)
        broken.answers['/jwks'] = (500, 'text/html', b'<html>oops</html>')
        log_out(app, broken.sign(claims(broken, client_id)), status=400)
    assert {'account_id': account_id} in refusals(conn, 'http_500')


def test_refusals_of_anyone_write_one_audit_row_an_hour(app, conn):
    """Anyone may post: the log grows by one row per address, hour and reason."""
    ip = unique_ip()
    before = conn.execute(
        "SELECT count(*) AS n FROM audit_events WHERE event = 'sso_backchannel_"
        "logout_refused' AND ip_address = %s",
        (ip,),
    ).fetchone()['n']
    for _ in range(5):
        app.post(
            ROUTE, {'logout_token': 'garbage'}, headers={'X-Real-IP': ip}, status=400
        )
    after = conn.execute(
        "SELECT count(*) AS n FROM audit_events WHERE event = 'sso_backchannel_"
        "logout_refused' AND ip_address = %s",
        (ip,),
    ).fetchone()['n']
    assert after - before <= 1


def test_a_provider_posts_without_origin_and_a_cross_site_form_changes_nothing(
    app, idp, two_accounts, make_user, pool, queries, config
):
    """The provider's server sends no Origin; a browser's form from anywhere may post
    too: the token is the credential, and it works once."""
    account_a, _, client_a, _ = two_accounts
    user = make_user(account_id=account_a)
    session = sso_session(pool, queries, config, user, account_a, 'sid-o', 'sub-o')
    app.post(
        ROUTE,
        {'logout_token': idp.sign(claims(idp, client_a, sid='sid-o'))},
        headers={'Origin': 'https://evil.example.net'},
        status=200,
    )
    assert not alive(app, session)


@pytest.mark.long(15)
def test_posts_are_limited_per_address(make_testapp):
    limited = make_testapp(RATE_LIMITS='on', OIDC_ALLOW_PRIVATE_ISSUERS='true')
    ip, (_, limit, period) = unique_ip(), BackchannelLogout.rate_limits['POST'][0]
    with_ip = {'X-Real-IP': ip}
    # The limit+1 posts must fall in one fixed window: on a loaded machine they take
    # seconds, so start at least half a window before its end.
    start_clear_of_a_window_boundary(period, margin=period / 2)
    for _ in range(limit):
        limited.post(ROUTE, {'logout_token': 'x'}, headers=with_ip, status=400)
    limited.post(ROUTE, {'logout_token': 'x'}, headers=with_ip, status=429)
    limited.post(
        ROUTE, {'logout_token': 'x'}, headers={'X-Real-IP': unique_ip()}, status=400
    )
