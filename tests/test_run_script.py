"""scripts/run and scripts/test on a fresh copy of the repository, as a newcomer runs them.

The copy shares this checkout's virtualenv (a symlink), so nothing is reinstalled. It
lives under pytest's 0700 temporary directory, which the postgres user cannot enter: as
root, that exercises the embedded cluster's home outside the checkout.
"""

import contextlib
import email
import email.policy
import glob
import hashlib
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

import pytest

from services import outbox
from tests.conftest import ROOT
from tests.conftest import free_port
from tests.conftest import http
from tests.conftest import unique_email

PASSWORD = 'a long passphrase'


def system_hba_files():
    """{path: sha256} of the machine's own PostgreSQL authentication files."""
    return {path: hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
            for path in glob.glob('/etc/postgresql/*/*/pg_hba.conf')}


def fresh_copy(tmp_path):
    """The files git would commit (tracked and new, not ignored), and the shared .venv."""
    copy = tmp_path / 'frontdesk'
    names = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split('\0')
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    (copy / '.venv').symlink_to(ROOT / '.venv')
    return copy


def clean_env(**extra):
    env = {key: value for key, value in os.environ.items()
           if key not in ('DATABASE_URL', 'SMTP_HOST', 'MAIL_DELIVERY', 'MAIL_DIR', 'LOG_FORMAT')}
    return {**env, **extra}


def processes_mentioning(*needles):
    """pid -> command line of every process whose command line or cwd holds a needle."""
    found = {}
    for proc in pathlib.Path('/proc').iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / 'cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace')
            cwd = os.readlink(proc / 'cwd')
        except OSError:
            continue
        if any(needle in cmdline or cwd == needle or cwd.startswith(needle + '/') for needle in needles):
            found[int(proc.name)] = cmdline
    return found


class Run:
    """One ``scripts/run`` of the copy, its console in a file."""

    def __init__(self, copy, port, console):
        self.console = console
        self._start = console.stat().st_size if console.exists() else 0
        self.proc = subprocess.Popen(['bash', 'scripts/run'], cwd=copy, stdin=subprocess.DEVNULL,
                                     stdout=open(console, 'ab'), stderr=subprocess.STDOUT,
                                     env=clean_env(BIND=f'127.0.0.1:{port}', BCRYPT_ROUNDS='4'),
                                     start_new_session=True)
        self.base = f'http://127.0.0.1:{port}'
        # The banner, not /healthz: a stale gunicorn of an earlier run may still answer.
        deadline = time.monotonic() + 120
        while 'Frontdesk is running' not in self.output():
            assert self.proc.poll() is None and time.monotonic() < deadline, f'no banner:\n{self.output()}'
            time.sleep(0.1)

    def output(self):
        """What this run printed so far."""
        return self.console.read_bytes()[self._start:].decode(errors='replace')

    def stop(self, signum=signal.SIGTERM):
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)


