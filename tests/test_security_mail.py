"""Security e-mails (SPEC 14), received by a real SMTP server: what happened, when, from
which address and device, and what to do if it was not the user."""

import datetime
import re

from tests.smtp_server import deliver
from tests.support.users import PASSWORD

FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0'
SAFARI = (
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 '
    '(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1'
)
NEW_PASSWORD = 'a brand new secret 9'
IP = '192.0.2.55'


def client(headers=None, agent=FIREFOX, ip=IP):
    return {**(headers or {}), 'User-Agent': agent, 'X-Real-IP': ip}


def received(inbox, base_env, address, subject):
    deliver(base_env, inbox.port)
    found = [item for item in inbox.to(address) if item.message['Subject'] == subject]
    assert len(found) == 1, [item.message['Subject'] for item in inbox.to(address)]
    return found[0]


def assert_facts(message, device, ip=IP):
    """Time (this minute or the last), address, device and advice, in both parts."""
    now = datetime.datetime.now(datetime.timezone.utc)
    minutes = {
        (now - datetime.timedelta(minutes=delta)).strftime('%Y-%m-%d %H:%M')
        for delta in (0, 1)
    }
    for body in (message.text, message.html):
        stamp = re.search(r'Time: (\d{4}-\d\d-\d\d \d\d:\d\d):\d\d UTC', body)
        assert stamp and stamp.group(1) in minutes, body
        assert f'IP address: {ip}' in body
        assert f'Device: {device}' in body
        assert 'If it was not, reset your password now' in body


def test_password_changed(testapp, make_user, inbox, base_env):
    user = make_user()
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'current_password': PASSWORD, 'password': NEW_PASSWORD}},
        headers=client(user.headers),
    )
    message = received(inbox, base_env, user.email, 'Your password was changed')
    assert 'The password of your Frontdesk account was changed.' in message.text
    assert_facts(message, 'Firefox 120.0 on Linux')
    assert NEW_PASSWORD not in message.text and NEW_PASSWORD not in message.html


def test_password_reset(testapp, make_user, inbox, base_env, conn):
    user = make_user()
    testapp.post_json('/auth/password', {'email': user.email})
    body = conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address = %s'
        " AND kind = 'reset_password'",
        (user.email,),
    ).fetchone()['text_body']
    token = re.search(r'reset_password_token=([A-Za-z0-9_-]+)', body).group(1)
    testapp.put_json(
        '/auth/password',
        {'reset_password_token': token, 'password': NEW_PASSWORD},
        headers=client(agent=SAFARI),
    )
    message = received(inbox, base_env, user.email, 'Your password was reset')
    assert_facts(message, 'Mobile Safari 17.1 on iOS (iPhone)')


def test_a_new_device_gets_a_notice_and_a_known_one_does_not(
    testapp, make_user, inbox, base_env
):
    user = make_user()
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, headers=client()
    )
    message = received(inbox, base_env, user.email, 'New sign-in to your account')
    assert_facts(message, 'Firefox 120.0 on Linux')

    # Firefox on Linux again, from elsewhere and a newer version: a known device.
    newer = FIREFOX.replace('120.0', '121.0')
    testapp.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': PASSWORD},
        headers=client(agent=newer, ip='192.0.2.66'),
    )
    deliver(base_env, inbox.port)
    assert len(inbox.to(user.email)) == 1

    testapp.post_json(
        '/auth/sign_in',
        {'email': user.email, 'password': PASSWORD},
        headers=client(agent=SAFARI, ip='2001:db8::7'),
    )
    deliver(base_env, inbox.port)
    notices = inbox.to(user.email)
    assert len(notices) == 2
    assert_facts(notices[1], 'Mobile Safari 17.1 on iOS (iPhone)', ip='2001:db8::7')


def test_a_device_unseen_for_90_days_is_new_again(
    testapp, make_user, inbox, base_env, conn
):
    user = make_user()
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, headers=client()
    )
    conn.execute(
        "UPDATE user_tokens SET last_used_at = now() - interval '91 days'"
        ' WHERE user_id = %s',
        (user.id,),
    )
    conn.execute(
        "UPDATE audit_events SET created_at = now() - interval '91 days'"
        " WHERE subject_id = %s AND event = 'sign_in_succeeded'",
        (user.id,),
    )
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, headers=client()
    )
    deliver(base_env, inbox.port)
    assert [item.message['Subject'] for item in inbox.to(user.email)] == [
        'New sign-in to your account'
    ] * 2


def test_access_token_reset(testapp, make_user, inbox, base_env):
    user = make_user()
    testapp.post('/api/v1/profile/reset_access_token', headers=client(user.headers))
    message = received(inbox, base_env, user.email, 'Your access token was reset')
    assert_facts(message, 'Firefox 120.0 on Linux')


def test_sessions_ended_by_an_administrator(testapp, admin, make_user, inbox, base_env):
    member = make_user(account_id=admin.account_id)
    testapp.delete(
        f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/sessions?include_access_token=true',
        headers=client(admin.headers),
    )
    message = received(inbox, base_env, member.email, 'You were signed out everywhere')
    assert_facts(message, 'Firefox 120.0 on Linux')
    assert f'Signed out by: {admin.email}' in message.text
    assert 'Your API access token was replaced too' in message.text


def test_names_lose_control_characters_and_are_cut_at_100(
    testapp, make_user, inbox, base_env
):
    user = make_user(name='Eve\u202e\x1b[31m' + 'x' * 200)
    testapp.post('/api/v1/profile/reset_access_token', headers=client(user.headers))
    message = received(inbox, base_env, user.email, 'Your access token was reset')
    greeting = message.text.splitlines()[0]
    assert greeting == 'Hi Eve[31m' + 'x' * 93 + ','


def test_the_very_first_sign_in_is_not_a_new_device(
    testapp, make_user, inbox, base_env, conn
):
    user = make_user()
    conn.execute('DELETE FROM user_tokens WHERE user_id = %s', (user.id,))
    testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': PASSWORD}, headers=client()
    )
    deliver(base_env, inbox.port)
    assert inbox.to(user.email) == []


def test_the_email_change_notice_names_time_address_and_device(
    testapp, make_user, inbox, base_env
):
    user = make_user()
    testapp.put_json(
        '/api/v1/profile',
        {'profile': {'email': 'moved-' + user.email}},
        headers=client(user.headers),
    )
    message = received(
        inbox, base_env, user.email, 'Your e-mail address is being changed'
    )
    for body in (message.text, message.html):
        assert f'IP address: {IP}' in body and 'Device: Firefox 120.0 on Linux' in body
        assert re.search(r'Time: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC', body)
    assert 'email_revert?token=' in message.text
