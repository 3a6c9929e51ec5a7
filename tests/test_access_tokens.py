"""Personal access tokens (SPEC 17): one test per rule, over HTTP.

The scope-by-route matrix generated from the route table is in
tests/test_access_token_matrix.py; revoking while in use, against gunicorn, in
tests/test_concurrency.py; the attacker holding one, in tests/test_attack_model.py.
"""

import datetime
import hashlib
import json

import pytest
import webtest

import app as app_module
from middleware.access import SCOPES
from services import personal_tokens
from services import sessions
from tests.support.users import insert_personal_tokens
from tests.test_confirmations import queued_token
from tests.test_mfa import Authenticator
from tests.test_mfa import revert_link
from tests.test_ownership import security_routes
from tests.test_suspension import reactivate
from tests.test_suspension import suspend
from tests.test_suspension import SUSPENDED
import tokens
from validators import load_schemas

TOKENS = '/api/v1/profile/access_tokens'
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
REAUTHENTICATE = {
    'error': 'Sign in again to change this',
    'error_code': 'reauthentication_required',
}
UNAUTHENTICATED = {'errors': ['You need to sign in or sign up before continuing.']}
LEGACY_DISABLED = {
    'error': 'This account no longer accepts the profile access token: use a '
    'personal access token',
    'error_code': 'legacy_token_disabled',
}


def insufficient(scope):
    return {
        'error': 'This token does not allow this action',
        'error_code': 'insufficient_scope',
        'required_scope': scope,
    }


def create(testapp, user, status=201, headers=None, **fields):
    body = {'name': 'CI', 'scopes': ['profile:read'], 'expires_in_days': 30, **fields}
    return testapp.post_json(
        TOKENS, body, headers=headers or user.headers, status=status
    )


def new_token(testapp, user, **fields):
    return create(testapp, user, **fields).json['token']


# The details key of an audit event caused by a personal access token (SPEC 17).
ACTING = 'acting_personal_access_token_id'


def bearer(token):
    return {'Authorization': f'Bearer {token}'}


def join(conn, account_id, user_id, role='agent'):
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s, %s)',
        (account_id, user_id, role),
    )


def stored(conn, user_id):
    return conn.execute(
        'SELECT * FROM personal_access_tokens WHERE user_id = %s ORDER BY id',
        (user_id,),
    ).fetchall()


def mails(conn, address, subject):
    return conn.execute(
        'SELECT text_body, html_body FROM mail_outbox WHERE to_address = %s'
        ' AND subject = %s ORDER BY id',
        (address, subject),
    ).fetchall()


def events(conn, user_id, event):
    return conn.execute(
        'SELECT actor_id, account_id, details FROM audit_events'
        ' WHERE subject_id = %s AND event = %s ORDER BY id',
        (user_id, event),
    ).fetchall()


# --- creating one -------------------------------------------------------------------


def test_a_new_token_is_shown_once_and_stored_only_as_its_digest(
    testapp, make_user, conn
):
    user = make_user()
    answer = create(
        testapp,
        user,
        name='  Billing sync ',
        scopes=['account:read', 'profile:read', 'account:read'],
        expires_in_days=90,
    )

    assert answer.status_int == 201
    assert answer.headers['Cache-Control'] == 'no-store'
    body = answer.json
    assert set(body) == {
        'id',
        'name',
        'token',
        'scopes',
        'account_ids',
        'expires_at',
        'created_at',
    }
    assert body['name'] == 'Billing sync'
    assert body['scopes'] == ['account:read', 'profile:read']
    assert body['account_ids'] is None
    token = body['token']
    assert token.startswith('fdpat_') and len(token) == 44
    assert tokens.is_personal_token(token)
    expires = datetime.datetime.fromisoformat(body['expires_at'])
    created = datetime.datetime.fromisoformat(body['created_at'])
    assert expires - created == datetime.timedelta(days=90)
    [row] = stored(conn, user.id)
    assert bytes(row['token_digest']) == hashlib.sha256(token.encode()).digest()
    assert token not in json.dumps({k: str(v) for k, v in row.items()})
    # Listed without the secret.
    listed = testapp.get(TOKENS, headers=user.headers).json
    assert [item['id'] for item in listed] == [body['id']]
    assert 'token' not in listed[0] and token not in json.dumps(listed)


def test_the_token_has_a_checksum_that_catches_a_typo():
    token = tokens.new_personal_token()
    secret, checksum = token[6:38], token[38:]
    assert all(char.isascii() and char.isalnum() for char in secret + checksum)
    assert tokens.is_personal_token(token)
    typo = token[:10] + ('a' if token[10] != 'a' else 'b') + token[11:]
    assert not tokens.is_personal_token(typo)
    assert not tokens.is_personal_token(token[:-1])
    assert not tokens.is_personal_token(token + 'x')
    assert not tokens.is_personal_token('ghp_' + token[6:])


def test_creating_one_needs_a_signed_in_session(testapp, make_user):
    user = make_user()
    token = new_token(testapp, user, scopes=list(SCOPES))
    for headers in ({'api_access_token': user.access_token}, bearer(token)):
        assert create(testapp, user, status=403, headers=headers).json == (
            NEEDS_SESSION
        )
    create(testapp, user, status=401, headers={'uid': user.email})


