"""README.md's curl walkthrough, run as written against a real instance, so it stays
true.

gunicorn and the mail worker (MAIL_DELIVERY=file, as scripts/run without SMTP_HOST) on
a database of their own with the rate limits on, as a fresh scripts/run has them.
"""

import os
import re
import subprocess
import sys

from tests.support import ROOT
from tests.support.database import new_database
from tests.support.servers import run_gunicorn


def walkthrough():
    readme = (ROOT / 'README.md').read_text()
    section = readme[readme.index('## Using the API with curl') :]
    return re.search(r'^```bash\n(.*?)^```$', section, re.DOTALL | re.MULTILINE)[1]


def test_the_readme_walkthrough_runs_top_to_bottom(tmp_path):
    script = walkthrough()
    assert 'api $B/auth/sign_in' in script and 'mail_token' in script
    mail_dir = tmp_path / 'mail'
    with new_database('frontdesk_readme') as url:
        env = {
            'DATABASE_URL': url,
            'RATE_LIMITS': 'on',
            'BCRYPT_ROUNDS': '4',
            'MAIL_DELIVERY': 'file',
            'MAIL_DIR': str(mail_dir),
            'AVATAR_DIR': str(tmp_path / 'avatars'),
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
                done = subprocess.run(
                    ['bash', '-c', script],
                    cwd=ROOT,
                    env={**os.environ, **env, 'B': base},
                    capture_output=True,
                    text=True,
                    timeout=180,
                )
        finally:
            worker.terminate()
            worker.wait(timeout=15)
    assert done.returncode == 0, (
        f'the walkthrough failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    )
    # The sign-out step printed the old token's 401; every other request succeeded.
    assert '\n401\n' in done.stdout
    assert '"status":"ok"' in done.stdout.replace(
        ' ', ''
    ) and '"status":"ready"' in done.stdout.replace(' ', '')
