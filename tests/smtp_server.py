"""A real SMTP server (aiosmtpd) in the test process, and ways to run deliver-mail at it."""

import asyncio
import contextlib
import dataclasses
import email
import email.message
import email.policy
import os
import re
import subprocess
import sys

from aiosmtpd.controller import Controller

import config as config_module
import db
from services import outbox
from tests.conftest import ROOT
from tests.conftest import free_port


@dataclasses.dataclass
class Received:
    mail_from: str
    rcpt_tos: list
    message: email.message.EmailMessage

    @property
    def text(self):
        return self.message.get_body(('plain',)).get_content()

    @property
    def html(self):
        return self.message.get_body(('html',)).get_content()

    def link(self, path, param):
        """The one link to ``path`` in the text part, and its token."""
        found = re.findall(rf'(\S+{re.escape(path)}\?{param}=([A-Za-z0-9_-]+))', self.text)
        assert len(found) == 1, self.text
        return found[0]


class Inbox:
    """An aiosmtpd handler that keeps every message it accepts.

    ``refuse`` maps a recipient to the reply its RCPT TO gets. With ``hold`` = n, the first
    n messages wait in DATA until all n have arrived: n senders must be mid-send at once.
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
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
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


def smtp_env(base_env, port, **extra):
    return {**base_env, 'SMTP_HOST': '127.0.0.1', 'SMTP_PORT': str(port), **extra}


def deliver(base_env, port, **extra):
    """Run the worker in this process until nothing is due; count the outcomes."""
    config = config_module.load(smtp_env(base_env, port, **extra))
    return outbox.run(config, db.load_queries(), once=True)


def deliver_mail_command(base_env, port, once=True, **extra):
    """The real ``python manage.py deliver-mail`` as a child process (not waited for)."""
    args = [sys.executable, 'manage.py', 'deliver-mail'] + (['--once'] if once else [])
    return subprocess.Popen(args, cwd=ROOT, env={**os.environ, **smtp_env(base_env, port, **extra)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
