"""Private PostgreSQL clusters: scripts/run's embedded database and scripts/test's.

Made with the machine's own server binaries (Debian's postgresql package, the major
version production runs). Nothing outside the cluster's own directory is changed, and
no other local user can reach the cluster (SPEC 10):

- the directory (data, unix socket, server log) belongs to the user the server runs
  as (``postgres`` when we are root, since initdb and pg_ctl refuse root; else the
  caller) and is mode 0700: only that user (and root) can enter it, so only they can
  reach the socket. No parent directory is touched. scripts/run as root makes it 0750
  with the group of the user that serves the app (``frontdesk``), see Cluster.admit;
- local connections use peer authentication, mapped in pg_ident.conf so that exactly
  the cluster's user and the user who made it sign in as the superuser ``postgres``
  (the role migrations run as), and the user who made it and scripts/run's app user
  (as root) as ``frontdesk_app``, the application's role, which owns nothing and may
  only read and write rows (SPEC 3.4; ``manage.py migrate --app-role`` grants them);
- TCP, only when a port is asked for (the test clusters), listens on 127.0.0.1 with
  scram-sha-256 and a random password that is never written to disk.

Command line (used by scripts/run and scripts/test):
  devdb.py embedded-start ROOT [APP_USER]
                                  start ROOT's embedded cluster, print the URL of
                                  its application role (APP_USER: also admit that
                                  OS user, see Cluster.admit)
  devdb.py embedded-stop ROOT     stop it (data kept)
  devdb.py test-run -- CMD...     run CMD with TEST_DATABASE_URL on a throwaway cluster
"""

import glob
import hashlib
import os
import pathlib
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse

SUPERUSER = 'postgres'
# The embedded database's application role (SPEC 3.4): gunicorn and the mail worker
# sign in as it; scripts/run passes it to manage.py migrate --app-role.
APP_ROLE = 'frontdesk_app'
IDENT_MAP = 'owners'


