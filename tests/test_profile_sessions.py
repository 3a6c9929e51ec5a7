"""Sessions (SPEC 13): the list, ending them, the cap with its picker, idle expiry, and
an administrator ending a member's sessions."""

import datetime
import re

import config as config_module

FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0'
SAFARI = (
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 '
    '(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1'
)
CURL = 'curl/8.4.0'
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
NOT_FOUND = {'error': 'Resource could not be found'}
ROLE = {'error': 'You are not authorized to do this action'}
# The fields the reference dashboard 4.15's Active Sessions page renders (SPEC 13).
FIELDS = {
    'id',
    'client_name',
    'browser_name',
    'browser_version',
    'platform_name',
    'platform_version',
    'device_name',
    'ip_address',
    'city',
    'country',
    'country_code',
    'created_at',
    'last_activity_at',
    'expires_at',
    'current',
    'sign_in_method',
}


def sign_in(app, user, agent=FIREFOX, ip='203.0.113.7', status=200, **extra):
    return app.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': user.password, **extra},
        headers={'User-Agent': agent, 'X-Real-IP': ip},
        status=status,
    )


def headers_of(resp):
    return {name: resp.headers[name] for name in ('access-token', 'client', 'uid')}


def session_id(conn, headers):
    return conn.execute(
        'SELECT id FROM user_tokens WHERE client = %s', (headers['client'],)
    ).fetchone()['id']


def live_ids(conn, user):
    rows = conn.execute(
        'SELECT id FROM user_tokens WHERE user_id = %s ORDER BY id', (user.id,)
    ).fetchall()
    return [row['id'] for row in rows]


def idle(conn, headers, minutes):
    conn.execute(
        'UPDATE user_tokens SET last_used_at = now() - make_interval(mins => %s)'
        ' WHERE client = %s',
        (minutes, headers['client']),
    )


def test_the_list_shows_each_session_parsed_from_its_user_agent(
    testapp, make_user, conn
):
    user = make_user()
    phone = headers_of(sign_in(testapp, user, agent=SAFARI, ip='2001:db8::1'))
    laptop = headers_of(sign_in(testapp, user, agent=FIREFOX))
    idle(conn, phone, 30)
    idle(conn, user.headers, 60)

    listed = testapp.get('/api/v1/profile/sessions', headers=laptop, status=200).json

    assert [entry['id'] for entry in listed] == [
        session_id(conn, h) for h in (laptop, phone, user.headers)
    ]
    assert all(set(entry) == FIELDS for entry in listed)
    first, second, third = listed
    assert first['current'] is True and not second['current'] and not third['current']
    assert (
        first['browser_name'],
        first['browser_version'],
        first['platform_name'],
    ) == ('Firefox', '120.0', 'Linux')
    assert (
        first['client_name'] == 'Firefox on Linux'
        and first['ip_address'] == '203.0.113.7'
    )
    assert (second['browser_name'], second['platform_name'], second['device_name']) == (
        'Mobile Safari',
        'iOS',
        'iPhone',
    )
    assert (first['platform_version'], second['platform_version']) == (None, '17.1')
    assert second['ip_address'] == '2001:db8::1'
    # No GeoIP database is configured: the place fields are there, and null.
    assert all(
        entry[field] is None
        for entry in listed
        for field in ('city', 'country', 'country_code')
    )
    # The fixture's token was issued without a request: nothing is known about it.
    assert third['browser_name'] is None and third['ip_address'] is None
    assert (
        first['last_activity_at']
        > second['last_activity_at']
        > third['last_activity_at']
    )
    assert first['expires_at'].endswith('Z') and first['created_at'].endswith('Z')
    # The one that asks is the current one; asking was activity, so it is now the first.
    again = testapp.get('/api/v1/profile/sessions', headers=phone).json
    assert [(entry['id'], entry['current']) for entry in again] == [
        (second['id'], True),
        (first['id'], False),
        (third['id'], False),
    ]


def test_expired_sessions_are_not_listed(testapp, make_user, conn):
    user = make_user()
    other = headers_of(sign_in(testapp, user))
    conn.execute(
        "UPDATE user_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE client = %s',
        (other['client'],),
    )
    listed = testapp.get('/api/v1/profile/sessions', headers=user.headers).json
    assert [entry['id'] for entry in listed] == [session_id(conn, user.headers)]


