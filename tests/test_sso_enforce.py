"""Single sign-on enforced (SPEC 19): while an account's provider sets ``enforce``, a
password opens no session for an address of its domains, through any way in, except
an administrator's break glass (with MFA), which every administrator hears of.

The provider is stored directly (tests/support/sso.py) from a forged provider on
loopback; users made with make_user are moved into its domain.
"""

import uuid

import pytest

import config as config_module
from services import passwords
from tests.smtp_server import deliver
from tests.support.fake_idp import fake_idp
from tests.support.sso import insert_provider
from tests.support.sso import unique_domain
from tests.test_confirmations import queued_token
from tests.test_mfa import challenge
from tests.test_mfa import enable

SSO_REQUIRED = {
    'success': False,
    'errors': ["Sign in with your organisation's single sign-on"],
    'error_code': 'sso_required',
}
INVALID_LOGIN = {
    'success': False,
    'errors': ['Invalid login credentials. Please try again.'],
}
NEW_PASSWORD = 'a brand new secret 9'
BREAK_GLASS_SUBJECT = 'An administrator signed in without single sign-on'


@pytest.fixture(scope='module')
def idp():
    with fake_idp() as idp:
        yield idp


@pytest.fixture
def app(make_testapp):
    return make_testapp(OIDC_ALLOW_PRIVATE_ISSUERS='true')


@pytest.fixture
def org(base_env, pool, make_account, idp):
    """An account whose provider enforces single sign-on for a domain of its own:
    ``org.account_id``, ``org.domain``."""
    config = config_module.load({**base_env, 'OIDC_ALLOW_PRIVATE_ISSUERS': 'true'})

    class Org:
        account_id = make_account()
        domain = unique_domain()

    with pool.connection() as conn:
        insert_provider(
            conn,
            config,
            Org.account_id,
            idp.issuer,
            'frontdesk',
            'secret',
            [Org.domain],
            enforce=True,
        )
    return Org


@pytest.fixture
def member(make_user, conn):
    """member(account_id, domain, role='agent'): a confirmed user with an address in
    ``domain`` (None: outside every provider's) and a session."""

    def make(account_id, domain, role='agent', confirmed=True):
        user = make_user(account_id=account_id, role=role, confirmed=confirmed)
        if domain is not None:
            user.email = f'u-{uuid.uuid4().hex[:10]}@{domain}'
            conn.execute(
                'UPDATE users SET email = %s WHERE id = %s', (user.email, user.id)
            )
        return user

    return make


def sign_in(app, user, password=None, status=401):
    return app.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': password or user.password},
        status=status,
    )


def second_step(app, token, code, status=200):
    return app.post_json(
        '/auth/sign_in', {'mfa_token': token, 'otp_code': code}, status=status
    )


def alive(app, headers):
    answer = app.get('/api/v1/profile', headers=headers, expect_errors=True)
    return answer.status_int == 200


def sessions_of(conn, user):
    return conn.execute(
        'SELECT count(*) AS n FROM user_tokens WHERE user_id = %s', (user.id,)
    ).fetchone()['n']


def failures(conn, email, reason):
    """Failed sign-ins of the user with ``email`` for ``reason``."""
    return conn.execute(
        'SELECT count(*) AS n FROM audit_events a JOIN users u ON u.id = a.subject_id'
        " WHERE u.email = %s AND a.event = 'sign_in_failed'"
        " AND a.details->>'reason' = %s",
        (email, reason),
    ).fetchone()['n']


def break_glass_events(conn, user):
    return conn.execute(
        'SELECT account_id, session_id FROM audit_events'
        " WHERE event = 'sso_break_glass' AND subject_id = %s",
        (user.id,),
    ).fetchall()


def reset_link(app, conn, user):
    app.post_json('/auth/password', {'email': user.email})
    return queued_token(conn, user.email, 'reset_password_token')


def reset(app, token, status):
    return app.put_json(
        '/auth/password',
        {
            'reset_password_token': token,
            'password': NEW_PASSWORD,
            'password_confirmation': NEW_PASSWORD,
        },
        status=status,
    )


def with_mfa(app, user):
    """Turn MFA on for ``user`` (before single sign-on is enforced for it: the session
    enabling it is a password one); its authenticator."""
    authenticator, _ = enable(app, user)
    return authenticator


def test_the_right_password_is_sso_required_and_a_wrong_one_the_usual_401(
    app, org, member, conn
):
    user = member(org.account_id, org.domain)

    assert sign_in(app, user, 'not the password').json == INVALID_LOGIN
    assert sign_in(app, user).json == SSO_REQUIRED

    assert failures(conn, user.email, 'password') == 1
    assert failures(conn, user.email, 'sso_required') == 1


