"""Delivering the mail outbox: the ``manage.py deliver-mail`` worker, which also runs
the purge of scheduled accounts (SPEC 20) when it starts and then every hour.

Over SMTP, or with ``MAIL_DELIVERY=file`` (scripts/run without SMTP_HOST) into
``MAIL_DIR`` as one .eml file per message, each announced in the log with its
recipient, subject and links (SPEC 10).

Each message is claimed, sent and marked in one transaction that holds its row lock
(``FOR UPDATE SKIP LOCKED``), so concurrent workers never send one message twice. If
the worker dies after the server accepted a message but before the commit, the
message goes out again: at-least-once, kept rare by the short SMTP timeout.
"""

import collections
import datetime
import email.message
import email.utils
import logging
import os
import pathlib
import re
import smtplib
import ssl
import threading
import time

import psycopg
from psycopg.rows import dict_row

import db
from services import deletion

SMTP_TIMEOUT_SECONDS = 10
# Ten attempts spread over about 85 minutes (10 s, 20 s, ... 2560 s apart).
MAX_ATTEMPTS = 10
FIRST_RETRY_SECONDS = 10
MAX_RETRY_SECONDS = 3600
POLL_SECONDS = 1.0
# Kinds whose outbox row is deleted once sent or given up, not kept as 'sent' or
# 'failed': the farewell to an erased person's address (SPEC 20), after which nothing
# may name them.
FORGOTTEN_ONCE_SENT = frozenset(('account_erased',))
# The purge of accounts whose deletion date has passed (services/deletion.py): at the
# worker's start, then this often.
PURGE_SECONDS = 3600
log = logging.getLogger('frontdesk.mail')


def build_message(config, row):
    """A multipart/alternative message: plain text first, HTML preferred."""
    message = email.message.EmailMessage()
    message['From'] = config.mail_from
    message['To'] = row['to_address']
    message['Subject'] = row['subject']
    message['Date'] = email.utils.formatdate(usegmt=True)
    sender_domain = email.utils.parseaddr(config.mail_from)[1].rpartition('@')[2]
    message['Message-ID'] = email.utils.make_msgid(domain=sender_domain or 'localhost')
    message['Auto-Submitted'] = 'auto-generated'
    message.set_content(row['text_body'])
    message.add_alternative(row['html_body'], subtype='html')
    return message


def send(config, message):
    """Send one message; the login, if any, only ever after TLS is up (config.py).

    The TLS context is made only when TLS is used: loading the system's certificate
    authorities costs more than the rest of a delivery to a relay on the same host.
    """
    if config.smtp_tls == 'implicit':
        smtp = smtplib.SMTP_SSL(
            config.smtp_host,
            config.smtp_port,
            timeout=SMTP_TIMEOUT_SECONDS,
            context=ssl.create_default_context(),
        )
    else:
        smtp = smtplib.SMTP(
            config.smtp_host, config.smtp_port, timeout=SMTP_TIMEOUT_SECONDS
        )
    try:
        if config.smtp_tls == 'starttls':
            # Raises when the server offers no STARTTLS: never a fallback to clear text.
            smtp.starttls(context=ssl.create_default_context())
        if config.smtp_username:
            smtp.login(config.smtp_username, config.smtp_password or '')
        smtp.send_message(message)
    finally:
        # Once the server has accepted the message, a failed QUIT must not count as a
        # failed delivery: that would send it again.
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()


_LINK = re.compile(r'https?://[^\s<>"]+')


def links(message):
    """The links of the plain-text part, in order, once each."""
    body = message.get_body(('plain',))
    return list(dict.fromkeys(_LINK.findall(body.get_content() if body else '')))