def test_creating_one_needs_a_recent_sign_in(testapp, make_user, conn):
    user = make_user()
    conn.execute(
        "UPDATE user_tokens SET authenticated_at = now() - interval '16 minutes'"
        ' WHERE user_id = %s',
        (user.id,),
    )
    assert create(testapp, user, status=403).json == REAUTHENTICATE
    assert stored(conn, user.id) == []
    # Signing in again is recent authentication.
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}
    )
    fresh = {
        name: signed_in.headers[name] for name in ('access-token', 'client', 'uid')
    }
    create(testapp, user, headers=fresh)


def test_an_unconfirmed_user_cannot_create_one(testapp, make_user, conn):
    user = make_user(confirmed=False)
    answer = create(testapp, user, status=422)
    assert answer.json == {'message': personal_tokens.NOT_CONFIRMED}
    assert stored(conn, user.id) == []


@pytest.mark.parametrize(
    ('fields', 'message'),
    [
        ({'name': None}, "Name can't be blank"),
        ({'name': '   '}, "Name can't be blank"),
        ({'name': 'x' * 101}, 'Name is too long (maximum is 100 characters)'),
        ({'scopes': None}, "Scopes can't be blank"),
        ({'scopes': []}, "Scopes can't be blank"),
        ({'scopes': ['profile:read', 'admin']}, 'Scopes is not included in the list'),
        ({'scopes': 'profile:read'}, 'Scopes must be an array'),
        ({'expires_in_days': 0}, 'Expires in days must be greater than or equal to 1'),
        (
            {'expires_in_days': 367},
            'Expires in days must be less than or equal to 366',
        ),
        ({'expires_in_days': None}, "Expires in days can't be blank"),
        ({'expires_in_days': '30 days'}, 'Expires in days must be an integer'),
        ({'account_ids': 'all'}, 'Account ids must be an array'),
        ({'account_ids': [0]}, 'Account ids must be greater than or equal to 1'),
    ],
)
def test_a_bad_body_is_a_422_and_creates_nothing(testapp, admin, conn, fields, message):
    body = {'name': 'CI', 'scopes': ['profile:read'], 'expires_in_days': 30}
    body.update(fields)
    body = {key: value for key, value in body.items() if value is not None}
    answer = testapp.post_json(TOKENS, body, headers=admin.headers, status=422)
    assert answer.json['message'] == message
    assert stored(conn, admin.id) == []


def test_only_accounts_of_the_caller_may_be_named(testapp, admin, make_account, conn):
    stranger = make_account('Not yours')
    answer = create(
        testapp, admin, status=422, account_ids=[admin.account_id, stranger]
    )
    assert answer.json == {
        'message': personal_tokens.NOT_A_MEMBER,
        'attributes': ['account_ids'],
    }
    assert stored(conn, admin.id) == []
    created = create(testapp, admin, account_ids=[admin.account_id]).json
    assert created['account_ids'] == [admin.account_id]


def test_a_suspended_member_cannot_name_that_account(
    testapp, admin, make_account, make_user, conn
):
    """SPEC 18: a member suspended from an account mints no token for it (422, as for an
    account they are not a member of), while one for their other account still works."""
    member = make_user(account_id=admin.account_id)
    other = make_account('Still active')
    join(conn, other, member.id)
    testapp.post(
        f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/suspend',
        headers=admin.headers,
    )
    answer = create(testapp, member, status=422, account_ids=[admin.account_id])
    assert answer.json == {
        'message': personal_tokens.NOT_A_MEMBER,
        'attributes': ['account_ids'],
    }
    assert stored(conn, member.id) == []
    assert create(testapp, member, account_ids=[other]).json['account_ids'] == [other]


def test_the_expiry_may_be_one_to_366_days(testapp, make_user):
    user = make_user()
    for days in (1, 366):
        body = create(testapp, user, expires_in_days=days).json
        lifetime = datetime.datetime.fromisoformat(
            body['expires_at']
        ) - datetime.datetime.fromisoformat(body['created_at'])
        assert lifetime == datetime.timedelta(days=days)


def test_a_form_body_works_as_json_does(testapp, admin):
    answer = testapp.post(
        TOKENS,
        f'name=Zapier&scopes[]=profile:write&account_ids[]={admin.account_id}'
        '&expires_in_days=7',
        headers=admin.headers,
        status=201,
    )
    assert (answer.json['scopes'], answer.json['account_ids']) == (
        ['profile:write'],
        [admin.account_id],
    )


def test_at_most_fifty_live_tokens(testapp, make_user, conn):
    user = make_user()
    insert_personal_tokens(conn, user.id, 49)
    create(testapp, user)
    answer = create(testapp, user, status=422)
    assert answer.json == {'message': personal_tokens.TOO_MANY}
    assert len(stored(conn, user.id)) == 50
    # An expired one is not live: it makes room (and is dropped).
    conn.execute(
        "UPDATE personal_access_tokens SET expires_at = now() - interval '1 second'"
        " WHERE user_id = %s AND name = 'old 1'",
        (user.id,),
    )
    create(testapp, user)
    assert len(stored(conn, user.id)) == 50
    assert 'old 1' not in {row['name'] for row in stored(conn, user.id)}


# --- using one ----------------------------------------------------------------------


