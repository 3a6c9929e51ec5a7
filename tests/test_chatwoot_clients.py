"""The reference system's own dashboard and mobile-app code, run unchanged against
Frontdesk.

../shared/clients/chatwoot/ holds that code, copied byte for byte from the reference
system's repositories, and a Node harness that drives it as a user would (SPEC 11). Each
test serves a fresh database with real gunicorn, without a mail worker (the harness
reads the mailed links from mail_outbox), and requires every check to pass: the default
four scenarios on an instance as configured by default, the MFA and session scenarios
on one with MFA available and a low session cap, and the single sign-on scenario with
the suite's real OpenID Connect provider (tests/sso_login_url.py runs the instance's
side of the flow).
"""

import fcntl
import os
import re
import shlex
import subprocess
import sys
import urllib.parse

import psycopg
from psycopg.rows import dict_row
import pytest

from tests.support import ROOT
from tests.support.database import new_database
from tests.support.servers import free_port
from tests.support.servers import run_gunicorn
from tests.support.sso_people import make_org
from tests.support.users import TEST_SECRET_KEY

HARNESS = ROOT.parent / 'shared' / 'clients' / 'chatwoot' / 'run.sh'
# The cross-origin scenario's dashboard: CORS is on for it alone.
DASHBOARD_ORIGIN = 'https://dashboard.example.com'
# The default four scenarios: seed-era 33 + current 34 + mobile 7 counted checks (cors
# reports INFO lines only).
CHECKS_AT_LEAST = 74
# The named scenarios: mfa 16 + sessions 9 + mfa-mobile 5 counted checks; mfa's "second
# step at the session limit" runs only with a cap of at most 10.
MFA_CHECKS_AT_LEAST = 30
# sso: the login page signs in from the provider's redirect, the same link twice, an MFA
# member's second step (SSO_LOGIN_URL_COMMAND: tests/sso_login_url.py with the suite's
# real provider).
SSO_CHECKS = 3
MFA_SESSION_CAP = 3


def as_url(conninfo):
    """A libpq conninfo as a postgresql:// URL, the only form node's pg client reads."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    user = urllib.parse.quote(params.get('user', 'postgres'), safe='')
    password = params.get('password')
    auth = user + (':' + urllib.parse.quote(password, safe='') if password else '')
    host = params.get('host', 'localhost')
    query = {}
    if host.startswith('/'):
        host, query['host'] = '', host  # a unix socket directory
    netloc = f'{auth}@{host}' + (
        f':{params["port"]}' if params.get('port') and host else ''
    )
    if params.get('port') and not host:
        query['port'] = params['port']
    return urllib.parse.urlunsplit(
        (
            'postgresql',
            netloc,
            '/' + params['dbname'],
            urllib.parse.urlencode(query),
            '',
        )
    )


@pytest.fixture
def fresh_database_url():
    with new_database('frontdesk_clients') as url:
        yield url


def served_env(database_url, instance_env):
    """The instance's environment for the harness."""
    return {
        'DATABASE_URL': database_url,
        'BCRYPT_ROUNDS': '4',
        # The harness makes 3 users and 5 accounts and signs in about 10 times.
        'RATE_LIMITS': 'off',
        **instance_env,
    }


def run_harness(database_url, instance_env, log_path, harness_env=None):
    """Serve ``database_url`` with real gunicorn and ``instance_env``, run the harness
    against it; return its output lines and check count once every check passed and
    none was skipped."""
    env = served_env(database_url, instance_env)
    with run_gunicorn(env, workers=2, log_path=log_path) as base:
        return harness_passes(base, database_url, harness_env)


