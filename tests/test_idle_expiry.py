"""An idle-expired session stays expired (SPEC 3.4): its expiry is recorded when it is
seen, so raising or removing SESSION_IDLE_TIMEOUT_MINUTES later brings nothing back."""

import pytest

from tests.test_profile_sessions import idle


@pytest.mark.parametrize('later', [{}, {'SESSION_IDLE_TIMEOUT_MINUTES': '120'}])
def test_an_idle_expired_session_stays_expired_when_the_timeout_is_raised_or_removed(
    make_testapp, make_user, conn, later
):
    strict = make_testapp(SESSION_IDLE_TIMEOUT_MINUTES='30')
    user = make_user()
    idle(conn, user.headers, 31)
    strict.get('/api/v1/profile', headers=user.headers, status=401)
    relaxed = make_testapp(**later)
    relaxed.get('/api/v1/profile', headers=user.headers, status=401)
    relaxed.get('/auth/validate_token', headers=user.headers, status=401)
    # Recorded on the row: the session is gone from every list, as an expired one is.
    row = conn.execute(
        'SELECT expires_at <= now() AS expired FROM user_tokens WHERE client = %s',
        (user.client,),
    ).fetchone()
    assert row is None or row['expired']


def test_a_session_never_seen_idle_is_not_expired_by_a_stricter_past(
    make_testapp, make_user, conn
):
    user = make_user()
    idle(conn, user.headers, 31)
    # No request came while the 30-minute timeout was on: without it the session lives.
    make_testapp().get('/api/v1/profile', headers=user.headers, status=200)
