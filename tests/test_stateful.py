"""A stateful Schemathesis run with every check against real gunicorn (issue 20).

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

from tests.support import ROOT

SCHEMATHESIS = pathlib.Path(sys.executable).parent / 'schemathesis'


def test_a_stateful_run_with_every_check_finds_nothing(
    gunicorn_url, admin, direct_database_url
):
    result = subprocess.run(
        [
            SCHEMATHESIS,
            '--config-file',
            'tests/schemathesis.toml',
            '--no-color',
            'run',
            gunicorn_url + '/api/v1/openapi.json',
            '--checks',
            'all',
        ],
        cwd=ROOT,
        env={
            **os.environ,
            'PYTHONPATH': str(ROOT),
            'SCHEMATHESIS_HOOKS': 'tests.schemathesis_hooks',
            'FRONTDESK_URL': gunicorn_url,
            'FRONTDESK_EMAIL': admin.email,
            'FRONTDESK_PASSWORD': admin.password,
            'FRONTDESK_DATABASE_URL': direct_database_url,
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
