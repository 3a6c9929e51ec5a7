"""GET /api/v1/docs in a real browser: headless Chromium finds every operation, and a
person signs in and tries operations out.

No network but the service: the page's files must come from the service itself, and the
page's own Content-Security-Policy must let them run.
"""

import html
import json
import os
import re
import shutil
import subprocess

import pytest

from resources.docs import CONTENT_SECURITY_POLICY
from tests.contract import document
from tests.support import CONTRACT_TOOLS
from tests.support.servers import http

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
# Once, directly (tests/conftest.py): the subject is the page and its script in a
# browser; what "Try it out" sends is what the sign-in and profile tests send, through
# PgBouncer too.
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason='chromium is not installed (scripts/bootstrap installs it)',
    ),
    pytest.mark.direct_only,
]


def render(url, tmp_path):
    """The DOM after Swagger UI rendered (virtual time lets its scripts finish)."""
    result = subprocess.run(
        [
            CHROMIUM,
            '--headless',
            '--no-sandbox',
            '--disable-gpu',
            '--no-first-run',
            '--disable-extensions',
            f'--user-data-dir={tmp_path / "profile"}',
            '--virtual-time-budget=30000',
            '--dump-dom',
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_every_operation_is_rendered_on_the_docs_page(gunicorn_url, tmp_path):
    page = http('GET', gunicorn_url + '/api/v1/docs')
    assert page.status == 200 and page.headers['content-type'].startswith('text/html')
    assert page.headers['content-security-policy'] == CONTENT_SECURITY_POLICY
    assert b'http://' not in page.body and b'https://' not in page.body, (
        'the page loads something from elsewhere'
    )

    dom = render(gunicorn_url + '/api/v1/docs', tmp_path)
    # Swagger UI's markup: one "opblock opblock-<method>" block per operation, its
    # path in data-path.
    rendered = {
        (method.upper(), html.unescape(path))
        for method, path in re.findall(
            r'class="opblock opblock-(\w+)[^"]*".*?data-path="([^"]+)"', dom, re.DOTALL
        )
    }
    expected = {
        (method.upper(), path)
        for path, operations in document()['paths'].items()
        for method in operations
    }
    assert expected <= rendered, f'not rendered: {sorted(expected - rendered)}'
    assert 'Frontdesk accounts API' in dom


def test_the_docs_assets_are_served_and_nothing_else(gunicorn_url):
    for name, kind in (
        ('swagger-ui-bundle.js', 'text/javascript'),
        ('swagger-ui.css', 'text/css'),
        ('api-docs.js', 'text/javascript'),
    ):
        answer = http('GET', f'{gunicorn_url}/api/v1/docs/assets/{name}')
        assert answer.status == 200 and answer.headers['content-type'].startswith(
            kind
        ), name
    for name in ('swagger-editor-bundle.js', '..%2f..%2fconfig.py', 'LICENSE'):
        answer = http('GET', f'{gunicorn_url}/api/v1/docs/assets/{name}')
        assert answer.status == 404 and answer.json == {
            'error': 'Resource could not be found'
        }, name


@pytest.mark.long(15)
def test_signing_in_on_the_page_authorizes_every_later_try_it_out(
    gunicorn_url, admin, tmp_path
):
    """One step: "Try it out" on the sign-in. The page keeps the token headers of the
    answer for every later call (a session, so even the token-headers-only ones) and
    forgets them on sign-out (tests/contract_tools/docs_page.mjs clicks through)."""
    result = subprocess.run(
        [
            'node',
            'docs_page.mjs',
            gunicorn_url,
            admin.email,
            admin.password,
            tmp_path / 'page.png',
        ],
        cwd=CONTRACT_TOOLS,
        env={**os.environ, 'CHROMIUM': CHROMIUM},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout)
    token = {'access-token', 'client', 'uid'}
    assert seen['signIn']['status'] == 200
    assert seen['signIn']['body']['data']['email'] == admin.email
    assert not token & set(seen['signIn']['headers'])
    assert seen['profile']['status'] == 200
    assert seen['profile']['body']['email'] == admin.email
    assert token <= set(seen['profile']['headers'])
    # Token headers only (403 with api_access_token): the page sent a session.
    assert seen['sessions']['status'] == 200
    assert [session['current'] for session in seen['sessions']['body']].count(True) == 1
    assert seen['signOut'] == {
        'status': 200,
        'body': {'success': True},
        'headers': seen['signOut']['headers'],
    }
    assert seen['afterSignOut']['status'] == 401
    assert not token & set(seen['afterSignOut']['headers'])
    assert seen['errors'] == []