def latest_mail(mail_dir, to, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in sorted(mail_dir.glob('*.eml'), reverse=True):
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            if message['To'] == to:
                return message
        time.sleep(0.2)
    raise AssertionError(f'no mail to {to} in {mail_dir}')


def test_a_newcomer_signs_up_confirms_and_signs_in_on_a_fresh_scripts_run(tmp_path):
    hba_before = system_hba_files()
    copy = fresh_copy(tmp_path)
    python = str(copy / '.venv' / 'bin' / 'python')
    # Before any scripts/run: no database to find, and the one line says what to do.
    nothing = subprocess.run([python, 'manage.py', 'migrate'], cwd=copy, env=clean_env(), capture_output=True,
                             text=True, timeout=60)
    assert nothing.returncode == 2 and 'scripts/run' in nothing.stderr and 'DATABASE_URL' in nothing.stderr
    assert nothing.stderr.count('\n') == 1, nothing.stderr
    console = tmp_path / 'console.log'
    run = Run(copy, free_port(), console)
    cluster_home = None
    try:
        banner = run.output()
        for line in ('Frontdesk is running on ' + run.base, run.base + '/api/v1/docs', str(copy / 'var' / 'mail'),
                     'kill '):
            assert line in banner, f'{line!r} missing from the banner:\n{banner}'
        cluster_home = os.path.realpath(copy / 'var' / 'postgres')
        stat = os.stat(cluster_home)
        assert stat.st_mode & 0o777 == 0o700, oct(stat.st_mode)
        if os.geteuid() == 0:
            assert not cluster_home.startswith(str(tmp_path)), 'postgres cannot enter the 0700 temporary directory'
            assert os.stat(tmp_path).st_mode & 0o777 == 0o700, 'a parent directory was opened up'

        email_address = unique_email('newcomer')
        signup = http('POST', run.base + '/api/v1/accounts', {
            'account_name': 'Acme', 'email': email_address, 'user_full_name': 'Ada', 'password': PASSWORD})
        assert signup.status == 200, signup.body
        message = latest_mail(copy / 'var' / 'mail', email_address)
        link = next(link for link in outbox.links(message) if 'confirmation_token=' in link)
        token = link.split('confirmation_token=')[1]
        assert http('POST', run.base + '/auth/confirmation', {'confirmation_token': token}).status == 200
        signed_in = http('POST', run.base + '/auth/sign_in', {'email': email_address, 'password': PASSWORD})
        assert signed_in.status == 200 and signed_in.json['data']['confirmed'] is True
        # The console announced the message with its recipient, subject and link.
        assert any(email_address in line and link in line for line in run.output().splitlines())

        created = subprocess.run([python, 'manage.py', 'create-user', '--email', unique_email('operator'),
                                  '--name', 'Operator', '--password', PASSWORD, '--confirmed'],
                                 cwd=copy, env=clean_env(), capture_output=True, text=True, timeout=60)
        assert created.returncode == 0 and '"confirmed": true' in created.stdout, created.stderr
        mailbox = subprocess.run([python, 'manage.py', 'mailbox'], cwd=copy, env=clean_env(), capture_output=True,
                                 text=True, timeout=60)
        assert mailbox.returncode == 0 and link in mailbox.stdout, mailbox.stdout + mailbox.stderr

        # kill -9 leaves gunicorn, the mail worker and PostgreSQL behind; the next run
        # stops the first two and adopts the cluster.
        run.stop(signal.SIGKILL)
        run = Run(copy, int(run.base.rsplit(':', 1)[1]), console)
        assert 'left running by an earlier scripts/run' in run.output()
        # While one runs, another of the same checkout says how to stop the first.
        second = subprocess.run(['bash', 'scripts/run'], cwd=copy, env=clean_env(BIND=f'127.0.0.1:{free_port()}'),
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert second.returncode == 1 and f'already running as pid {run.proc.pid}' in second.stderr, second.stderr
        assert f'kill {run.proc.pid}' in second.stderr
        assert http('POST', run.base + '/auth/sign_in', {'email': email_address, 'password': PASSWORD}).status == 200

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
    assert system_hba_files() == hba_before


def test_scripts_test_uses_a_throwaway_cluster_and_leaves_the_system_postgresql_alone(tmp_path):
    hba_before = system_hba_files()
    copy = fresh_copy(tmp_path)
    env = {key: value for key, value in clean_env().items() if key != 'TEST_DATABASE_URL'}
    done = subprocess.run(['bash', 'scripts/test', '-q', '-p', 'no:cacheprovider',
                           'tests/test_app.py::test_every_migration_is_recorded_once_even_when_run_again'], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert '1 passed' in done.stdout
    home = re.search(r'throwaway PostgreSQL cluster in (\S+)', done.stderr)[1]
    assert not os.path.exists(home), 'the test cluster was not removed'
    assert not processes_mentioning(home)
    assert system_hba_files() == hba_before


@pytest.mark.parametrize('url', ['postgresql://nobody@127.0.0.1:1/none', 'postgresql://nobody@/none?host=/nonexistent'])
def test_an_unreachable_database_is_one_line(url):
    done = subprocess.run([str(ROOT / '.venv' / 'bin' / 'python'), 'manage.py', 'migrate'], cwd=ROOT,
                          env=clean_env(DATABASE_URL=url), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith('manage.py migrate: cannot reach the database: ')
    assert done.stderr.count('\n') == 1 and 'Traceback' not in done.stderr


def test_the_throwaway_cluster_is_removed_when_the_test_run_is_stopped():
    proc = subprocess.Popen([str(ROOT / '.venv' / 'bin' / 'python'), 'devdb.py', 'test-run', '--', 'sleep', '60'],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        home = re.search(r'throwaway PostgreSQL cluster in (\S+)', proc.stderr.readline())[1]
        assert os.path.isdir(home) and processes_mentioning(home)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not os.path.exists(home) and not processes_mentioning(home)
