"""GET /api/v1/docs in a real browser: headless Chromium finds every operation.

No network but the service: the page's files must come from the service itself, and the
page's own Content-Security-Policy must let them run.
"""

import html
import re
import shutil
import subprocess

import pytest

from resources.docs import CONTENT_SECURITY_POLICY
from tests.contract import document
from tests.support.servers import http

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason='chromium is not installed (scripts/bootstrap installs it)'
)


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
