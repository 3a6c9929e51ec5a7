"""Single sign-on in the ownership model (SPEC 3.3, 3.4, 19), from an attacker's side:
what an sso_auth_token, the MFA challenge it opens and an SSO session are worth after
the owner acts, and what anyone can make the callback and the token sign-in write.

Each test names the rule it holds; docs/security.md lists them.
"""

import uuid

from tests.support.users import unique_ip
from tests.test_confirmations import queued_token
from tests.test_confirmations import reset
from tests.test_mfa import enable
from tests.test_sso_flow import add_user
from tests.test_sso_flow import app  # noqa: F401 (fixture)
from tests.test_sso_flow import callback
from tests.test_sso_flow import FAILED
from tests.test_sso_flow import idp  # noqa: F401 (fixture)
from tests.test_sso_flow import INVALID_LOGIN
from tests.test_sso_flow import make_sso  # noqa: F401 (fixture)
from tests.test_sso_flow import member  # noqa: F401 (fixture)
from tests.test_sso_flow import session_headers
from tests.test_sso_flow import setup  # noqa: F401 (fixture)
from tests.test_sso_flow import sign_in_through
from tests.test_sso_flow import sso_config  # noqa: F401 (fixture)
from tests.test_sso_flow import start
from tests.test_sso_flow import token_of

SETTINGS = '/api/v1/accounts/{}/sso_settings'


def audit_rows(conn, event, ip):
    return conn.execute(
        'SELECT subject_id, details FROM audit_events WHERE event = %s'
        ' AND ip_address = %s ORDER BY id',
        (event, ip),
    ).fetchall()


def token_sign_in(app, email, token, status):  # noqa: F811
    return app.post_json(
        '/auth/sign_in', {'email': email, 'sso_auth_token': token}, status=status
    )


def ask_reset(app, conn, email):  # noqa: F811
    app.post_json('/auth/password', {'email': email}, status=200)
    return queued_token(conn, email, 'reset_password_token')


# --- a credential change voids what single sign-on issued -----------------------------


def test_a_reset_voids_an_outstanding_sso_token_and_ends_sso_sessions(
    app,  # noqa: F811
    conn,
    setup,  # noqa: F811
    member,  # noqa: F811
):
    """SPEC 3.3: a reset invalidates every outstanding one-time token and ends every
    session, the sessions single sign-on opened included."""
    location, _ = sign_in_through(app, setup, member.email)
    _, sso_session_token = token_of(location)
    sso_session = session_headers(
        token_sign_in(app, member.email, sso_session_token, 200)
    )
    location, _ = sign_in_through(app, setup, member.email)
    _, stale = token_of(location)
    reset(app, ask_reset(app, conn, member.email))
    app.get('/api/v1/profile', headers=sso_session, status=401)
    assert token_sign_in(app, member.email, stale, 401).json == INVALID_LOGIN


def test_turning_mfa_on_voids_an_sso_token_and_off_voids_the_challenge_it_opened(
    app,  # noqa: F811
    setup,  # noqa: F811
    member,  # noqa: F811
):
    """A token issued before MFA came on would skip it; a challenge opened before MFA
    went off belongs to the old credential (SPEC 3.3)."""
    location, _ = sign_in_through(app, setup, member.email)
    _, before_mfa = token_of(location)
    authenticator, codes = enable(app, member)
    token_sign_in(app, member.email, before_mfa, 401)
    location, _ = sign_in_through(app, setup, member.email)
    _, token = token_of(location)
    challenge = token_sign_in(app, member.email, token, 206).json['mfa_token']
    app.delete_json(
        '/api/v1/profile/mfa',
        {'password': member.password, 'backup_code': codes[0]},
        headers=member.headers,
        status=200,
    )
    app.post_json(
        '/auth/sign_in',
        {'mfa_token': challenge, 'otp_code': authenticator.code(0)},
        status=401,
    )


def test_a_token_is_void_once_its_user_is_locked_out(
    app,  # noqa: F811
    conn,
    setup,  # noqa: F811
    member,  # noqa: F811
):
    location, _ = sign_in_through(app, setup, member.email)
    _, token = token_of(location)
    conn.execute(
        "UPDATE account_users SET status = 'suspended' WHERE user_id = %s",
        (member.id,),
    )
    answer = token_sign_in(app, member.email, token, 401)
    assert answer.json.get('error_code') == 'account_suspended'


def test_a_token_is_void_once_its_user_is_suspended_in_the_providers_account(
    app,  # noqa: F811
    conn,
    setup,  # noqa: F811
    member,  # noqa: F811
    make_account,
):
    """Suspended in the provider's account between the callback and the token's use,
    but active in another: the provider no longer vouches for them here."""
    other = make_account()
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role)'
        " VALUES (%s, %s, 'agent')",
        (other, member.id),
    )
    location, _ = sign_in_through(app, setup, member.email)
    _, token = token_of(location)
    conn.execute(
        "UPDATE account_users SET status = 'suspended'"
        ' WHERE user_id = %s AND account_id = %s',
        (member.id, setup.account_id),
    )
    answer = token_sign_in(app, member.email, token, 401)
    assert answer.json.get('error_code') == 'account_suspended'
    assert 'access-token' not in answer.headers


# --- the provider's settings vouch only while they hold -------------------------------