def test_bearer_and_the_api_access_token_header_both_carry_it(testapp, make_user):
    user = make_user()
    token = new_token(testapp, user)
    for headers in (bearer(token), {'api_access_token': token}):
        profile = testapp.get('/api/v1/profile', headers=headers).json
        assert profile['id'] == user.id
    # Bearer is for personal access tokens only; other schemes are not credentials.
    testapp.get('/api/v1/profile', headers=bearer(user.access_token), status=401)
    testapp.get(
        '/api/v1/profile', headers={'Authorization': f'Basic {token}'}, status=401
    )


def test_answers_to_a_personal_token_never_carry_a_credential(testapp, admin):
    token = new_token(testapp, admin, scopes=['profile:write'])
    headers = bearer(token)
    account = admin.account_id
    answers = [
        testapp.get('/api/v1/profile', headers=headers).json,
        testapp.put_json(
            '/api/v1/profile', {'profile': {'name': 'Ada'}}, headers=headers
        ).json,
        testapp.delete('/api/v1/profile/avatar', headers=headers).json,
        testapp.post_json(
            '/api/v1/profile/availability',
            {'profile': {'account_id': account, 'availability': 'busy'}},
            headers=headers,
        ).json,
        testapp.get('/auth/validate_token', headers=headers).json['payload']['data'],
    ]
    for user_json in answers:
        assert (user_json['access_token'], user_json['pubsub_token']) == (None, None)
        assert user_json['name'] == 'Ada' or user_json is answers[0]
    # Nor token headers; the same profile read with a session still carries them.
    assert 'access-token' not in testapp.get('/api/v1/profile', headers=headers).headers
    assert (
        testapp.get('/api/v1/profile', headers=admin.headers).json['access_token']
        == admin.access_token
    )


def test_a_malformed_token_is_refused_before_any_database_lookup(config):
    class CountingPool:
        asked = 0

        def connection(self):
            self.asked += 1
            raise RuntimeError('no database here')

        getconn = connection  # db.borrow's way in

    pool = CountingPool()
    app = webtest.TestApp(app_module.create_app(config, pool))
    good = tokens.new_personal_token()
    typo = good[:-1] + ('a' if good[-1] != 'a' else 'b')
    for credential in (typo, good[:-1], 'fdpat_short', 'fdpat_' + 'é' * 38):
        for headers in (bearer(credential), {'api_access_token': credential}):
            answer = app.get('/api/v1/profile', headers=headers, status=401)
            assert answer.json == UNAUTHENTICATED
    assert pool.asked == 0
    # A well-formed one is looked up (and fails here, with no database).
    app.get('/api/v1/profile', headers=bearer(good), expect_errors=True)
    assert pool.asked == 1


def test_expired_revoked_and_unknown_tokens_are_the_401(testapp, make_user, conn):
    user = make_user()
    expired, revoked = new_token(testapp, user), create(testapp, user).json
    conn.execute(
        "UPDATE personal_access_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE token_digest = %s',
        (tokens.digest(expired),),
    )
    testapp.delete(f'{TOKENS}/{revoked["id"]}', headers=user.headers)
    for token in (expired, revoked['token'], tokens.new_personal_token()):
        answer = testapp.get('/api/v1/profile', headers=bearer(token), status=401)
        assert answer.json == UNAUTHENTICATED


def test_a_route_outside_the_scopes_is_403_insufficient_scope(testapp, admin):
    read = bearer(new_token(testapp, admin, scopes=['profile:read']))
    testapp.get('/api/v1/profile', headers=read)
    answer = testapp.put_json(
        '/api/v1/profile', {'profile': {'name': 'x'}}, headers=read, status=403
    )
    assert answer.json == insufficient('profile:write')
    answer = testapp.get(
        f'/api/v1/accounts/{admin.account_id}', headers=read, status=403
    )
    assert answer.json == insufficient('account:read')


def test_a_write_scope_includes_its_read_scope(testapp, admin):
    writer = bearer(
        new_token(testapp, admin, scopes=['profile:write', 'account:write'])
    )
    account = f'/api/v1/accounts/{admin.account_id}'
    testapp.get('/api/v1/profile', headers=writer)
    testapp.get(account, headers=writer)
    testapp.get(account + '/cache_keys', headers=writer)
    assert testapp.patch_json(account, {'name': 'Renamed'}, headers=writer).json[
        'name'
    ] == ('Renamed')
    testapp.post(account + '/update_active_at', headers=writer)


def test_account_write_still_needs_the_members_role(testapp, admin, make_user):
    agent = make_user(account_id=admin.account_id)
    token = bearer(new_token(testapp, agent, scopes=['account:write']))
    account = f'/api/v1/accounts/{admin.account_id}'
    answer = testapp.put_json(account, {'name': 'Mine now'}, headers=token, status=401)
    assert answer.json == {'error': 'You are not authorized to do this action'}
    testapp.post(account + '/update_active_at', headers=token)


def test_profile_write_never_changes_the_address_or_the_password(testapp, make_user):
    user = make_user()
    token = bearer(new_token(testapp, user, scopes=list(SCOPES)))
    for profile in (
        {'email': 'elsewhere@example.com'},
        {'current_password': user.password, 'password': 'another long one 9'},
    ):
        answer = testapp.put_json(
            '/api/v1/profile', {'profile': profile}, headers=token, status=403
        )
        assert answer.json == NEEDS_SESSION
    assert testapp.get('/api/v1/profile', headers=token).json['email'] == user.email