def write_file(config, message, mail_id):
    """Write ``message`` to MAIL_DIR as ``<UTC time>-<outbox id>.eml``; return its path.

    The directory is private (0700): the messages carry sign-in links. One that exists
    with wider bits (scripts/run as root makes ./var/mail with the umask's) is made
    0700 first; when that is not ours to do, the delivery fails (and is retried).
    """
    directory = pathlib.Path(config.mail_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if directory.stat().st_mode & 0o077:
        directory.chmod(0o700)
    stamp = datetime.datetime.now(datetime.UTC).strftime('%Y%m%dT%H%M%S')
    path = directory / f'{stamp}-{mail_id:08d}.eml'
    partial = path.with_suffix('.part')
    with open(
        os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'wb'
    ) as out:
        out.write(message.as_bytes())
    partial.rename(path)
    return path


def is_permanent(ex):
    """True for a 5xx refusal of the recipient: retrying cannot help."""
    if isinstance(ex, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in ex.recipients.values())
    return False


def retry_after(attempts):
    """The pause after failed attempt number ``attempts + 1``."""
    return datetime.timedelta(
        seconds=min(FIRST_RETRY_SECONDS * 2**attempts, MAX_RETRY_SECONDS)
    )


def _deliver(conn, queries, config, row):
    try:
        message = build_message(config, row)
        if config.mail_delivery == 'file':
            path = write_file(config, message, row['id'])
            # The development console's inbox: who, what, and the links to follow.
            log.info(
                'mail %s to %s: %s | %s | %s',
                row['id'],
                row['to_address'],
                row['subject'],
                ' '.join(links(message)) or 'no links',
                path,
            )
        else:
            send(config, message)
    except Exception as ex:  # noqa: BLE001 - one bad message must not stop the queue
        give_up = is_permanent(ex) or row['attempts'] + 1 >= MAX_ATTEMPTS
        status = 'failed' if give_up else 'pending'
        # smtplib's messages hold server replies and addresses, never the SMTP password.
        error = f'{type(ex).__name__}: {ex}'[:1000]
        if give_up and row['kind'] in FORGOTTEN_ONCE_SENT:
            conn.execute(queries['mail.forget'], {'id': row['id']})
            log.warning(
                'mail %s failed for good and was forgotten: %s',
                row['id'],
                type(ex).__name__,
            )
            return status
        conn.execute(
            queries['mail.record_failure'],
            {
                'id': row['id'],
                'status': status,
                'error': error,
                'retry_after': retry_after(row['attempts']),
            },
        )
        log.warning(
            'mail %s attempt %s %s: %s',
            row['id'],
            row['attempts'] + 1,
            'failed for good' if give_up else 'will be retried',
            type(ex).__name__,
        )
        return status
    if row['kind'] in FORGOTTEN_ONCE_SENT:
        conn.execute(queries['mail.forget'], {'id': row['id']})
    else:
        conn.execute(
            queries['mail.mark_sent'],
            {'id': row['id'], 'message_id': message['Message-ID']},
        )
    log.info('mail %s sent', row['id'])
    return 'sent'


def deliver_due(conn, queries, config, stop=None):
    """Send every message that is due, one transaction each; count the outcomes."""
    outcomes = collections.Counter()
    while stop is None or not stop.is_set():
        with conn.transaction():
            row = conn.execute(queries['mail.claim_due']).fetchone()
            if row is None:
                break
            outcomes[_deliver(conn, queries, config, row)] += 1
    return outcomes


def _pause(stop, seconds):
    # Short sleeps rather than Event.wait(): set() from a signal handler could deadlock
    # on the Event's own lock if the signal lands while wait() holds it.
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.1)


class Every:
    """``due()`` is True at its first call, then again once ``seconds`` have passed
    since the last time it was."""

    def __init__(self, seconds, clock=time.monotonic):
        self._seconds = seconds
        self._clock = clock
        self._next = None

    def due(self):
        now = self._clock()
        if self._next is not None and now < self._next:
            return False
        self._next = now + self._seconds
        return True


def purge_accounts(config, queries, conn, stop):
    """The worker's run of the purge (``manage.py purge-accounts``'s work). A failure
    is logged and left for the next run: it never stops the mail."""
    try:
        purged = deletion.purge_due(config, queries, conn, stop)
    except Exception as ex:  # noqa: BLE001 - the mail must go on; next hour tries again
        log.error(
            'account purge failed (%s: %s); next run in an hour', type(ex).__name__, ex
        )
        return None
    if purged['accounts']:
        log.info(
            'account purge: %s account(s) purged, %s person(s) erased',
            purged['accounts'],
            purged['people'],
        )
    return purged


def run(config, queries, once=False, stop=None, purge_every=PURGE_SECONDS):
    """Deliver until ``stop`` is set, or with ``once`` until nothing is due.

    Outside ``once``, a lost database connection is logged and opened again, and the
    purge of scheduled accounts runs at the start and then every ``purge_every``
    seconds.
    """
    stop = stop or threading.Event()
    total = collections.Counter()
    purge = None if once else Every(purge_every)
    while not stop.is_set():
        try:
            with db.connect(config, autocommit=True, row_factory=dict_row) as conn:
                while not stop.is_set():
                    if purge is not None and purge.due():
                        purge_accounts(config, queries, conn, stop)
                    total += deliver_due(conn, queries, config, stop)
                    if once:
                        return total
                    _pause(stop, POLL_SECONDS)
        except psycopg.OperationalError as ex:
            if once:
                raise
            log.warning('database unavailable (%s); trying again', type(ex).__name__)
            _pause(stop, POLL_SECONDS * 5)
    return total