def test_sessions_need_a_signed_in_session(testapp, make_user):
    user = make_user()
    api = {'api_access_token': user.access_token}
    assert (
        testapp.get('/api/v1/profile/sessions', headers=api, status=403).json
        == NEEDS_SESSION
    )
    assert (
        testapp.delete('/api/v1/profile/sessions', headers=api, status=403).json
        == NEEDS_SESSION
    )
    assert (
        testapp.delete('/api/v1/profile/sessions/1', headers=api, status=403).json
        == NEEDS_SESSION
    )
    assert testapp.get('/api/v1/profile/sessions', status=401).json == UNAUTHENTICATED
    assert (
        testapp.delete('/api/v1/profile/sessions', status=401).json == UNAUTHENTICATED
    )
    assert (
        testapp.delete('/api/v1/profile/sessions/1', status=401).json == UNAUTHENTICATED
    )


def test_ending_one_session(testapp, make_user, conn):
    user, stranger = make_user(), make_user()
    other = headers_of(sign_in(testapp, user))
    other_id = session_id(conn, other)

    resp = testapp.delete(
        f'/api/v1/profile/sessions/{other_id}', headers=user.headers, status=200
    )

    assert resp.json == {}
    assert resp.headers['access-token'] == user.token
    testapp.get('/api/v1/profile', headers=other, status=401)
    testapp.get('/api/v1/profile', headers=user.headers, status=200)
    assert (
        testapp.delete(
            f'/api/v1/profile/sessions/{other_id}', headers=user.headers, status=404
        ).json
        == NOT_FOUND
    )
    own = session_id(conn, user.headers)
    assert testapp.delete(
        f'/api/v1/profile/sessions/{own}', headers=user.headers, status=422
    ).json == {'error': 'You cannot revoke the current session.'}
    # Another user's session is not found, and stays.
    theirs = session_id(conn, stranger.headers)
    assert (
        testapp.delete(
            f'/api/v1/profile/sessions/{theirs}', headers=user.headers, status=404
        ).json
        == NOT_FOUND
    )
    testapp.get('/api/v1/profile', headers=stranger.headers, status=200)
    testapp.delete('/api/v1/profile/sessions/0', headers=user.headers, status=404)
    testapp.delete(
        f'/api/v1/profile/sessions/{2**63}', headers=user.headers, status=404
    )


def test_ending_every_other_session(testapp, make_user, conn):
    user = make_user()
    others = [headers_of(sign_in(testapp, user)) for _ in range(3)]

    resp = testapp.delete('/api/v1/profile/sessions', headers=user.headers, status=200)

    assert resp.json == {'revoked': 3}
    for headers in others:
        testapp.get('/api/v1/profile', headers=headers, status=401)
    assert live_ids(conn, user) == [session_id(conn, user.headers)]
    assert testapp.delete('/api/v1/profile/sessions', headers=user.headers).json == {
        'revoked': 0
    }


def test_ending_every_other_session_can_replace_the_access_token(
    testapp, make_user, conn
):
    """SPEC 3.4: the owner's "end other sessions" leaves the API token working unless
    asked (the reference dashboard sends no body); with include_access_token it goes
    too, as on the administrators' route, and the owner is told as for a reset."""
    user = make_user()
    other = headers_of(sign_in(testapp, user))
    api = {'api_access_token': user.access_token}
    # No body, an empty object, false: sessions only.
    testapp.delete('/api/v1/profile/sessions', headers=user.headers)
    testapp.delete_json('/api/v1/profile/sessions', {}, headers=user.headers)
    testapp.delete_json(
        '/api/v1/profile/sessions',
        {'include_access_token': False},
        headers=user.headers,
    )
    testapp.get('/api/v1/profile', headers=api, status=200)
    testapp.get('/api/v1/profile', headers=other, status=401)
    other = headers_of(sign_in(testapp, user))
    resp = testapp.delete_json(
        '/api/v1/profile/sessions',
        {'include_access_token': True},
        headers=user.headers,
    )
    assert resp.json == {'revoked': 1}
    testapp.get('/api/v1/profile', headers=api, status=401)
    testapp.get('/api/v1/profile', headers=other, status=401)
    new = testapp.get('/api/v1/profile', headers=user.headers).json['access_token']
    assert new != user.access_token
    testapp.get('/api/v1/profile', headers={'api_access_token': new}, status=200)
    assert [
        row['event']
        for row in conn.execute(
            'SELECT event FROM audit_events WHERE subject_id = %s'
            " AND event IN ('session_revoked', 'access_token_reset') ORDER BY id",
            (user.id,),
        )
    ] == ['session_revoked', 'session_revoked', 'access_token_reset']
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM mail_outbox WHERE to_address = %s'
            " AND subject ILIKE '%%access token%%'",
            (user.email,),
        ).fetchone()['n']
        == 1
    )
    # Anything but a boolean: the usual 422, nothing ended.
    testapp.delete_json(
        '/api/v1/profile/sessions',
        {'include_access_token': 'yes'},
        headers=user.headers,
        status=422,
    )
    testapp.get('/api/v1/profile', headers={'api_access_token': new}, status=200)


