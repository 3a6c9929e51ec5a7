"""scripts/smoke.sh against real gunicorn, behind the real nginx of
deploy/nginx.conf."""

import os
import subprocess

import pytest

from tests.nginx_server import run_nginx
from tests.nginx_server import shared_workdir
from tests.support import ROOT
from tests.support.servers import free_port
from tests.support.servers import run_gunicorn

SMOKE = ROOT / 'scripts' / 'smoke.sh'
STEPS = [
    'sign-up',
    'five headers',
    'profile read',
    'profile update',
    'avatar upload',
    'avatar fetch',
    'avatar delete',
    'availability',
    'auto_offline',
    'account read',
    'account update',
    'cache keys',
    'update_active_at',
    'wrong current_password',
    'no credentials',
    "another account's id",
    'sign-out',
]


def smoke(base, **env):
    return subprocess.run(
        ['bash', str(SMOKE), base],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope='module')
def proxy(base_env):
    """nginx in front of gunicorn, both seeing the same AVATAR_DIR."""
    with shared_workdir() as workdir:
        env = {**base_env, 'AVATAR_DIR': str(workdir / 'avatars')}
        with run_gunicorn(env, workers=2) as app:
            with run_nginx(
                workdir, app.removeprefix('http://'), workdir / 'avatars'
            ) as (base, _):
                yield base


def test_every_step_passes_through_nginx(proxy):
    result = smoke(proxy)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(':')[0] for line in lines[:-1]] == [
        f'ok   {step}' for step in STEPS
    ]
    assert lines[-1] == f'smoke test passed against {proxy}'
    assert 'avatar fetch: image/png, nosniff' in result.stdout
    assert result.stderr == ''


def test_against_gunicorn_alone_the_avatar_fetch_is_skipped(gunicorn_url):
    # As against scripts/run: nothing in front of gunicorn serves AVATAR_DIR.
    result = smoke(gunicorn_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        'skip avatar fetch: no proxy in front (Server: gunicorn); nginx serves the '
        'avatar files\n' in result.stdout
    )
    assert (
        len([line for line in result.stdout.splitlines() if line.startswith('ok   ')])
        == len(STEPS) - 1
    )


def test_a_failing_step_stops_the_run_with_its_status_and_body(base_env):
    with run_gunicorn(
        {**base_env, 'ENABLE_ACCOUNT_SIGNUP': 'false'}, workers=1
    ) as base:
        result = smoke(base)
    assert result.returncode == 1
    assert result.stdout == ''
    assert result.stderr == (
        'FAIL sign-up: expected HTTP 200, got HTTP 404\n'
        '  body: {"error":"Resource could not be found"}\n'
    )


def test_no_answer_at_all_is_a_failure_too():
    result = smoke(f'http://127.0.0.1:{free_port()}', SMOKE_MAX_TIME='2')
    assert result.returncode == 1
    assert result.stderr.startswith(
        'FAIL sign-up: expected HTTP 200, got HTTP 000\n  curl: '
    )