def test_deleting_the_settings_voids_the_tokens_and_challenges_they_issued(
    app,  # noqa: F811
    setup,  # noqa: F811
    member,  # noqa: F811
    make_user,
):
    """An administrator removes a provider (say, it was compromised): nothing it
    vouched for in the last minutes signs in afterwards."""
    admin = make_user(account_id=setup.account_id, role='administrator')
    authenticator, _ = enable(app, member)
    location, _ = sign_in_through(app, setup, member.email)
    _, challenged = token_of(location)
    challenge = token_sign_in(app, member.email, challenged, 206).json['mfa_token']
    location, _ = sign_in_through(app, setup, member.email)
    _, unused = token_of(location)
    app.delete(SETTINGS.format(setup.account_id), headers=admin.headers, status=204)
    token_sign_in(app, member.email, unused, 401)
    app.post_json(
        '/auth/sign_in',
        {'mfa_token': challenge, 'otp_code': authenticator.code(1)},
        status=401,
    )


def test_replacing_the_settings_voids_flows_and_tokens_issued_under_the_old_ones(
    app,  # noqa: F811
    setup,  # noqa: F811
    member,  # noqa: F811
    conn,
    pool,
    queries,
    config,
):
    """A new issuer (or client, domains, trust in the provider's MFA): a flow started,
    or a token issued, under the old settings is refused."""
    admin = add_user(pool, queries, config, setup.address('admin'), setup.account_id)
    conn.execute(
        "UPDATE account_users SET role = 'administrator' WHERE user_id = %s",
        (admin.id,),
    )
    location, _ = sign_in_through(app, setup, member.email)
    _, token = token_of(location)
    flow = start(app, member.email)
    app.put_json(
        SETTINGS.format(setup.account_id),
        {
            'sso_settings': {
                'issuer': setup.idp.issuer,
                'client_id': 'another-client',
                'client_secret': 'another secret',
                'allowed_domains': [setup.domain],
                'jit_provisioning': False,
                'enforce': False,
                'trust_idp_mfa': False,
            }
        },
        headers=admin.headers,
        status=200,
    )
    token_sign_in(app, member.email, token, 401)
    setup.idp.id_token = setup.idp.sign(
        setup.idp.claims('another-client', flow.nonce, email=member.email)
    )
    assert callback(app, {'code': 'c', 'state': flow.state}, flow.cookie) == FAILED


# --- what anyone can make the log hold ------------------------------------------------


def test_made_up_callbacks_write_one_audit_row_an_hour(app, conn):  # noqa: F811
    """SPEC 14: unauthenticated traffic cannot grow the audit log without bound."""
    ip = unique_ip()
    for _ in range(5):
        location = callback(
            app,
            {'code': 'c', 'state': 'x' * 43},
            'y' * 43,
            **{'X-Real-IP': ip},
        )
        assert location == FAILED
    assert audit_rows(conn, 'sso_sign_in_failed', ip) == [
        {'subject_id': None, 'details': {'reason': 'state_mismatch'}}
    ]


def test_made_up_sso_tokens_for_a_known_address_write_one_audit_row_an_hour(
    app,  # noqa: F811
    conn,
    member,  # noqa: F811
):
    """No guessing budget bounds sso_auth_tokens (256 bits need none), so their
    refusals are counted as an unknown address's are."""
    ip = unique_ip()
    for _ in range(5):
        app.post_json(
            '/auth/sign_in',
            {'email': member.email, 'sso_auth_token': 'z' * 43},
            headers={'X-Real-IP': ip},
            status=401,
        )
    assert audit_rows(conn, 'sign_in_failed', ip) == [
        {'subject_id': member.id, 'details': {'reason': 'sso_token'}}
    ]


def test_a_token_does_not_follow_its_user_to_another_address(
    app,  # noqa: F811
    conn,
    setup,  # noqa: F811
    pool,
    queries,
    config,
):
    """Bound to the address it was issued for (sso.flow_take_token)."""
    user = add_user(pool, queries, config, setup.address('mover'), setup.account_id)
    location, _ = sign_in_through(app, setup, user.email)
    _, token = token_of(location)
    moved = setup.address('moved')
    conn.execute('UPDATE users SET email = %s WHERE id = %s', (moved, user.id))
    token_sign_in(app, moved, token, 401)
    token_sign_in(app, user.email, token, 401)


def test_the_owners_sso_voids_a_squatters_pending_address_change(
    app,  # noqa: F811
    conn,
    make_sso,  # noqa: F811
):
    """The squatter signed up with the owner's address and asked to move the account to
    his own before anyone confirmed: the owner's first confirmation by single sign-on
    drops the pending address and voids its link (SPEC 3.3), so the squatter cannot
    take the account to his mailbox afterwards."""
    setup = make_sso(jit_provisioning=True)  # noqa: F811
    owner_address = setup.address('owner')
    squatter_address = f'squatter-{uuid.uuid4().hex[:10]}@example.com'
    signed_up = app.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Squat',
            'email': owner_address,
            'user_full_name': 'Squatter',
            'password': 'orange tulip 77 x',
        },
        status=200,
    )
    app.put_json(
        '/api/v1/profile',
        {'profile': {'email': squatter_address}},
        headers=session_headers(signed_up),
        status=200,
    )
    link = queued_token(conn, squatter_address, 'confirmation_token')
    location, _ = sign_in_through(app, setup, owner_address)
    email, token = token_of(location)
    owner = token_sign_in(app, email, token, 200)
    assert owner.json['data']['unconfirmed_email'] is None
    app.post_json('/auth/confirmation', {'confirmation_token': link}, status=422)
    assert owner.json['data']['email'] == owner_address
    assert (
        app.get('/api/v1/profile', headers=session_headers(owner), status=200).json[
            'email'
        ]
        == owner_address
    )
