"""A real SMTP server (aiosmtpd) in the test process, and ways to run deliver-mail at
it."""

import asyncio
import contextlib
import dataclasses
import email
import email.message
import email.policy
import functools
import os
import re
import ssl
import subprocess
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

import config as config_module
import db
from services import outbox
from tests.support import ROOT
from tests.support.servers import free_port


@dataclasses.dataclass
class Received:
    mail_from: str
    rcpt_tos: list
    message: email.message.EmailMessage

    @functools.cached_property
    def text(self):
        # Parsed once: each example of the attack machine reads the whole inbox again.
        return self.message.get_body(('plain',)).get_content()

    @property
    def html(self):
        return self.message.get_body(('html',)).get_content()

    def link(self, path, param):
        """The one link to ``path`` in the text part, and its token."""
        found = re.findall(
            rf'(\S+{re.escape(path)}\?{param}=([A-Za-z0-9_-]+))', self.text
        )
        assert len(found) == 1, self.text
        return found[0]


class Inbox:
    """An aiosmtpd handler that keeps every message it accepts.

    ``refuse`` maps a recipient to the reply its RCPT TO gets. With ``hold`` = n, the
    first n messages wait in DATA until all n have arrived: n senders must be mid-send
    at once.
    """

    def __init__(self, port):
        self.port = port
        self.received = []
        self.refuse = {}
        self.hold = 0
        self._barrier = None

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return self.refuse[address]
        envelope.rcpt_tos.append(address)
        return '250 OK'

    async def handle_DATA(self, server, session, envelope):
        if self.hold:
            self._barrier = self._barrier or asyncio.Barrier(self.hold)
            self.hold -= 1
            await asyncio.wait_for(self._barrier.wait(), timeout=8)
        message = email.message_from_bytes(
            envelope.content, policy=email.policy.default
        )
        self.received.append(
            Received(envelope.mail_from, list(envelope.rcpt_tos), message)
        )
        return '250 Message accepted for delivery'

    def to(self, address):
        return [item for item in self.received if address in item.rcpt_tos]

    def one_to(self, address):
        found = self.to(address)
        assert len(found) == 1, [item.rcpt_tos for item in self.received]
        return found[0]


@contextlib.contextmanager
def smtp_server(port=None):
    inbox = Inbox(port or free_port())
    controller = Controller(inbox, hostname='127.0.0.1', port=inbox.port)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


SMTP_LOGIN = ('mailer', 'mail secret 1')


def self_signed_certificate(directory):
    """A throwaway certificate for localhost and 127.0.0.1; returns (cert, key)
    paths."""
    cert, key = directory / 'smtp.crt', directory / 'smtp.key'
    subprocess.run(
        [
            'openssl',
            'req',
            '-x509',
            '-newkey',
            'rsa:2048',
            '-nodes',
            '-days',
            '1',
            '-keyout',
            str(key),
            '-out',
            str(cert),
            '-subj',
            '/CN=localhost',
            '-addext',
            'subjectAltName=DNS:localhost,IP:127.0.0.1',
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _authenticate(server, session, envelope, mechanism, auth_data):
    # handled=False: aiosmtpd then answers a refusal with 535 itself.
    return AuthResult(
        success=(auth_data.login.decode(), auth_data.password.decode()) == SMTP_LOGIN,
        handled=False,
    )


@contextlib.contextmanager
def tls_smtp_server(cert, key, implicit=False):
    """A real SMTP server with TLS, implicit or by STARTTLS, that demands SMTP_LOGIN.

    With STARTTLS it refuses mail and AUTH until TLS is up, as a careful relay does.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    inbox = Inbox(free_port())
    # aiosmtpd only counts STARTTLS as TLS for auth_require_tls; implicit TLS is TLS
    # too.
    tls = (
        {'ssl_context': context, 'auth_require_tls': False}
        if implicit
        else {
            'tls_context': context,
            'require_starttls': True,
            'auth_require_tls': True,
        }
    )
    controller = Controller(
        inbox,
        hostname='127.0.0.1',
        port=inbox.port,
        authenticator=_authenticate,
        auth_required=True,
        **tls,
    )
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


def smtp_env(base_env, port, **extra):
    return {**base_env, 'SMTP_HOST': '127.0.0.1', 'SMTP_PORT': str(port), **extra}


def deliver(base_env, port, **extra):
    """Run the worker in this process until nothing is due; count the outcomes."""
    config = config_module.load(smtp_env(base_env, port, **extra))
    return outbox.run(config, db.load_queries(), once=True)


def deliver_mail_command(base_env, port, once=True, **extra):
    """The real ``python manage.py deliver-mail`` as a child process (not waited
    for)."""
    args = [sys.executable, 'manage.py', 'deliver-mail'] + (['--once'] if once else [])
    return subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, **smtp_env(base_env, port, **extra)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
