"""scripts/run and scripts/test on a fresh copy of the repository, as a newcomer runs
them.

The copy shares this checkout's virtualenv (a symlink), so nothing is reinstalled. It
lives under pytest's 0700 temporary directory. As root, scripts/run serves as
the user frontdesk, which cannot enter it: scripts/run says so in one line; the copy
then moves to a 0750 directory of frontdesk's group under /var/tmp, which the postgres
user still cannot enter, so the embedded cluster's home is outside the checkout.
"""

import contextlib
import email
import email.policy
import glob
import hashlib
import os
import pathlib
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psycopg
import pytest

import devdb
from services import outbox
from tests.support import ROOT
from tests.support.servers import free_port
from tests.support.servers import http
from tests.support.users import unique_email

PASSWORD = 'a long passphrase'
# scripts/run's unprivileged user when started as root.
APP_USER = 'frontdesk'  # what scripts/app-user prints


def system_hba_files():
    """{path: sha256} of the machine's own PostgreSQL authentication files."""
    return {
        path: hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
        for path in glob.glob('/etc/postgresql/*/*/pg_hba.conf')
    }


def fresh_copy(tmp_path):
    """The files git would commit (tracked and new, not ignored), and the shared
    .venv."""
    copy = tmp_path / 'frontdesk'
    names = (
        subprocess.run(
            ['git', 'ls-files', '-co', '--exclude-standard', '-z'],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split('\0')
    )
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    (copy / '.venv').symlink_to(ROOT / '.venv')
    return copy


def as_app_user(*command):
    """Run ``command`` as APP_USER; True when it succeeds."""
    return (
        subprocess.run(
            [
                'setpriv',
                f'--reuid={APP_USER}',
                f'--regid={APP_USER}',
                '--init-groups',
                '--',
                *command,
            ],
            capture_output=True,
        ).returncode
        == 0
    )


def app_virtualenv(place):
    """A virtualenv APP_USER can run, with this checkout's packages.

    This checkout's own may be out of APP_USER's reach (made from pyenv's Python under
    a 0700 /root, or the checkout itself under it; scripts/run refuses that with the way
    out). Then a virtualenv of the system's Python of the same version stands in, with
    this one's packages: added from where they are when APP_USER can read them, else
    copied beside it. Nothing is installed or downloaded.
    """
    shared = (ROOT / '.venv').resolve()
    if as_app_user(str(shared / 'bin' / 'python'), '-c', 'import gunicorn'):
        return shared
    version = f'python{sys.version_info.major}.{sys.version_info.minor}'
    site_packages = shared / 'lib' / version / 'site-packages'
    if not as_app_user(
        f'/usr/bin/{version}', '-c', f'import os; os.listdir({str(site_packages)!r})'
    ):
        site_packages = shutil.copytree(
            site_packages, place / 'site-packages', symlinks=True
        )
    venv = place / 'venv'
    subprocess.run(
        [f'/usr/bin/{version}', '-m', 'venv', '--without-pip', str(venv)], check=True
    )
    (venv / 'lib' / version / 'site-packages' / 'shared.pth').write_text(
        f'import site; site.addsitedir({str(site_packages)!r})\n'
    )
    gunicorn = venv / 'bin' / 'gunicorn'
    gunicorn.write_text(
        f'#!{venv}/bin/python\nfrom gunicorn.app.wsgiapp import run\nrun()\n'
    )
    gunicorn.chmod(0o755)
    for stamp in shared.glob(
        '.requirements-*.sha256'
    ):  # scripts/bootstrap: nothing to install
        shutil.copy2(stamp, venv / stamp.name)
    return venv


def owner_ids(pid):
    """({real, effective, saved, fs uid}, {... gid}) of a process."""
    fields = dict(
        line.split(':', 1)
        for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines()
    )
    return set(map(int, fields['Uid'].split())), set(map(int, fields['Gid'].split()))


def children_of(pid):
    found = []
    for status in pathlib.Path('/proc').glob('[0-9]*/status'):
        try:
            if f'\nPPid:\t{pid}\n' in status.read_text():
                found.append(int(status.parent.name))
        except OSError:
            continue
    return found


def clean_env(**extra):
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in ('DATABASE_URL', 'SMTP_HOST', 'MAIL_DELIVERY', 'MAIL_DIR', 'LOG_FORMAT')
    }
    return {**env, **extra}