def test_the_right_password_of_someone_outside_the_account_is_sso_required(
    app, org, member, make_account
):
    """Enforcement is the address's domain's, whichever accounts the user is in."""
    user = member(make_account(), org.domain)
    assert sign_in(app, user).json == SSO_REQUIRED


def test_an_unconfirmed_address_is_told_to_use_single_sign_on(app, org, member):
    """Single sign-on confirms an address (SPEC 19): that comes first."""
    user = member(org.account_id, org.domain, confirmed=False)
    assert sign_in(app, user).json == SSO_REQUIRED


def test_the_wrong_passwords_still_spend_the_guessing_budget(app, org, member):
    user = member(org.account_id, org.domain)
    for _ in range(10):
        sign_in(app, user, 'not the password')
    # The right password past the budget: the 429, not sso_required.
    sign_in(app, user, status=429)


def test_an_address_outside_the_domain_signs_in(app, org, member):
    user = member(org.account_id, None, role='administrator')
    assert sign_in(app, user, status=200).json['data']['email'] == user.email


def test_a_provider_that_does_not_enforce_changes_nothing(app, org, member, conn):
    conn.execute(
        'UPDATE sso_providers SET enforce = false WHERE account_id = %s',
        (org.account_id,),
    )
    user = member(org.account_id, org.domain)
    sign_in(app, user, status=200)


def test_break_glass_an_administrator_with_mfa_signs_in_and_every_administrator_hears(
    app, org, member, conn, inbox, base_env
):
    admin = member(org.account_id, org.domain, role='administrator')
    colleague = member(org.account_id, None, role='administrator')
    agent = member(org.account_id, org.domain)
    authenticator = with_mfa(app, admin)

    token = challenge(app, admin)
    answer = second_step(app, token, authenticator.code(0))

    assert answer.json['data']['email'] == admin.email
    assert alive(app, {k: answer.headers[k] for k in ('access-token', 'client', 'uid')})
    [event] = break_glass_events(conn, admin)
    assert event['account_id'] == org.account_id and event['session_id'] is not None
    deliver(base_env, inbox.port)
    for address in (admin.email, colleague.email):
        [message] = [
            item
            for item in inbox.to(address)
            if item.message['Subject'] == BREAK_GLASS_SUBJECT
        ]
        assert f'Address: {admin.email}' in message.text
    assert not [
        item
        for item in inbox.to(agent.email)
        if item.message['Subject'] == BREAK_GLASS_SUBJECT
    ]


def test_a_wrong_code_of_break_glass_tells_nobody(app, org, member, conn):
    admin = member(org.account_id, org.domain, role='administrator')
    with_mfa(app, admin)
    token = challenge(app, admin)
    second_step(app, token, '000000', status=400)
    assert break_glass_events(conn, admin) == []


def test_an_administrator_without_mfa_is_sso_required(app, org, member):
    admin = member(org.account_id, org.domain, role='administrator')
    assert sign_in(app, admin).json == SSO_REQUIRED


def test_an_agent_with_mfa_is_sso_required(app, org, member):
    agent = member(org.account_id, org.domain)
    with_mfa(app, agent)
    assert sign_in(app, agent).json == SSO_REQUIRED


def test_an_administrator_of_another_account_with_mfa_is_sso_required(
    app, org, member, make_account
):
    admin = member(make_account(), org.domain, role='administrator')
    with_mfa(app, admin)
    assert sign_in(app, admin).json == SSO_REQUIRED


def test_a_suspended_administrator_with_mfa_is_sso_required(app, org, member, conn):
    admin = member(org.account_id, org.domain, role='administrator')
    with_mfa(app, admin)
    conn.execute(
        "UPDATE account_users SET status = 'suspended' WHERE user_id = %s",
        (admin.id,),
    )
    assert sign_in(app, admin).json == SSO_REQUIRED


def test_a_challenge_from_before_enforcement_opens_no_session(app, org, member, conn):
    """The second step asks again: enforcement may have come on since the password."""
    conn.execute(
        'UPDATE sso_providers SET enforce = false WHERE account_id = %s',
        (org.account_id,),
    )
    agent = member(org.account_id, org.domain)
    authenticator = with_mfa(app, agent)
    token = challenge(app, agent)
    before = sessions_of(conn, agent)
    conn.execute(
        'UPDATE sso_providers SET enforce = true WHERE account_id = %s',
        (org.account_id,),
    )

    answer = second_step(app, token, authenticator.code(0), status=401)

    assert answer.json == SSO_REQUIRED
    assert sessions_of(conn, agent) == before
    assert failures(conn, agent.email, 'sso_required') == 1