def pg_bindir():
    found = sorted(
        glob.glob('/usr/lib/postgresql/*/bin'),
        key=lambda path: int(path.split('/')[-2]),
    )
    if not found:
        raise RuntimeError(
            'no PostgreSQL server binaries; scripts/bootstrap installs them'
        )
    return found[-1]


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class Cluster:
    """One cluster in ``home`` (``home/data``, the socket and ``home/postgresql.log``).

    ``port``: also listen on 127.0.0.1:port with a password (else unix socket only).
    """

    def __init__(self, home, port=None):
        self.home = pathlib.Path(home)
        self.data = self.home / 'data'
        self.log = self.home / 'postgresql.log'
        self.port = port
        self.bindir = pg_bindir()
        self.password = None
        as_root = os.geteuid() == 0
        self.owner = SUPERUSER if as_root else pwd.getpwuid(os.geteuid()).pw_name
        self._as = ['runuser', '-u', SUPERUSER, '--'] if as_root else []

    @property
    def initialised(self):
        return (self.data / 'PG_VERSION').exists()

    def url(self, dbname='postgres', user=SUPERUSER):
        if self.port:
            return (
                f'postgresql://{SUPERUSER}:{urllib.parse.quote(self.password)}@127.0.0.1:{self.port}'
                f'/{dbname}'
            )
        return (
            f'postgresql://{user}@/{dbname}?host={urllib.parse.quote(str(self.home))}'
        )

    def _run(self, tool, *args):
        result = subprocess.run(
            [*self._as, os.path.join(self.bindir, tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f'{tool} failed: {(result.stderr or result.stdout).strip()}'
            )
        return result

    def _own(self, path):
        owner = pwd.getpwnam(self.owner)
        os.chown(path, owner.pw_uid, owner.pw_gid)

    def create(self):
        """initdb with peer (local) and scram (TCP) authentication; no trust
        anywhere."""
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)
        self._own(self.home)
        self.password = secrets.token_urlsafe(24)
        pwfile = self.home / '.initdb-password'
        pwfile.write_text(self.password + '\n')
        os.chmod(pwfile, 0o600)
        self._own(pwfile)
        try:
            self._run(
                'initdb',
                '-D',
                str(self.data),
                '-U',
                SUPERUSER,
                '-E',
                'UTF8',
                '--auth-local=peer',
                '--auth-host=scram-sha-256',
                f'--pwfile={pwfile}',
            )
        finally:
            pwfile.unlink(missing_ok=True)
        invoker = pwd.getpwuid(os.getuid()).pw_name
        # Written in place: the files keep initdb's owner and mode (0600).
        (self.data / 'pg_hba.conf').write_text(
            '# Written by devdb.py: peer for the owners (pg_ident.conf), a password'
            ' over TCP.\n'
            f'local all all peer map={IDENT_MAP}\n'
            'host all all 127.0.0.1/32 scram-sha-256\n'
        )
        (self.data / 'pg_ident.conf').write_text(
            ''.join(
                f'{IDENT_MAP} {user} {SUPERUSER}\n'
                for user in dict.fromkeys([self.owner, invoker])
            )
        )

    def map_ident(self, user, role, unmap=()):
        """Let the OS user ``user`` sign in as ``role`` through the socket, and no
        longer as any role of ``unmap``; reloads a running server when that changed."""
        ident = self.data / 'pg_ident.conf'
        lines = ident.read_text().splitlines()
        gone = {f'{IDENT_MAP} {user} {old}' for old in unmap}
        kept = [line for line in lines if line not in gone]
        line = f'{IDENT_MAP} {user} {role}'
        wanted = kept if line in kept else [*kept, line]
        if wanted != lines:
            # Written in place: the file keeps its owner and mode (0600).
            ident.write_text(''.join(f'{entry}\n' for entry in wanted))
            if self.running():
                self._run('pg_ctl', 'reload', '-D', str(self.data))

    def admit(self, user):
        """Let the OS user ``user`` sign in as the application role (only), through
        the socket.

        scripts/run started as root serves as an unprivileged user, which
        must reach this cluster. The simplest safe way: its line in the ident map (added
        to a cluster made before, then reloaded), and the home directory 0750 with that
        user's own group, so it can enter it and reach the socket. data/ stays 0700 and
        the log 0600 (the server's), and no other local user gains anything. Not chosen:
        a second socket directory elsewhere (one more path to create, own and clean up)
        and TCP (a password on disk). SPEC 3.4: the line maps it to APP_ROLE, never to
        the superuser (a cluster of an older scripts/run loses that line).
        """
        self.map_ident(user, APP_ROLE, unmap=[SUPERUSER])
        os.chown(self.home, -1, pwd.getpwnam(user).pw_gid)
        os.chmod(self.home, 0o750)

    def _ctl(self, action, *extra):
        listen = (
            f'-c listen_addresses=127.0.0.1 -p {self.port}'
            if self.port
            else "-c listen_addresses=''"
        )
        options = f"{listen} -k '{self.home}'"
        self._run(
            'pg_ctl',
            '-D',
            str(self.data),
            '-l',
            str(self.log),
            '-o',
            options,
            '-w',
            *extra,
            action,
        )

    def running(self):
        status = subprocess.run(
            [
                *self._as,
                os.path.join(self.bindir, 'pg_ctl'),
                'status',
                '-D',
                str(self.data),
            ],
            capture_output=True,
        )
        return status.returncode == 0

    def start(self):
        self._ctl('start')

    def stop(self):
        self._ctl('stop', '-m', 'fast')

    def restart(self):
        self._ctl('restart', '-m', 'fast')

    def destroy(self):
        try:
            if self.running():
                self.stop()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)


def throwaway(port=None):
    """A new cluster in a fresh temporary directory, started; ``destroy()`` removes
    it."""
    cluster = Cluster(tempfile.mkdtemp(prefix='frontdesk-pg-'), port or free_port())
    try:
        cluster.create()
        cluster.start()
    except BaseException:
        shutil.rmtree(cluster.home, ignore_errors=True)
        raise
    return cluster


def _can_traverse(user, path):
    if os.geteuid() != 0:
        return True
    return (
        subprocess.run(
            ['runuser', '-u', user, '--', 'test', '-x', str(path)]
        ).returncode
        == 0
    )