def test_every_security_route_refuses_a_personal_token(testapp, admin):
    token = bearer(new_token(testapp, admin, scopes=list(SCOPES)))
    account = admin.account_id
    refused = [*security_routes(account, admin.id), ('delete', '/auth/sign_out')]
    for method, url in refused:
        answer = getattr(testapp, method)(url, headers=token, status=403)
        assert answer.json == NEEDS_SESSION, (method, url)
    # Nor the account settings that are security (SPEC 3.4, 17).
    for field in ('enforce_mfa', 'restrict_legacy_access_token'):
        answer = testapp.patch_json(
            f'/api/v1/accounts/{account}', {field: False}, headers=token, status=403
        )
        assert answer.json == NEEDS_SESSION


def test_a_member_of_an_account_that_requires_mfa_must_enrol_first(
    testapp, admin, make_user, conn
):
    member = make_user(account_id=admin.account_id)
    token = bearer(new_token(testapp, member, scopes=list(SCOPES)))
    conn.execute(
        'UPDATE accounts SET enforce_mfa = true WHERE id = %s', (admin.account_id,)
    )
    answer = testapp.get('/api/v1/profile', headers=token, status=403)
    assert answer.json['error_code'] == 'mfa_enrollment_required'


# --- accounts -----------------------------------------------------------------------


@pytest.fixture
def two_accounts(make_account, make_user, conn):
    """An administrator of accounts A and B."""
    first, second = make_account('A'), make_account('B')
    user = make_user(account_id=first, role='administrator')
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role) VALUES (%s, %s,'
        " 'administrator')",
        (second, user.id),
    )
    return user, first, second


def test_a_token_for_some_accounts_reaches_only_those(testapp, two_accounts):
    user, first, second = two_accounts
    token = bearer(
        new_token(
            testapp,
            user,
            scopes=['account:write', 'profile:write'],
            account_ids=[first],
        )
    )
    testapp.get(f'/api/v1/accounts/{first}', headers=token)
    for method, path, scope in (
        ('get', '', 'account:read'),
        ('get', '/cache_keys', 'account:read'),
        ('post', '/update_active_at', 'account:write'),
        ('patch', '', 'account:write'),
    ):
        answer = getattr(testapp, method)(
            f'/api/v1/accounts/{second}{path}', headers=token, status=403
        )
        assert answer.json == insufficient(scope), path
    # A body that names the other account is held to the same rule.
    for route, field in (('availability', 'availability'), ('auto_offline', None)):
        profile = {'account_id': second}
        profile[field or route] = 'busy' if field else False
        answer = testapp.post_json(
            f'/api/v1/profile/{route}', {'profile': profile}, headers=token, status=403
        )
        assert answer.json == insufficient('profile:write')
    answer = testapp.put_json(
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': second}},
        headers=token,
        status=403,
    )
    assert answer.json == insufficient('profile:write')
    testapp.put_json(
        '/api/v1/profile/set_active_account',
        {'profile': {'account_id': first}},
        headers=token,
    )


def test_a_token_for_no_accounts_reaches_the_profile_only(testapp, admin):
    token = bearer(new_token(testapp, admin, scopes=list(SCOPES), account_ids=[]))
    testapp.get('/api/v1/profile', headers=token)
    answer = testapp.get(
        f'/api/v1/accounts/{admin.account_id}', headers=token, status=403
    )
    assert answer.json == insufficient('account:read')


def test_a_token_of_one_user_never_reaches_another_users_account(
    testapp, admin, make_user, make_account
):
    other = make_user(account_id=make_account('Elsewhere'), role='administrator')
    token = bearer(new_token(testapp, other, scopes=list(SCOPES)))
    for path in ('', '/cache_keys'):
        answer = testapp.get(
            f'/api/v1/accounts/{admin.account_id}{path}', headers=token, status=404
        )
        assert answer.json == {'error': 'Resource could not be found'}
    testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'account_id': admin.account_id, 'availability': 'busy'}},
        headers=token,
        status=404,
    )


def test_an_account_left_is_left_by_the_token_too(testapp, two_accounts, conn):
    """Which accounts a token reaches is decided by the membership look-up a session
    gets, at every request: a membership that ends ends for the token (and comes back
    with it)."""
    user, first, second = two_accounts
    restricted = bearer(
        new_token(testapp, user, scopes=['account:read'], account_ids=[first])
    )
    everywhere = bearer(new_token(testapp, user, scopes=['account:read']))
    removed = conn.execute(
        'DELETE FROM account_users WHERE user_id = %s AND account_id = %s'
        ' RETURNING role',
        (user.id, first),
    ).fetchone()
    for headers in (restricted, everywhere, user.headers):
        testapp.get(f'/api/v1/accounts/{first}', headers=headers, status=404)
    testapp.get(f'/api/v1/accounts/{second}', headers=everywhere)
    join(conn, first, user.id, removed['role'])
    for headers in (restricted, everywhere):
        testapp.get(f'/api/v1/accounts/{first}', headers=headers)