def processes_mentioning(*needles):
    """pid -> command line of every process whose command line or cwd holds a needle."""
    found = {}
    for proc in pathlib.Path('/proc').iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (
                (proc / 'cmdline')
                .read_bytes()
                .replace(b'\0', b' ')
                .decode(errors='replace')
            )
            cwd = os.readlink(proc / 'cwd')
        except OSError:
            continue
        if any(
            needle in cmdline or cwd == needle or cwd.startswith(needle + '/')
            for needle in needles
        ):
            found[int(proc.name)] = cmdline
    return found


class Run:
    """One ``scripts/run`` of the copy, its console in a file."""

    def __init__(self, copy, port, console):
        self.console = console
        self._start = console.stat().st_size if console.exists() else 0
        self.proc = subprocess.Popen(
            ['bash', 'scripts/run'],
            cwd=copy,
            stdin=subprocess.DEVNULL,
            stdout=open(console, 'ab'),
            stderr=subprocess.STDOUT,
            env=clean_env(BIND=f'127.0.0.1:{port}', BCRYPT_ROUNDS='4'),
            start_new_session=True,
        )
        self.base = f'http://127.0.0.1:{port}'
        # The banner, not /healthz: a stale gunicorn of an earlier run may still answer.
        deadline = time.monotonic() + 120
        while 'Frontdesk is running' not in self.output():
            assert self.proc.poll() is None and time.monotonic() < deadline, (
                f'no banner:\n{self.output()}'
            )
            time.sleep(0.1)

    def output(self):
        """What this run printed so far."""
        return self.console.read_bytes()[self._start :].decode(errors='replace')

    def stop(self, signum=signal.SIGTERM):
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)


