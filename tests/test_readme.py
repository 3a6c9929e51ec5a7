"""The curl walkthroughs, run as written against a real instance, so they stay true:
README.md's five steps and docs/api.md's whole API in one script.

gunicorn and the mail worker (MAIL_DELIVERY=file, as scripts/run without SMTP_HOST) on
a database of their own with the rate limits on, as a fresh scripts/run has them.
"""

import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.database import new_database
from tests.support.servers import run_gunicorn


def bash_block(path, heading):
    """The first ```bash block under ``heading`` in the Markdown file at ``path``."""
    text = (ROOT / path).read_text()
    section = text[text.index(f'\n{heading}\n') :]
    return re.search(r'^```bash\n(.*?)^```$', section, re.DOTALL | re.MULTILINE)[1]


@pytest.fixture(scope='module')
def instance(tmp_path_factory):
    """The environment and base URL of a running gunicorn and mail worker."""
    tmp = tmp_path_factory.mktemp('walkthrough')
    with new_database('frontdesk_readme') as url:
        env = {
            'DATABASE_URL': url,
            'RATE_LIMITS': 'on',
            'BCRYPT_ROUNDS': '4',
            'MAIL_DELIVERY': 'file',
            'MAIL_DIR': str(tmp / 'mail'),
            'AVATAR_DIR': str(tmp / 'avatars'),
        }
        worker = subprocess.Popen(
            [sys.executable, 'manage.py', 'deliver-mail'],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with run_gunicorn(env, workers=2) as base:
                yield {**env, 'B': base}
        finally:
            worker.terminate()
            worker.wait(timeout=15)


def run(script, instance):
    done = subprocess.run(
        ['bash', '-c', script],
        cwd=ROOT,
        env={**os.environ, **instance},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, (
        f'the walkthrough failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    )
    return done.stdout.replace(' ', '')


def test_the_readme_five_steps_run_top_to_bottom(instance):
    script = bash_block('README.md', '## Using the API with curl')
    assert 'api -D "$headers" $B/auth/sign_in' in script and 'mail_token' in script
    out = run(script, instance)
    # The last answer is the updated profile, read by the signed-in session.
    assert '"display_name":"AdaL."' in out and '"theme":"dark"' in out


def test_the_api_guide_walkthrough_runs_top_to_bottom(instance):
    script = bash_block('docs/api.md', '## The whole API in one script')
    assert 'api $B/auth/sign_in' in script and 'mail_token' in script
    out = run(script, instance)
    # The sign-out step printed the old token's 401; every other request succeeded.
    assert '\n401\n' in out
    assert '"status":"ok"' in out and '"status":"ready"' in out
