"""A stateful Schemathesis run with every check against real gunicorn.

Schemathesis infers links between the operations from the document (an account id from
a user, a session id from the list of sessions...) and walks them, each request with a
new session (tests/schemathesis_hooks.py). Every check is on: no 5xx, no answer the
document does not describe, no schema-valid request refused except for what no schema
can say (the hooks name those), no schema-violating one accepted. The sessions come
straight from the database, so that the run's wrong passwords cannot lock the user's
sign-in. The settings are tests/schemathesis.toml: the seed, one worker, and 250
scenarios, about a minute; docs/api.md ("Fuzzing the API") runs the same by hand,
longer.
"""

import os
import pathlib
import re
import subprocess
import sys

import psycopg
from psycopg.rows import dict_row
import pytest

from tests.support import ROOT
from tests.support.database import new_database
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.users import PASSWORD
from tests.support.users import TEST_SECRET_KEY
from tests.test_confirmations import queued_token

SCHEMATHESIS = pathlib.Path(sys.executable).parent / 'schemathesis'
EMAIL = 'stateful@example.com'


def signed_up(base, database_url):
    """A confirmed administrator of a new account, signed up and confirmed over HTTP."""
    answer = http(
        'POST',
        base + '/api/v1/accounts',
        {
            'account_name': 'Stateful',
            'email': EMAIL,
            'user_full_name': 'Ada Lovelace',
            'password': PASSWORD,
        },
    )
    assert answer.status == 200
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        token = queued_token(conn, EMAIL, 'confirmation_token')
    answer = http('POST', base + '/auth/confirmation', {'confirmation_token': token})
    assert answer.status == 200


@pytest.mark.long(40)
def test_a_stateful_run_with_every_check_finds_nothing(tmp_path):
    # A database and a gunicorn of its own: the run starts from the same state each
    # time, whatever the rest of the suite left in the shared one.
    with new_database('frontdesk_stateful') as database_url:
        env = {
            'DATABASE_URL': database_url,
            'BCRYPT_ROUNDS': '4',
            'RATE_LIMITS': 'off',
            'AVATAR_DIR': str(tmp_path / 'avatars'),
            'FRONTEND_URL': 'http://frontdesk.test',
            'SECRET_KEY': TEST_SECRET_KEY,
        }
        with run_gunicorn(env, workers=2) as base:
            signed_up(base, database_url)
            result = subprocess.run(
                [
                    SCHEMATHESIS,
                    '--config-file',
                    'tests/schemathesis.toml',
                    '--no-color',
                    'run',
                    base + '/api/v1/openapi.json',
                    '--checks',
                    'all',
                ],
                cwd=ROOT,
                env={
                    **os.environ,
                    'PYTHONPATH': str(ROOT),
                    'SCHEMATHESIS_HOOKS': 'tests.schemathesis_hooks',
                    'FRONTDESK_URL': base,
                    'FRONTDESK_EMAIL': EMAIL,
                    'FRONTDESK_PASSWORD': PASSWORD,
                    'FRONTDESK_DATABASE_URL': database_url,
                },
                capture_output=True,
                text=True,
                timeout=600,
            )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    # It walked the API: every operation, scenarios through the inferred links.
    assert re.search(r'Operations:\s+(\d+) selected / \1 total', output), output
    scenarios = int(re.search(r'Scenarios:\s+(\d+)', output)[1])
    links = int(re.search(r'API Links:\s+(\d+) covered', output)[1])
    assert scenarios >= 250 and links >= 20, output[-3000:]
    assert re.search(r'✅ \d+ passed', output) and '❌' not in output, output[-3000:]