def latest_mail(mail_dir, to, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in sorted(mail_dir.glob('*.eml'), reverse=True):
            message = email.message_from_bytes(
                path.read_bytes(), policy=email.policy.default
            )
            if message['To'] == to:
                return message
        time.sleep(0.2)
    raise AssertionError(f'no mail to {to} in {mail_dir}')


@pytest.mark.long(15)
def test_a_newcomer_signs_up_confirms_and_signs_in_on_a_fresh_scripts_run(tmp_path):
    hba_before = system_hba_files()
    copy = fresh_copy(tmp_path)
    python = str(copy / '.venv' / 'bin' / 'python')

    def manage(*args):
        """An operator command in the copy (wherever it is by then), as from a shell."""
        return subprocess.run(
            [python, 'manage.py', *args],
            cwd=copy,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    # Before any scripts/run: no database to find, and the one line says what to do.
    nothing = manage('migrate')
    assert (
        nothing.returncode == 2
        and 'scripts/run' in nothing.stderr
        and 'DATABASE_URL' in nothing.stderr
    )
    assert nothing.stderr.count('\n') == 1, nothing.stderr
    as_root = os.geteuid() == 0
    place = None
    if as_root:
        # The app user cannot enter pytest's 0700 directory: one line says what to do,
        # and nothing starts.
        refused = subprocess.run(
            ['bash', 'scripts/run'],
            cwd=copy,
            env=clean_env(BIND=f'127.0.0.1:{free_port()}'),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        last = refused.stderr.splitlines()[-1]
        assert (
            refused.returncode == 1 and f'the user {APP_USER}, which cannot run' in last
        ), refused.stderr
        assert 'ordinary user' in last and not (copy / 'var' / 'postgres').exists(), (
            refused.stderr
        )
        assert os.stat(tmp_path).st_mode & 0o777 == 0o700, (
            'a parent directory was opened up'
        )
        app_user = pwd.getpwnam(APP_USER)  # made by that run
        place = pathlib.Path(
            tempfile.mkdtemp(prefix='frontdesk-run-test-', dir='/var/tmp')
        )
        shutil.chown(place, group=APP_USER)
        os.chmod(place, 0o750)
        copy = pathlib.Path(shutil.move(copy, place / 'frontdesk'))
        (copy / '.venv').unlink()
        (copy / '.venv').symlink_to(app_virtualenv(place))
        python = str(copy / '.venv' / 'bin' / 'python')
    console = tmp_path / 'console.log'
    cluster_home = None
    try:
        run = Run(copy, free_port(), console)
        banner = run.output()
        for line in (
            'Frontdesk is running on ' + run.base,
            run.base + '/api/v1/docs',
            str(copy / 'var' / 'mail'),
            'kill ',
        ):
            assert line in banner, f'{line!r} missing from the banner:\n{banner}'
        cluster_home = os.path.realpath(copy / 'var' / 'postgres')
        stat = os.stat(cluster_home)
        if as_root:
            # Entered by the app user's group to reach the socket (devdb.py
            # Cluster.admit).
            assert stat.st_mode & 0o777 == 0o750 and stat.st_gid == app_user.pw_gid, (
                oct(stat.st_mode),
                stat.st_gid,
            )
            assert not cluster_home.startswith(str(place)), (
                'postgres cannot enter the 0750 directory'
            )
            assert os.stat(place).st_mode & 0o777 == 0o750, (
                'a parent directory was opened up'
            )
            # gunicorn's master and workers and the mail worker run as the app user.
            gunicorn = int((copy / 'var' / 'run' / 'gunicorn.pid').read_text())
            mail = int((copy / 'var' / 'run' / 'mail.pid').read_text())
            workers = children_of(gunicorn)
            assert workers, f'no gunicorn worker under {gunicorn}'
            for pid in (gunicorn, *workers, mail):
                assert owner_ids(pid) == ({app_user.pw_uid}, {app_user.pw_gid}), (
                    pid,
                    owner_ids(pid),
                )
        else:
            assert stat.st_mode & 0o777 == 0o700, oct(stat.st_mode)

        email_address = unique_email('newcomer')
        signup = http(
            'POST',
            run.base + '/api/v1/accounts',
            {
                'account_name': 'Acme',
                'email': email_address,
                'user_full_name': 'Ada',
                'password': PASSWORD,
            },
        )
        assert signup.status == 200, signup.body
        message = latest_mail(copy / 'var' / 'mail', email_address)
        link = next(
            link for link in outbox.links(message) if 'confirmation_token=' in link
        )
        token = link.split('confirmation_token=')[1]
        assert (
            http(
                'POST', run.base + '/auth/confirmation', {'confirmation_token': token}
            ).status
            == 200
        )
        signed_in = http(
            'POST',
            run.base + '/auth/sign_in',
            {'email': email_address, 'password': PASSWORD},
        )
        assert signed_in.status == 200 and signed_in.json['data']['confirmed'] is True
        # The console announced the message with its recipient, subject and link.
        assert any(
            email_address in line and link in line for line in run.output().splitlines()
        )
        if as_root:
            assert {
                path.stat().st_uid for path in (copy / 'var' / 'mail').glob('*.eml')
            } == {app_user.pw_uid}
        # The development inbox holds sign-in links: only its user may enter it.
        assert os.stat(copy / 'var' / 'mail').st_mode & 0o777 == 0o700
        # SPEC 3.4: gunicorn and the mail worker sign in as the application role, which
        # owns nothing; migrations ran as the cluster's superuser.
        owner_url = (copy / 'var' / 'run' / 'migrate_database_url').read_text().strip()
        with psycopg.connect(owner_url, autocommit=True) as owner:
            service_roles = owner.execute(
                'SELECT DISTINCT usename FROM pg_stat_activity'
                " WHERE datname = 'frontdesk' AND pid <> pg_backend_pid()"
            ).fetchall()
            app_role = owner.execute(
                'SELECT rolsuper,'
                ' (SELECT count(*) FROM pg_class WHERE relowner = r.oid)'
                ' FROM pg_roles r WHERE rolname = %s',
                (devdb.APP_ROLE,),
            ).fetchone()
        assert service_roles == [(devdb.APP_ROLE,)] and app_role == (False, 0)
        if as_root:
            # The app user may not sign in as the superuser.
            assert not as_app_user(
                python,
                '-c',
                'import psycopg, sys; psycopg.connect(sys.argv[1]).close()',
                owner_url,
            )

        created = manage(
            'create-user',
            '--email',
            unique_email('operator'),
            '--name',
            'Operator',
            '--password',
            PASSWORD,
            '--confirmed',
        )
        assert created.returncode == 0 and '"confirmed": true' in created.stdout, (
            created.stderr
        )
        mailbox = manage('mailbox')
        assert mailbox.returncode == 0 and link in mailbox.stdout, (
            mailbox.stdout + mailbox.stderr
        )
        # prune finds the migration role by itself (./var/run/migrate_database_url).
        pruned = manage('prune')
        assert pruned.returncode == 0 and 'deleted' in pruned.stdout, pruned.stderr

        # kill -9 leaves gunicorn, the mail worker and PostgreSQL behind; the next run
        # stops the first two and adopts the cluster.
        run.stop(signal.SIGKILL)
        run = Run(copy, int(run.base.rsplit(':', 1)[1]), console)
        assert 'left running by an earlier scripts/run' in run.output()
        # While one runs, another of the same checkout says how to stop the first.
        second = subprocess.run(
            ['bash', 'scripts/run'],
            cwd=copy,
            env=clean_env(BIND=f'127.0.0.1:{free_port()}'),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (
            second.returncode == 1
            and f'already running as pid {run.proc.pid}' in second.stderr
        ), second.stderr
        assert f'kill {run.proc.pid}' in second.stderr
        assert (
            http(
                'POST',
                run.base + '/auth/sign_in',
                {'email': email_address, 'password': PASSWORD},
            ).status
            == 200
        )

        assert run.stop() in (0, 143)
        left = processes_mentioning(str(copy), cluster_home)
        assert not left, f'still running after SIGTERM: {left}'
        assert not (copy / 'var' / 'run' / 'run.pid').exists()
    finally:
        # After a failure: whatever runs in the copy (scripts/run, gunicorn, the mail
        # worker) or on its cluster is this test's own.
        for pid in processes_mentioning(str(copy), *filter(None, [cluster_home])):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if cluster_home and cluster_home.startswith('/var/tmp/frontdesk-postgres-'):
            shutil.rmtree(cluster_home, ignore_errors=True)
        if place:
            shutil.rmtree(place, ignore_errors=True)
    assert system_hba_files() == hba_before


def test_scripts_test_uses_a_throwaway_cluster_and_leaves_the_system_postgresql_alone(
    tmp_path,
):
    hba_before = system_hba_files()
    copy = fresh_copy(tmp_path)
    env = {
        key: value for key, value in clean_env().items() if key != 'TEST_DATABASE_URL'
    }
    done = subprocess.run(
        [
            'bash',
            'scripts/test',
            '-q',
            '-p',
            'no:cacheprovider',
            'tests/test_app.py::test_every_migration_is_recorded_once_even_when_run_again',
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert '1 passed' in done.stdout
    home = re.search(r'throwaway PostgreSQL cluster in (\S+)', done.stderr)[1]
    assert not os.path.exists(home), 'the test cluster was not removed'
    assert not processes_mentioning(home)
    assert system_hba_files() == hba_before


@pytest.mark.parametrize(
    'url',
    [
        'postgresql://nobody@127.0.0.1:1/none',
        'postgresql://nobody@/none?host=/nonexistent',
    ],
)
def test_an_unreachable_database_is_one_line(url):
    done = subprocess.run(
        [str(ROOT / '.venv' / 'bin' / 'python'), 'manage.py', 'migrate'],
        cwd=ROOT,
        env=clean_env(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith('manage.py migrate: cannot reach the database: ')
    assert done.stderr.count('\n') == 1 and 'Traceback' not in done.stderr


def test_the_throwaway_cluster_is_removed_when_the_test_run_is_stopped():
    proc = subprocess.Popen(
        [
            str(ROOT / '.venv' / 'bin' / 'python'),
            'devdb.py',
            'test-run',
            '--',
            'sleep',
            '60',
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        home = re.search(
            r'throwaway PostgreSQL cluster in (\S+)', proc.stderr.readline()
        )[1]
        assert os.path.isdir(home) and processes_mentioning(home)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not os.path.exists(home) and not processes_mentioning(home)


@pytest.mark.skipif(
    os.geteuid() != 0, reason='scripts/run admits an app user only when started as root'
)
def test_a_cluster_of_an_older_scripts_run_admits_the_app_user_while_it_runs():
    """As the application role only (SPEC 3.4): the superuser line an older
    scripts/run wrote for it goes."""
    # Made as scripts/run makes it, whichever test runs first.
    assert (
        subprocess.run(
            [str(ROOT / 'scripts' / 'app-user')],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        == APP_USER
    )
    cluster = devdb.Cluster(tempfile.mkdtemp(prefix='frontdesk-pg-'))

    def psql(role):
        return [
            os.path.join(cluster.bindir, 'psql'),
            '-h',
            str(cluster.home),
            '-U',
            role,
            '-d',
            'postgres',
            '-c',
            'SELECT 1',
        ]

    older = f'{devdb.IDENT_MAP} {APP_USER} {devdb.SUPERUSER}'
    try:
        cluster.create()
        cluster.start()
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute(f'CREATE ROLE {devdb.APP_ROLE} LOGIN')
        assert not as_app_user(*psql(devdb.APP_ROLE)), 'reached before it was admitted'
        ident = cluster.data / 'pg_ident.conf'
        ident.write_text(ident.read_text() + older + '\n')
        cluster.admit(APP_USER)
        cluster.admit(APP_USER)
        lines = ident.read_text().splitlines()
        assert older not in lines, lines
        assert lines.count(f'{devdb.IDENT_MAP} {APP_USER} {devdb.APP_ROLE}') == 1, lines
        assert as_app_user(*psql(devdb.APP_ROLE)), 'not admitted without a restart'
        assert not as_app_user(*psql(devdb.SUPERUSER)), 'still the superuser'
        assert os.stat(cluster.data).st_mode & 0o777 == 0o700
    finally:
        cluster.destroy()