def test_a_suspended_membership_is_lost_by_the_token_until_reactivation(
    testapp, admin, make_user, make_account, conn
):
    """SPEC 17 with 18: the token's user suspended in an account loses it for the token
    too (the same membership check a session gets), and regains it on reactivation."""
    member = make_user(account_id=admin.account_id, role='administrator')
    elsewhere = make_account('Elsewhere')
    join(conn, elsewhere, member.id)
    token = bearer(new_token(testapp, member, scopes=list(SCOPES)))
    account = f'/api/v1/accounts/{admin.account_id}'
    suspend(testapp, admin, member.id)
    for method, path in (('get', ''), ('get', '/cache_keys'), ('patch', '')):
        answer = getattr(testapp, method)(account + path, headers=token, status=403)
        assert answer.json == SUSPENDED, path
    answer = testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'account_id': admin.account_id, 'availability': 'busy'}},
        headers=token,
        status=403,
    )
    assert answer.json == SUSPENDED
    testapp.get(f'/api/v1/accounts/{elsewhere}', headers=token)
    reactivate(testapp, admin, member.id)
    testapp.get(account, headers=token)


def test_a_lockout_revokes_every_personal_token(testapp, admin, make_user, conn):
    member = make_user(account_id=admin.account_id)
    token = bearer(new_token(testapp, member, scopes=list(SCOPES)))
    suspend(testapp, admin, member.id)  # the member's only account: a lockout
    testapp.get('/api/v1/profile', headers=token, status=401)
    assert stored(conn, member.id) == []
    reactivate(testapp, admin, member.id)
    testapp.get('/api/v1/profile', headers=token, status=401)


def test_a_token_reaches_accounts_joined_later_unless_restricted(
    testapp, make_user, make_account, conn
):
    user = make_user(account_id=make_account('First'))
    restricted_to = make_account('Listed')
    join(conn, restricted_to, user.id)
    everywhere = bearer(new_token(testapp, user, scopes=['account:read']))
    restricted = bearer(
        new_token(testapp, user, scopes=['account:read'], account_ids=[restricted_to])
    )
    later = make_account('Joined later')
    join(conn, later, user.id)
    testapp.get(f'/api/v1/accounts/{later}', headers=everywhere)
    testapp.get(f'/api/v1/accounts/{later}', headers=restricted, status=403)


# --- listing, last use, revoking ----------------------------------------------------


def test_the_list_shows_last_use_written_at_most_every_five_minutes(
    testapp, make_user, conn
):
    user = make_user()
    created = create(testapp, user).json
    [listed] = testapp.get(TOKENS, headers=user.headers).json
    assert (listed['last_used_at'], listed['last_used_ip']) == (None, None)
    token = bearer(created['token'])
    testapp.get(
        '/api/v1/profile', headers=token, extra_environ={'REMOTE_ADDR': '127.0.0.1'}
    )
    [listed] = testapp.get(TOKENS, headers=user.headers).json
    first_use = listed['last_used_at']
    assert first_use is not None and listed['last_used_ip'] == '127.0.0.1'
    testapp.get('/api/v1/profile', headers={**token, 'X-Real-IP': '203.0.113.5'})
    [listed] = testapp.get(TOKENS, headers=user.headers).json
    assert (listed['last_used_at'], listed['last_used_ip']) == (first_use, '127.0.0.1')
    conn.execute(
        "UPDATE personal_access_tokens SET last_used_at = now() - interval '5 minutes'"
        ' WHERE id = %s',
        (created['id'],),
    )
    testapp.get('/api/v1/profile', headers={**token, 'X-Real-IP': '203.0.113.5'})
    [listed] = testapp.get(TOKENS, headers=user.headers).json
    assert listed['last_used_ip'] == '203.0.113.5'
    assert listed['last_used_at'] > first_use


def test_the_list_is_the_callers_live_tokens_newest_first(testapp, make_user, conn):
    user, other = make_user(), make_user()
    first, second = create(testapp, user).json, create(testapp, user).json
    create(testapp, other)
    expired = create(testapp, user).json
    conn.execute(
        "UPDATE personal_access_tokens SET expires_at = now() - interval '1 second'"
        ' WHERE id = %s',
        (expired['id'],),
    )
    listed = testapp.get(TOKENS, headers=user.headers).json
    assert [item['id'] for item in listed] == [second['id'], first['id']]
    assert set(listed[0]) == {
        'id',
        'name',
        'scopes',
        'account_ids',
        'expires_at',
        'created_at',
        'last_used_at',
        'last_used_ip',
    }


def test_revoking_ends_it_at_once(testapp, make_user):
    user, other = make_user(), make_user()
    created = create(testapp, user).json
    theirs = create(testapp, other).json
    token = bearer(created['token'])
    testapp.get('/api/v1/profile', headers=token)

    assert testapp.delete(f'{TOKENS}/{created["id"]}', headers=user.headers).json == {}

    testapp.get('/api/v1/profile', headers=token, status=401)
    assert testapp.get(TOKENS, headers=user.headers).json == []
    for token_id in (created['id'], theirs['id'], 2**63 - 1):
        testapp.delete(f'{TOKENS}/{token_id}', headers=user.headers, status=404)
    testapp.get('/api/v1/profile', headers=bearer(theirs['token']))