def test_a_browser_at_the_cap_is_asked_which_session_to_end(
    make_testapp, make_user, conn
):
    app = make_testapp(MAX_USER_SESSIONS='2')
    user = make_user()
    second = headers_of(sign_in(app, user))
    before = live_ids(conn, user)

    refused = sign_in(app, user, status=409)

    assert refused.json['sessions_limit_reached'] is True
    assert [entry['id'] for entry in refused.json['sessions']] == sorted(
        before, reverse=True
    )
    assert not any(entry['current'] for entry in refused.json['sessions'])
    assert 'access-token' not in refused.headers
    assert live_ids(conn, user) == before
    # The password is checked first: a wrong one revokes nothing and learns nothing.
    wrong = app.post_json(
        '/auth/sign_in',
        {
            'email': user.email,
            'password': 'wrong password',
            'revoke_all_sessions': True,
        },
        headers={'User-Agent': FIREFOX},
        status=401,
    )
    assert 'sessions' not in wrong.json
    assert live_ids(conn, user) == before
    # An id that is not one of the user's own changes nothing.
    sign_in(app, user, status=409, revoke_session_id=2**62)

    chosen = session_id(conn, second)
    third = headers_of(sign_in(app, user, revoke_session_id=chosen))

    app.get('/api/v1/profile', headers=second, status=401)
    app.get('/api/v1/profile', headers=user.headers, status=200)
    app.get('/api/v1/profile', headers=third, status=200)
    fresh = headers_of(sign_in(app, user, revoke_all_sessions=True))
    assert live_ids(conn, user) == [session_id(conn, fresh)]
    app.get('/api/v1/profile', headers=user.headers, status=401)


def test_other_clients_at_the_cap_end_the_least_recently_active_session(
    make_testapp, make_user, conn
):
    app = make_testapp(MAX_USER_SESSIONS='3')
    user = make_user()
    second, third = (
        headers_of(sign_in(app, user, agent=CURL)),
        headers_of(sign_in(app, user, agent=CURL)),
    )
    # The oldest session is the most recently active; the second one has been idle
    # longest.
    idle(conn, second, 50)
    idle(conn, third, 20)

    fourth = headers_of(sign_in(app, user, agent=CURL))

    app.get('/api/v1/profile', headers=second, status=401)
    for headers in (user.headers, third, fourth):
        app.get('/api/v1/profile', headers=headers, status=200)
    idle(conn, user.headers, 30)
    headers_of(sign_in(app, user, agent='okhttp/4.9.2'))
    app.get('/api/v1/profile', headers=user.headers, status=401)
    app.get('/api/v1/profile', headers=third, status=200)


def test_a_session_in_use_outlives_newer_ones_nobody_has_used(make_testapp, make_user):
    """Activity is stamped at most every 5 minutes: a session used since its sign-in may
    be active now, while one never used since was last active at its sign-in."""
    app = make_testapp(MAX_USER_SESSIONS='3')
    user = make_user()
    app.get('/api/v1/profile', headers=user.headers)
    second, third = (
        headers_of(sign_in(app, user, agent=CURL)),
        headers_of(sign_in(app, user, agent=CURL)),
    )

    fourth = headers_of(sign_in(app, user, agent=CURL))

    app.get('/api/v1/profile', headers=second, status=401)
    for headers in (user.headers, third, fourth):
        app.get('/api/v1/profile', headers=headers, status=200)


def test_a_password_reset_at_the_cap_evicts_silently(make_testapp, make_user, conn):
    app = make_testapp(MAX_USER_SESSIONS='1')
    user = make_user()
    sign_in(app, user, agent=FIREFOX, status=409)
    app.post_json('/auth/password', {'email': user.email})
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'reset_password'",
        (user.email,),
    ).fetchone()['text_body']
    token = re.search(r'reset_password_token=([A-Za-z0-9_-]+)', body).group(1)
    resp = app.put_json(
        '/auth/password',
        {'reset_password_token': token, 'password': 'a new password 2'},
        headers={'User-Agent': FIREFOX},
        status=200,
    )
    assert live_ids(conn, user) == [session_id(conn, headers_of(resp))]


