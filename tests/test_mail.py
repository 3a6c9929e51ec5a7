"""The outbox worker, ``manage.py deliver-mail``, against a real SMTP server
(aiosmtpd)."""

import hashlib
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

import pytest

from services import outbox
from tests.smtp_server import deliver
from tests.smtp_server import deliver_mail_command
from tests.smtp_server import self_signed_certificate
from tests.smtp_server import SMTP_LOGIN
from tests.smtp_server import smtp_server
from tests.smtp_server import tls_smtp_server
from tests.support import ROOT
from tests.support.servers import free_port
from tests.support.users import unique_email

FRONTEND = 'http://frontdesk.test'


@pytest.fixture(scope='session')
def certificate(tmp_path_factory):
    return self_signed_certificate(tmp_path_factory.mktemp('smtp-tls'))


def enqueue(conn, queries, address, body='Hello', user_id=None):
    """Queue a test mail to ``address``; its id. ``user_id``: whose mail it is (None:
    nobody's, as every row queued before the outbox named owners)."""
    return conn.execute(
        queries['mail.enqueue'],
        {
            'kind': 'test',
            'user_id': user_id,
            'to_address': address,
            'subject': 'Test message',
            'text_body': body,
            'html_body': f'<p>{body}</p>',
        },
    ).fetchone()['id']


def outbox_row(conn, mail_id):
    return conn.execute(
        'SELECT status, attempts, last_error, message_id, sent_at, text_body, '
        'html_body, EXTRACT(epoch FROM next_attempt_at - now()) AS wait'
        ' FROM mail_outbox WHERE id = %s',
        (mail_id,),
    ).fetchone()


def make_due(conn, mail_id):
    conn.execute(
        'UPDATE mail_outbox SET next_attempt_at = now() WHERE id = %s', (mail_id,)
    )


def finish(proc, timeout=30):
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr
    return stdout, stderr


def sign_up(testapp, address):
    """A sign-up over HTTP, which queues the confirmation mail to ``address``."""
    testapp.post_json(
        '/api/v1/accounts',
        {
            'account_name': 'Acme',
            'email': address,
            'user_full_name': 'Ada',
            'password': 'correct horse 1',
        },
        status=200,
    )


def test_the_command_sends_the_sign_up_confirmation_and_forgets_its_body(
    testapp, conn, base_env, inbox
):
    address = unique_email('signup')
    sign_up(testapp, address)
    row = conn.execute(
        'SELECT id FROM mail_outbox WHERE to_address = %s', (address,)
    ).fetchone()

    stdout, _ = finish(deliver_mail_command(base_env, inbox.port))

    assert 'sent' in stdout
    received = inbox.one_to(address)
    message = received.message
    assert received.rcpt_tos == [address]
    assert received.mail_from == 'accounts@localhost'
    assert message['To'] == address
    assert message['From'] == 'Frontdesk <accounts@localhost>'
    assert message['Subject'] == 'Confirmation Instructions'
    assert message.get_content_type() == 'multipart/alternative'
    assert [part.get_content_type() for part in message.iter_parts()] == [
        'text/plain',
        'text/html',
    ]
    link, token = received.link('/app/auth/confirmation', 'confirmation_token')
    assert link == f'{FRONTEND}/app/auth/confirmation?confirmation_token={token}'
    assert f'href="{link}"' in received.html
    stored = conn.execute(
        'SELECT t.token_digest FROM one_time_tokens t JOIN users u ON u.id = t.user_id'
        ' WHERE u.email = %s',
        (address,),
    ).fetchone()
    assert bytes(stored['token_digest']) == hashlib.sha256(token.encode()).digest()
    sent = outbox_row(conn, row['id'])
    assert (
        sent['status'] == 'sent'
        and sent['attempts'] == 1
        and sent['sent_at'] is not None
    )
    assert sent['message_id'] == message['Message-ID'] and sent['message_id'].endswith(
        '@localhost>'
    )
    assert sent['text_body'] is None and sent['html_body'] is None

    finish(deliver_mail_command(base_env, inbox.port))
    assert len(inbox.to(address)) == 1


def test_mail_queued_while_smtp_is_down_goes_out_once_it_is_back(
    testapp, conn, base_env, make_user
):
    user = make_user()
    port = free_port()  # nothing listens here yet
    answer = testapp.post_json('/auth/password', {'email': user.email})
    assert answer.status_int == 200
    mail_id = conn.execute(
        'SELECT id FROM mail_outbox WHERE to_address = %s', (user.email,)
    ).fetchone()['id']

    deliver(base_env, port)
    failed = outbox_row(conn, mail_id)
    assert failed['status'] == 'pending' and failed['attempts'] == 1
    assert failed['last_error'].startswith('ConnectionRefusedError')
    assert failed['text_body'] is not None and 5 < failed['wait'] <= 10
    deliver(base_env, port)
    assert outbox_row(conn, mail_id)['attempts'] == 1, (
        'retried before its backoff was over'
    )

    with smtp_server(port) as inbox:
        make_due(conn, mail_id)
        deliver(base_env, port)
        deliver(base_env, port)
        make_due(conn, mail_id)
        deliver(base_env, port)
    received = inbox.one_to(user.email)
    assert received.message['Subject'] == 'Reset password instructions'
    link, token = received.link('/app/auth/password/edit', 'reset_password_token')
    assert link == f'{FRONTEND}/app/auth/password/edit?reset_password_token={token}'
    sent = outbox_row(conn, mail_id)
    assert (
        sent['status'] == 'sent' and sent['attempts'] == 2 and sent['text_body'] is None
    )