def test_creating_and_revoking_are_mailed_and_audited(testapp, make_user, conn):
    user = make_user()
    created = create(
        testapp,
        user,
        name='Deploy bot evil.example/login',
        scopes=['profile:read'],
        headers={**user.headers, 'User-Agent': 'curl/8.5.0'},
    ).json
    testapp.delete(f'{TOKENS}/{created["id"]}', headers=user.headers)

    [made] = mails(conn, user.email, 'A personal access token was created')
    assert 'Token: Deploy bot evil.example/login' in made['text_body']
    assert 'Scopes: profile:read' in made['text_body']
    assert 'Accounts: every account of yours' in made['text_body']
    assert created['token'] not in made['text_body'] + made['html_body']
    # The name is the user's text: inert in HTML.
    assert 'evil.example/login' not in made['html_body']
    [gone] = mails(conn, user.email, 'A personal access token was revoked')
    assert 'Token: Deploy bot evil.example/login' in gone['text_body']
    [(actor, account, details)] = [
        tuple(row.values())
        for row in events(conn, user.id, 'personal_access_token_created')
    ]
    assert (actor, account, details['personal_access_token_id']) == (
        user.id,
        None,
        created['id'],
    )
    assert details['scopes'] == ['profile:read'] and details['account_ids'] is None
    [revoked] = events(conn, user.id, 'personal_access_token_revoked')
    assert revoked['details'] == {
        'personal_access_token_id': created['id'],
        'by_administrator': False,
    }
    feed = testapp.get('/api/v1/profile/audit_events', headers=user.headers).json
    assert [event['event'] for event in feed['events'][:2]] == [
        'personal_access_token_revoked',
        'personal_access_token_created',
    ]


# --- administrators -----------------------------------------------------------------


def test_administrators_list_the_members_tokens_that_reach_their_account(
    testapp, admin, make_user, make_account, conn
):
    member = make_user(account_id=admin.account_id)
    elsewhere = make_account('Elsewhere')
    join(conn, elsewhere, member.id)
    everywhere = create(testapp, member, name='everywhere').json
    here = create(
        testapp, member, name='here', account_ids=[elsewhere, admin.account_id]
    ).json
    create(testapp, member, name='not here', account_ids=[elsewhere])
    create(testapp, make_user(), name='a stranger')
    url = f'/api/v1/accounts/{admin.account_id}/access_tokens'

    listed = testapp.get(url, headers=admin.headers).json

    assert [(item['id'], item['user_id']) for item in listed] == [
        (here['id'], member.id),
        (everywhere['id'], member.id),
    ]
    # Only whether it is restricted: the member's other accounts are not shown.
    assert [item['account_ids'] for item in listed] == [[admin.account_id], None]
    assert 'token' not in json.dumps(listed).replace('"', ' ').split()
    assert here['token'] not in json.dumps(listed)
    answer = testapp.get(url, headers=member.headers, status=401)
    assert answer.json == {'error': 'You are not authorized to do this action'}
    for headers in (
        {'api_access_token': admin.access_token},
        bearer(new_token(testapp, admin, scopes=list(SCOPES))),
    ):
        assert testapp.get(url, headers=headers, status=403).json == NEEDS_SESSION


def test_administrators_revoke_a_members_token_and_the_member_is_told(
    testapp, admin, make_user, make_account, conn
):
    member = make_user(account_id=admin.account_id)
    elsewhere = make_account('Elsewhere')
    join(conn, elsewhere, member.id)
    reaching = create(testapp, member, name='Sync').json
    not_here = create(testapp, member, account_ids=[elsewhere]).json
    stranger = create(testapp, make_user()).json
    url = f'/api/v1/accounts/{admin.account_id}/access_tokens'

    assert testapp.delete(f'{url}/{reaching["id"]}', headers=admin.headers).json == {}

    testapp.get('/api/v1/profile', headers=bearer(reaching['token']), status=401)
    for other in (not_here, stranger, reaching):
        testapp.delete(f'{url}/{other["id"]}', headers=admin.headers, status=404)
        if other is not reaching:
            testapp.get('/api/v1/profile', headers=bearer(other['token']))
    [mail] = mails(conn, member.email, 'A personal access token was revoked')
    assert f'Revoked by: {admin.email}' in mail['text_body']
    assert 'Token: Sync' in mail['text_body']
    [event] = events(conn, member.id, 'personal_access_token_revoked')
    assert (event['actor_id'], event['account_id']) == (admin.id, admin.account_id)
    assert event['details']['by_administrator'] is True
    # An agent may not.
    agent_token = create(testapp, member).json
    testapp.delete(f'{url}/{agent_token["id"]}', headers=member.headers, status=401)