def test_an_idle_session_expires(make_testapp, make_user, conn):
    app = make_testapp(SESSION_IDLE_TIMEOUT_MINUTES='30')
    user, other = make_user(), make_user()
    idle(conn, user.headers, 31)
    idle(conn, other.headers, 29)
    assert (
        app.get('/api/v1/profile', headers=user.headers, status=401).json
        == UNAUTHENTICATED
    )
    app.get('/api/v1/profile', headers=other.headers, status=200)
    # That request counted as activity: the session is fresh again.
    stamp = conn.execute(
        'SELECT now() - last_used_at AS idle FROM user_tokens WHERE client = %s',
        (other.client,),
    ).fetchone()['idle']
    assert stamp < datetime.timedelta(minutes=1)
    assert [
        entry['id']
        for entry in app.get('/api/v1/profile/sessions', headers=other.headers).json
    ] == [session_id(conn, other.headers)]
    # Off by default: the same idleness is fine.
    idle(conn, other.headers, 60 * 24 * 30)
    make_testapp().get('/api/v1/profile', headers=other.headers, status=200)


def test_activity_is_stamped_at_most_every_five_minutes(testapp, make_user, conn):
    user = make_user()

    def idle_minutes():
        row = conn.execute(
            'SELECT extract(epoch FROM now() - last_used_at) / 60 AS idle'
            ' FROM user_tokens WHERE client = %s',
            (user.client,),
        ).fetchone()
        return float(row['idle'])

    idle(conn, user.headers, 4)
    testapp.get('/api/v1/profile', headers=user.headers)
    assert idle_minutes() > 3.9
    idle(conn, user.headers, 6)
    testapp.get('/api/v1/profile', headers=user.headers)
    assert idle_minutes() < 1


def test_max_tokens_per_user_is_read_as_the_old_name(base_env):
    assert (
        config_module.load({**base_env, 'MAX_TOKENS_PER_USER': '7'}).max_user_sessions
        == 7
    )
    assert (
        config_module.load(
            {**base_env, 'MAX_TOKENS_PER_USER': '7', 'MAX_USER_SESSIONS': '9'}
        ).max_user_sessions
        == 9
    )
    assert config_module.load(base_env).max_user_sessions == 25
    assert config_module.load(base_env).session_idle_timeout_minutes is None


def member_sessions(account_id, user_id):
    return f'/api/v1/accounts/{account_id}/agents/{user_id}/sessions'


def test_an_administrator_ends_every_session_of_a_member(
    testapp, admin, make_user, conn
):
    member = make_user(account_id=admin.account_id)
    other = headers_of(sign_in(testapp, member))

    resp = testapp.delete(
        member_sessions(admin.account_id, member.id), headers=admin.headers, status=200
    )

    assert resp.json == {'revoked': 2}
    testapp.get('/api/v1/profile', headers=member.headers, status=401)
    testapp.get('/api/v1/profile', headers=other, status=401)
    # The access token stays unless asked for.
    testapp.get(
        '/api/v1/profile', headers={'api_access_token': member.access_token}, status=200
    )
    testapp.get('/api/v1/profile', headers=admin.headers, status=200)
    url = member_sessions(admin.account_id, member.id) + '?include_access_token=true'
    assert testapp.delete(url, headers=admin.headers).json == {'revoked': 0}
    testapp.get(
        '/api/v1/profile', headers={'api_access_token': member.access_token}, status=401
    )


def test_ending_a_members_sessions_is_for_administrators_of_that_account(
    testapp, admin, make_user, make_account
):
    member = make_user(account_id=admin.account_id)
    agent = make_user(account_id=admin.account_id)
    elsewhere = make_user(account_id=make_account())
    url = member_sessions(admin.account_id, member.id)
    assert testapp.delete(url, headers=agent.headers, status=401).json == ROLE
    testapp.get('/api/v1/profile', headers=member.headers, status=200)
    assert (
        testapp.delete(
            member_sessions(admin.account_id, elsewhere.id),
            headers=admin.headers,
            status=404,
        ).json
        == NOT_FOUND
    )
    testapp.get('/api/v1/profile', headers=elsewhere.headers, status=200)
    assert (
        testapp.delete(
            member_sessions(admin.account_id, 2**62), headers=admin.headers, status=404
        ).json
        == NOT_FOUND
    )
    assert testapp.delete(url, headers=elsewhere.headers, status=404).json == NOT_FOUND
    assert testapp.delete(url, status=401).json == UNAUTHENTICATED
    bad = testapp.delete(
        url + '?include_access_token=yes', headers=admin.headers, status=422
    ).json
    assert bad == {
        'message': 'Include access token must be true or false',
        'attributes': ['include_access_token'],
    }
    testapp.get('/api/v1/profile', headers=member.headers, status=200)


def test_an_administrator_ending_their_own_sessions_gets_no_dead_token_back(
    testapp, admin
):
    resp = testapp.delete(
        member_sessions(admin.account_id, admin.id), headers=admin.headers, status=200
    )
    assert resp.json == {'revoked': 1}
    assert 'access-token' not in resp.headers