def test_two_workers_at_once_send_each_message_exactly_once(
    conn, queries, base_env, inbox
):
    addresses = [unique_email('pair') for _ in range(12)]
    ids = [enqueue(conn, queries, address) for address in addresses]
    # Each worker's first message waits in DATA until the other worker is mid-send too:
    # the second worker can only get there by skipping the row the first one holds.
    inbox.hold = 2

    workers = [deliver_mail_command(base_env, inbox.port) for _ in range(2)]
    outputs = [finish(worker)[0] for worker in workers]

    for output in outputs:
        assert int(output.split('deliver-mail: ')[1].split(' sent')[0]) >= 1, output
    assert [len(inbox.to(address)) for address in addresses] == [1] * len(addresses)
    statuses = conn.execute(
        'SELECT status, attempts FROM mail_outbox WHERE id = ANY(%s)', (ids,)
    ).fetchall()
    assert statuses == [{'status': 'sent', 'attempts': 1}] * len(ids)


def test_a_permanently_refused_recipient_fails_at_once(conn, queries, base_env, inbox):
    address = unique_email('nobody')
    inbox.refuse[address] = '550 5.1.1 Recipient address rejected: User unknown'
    mail_id = enqueue(conn, queries, address)

    assert deliver(base_env, inbox.port)['failed'] >= 1

    row = outbox_row(conn, mail_id)
    assert row['status'] == 'failed' and row['attempts'] == 1
    assert (
        row['last_error'].startswith('SMTPRecipientsRefused')
        and '550' in row['last_error']
    )
    assert (
        row['text_body'] is None and row['html_body'] is None and row['sent_at'] is None
    )
    make_due(conn, mail_id)
    deliver(base_env, inbox.port)
    assert outbox_row(conn, mail_id)['attempts'] == 1
    assert inbox.to(address) == []


def test_a_temporarily_refused_recipient_backs_off_and_gives_up_after_bounded_attempts(
    conn, queries, base_env, inbox
):
    address = unique_email('busy')
    inbox.refuse[address] = '451 4.3.0 Try again later'
    mail_id = enqueue(conn, queries, address)

    for attempt in range(1, outbox.MAX_ATTEMPTS):
        deliver(base_env, inbox.port)
        row = outbox_row(conn, mail_id)
        expected = min(10 * 2 ** (attempt - 1), 3600)
        assert (row['status'], row['attempts']) == ('pending', attempt)
        assert expected - 5 < row['wait'] <= expected
        make_due(conn, mail_id)
    deliver(base_env, inbox.port)

    row = outbox_row(conn, mail_id)
    assert (row['status'], row['attempts']) == ('failed', outbox.MAX_ATTEMPTS)
    assert '451' in row['last_error'] and row['text_body'] is None
    assert inbox.to(address) == []


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_without_once_the_worker_keeps_delivering_until_signalled(
    conn, queries, base_env, inbox, signum
):
    worker = deliver_mail_command(base_env, inbox.port, once=False)
    try:
        address = unique_email('loop')
        enqueue(conn, queries, address)
        deadline = time.monotonic() + 15
        while not inbox.to(address) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(inbox.to(address)) == 1
    finally:
        worker.send_signal(signum)
    _, stderr = finish(worker, timeout=10)
    assert 'Traceback' not in stderr


def test_neither_the_smtp_password_nor_a_link_reaches_the_log_or_the_outbox(
    conn, queries, base_env, certificate
):
    secret = f'pw-{uuid.uuid4().hex}'
    link_token = f'tok-{uuid.uuid4().hex}'
    mail_id = enqueue(
        conn, queries, unique_email('auth'), body=f'Open {FRONTEND}/x?t={link_token}'
    )

    # Over STARTTLS, with a password the server refuses.
    with tls_smtp_server(*certificate) as server:
        _, stderr = finish(
            deliver_mail_command(
                base_env,
                server.port,
                SMTP_TLS='starttls',
                SMTP_USERNAME='mailer',
                SMTP_PASSWORD=secret,
                SSL_CERT_FILE=str(certificate[0]),
            )
        )

    row = outbox_row(conn, mail_id)
    assert row['status'] == 'pending' and row['last_error'].startswith(
        'SMTPAuthenticationError'
    )
    assert secret not in row['last_error'] and secret not in stderr
    assert link_token not in row['last_error'] and link_token not in stderr
    conn.execute("UPDATE mail_outbox SET status = 'failed' WHERE id = %s", (mail_id,))


# --- SMTP over TLS -------------------------------------------------------------------