def test_administrators_do_not_see_a_suspended_members_tokens_but_may_revoke_them(
    testapp, admin, make_user, make_account, conn
):
    """SPEC 17 with 18: a member suspended here keeps their tokens for their other
    accounts, which reach this one no more; where the member uses them since (last use,
    IP) is not this account's to see. Their ids still revoke them, so that a token does
    not come back with the reactivation."""
    member = make_user(account_id=admin.account_id)
    elsewhere = make_account('Elsewhere')
    join(conn, elsewhere, member.id)
    kept = create(testapp, member, name='kept', scopes=['account:read']).json
    revoked = create(testapp, member, name='revoked').json
    url = f'/api/v1/accounts/{admin.account_id}/access_tokens'
    listed = testapp.get(url, headers=admin.headers).json
    assert [item['id'] for item in listed] == [revoked['id'], kept['id']]
    suspend(testapp, admin, member.id)
    # Used elsewhere, from the member's new address.
    testapp.get(
        f'/api/v1/accounts/{elsewhere}',
        headers=bearer(kept['token']),
        extra_environ={'REMOTE_ADDR': '203.0.113.77'},
    )

    listed = testapp.get(url, headers=admin.headers)

    assert listed.json == []
    assert '203.0.113.77' not in listed.text
    assert testapp.delete(f'{url}/{revoked["id"]}', headers=admin.headers).json == {}
    testapp.get('/api/v1/profile', headers=bearer(revoked['token']), status=401)
    reactivate(testapp, admin, member.id)
    listed = testapp.get(url, headers=admin.headers).json
    assert [item['id'] for item in listed] == [kept['id']]
    assert listed[0]['last_used_ip'] == '203.0.113.77'


# --- restrict_legacy_access_token ---------------------------------------------------


def test_an_account_may_retire_the_profile_access_token(
    testapp, two_accounts, make_user, conn
):
    user, first, second = two_accounts
    legacy = {'api_access_token': user.access_token}
    token = bearer(new_token(testapp, user, scopes=list(SCOPES)))
    url = f'/api/v1/accounts/{first}'
    assert testapp.get(url, headers=user.headers).json[
        'restrict_legacy_access_token'
    ] is (False)
    # A security setting: a session only (SPEC 3.4).
    for headers in (legacy, token):
        answer = testapp.put_json(
            url, {'restrict_legacy_access_token': True}, headers=headers, status=403
        )
        assert answer.json == NEEDS_SESSION
    agent = make_user(account_id=first)
    testapp.put_json(
        url, {'restrict_legacy_access_token': True}, headers=agent.headers, status=401
    )

    account = testapp.put_json(
        url, {'restrict_legacy_access_token': True}, headers=user.headers
    ).json
    assert account['restrict_legacy_access_token'] is True

    for method, path in (
        ('get', ''),
        ('get', '/cache_keys'),
        ('post', '/update_active_at'),
        ('patch', ''),
    ):
        answer = getattr(testapp, method)(url + path, headers=legacy, status=403)
        assert answer.json == LEGACY_DISABLED, path
    answer = testapp.post_json(
        '/api/v1/profile/availability',
        {'profile': {'account_id': first, 'availability': 'busy'}},
        headers=legacy,
        status=403,
    )
    assert answer.json == LEGACY_DISABLED
    # Every other member's profile token too; not another account's, not the profile.
    testapp.get(url, headers={'api_access_token': agent.access_token}, status=403)
    testapp.get(f'/api/v1/accounts/{second}', headers=legacy)
    testapp.get('/api/v1/profile', headers=legacy)
    # Personal access tokens and sessions still reach it.
    testapp.get(url, headers=token)
    testapp.get(url, headers=user.headers)
    testapp.put_json(url, {'restrict_legacy_access_token': False}, headers=user.headers)
    testapp.get(url, headers=legacy)


# --- what ends them all -------------------------------------------------------------


def test_a_password_reset_revokes_every_personal_token(testapp, make_user, conn):
    user = make_user()
    tokens_of_user = [new_token(testapp, user) for _ in range(3)]
    testapp.post_json('/auth/password', {'email': user.email})
    reset = queued_token(conn, user.email, 'reset_password_token')

    testapp.put_json(
        '/auth/password',
        {'reset_password_token': reset, 'password': 'a brand new secret 7'},
    )

    for token in tokens_of_user:
        testapp.get('/api/v1/profile', headers=bearer(token), status=401)
    assert stored(conn, user.id) == []
    [mail] = mails(conn, user.email, 'Your password was reset')
    assert 'Personal access tokens revoked: 3' in mail['text_body']
    [event] = events(conn, user.id, 'password_reset')
    assert event['details'] == {'personal_access_tokens_revoked': 3}


def test_an_email_revert_revokes_every_personal_token(testapp, make_user, conn):
    owner = make_user()
    # Whoever holds a fresh session of the owner's mints a token, then moves the
    # account.
    token = new_token(testapp, owner, scopes=list(SCOPES))
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': 'taker@example.com'}},
        headers=owner.headers,
    )
    revert = queued_token(conn, owner.email, 'token')

    testapp.post_json('/auth/email_revert', {'token': revert})

    testapp.get('/api/v1/profile', headers=bearer(token), status=401)
    assert stored(conn, owner.id) == []


def test_the_mfa_revert_link_revokes_every_personal_token(testapp, make_user, conn):
    owner = make_user()
    taker = owner.headers
    started = testapp.post('/api/v1/profile/mfa', headers=taker).json
    code = Authenticator(started['provisioning_url']).code(0)
    testapp.post_json('/api/v1/profile/mfa/verify', {'otp_code': code}, headers=taker)
    token = new_token(testapp, owner, headers=taker)

    testapp.post_json('/auth/mfa_revert', {'token': revert_link(conn, owner)})

    testapp.get('/api/v1/profile', headers=bearer(token), status=401)