def embedded_home(root):
    """Where ROOT's embedded cluster lives: ROOT/var/postgres, or (when the server's
    user cannot reach the checkout, e.g. a 0700 home directory) a directory of its own
    under /var/tmp named after the checkout, with ROOT/var/postgres a symlink to it."""
    var = pathlib.Path(root).resolve() / 'var'
    var.mkdir(exist_ok=True)
    link = var / 'postgres'
    if link.is_symlink():
        return link.resolve()
    if link.exists() or _can_traverse(SUPERUSER, var):
        return link
    digest = hashlib.sha256(str(var).encode()).hexdigest()[:12]
    home = pathlib.Path('/var/tmp') / f'frontdesk-postgres-{digest}'
    link.symlink_to(home)
    return home


def embedded_start(root, app_user=None):
    """Start ROOT's embedded cluster (made on first use), create database frontdesk
    and the role APP_ROLE, write their URLs to ROOT/var/run (database_url: the
    application role's; migrate_database_url: the superuser's, which migrations run as;
    both read by config.py) and return the first.

    ``app_user``: the OS user that serves the app (scripts/run as root), admitted too.
    """
    import psycopg

    cluster = Cluster(embedded_home(root))
    if (pathlib.Path(root) / 'var' / 'pgdata' / 'PG_VERSION').exists():
        print(
            'scripts/run: ./var/pgdata is the cluster of an older scripts/run (trust '
            'authentication); it is no longer used: move its data over with pg_dump '
            'if you need it, then delete it',
            file=sys.stderr,
        )
    if not cluster.initialised:
        print(
            f'scripts/run: creating the embedded PostgreSQL cluster in {cluster.home}',
            file=sys.stderr,
        )
        cluster.create()
    # The user who runs scripts/run: operator commands (manage.py) as APP_ROLE too.
    cluster.map_ident(pwd.getpwuid(os.getuid()).pw_name, APP_ROLE)
    if app_user:
        cluster.admit(app_user)
    if not cluster.running():
        cluster.start()
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = 'frontdesk'"
        ).fetchone():
            conn.execute('CREATE DATABASE frontdesk')
        if not conn.execute(
            'SELECT 1 FROM pg_roles WHERE rolname = %s', (APP_ROLE,)
        ).fetchone():
            conn.execute(f'CREATE ROLE {APP_ROLE} LOGIN')
    url = cluster.url('frontdesk', APP_ROLE)
    run_dir = pathlib.Path(root) / 'var' / 'run'
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / 'database_url').write_text(url + '\n')
    (run_dir / 'migrate_database_url').write_text(cluster.url('frontdesk') + '\n')
    return url


def embedded_stop(root):
    cluster = Cluster(embedded_home(root))
    if cluster.initialised and cluster.running():
        cluster.stop()


def test_run(command):
    """Run ``command`` with TEST_DATABASE_URL on a throwaway cluster, then remove it.

    The signal handlers go in before anything exists or is announced: a SIGTERM, SIGINT
    or SIGHUP that arrives while the cluster is being made, or between the announcement
    and the child's start, is remembered; the child then never starts (or gets it as
    soon as it exists), and the cluster is removed all the same.
    """
    pending = []
    child = None

    def forward(signum, frame):
        if child is None:
            pending.append(signum)
        else:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    cluster = throwaway()
    try:
        print(
            f'scripts/test: throwaway PostgreSQL cluster in {cluster.home} '
            '(removed at the end)',
            file=sys.stderr,
            flush=True,
        )
        if pending:
            return 128 + pending[0]
        child = subprocess.Popen(
            command, env={**os.environ, 'TEST_DATABASE_URL': cluster.url()}
        )
        if pending:  # arrived while Popen ran, before ``child`` was set
            child.send_signal(pending[0])
        return child.wait()
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        cluster.destroy()


def main(argv):
    if len(argv) >= 2 and argv[0] == 'embedded-start':
        print(embedded_start(*argv[1:3]))
    elif len(argv) >= 2 and argv[0] == 'embedded-stop':
        embedded_stop(argv[1])
    elif len(argv) >= 3 and argv[0] == 'test-run' and argv[1] == '--':
        sys.exit(test_run(argv[2:]))
    else:
        sys.exit(__doc__.split('Command line')[1])


if __name__ == '__main__':
    try:
        main(sys.argv[1:])
    except RuntimeError as ex:
        sys.exit(f'devdb: {ex}')
