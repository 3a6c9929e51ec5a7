"""A private PgBouncer in transaction mode in front of a test database.

Debian's ``pgbouncer`` package (scripts/bootstrap's install_pgbouncer) gives the binary;
nothing of the system's is used. The configuration is deploy/pgbouncer.ini with its EDIT
values replaced: it, the auth file, the log and the pid file live in a temporary
directory only the instance's user can enter, and it listens on a free 127.0.0.1 port,
no unix socket. PgBouncer refuses to run as root, so as root it runs as ``postgres``.

Clients sign in with SCRAM and a password: the server's password when its URL has one
(PgBouncer signs in to the server with it), else a random one (a server that trusts
127.0.0.1 then takes any).
"""

import os
import pathlib
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
import urllib.parse

import psycopg

from tests.support.processes import listening
from tests.support.processes import wait_ready

BINARY = '/usr/sbin/pgbouncer'
USER = 'postgres'

DEPLOY_INI = pathlib.Path(__file__).resolve().parent.parent / 'deploy' / 'pgbouncer.ini'
# Test-only, beside the EDIT values: with the server down, the first query waits
# query_wait_timeout (5 s in the deploy file) and the next ones fail at once until a
# login succeeds again; 3 s keeps it under the 3 s + 2 s that tests/test_db_faults.py
# allows a request.
TEST_SETTINGS = {'query_wait_timeout': '3'}


def config_text(server, port, home, extra=None):
    """deploy/pgbouncer.ini with its EDIT values for a private test instance, plus
    ``extra`` settings at the end (of the [pgbouncer] section)."""
    text = DEPLOY_INI.read_text()
    text, found = re.subn(
        r'^frontdesk = .*$', f'* = {server}', text, flags=re.MULTILINE
    )
    settings = {
        'listen_addr': '127.0.0.1',
        'listen_port': str(port),
        'unix_socket_dir': '',
        'auth_file': f'{home}/userlist.txt',
        'logfile': f'{home}/pgbouncer.log',
        'pidfile': f'{home}/pgbouncer.pid',
        **TEST_SETTINGS,
    }
    for key, value in settings.items():
        text, count = re.subn(
            rf'^{key} = .*$', f'{key} = {value}'.rstrip(), text, flags=re.MULTILINE
        )
        found += count
    if found != len(settings) + 1:
        raise RuntimeError(
            f'{DEPLOY_INI} no longer has one line for each of: frontdesk, '
            f'{", ".join(settings)}'
        )
    return text + ''.join(f'{key} = {value}\n' for key, value in (extra or {}).items())


class PgBouncer:
    """``PgBouncer(server_url, port, **extra_settings)``; ``start()``, ``url(dbname)``,
    ``restart()``, ``destroy()``."""

    def __init__(self, server_url, port, **extra):
        if not os.access(BINARY, os.X_OK):
            raise RuntimeError(
                f'no {BINARY}; scripts/bootstrap (install_pgbouncer) installs it'
            )
        server = psycopg.conninfo.conninfo_to_dict(server_url)
        self.user = server.get('user') or USER
        self.password = server.get('password') or secrets.token_urlsafe(18)
        self.port = port
        self.home = tempfile.mkdtemp(prefix='frontdesk-pgbouncer-')
        self._as_root = os.geteuid() == 0
        target = ' '.join(
            f'{key}={server[key]}' for key in ('host', 'port') if server.get(key)
        )
        self._write('pgbouncer.ini', config_text(target, self.port, self.home, extra))
        quoted = [value.replace('"', '""') for value in (self.user, self.password)]
        self._write('userlist.txt', '"{}" "{}"\n'.format(*quoted))
        if self._as_root:
            owner = pwd.getpwnam(USER)
            for path in (
                self.home,
                *(os.path.join(self.home, name) for name in os.listdir(self.home)),
            ):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        self.proc = None

    def _write(self, name, text):
        path = os.path.join(self.home, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), 'w') as file:
            file.write(text)

    @property
    def log(self):
        return os.path.join(self.home, 'pgbouncer.log')

    def url(self, dbname='postgres'):
        return (
            f'postgresql://{urllib.parse.quote(self.user)}:{urllib.parse.quote(self.password)}'
            f'@127.0.0.1:{self.port}/{urllib.parse.quote(dbname)}'
        )

    def start(self):
        user = (
            {'user': USER, 'group': USER, 'extra_groups': []} if self._as_root else {}
        )
        self.proc = subprocess.Popen(
            [BINARY, os.path.join(self.home, 'pgbouncer.ini')],
            cwd=self.home,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **user,
        )
        try:
            wait_ready(self.proc, lambda: listening(self.port), 'pgbouncer')
        except (RuntimeError, TimeoutError) as ex:
            raise RuntimeError(f'{ex}: {self.tail()}') from None
        return self

    def stop(self):
        """Immediate shutdown (SIGTERM in 1.18): every client connection is closed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        return self.start()

    def destroy(self):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)

    def tail(self, lines=5):
        try:
            with open(self.log, errors='replace') as log:
                return ' | '.join(log.read().splitlines()[-lines:])
        except OSError:
            return '(no log)'