def install_harness_packages():
    """Install the harness's pinned npm packages as run.sh does on its first use (same
    test, same command), one process at a time.

    The long tests are handed out first, so this module's three start together in
    three xdist workers; on a fresh checkout their run.sh each ran ``npm ci`` into the
    one node_modules, and each broke the others (ENOENT on mkdir, MODULE_NOT_FOUND).
    The lock is on package-lock.json, opened for reading: nothing is written beside
    the harness but what run.sh itself writes. A read-only checkout is left to run.sh,
    which then installs into a private copy on every run."""
    harness = HARNESS.parent
    if not os.access(harness, os.W_OK):
        return
    lock_file = harness / 'package-lock.json'
    modules = harness / 'node_modules'
    with open(lock_file, 'rb') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if modules.is_dir() and modules.stat().st_mtime >= lock_file.stat().st_mtime:
            return
        install = subprocess.run(
            ['npm', 'ci', '--no-audit', '--no-fund', '--loglevel=error'],
            cwd=harness,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert install.returncode == 0, (
            f'npm ci in {harness}:\n{install.stderr[-3000:]}'
        )
        modules.touch()


def harness_passes(base, database_url, harness_env=None):
    """Run the harness against the instance at ``base``; return its output lines and
    check count once every check passed and none was skipped."""
    install_harness_packages()
    run = subprocess.run(
        ['bash', str(HARNESS), base, as_url(database_url)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(harness_env or {})},
    )
    output = run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    failed = [line for line in lines if line.startswith(('FAIL', 'SKIP'))]
    assert run.returncode == 0 and not failed, (
        '\n'.join(failed) + '\n...\n' + output[-6000:]
    )
    tally = re.fullmatch(r'chatwoot-client: (\d+)/(\d+) passed', lines[-1])
    assert tally and tally.group(1) == tally.group(2), output[-3000:]
    print(lines[-1])  # shown with pytest -rP
    return lines, int(tally.group(2))


@pytest.mark.long(30)
def test_the_reference_clients_pass_every_check(
    fresh_database_url, avatar_dir, tmp_path
):
    assert HARNESS.exists(), (
        f'{HARNESS} is missing: the checkout needs shared/ beside it'
    )
    lines, checks = run_harness(
        fresh_database_url,
        {'AVATAR_DIR': str(avatar_dir), 'CORS_ALLOWED_ORIGINS': DASHBOARD_ORIGIN},
        tmp_path / 'gunicorn.log',
    )
    assert checks >= CHECKS_AT_LEAST, lines[-1]
    # The cross-origin dashboard (node's fetch sends Origin) is allowed, and may read
    # the token.
    verdict = next(
        line for line in lines if line.startswith('INFO') and '[cors] verdict' in line
    )
    assert f'cross-origin allowed for {DASHBOARD_ORIGIN}' in verdict, verdict


@pytest.mark.long(180)
def test_the_reference_mfa_and_sessions_pages_pass_every_check(
    fresh_database_url, avatar_dir, tmp_path
):
    """Chatwoot 4.15's MFA settings, MFA sign-in, Active Sessions and the mobile app's
    MFA step (SPEC 12, 13), with MFA available and a cap low enough that the harness
    reaches it on the second sign-in step too. About 2 minutes: each TOTP code waits for
    a new step."""
    assert HARNESS.exists(), (
        f'{HARNESS} is missing: the checkout needs shared/ beside it'
    )
    cap = {'MAX_USER_SESSIONS': str(MFA_SESSION_CAP)}
    instance = {'AVATAR_DIR': str(avatar_dir), 'SECRET_KEY': TEST_SECRET_KEY, **cap}
    lines, checks = run_harness(
        fresh_database_url,
        instance,
        tmp_path / 'gunicorn.log',
        harness_env={'SCENARIOS': 'mfa sessions mfa-mobile', **cap},
    )
    assert checks >= MFA_CHECKS_AT_LEAST, lines[-1]


@pytest.mark.long(30)
def test_the_reference_login_page_finishes_single_sign_on(
    fresh_database_url, avatar_dir, oidc_provider, tmp_path
):
    """Chatwoot 4.15's login page opened at the redirect a real provider's sign-in
    ends in (SPEC 19): it signs in by itself, the link works once, and an MFA member
    gets the second step. The instance's FRONTEND_URL is itself, so the provider's
    redirects land on it; the organisation's administrator sets single sign-on up over
    the API, with just-in-time provisioning for the people the command signs in."""
    assert HARNESS.exists(), (
        f'{HARNESS} is missing: the checkout needs shared/ beside it'
    )
    port = free_port()
    base = f'http://127.0.0.1:{port}'
    env = served_env(
        fresh_database_url,
        {
            'AVATAR_DIR': str(avatar_dir),
            'SECRET_KEY': TEST_SECRET_KEY,
            'OIDC_ALLOW_PRIVATE_ISSUERS': 'true',
            'FRONTEND_URL': base,
        },
    )
    with (
        run_gunicorn(env, workers=2, port=port, log_path=tmp_path / 'gunicorn.log'),
        psycopg.connect(
            fresh_database_url, autocommit=True, row_factory=dict_row
        ) as conn,
    ):
        org = make_org(base, conn, oidc_provider, jit_provisioning=True)
        root, python = shlex.quote(str(ROOT)), shlex.quote(sys.executable)
        command = f'cd {root} && {python} -m tests.sso_login_url'
        lines, checks = harness_passes(
            base,
            fresh_database_url,
            {
                'SCENARIOS': 'sso',
                'SSO_LOGIN_URL_COMMAND': command,
                'SSO_BASE_URL': base,
                'SSO_ISSUER': oidc_provider.issuer,
                'SSO_DOMAIN': org.domain,
            },
        )
    assert checks == SSO_CHECKS, lines[-1]