@pytest.mark.parametrize(
    'change',
    ['password', 'reset_access_token', 'mfa'],
)
def test_the_owners_own_credential_changes_keep_the_tokens(testapp, make_user, change):
    """A password change with a session, a new profile access token or turning MFA on:
    the owner's integrations keep working (they list and revoke tokens themselves)."""
    user = make_user()
    token = bearer(new_token(testapp, user))
    if change == 'password':
        testapp.put_json(
            '/api/v1/profile',
            {
                'profile': {
                    'current_password': user.password,
                    'password': 'a whole new secret 5',
                }
            },
            headers=user.headers,
        )
    elif change == 'reset_access_token':
        testapp.post('/api/v1/profile/reset_access_token', headers=user.headers)
    else:
        started = testapp.post('/api/v1/profile/mfa', headers=user.headers).json
        code = Authenticator(started['provisioning_url']).code(0)
        testapp.post_json(
            '/api/v1/profile/mfa/verify', {'otp_code': code}, headers=user.headers
        )
    testapp.get('/api/v1/profile', headers=token)


def test_the_first_confirmation_revokes_every_personal_token(
    testapp, make_user, conn, pool, queries, config
):
    """An unconfirmed user cannot make one; should one exist (made before the rule, or
    by hand), the owner's confirmation ends it like every other credential."""
    user = make_user(confirmed=False)
    token = tokens.new_personal_token()
    conn.execute(
        'INSERT INTO personal_access_tokens (user_id, name, token_digest, scopes,'
        " expires_at) VALUES (%s, 'squatter', %s, '{profile:read}', now() +"
        " interval '1 day')",
        (user.id, tokens.digest(token)),
    )
    testapp.get('/api/v1/profile', headers=bearer(token))
    testapp.post('/api/v1/profile/resend_confirmation', headers=user.headers)
    confirmation = queued_token(conn, user.email, 'confirmation_token')

    testapp.post_json('/auth/confirmation', {'confirmation_token': confirmation})

    testapp.get('/api/v1/profile', headers=bearer(token), status=401)


# --- the contract -------------------------------------------------------------------


def test_the_scopes_are_the_same_in_the_schema_and_the_access_rules():
    schema = load_schemas()['access_token_create']
    assert tuple(schema['properties']['scopes']['items']['enum']) == SCOPES
    assert tuple(load_schemas()['response_bodies']['$defs']['scope']['enum']) == SCOPES


def test_a_session_issued_long_ago_but_used_now_is_still_stale(
    testapp, make_user, pool, queries, config, conn
):
    """Recent authentication is the last password or second-factor check, not the last
    request: a session kept alive by use cannot mint a token."""
    user = make_user()
    conn.execute(
        "UPDATE user_tokens SET authenticated_at = now() - interval '1 hour',"
        ' last_used_at = now() WHERE user_id = %s',
        (user.id,),
    )
    with pool.connection() as db:
        session_id = db.execute(
            'SELECT id FROM user_tokens WHERE user_id = %s', (user.id,)
        ).fetchone()['id']
        assert not sessions.recently_authenticated(db, queries, config, session_id)
    testapp.get('/api/v1/profile', headers=user.headers)
    create(testapp, user, status=403)


def test_the_audit_log_names_the_token_that_acted(testapp, admin, make_user, conn):
    """After a leak, the owner and the administrators can tell what that token did: an
    event a personal access token causes carries its id as
    acting_personal_access_token_id; one a session causes does not, not even one about
    a token (its creation or revocation names that token as
    personal_access_token_id)."""
    made = create(testapp, admin, scopes=['account:write']).json
    account = f'/api/v1/accounts/{admin.account_id}'
    testapp.patch_json(account, {'name': 'By token'}, headers=bearer(made['token']))
    testapp.patch_json(account, {'name': 'By session'}, headers=admin.headers)
    changes = events(conn, admin.id, 'account_settings_changed')
    assert [row['details'].get(ACTING) for row in changes] == [made['id'], None]
    revoked = create(testapp, admin).json
    testapp.delete(f'{TOKENS}/{revoked["id"]}', headers=admin.headers)
    about_tokens = events(conn, admin.id, 'personal_access_token_created') + events(
        conn, admin.id, 'personal_access_token_revoked'
    )
    assert [row['details'].get(ACTING) for row in about_tokens] == [None] * 3
    assert [row['details']['personal_access_token_id'] for row in about_tokens] == [
        made['id'],
        revoked['id'],
        revoked['id'],
    ]
    # A role refusal: an agent's token, with the scope, on an administrators' route.
    agent = make_user(account_id=admin.account_id)
    refused = create(testapp, agent, scopes=['account:write']).json
    testapp.put_json(
        account, {'name': 'Mine'}, headers=bearer(refused['token']), status=401
    )
    refusals = events(conn, agent.id, 'access_refused')
    assert [row['details'][ACTING] for row in refusals] == [refused['id']]
    # What the owner reads in their feed says so too.
    feed = testapp.get('/api/v1/profile/audit_events', headers=admin.headers).json
    by_token = [
        event
        for event in feed['events']
        if event['event'] == 'account_settings_changed'
    ]
    assert by_token[-1]['details'][ACTING] == made['id']
