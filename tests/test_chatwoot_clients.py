"""The reference system's own dashboard and mobile-app code, run unchanged against Frontdesk.

../shared/clients/chatwoot/ holds that code, copied byte for byte from the reference
system's repositories, and a Node harness that drives it as a user would (SPEC 11). This
test serves a fresh database with real gunicorn, without a mail worker (the harness reads
the mailed links from mail_outbox), and requires every check to pass.
"""

import re
import subprocess
import urllib.parse

import psycopg
import pytest

from tests.support import ROOT
from tests.support.database import new_database
from tests.support.servers import run_gunicorn

HARNESS = ROOT.parent / 'shared' / 'clients' / 'chatwoot' / 'run.sh'
# The cross-origin scenario's dashboard: CORS is on for it alone.
DASHBOARD_ORIGIN = 'https://dashboard.example.com'
CHECKS_AT_LEAST = 74


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
    netloc = f'{auth}@{host}' + (f':{params["port"]}' if params.get('port') and host else '')
    if params.get('port') and not host:
        query['port'] = params['port']
    return urllib.parse.urlunsplit(('postgresql', netloc, '/' + params['dbname'], urllib.parse.urlencode(query), ''))


@pytest.fixture
def fresh_database_url():
    with new_database('frontdesk_clients') as url:
        yield url


def test_the_reference_clients_pass_every_check(fresh_database_url, avatar_dir, tmp_path):
    assert HARNESS.exists(), f'{HARNESS} is missing: the checkout needs shared/ beside it'
    env = {
        'DATABASE_URL': fresh_database_url,
        'BCRYPT_ROUNDS': '4',
        # The harness makes 3 users and 5 accounts and signs in about 10 times.
        'RATE_LIMITS': 'off',
        'AVATAR_DIR': str(avatar_dir),
        'CORS_ALLOWED_ORIGINS': DASHBOARD_ORIGIN,
    }
    with run_gunicorn(env, workers=2, log_path=tmp_path / 'gunicorn.log') as base:
        run = subprocess.run(['bash', str(HARNESS), base, as_url(fresh_database_url)], capture_output=True,
                             text=True, timeout=900)
    output = run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    failed = [line for line in lines if line.startswith(('FAIL', 'SKIP'))]
    assert run.returncode == 0 and not failed, output[-6000:]
    tally = re.fullmatch(r'chatwoot-client: (\d+)/(\d+) passed', lines[-1])
    assert tally, output[-3000:]
    assert tally.group(1) == tally.group(2) and int(tally.group(2)) >= CHECKS_AT_LEAST, lines[-1]
    # The cross-origin dashboard (node's fetch sends Origin) is allowed, and may read the token.
    verdict = next(line for line in lines if line.startswith('INFO') and '[cors] verdict' in line)
    assert f'cross-origin allowed for {DASHBOARD_ORIGIN}' in verdict, verdict