def test_a_challenge_single_sign_on_opened_is_no_break_glass(
    app, org, member, conn, inbox, base_env
):
    """The flow's own MFA step (its challenge names the provider) is single sign-on:
    neither refused nor told to the administrators."""
    admin = member(org.account_id, org.domain, role='administrator')
    agent = member(org.account_id, org.domain)
    for user in (admin, agent):
        authenticator = with_mfa(app, user)
        conn.execute(
            'UPDATE sso_providers SET enforce = false WHERE account_id = %s',
            (org.account_id,),
        )
        token = challenge(app, user)
        conn.execute(
            'UPDATE sso_providers SET enforce = true WHERE account_id = %s',
            (org.account_id,),
        )
        # What the flow's challenge carries (migration 0020).
        conn.execute(
            "UPDATE one_time_tokens SET sso_account_id = %s, sso_sub = 'sub'"
            " WHERE user_id = %s AND purpose = 'mfa_challenge'",
            (org.account_id, user.id),
        )
        second_step(app, token, authenticator.code(0))
        assert break_glass_events(conn, user) == []


def test_a_reset_sets_the_password_ends_every_session_and_opens_none(
    app, org, member, conn
):
    user = member(org.account_id, org.domain)
    token = reset_link(app, conn, user)

    assert reset(app, token, status=401).json == SSO_REQUIRED

    assert not alive(app, user.headers)
    assert sessions_of(conn, user) == 0
    hashed = conn.execute(
        'SELECT encrypted_password FROM users WHERE id = %s', (user.id,)
    ).fetchone()['encrypted_password']
    assert passwords.check_password(NEW_PASSWORD, hashed)
    # The new password is as unusable for signing in while enforced...
    assert sign_in(app, user, NEW_PASSWORD).json == SSO_REQUIRED
    # ...and signs in once it no longer is.
    conn.execute(
        'UPDATE sso_providers SET enforce = false WHERE account_id = %s',
        (org.account_id,),
    )
    sign_in(app, user, NEW_PASSWORD, status=200)


def test_a_reset_of_an_agent_with_mfa_gives_no_challenge(app, org, member, conn):
    agent = member(org.account_id, org.domain)
    with_mfa(app, agent)
    token = reset_link(app, conn, agent)
    assert reset(app, token, status=401).json == SSO_REQUIRED
    assert (
        conn.execute(
            'SELECT count(*) AS n FROM one_time_tokens WHERE user_id = %s'
            " AND purpose = 'mfa_challenge'",
            (agent.id,),
        ).fetchone()['n']
        == 0
    )


def test_a_reset_of_break_glass_is_the_usual_challenge(app, org, member, conn):
    admin = member(org.account_id, org.domain, role='administrator')
    authenticator = with_mfa(app, admin)
    token = reset_link(app, conn, admin)

    answer = reset(app, token, status=206)

    second_step(app, answer.json['mfa_token'], authenticator.code(1))
    assert len(break_glass_events(conn, admin)) == 1


def test_a_confirmation_confirms_and_opens_no_session(app, org, member, conn):
    user = member(org.account_id, org.domain, confirmed=False)
    app.post_json('/resend_confirmation', {'email': user.email})
    token = queued_token(conn, user.email, 'confirmation_token')

    answer = app.post_json(
        '/auth/confirmation', {'confirmation_token': token}, status=401
    )

    assert answer.json == SSO_REQUIRED
    assert 'access-token' not in answer.headers
    assert conn.execute(
        'SELECT confirmed_at IS NOT NULL AS confirmed FROM users WHERE id = %s',
        (user.id,),
    ).fetchone()['confirmed']
    assert sessions_of(conn, user) == 0


def test_a_revert_link_opens_no_session_and_its_reset_none_either(
    app, org, member, conn
):
    """E-mail and MFA revert links end every session and mail a reset link; that link
    is the reset above."""
    user = member(org.account_id, org.domain)
    with_mfa(app, user)
    token = queued_token(conn, user.email, 'token')
    assert app.post_json('/auth/mfa_revert', {'token': token}).json == {}
    assert sessions_of(conn, user) == 0
    reset_token = queued_token(conn, user.email, 'reset_password_token')
    assert reset(app, reset_token, status=401).json == SSO_REQUIRED
    assert sessions_of(conn, user) == 0


def test_a_reset_of_a_member_locked_out_everywhere_changes_nothing(
    app, org, member, conn
):
    """SPEC 18 before SPEC 19: account_suspended, and the link's work rolled back."""
    user = member(org.account_id, org.domain)
    token = reset_link(app, conn, user)
    conn.execute(
        "UPDATE account_users SET status = 'suspended' WHERE user_id = %s",
        (user.id,),
    )

    assert reset(app, token, status=401).json['error_code'] == 'account_suspended'

    hashed = conn.execute(
        'SELECT encrypted_password FROM users WHERE id = %s', (user.id,)
    ).fetchone()['encrypted_password']
    assert passwords.check_password(user.password, hashed)
