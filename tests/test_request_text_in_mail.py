"""Text from a request placed in a mail is inert (SPEC 3.4): the User-Agent of a
security e-mail's device line loses its control characters, is cut at 100 and is never
a link."""

from tests.test_security_mail import received

# ua-parser reads the device name out of the parentheses: text the client chose.
AGENT = (
    'Mozilla/5.0 (Linux; Android 10; evil.example/login\x1b[31m'
    + 'x' * 70
    + ' Build/QQ) AppleWebKit/537.36 Chrome/1.0 Mobile Safari/537.36'
)


def test_a_user_agent_in_a_security_mail_is_cleaned_cut_and_never_a_link(
    testapp, make_user, inbox, base_env
):
    user = make_user()
    testapp.post(
        '/api/v1/profile/reset_access_token',
        headers={**user.headers, 'User-Agent': AGENT},
    )
    message = received(inbox, base_env, user.email, 'Your access token was reset')
    device = next(
        line for line in message.text.splitlines() if line.startswith('Device: ')
    )
    assert device.startswith('Device: Chrome 1.0 on Android (evil.example/login[31mxxx')
    assert (
        len(device) == len('Device: ') + 100
        and '\x1b' not in message.text + message.html
    )
    body = message.html.split('<p><a ')[0]
    for linkable in ('evil.example', 'example/login'):
        assert linkable not in body, linkable
    # What the service itself writes stays as it was.
    assert 'Device: Chrome 1.0 on Android (' in body


def test_a_known_device_reads_as_before(testapp, make_user, inbox, base_env):
    user = make_user()
    agent = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0'
    testapp.post(
        '/api/v1/profile/reset_access_token',
        headers={**user.headers, 'User-Agent': agent},
    )
    message = received(inbox, base_env, user.email, 'Your access token was reset')
    assert 'Device: Firefox 120.0 on Linux' in message.html