@pytest.mark.parametrize(
    'mode, extra',
    [
        ('implicit', {'SMTP_TLS': 'implicit'}),
        ('starttls', {'SMTP_TLS': 'starttls'}),
        (
            'starttls',
            {'SMTP_STARTTLS': 'true'},
        ),  # the older variable still means STARTTLS
    ],
    ids=['implicit', 'starttls', 'legacy-starttls'],
)
def test_mail_goes_out_over_tls_with_the_login(
    conn, queries, base_env, certificate, monkeypatch, mode, extra
):
    monkeypatch.setenv(
        'SSL_CERT_FILE', str(certificate[0])
    )  # trust the throwaway certificate
    address = unique_email('tls')
    mail_id = enqueue(conn, queries, address)
    user, password = SMTP_LOGIN
    with tls_smtp_server(*certificate, implicit=mode == 'implicit') as server:
        deliver(
            base_env, server.port, SMTP_USERNAME=user, SMTP_PASSWORD=password, **extra
        )
    assert outbox_row(conn, mail_id)['status'] == 'sent'
    assert server.one_to(address).message['Subject'] == 'Test message'


def test_an_untrusted_certificate_stops_the_delivery_before_the_login(
    conn, queries, base_env, certificate
):
    mail_id = enqueue(conn, queries, unique_email('untrusted'))
    user, password = SMTP_LOGIN
    with tls_smtp_server(*certificate, implicit=True) as server:
        deliver(
            base_env,
            server.port,
            SMTP_TLS='implicit',
            SMTP_USERNAME=user,
            SMTP_PASSWORD=password,
        )
    row = outbox_row(conn, mail_id)
    assert (
        row['status'] == 'pending' and 'CERTIFICATE_VERIFY_FAILED' in row['last_error']
    )
    assert server.received == []
    conn.execute("UPDATE mail_outbox SET status = 'failed' WHERE id = %s", (mail_id,))


def test_starttls_never_falls_back_to_clear_text(conn, queries, base_env, inbox):
    # The plain test server offers no STARTTLS: the message waits, nothing is sent.
    mail_id = enqueue(conn, queries, unique_email('nofallback'))
    deliver(
        base_env,
        inbox.port,
        SMTP_TLS='starttls',
        SMTP_USERNAME='mailer',
        SMTP_PASSWORD='x',
    )
    row = outbox_row(conn, mail_id)
    assert row['status'] == 'pending' and row['last_error'].startswith(
        'SMTPNotSupportedError'
    )
    assert inbox.received == [] or all(
        'nofallback' not in item.rcpt_tos[0] for item in inbox.received
    )
    conn.execute("UPDATE mail_outbox SET status = 'failed' WHERE id = %s", (mail_id,))


@pytest.mark.parametrize(
    'env, expected',
    [
        ({'SMTP_USERNAME': 'mailer'}, 'SMTP_USERNAME is set but SMTP_TLS is off'),
        (
            {'SMTP_USERNAME': 'mailer', 'SMTP_TLS': 'off'},
            'SMTP_USERNAME is set but SMTP_TLS is off',
        ),
        ({'SMTP_TLS': 'ssl'}, 'SMTP_TLS must be one of starttls, implicit, off'),
        (
            {'SMTP_TLS': 'implicit', 'SMTP_STARTTLS': 'true'},
            'SMTP_STARTTLS=true contradicts SMTP_TLS=implicit',
        ),
    ],
)
def test_smtp_settings_that_would_leak_the_login_stop_the_start(
    base_env, env, expected
):
    done = deliver_mail_command(base_env, free_port(), **env)
    _, stderr = done.communicate(timeout=30)
    assert done.returncode != 0
    assert stderr.strip() == f'frontdesk: invalid configuration: {expected}' or (
        stderr.startswith(f'frontdesk: invalid configuration: {expected}')
        and stderr.count('\n') == 1
    )


def test_implicit_tls_defaults_to_port_465(base_env):
    from config import load

    assert load({**base_env, 'SMTP_TLS': 'implicit'}).smtp_port == 465
    assert load({**base_env, 'SMTP_TLS': 'starttls'}).smtp_port == 25


def test_development_mail_goes_into_a_private_directory_even_one_made_wider(
    testapp, base_env, tmp_path
):
    """MAIL_DELIVERY=file (scripts/run without SMTP_HOST): the messages carry sign-in
    links, so MAIL_DIR is 0700 and each file 0600, also when the directory was there
    before with wider bits (scripts/run as root makes ./var/mail with the umask's)."""
    mail_dir = tmp_path / 'mail'
    mail_dir.mkdir()
    mail_dir.chmod(0o755)
    address = unique_email('devmail')
    sign_up(testapp, address)
    done = subprocess.run(
        [sys.executable, 'manage.py', 'deliver-mail', '--once'],
        cwd=ROOT,
        env={
            **os.environ,
            **base_env,
            'MAIL_DELIVERY': 'file',
            'MAIL_DIR': str(mail_dir),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    written = [
        path for path in mail_dir.glob('*.eml') if f'To: {address}' in path.read_text()
    ]
    assert len(written) == 1
    assert stat.S_IMODE(mail_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o600
