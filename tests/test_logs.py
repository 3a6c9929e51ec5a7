"""Log lines (SPEC 16): one format for every logger, access lines from the app, HEAD."""

import json
import re

import pytest

from logs import escape
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.sso import SETTINGS_ROUTE

FORGED = (
    '/api/v1/x%0a2026-01-01T00:00:00.000Z%20INFO%20frontdesk.access'
    '%20forged%09%5c%c2%85'
)


def test_escape_leaves_no_control_character_backslash_or_space():
    assert (
        escape('/a\nb\rc\td\\e f\x00\x1b\x7f\x85é')
        == '/a\\nb\\rc\\td\\\\e\\x20f\\x00\\x1b\\x7f\\x85é'
    )


def _lines(path):
    return path.read_text().splitlines()


@pytest.mark.parametrize('log_format', ['text', 'json'])
def test_access_lines_carry_time_client_ip_and_escaped_path_in_one_format(
    base_env, tmp_path, log_format
):
    log_path = tmp_path / 'gunicorn.log'
    with run_gunicorn(
        {**base_env, 'LOG_FORMAT': log_format}, workers=1, log_path=log_path
    ) as base:
        # From 127.0.0.1, a trusted proxy: its X-Real-IP is the client.
        answer = http('GET', base + FORGED, headers={'X-Real-IP': '203.0.113.9'})
        assert answer.status == 404
        request_id = answer.headers['x-request-id']
    lines = _lines(log_path)
    access = [line for line in lines if request_id in line]
    assert len(access) == 1, lines
    assert not any('forged' in line and request_id not in line for line in lines), (
        'a request forged a log line'
    )
    if log_format == 'json':
        docs = [
            json.loads(line) for line in lines
        ]  # every line, gunicorn's own included
        assert any(doc['logger'] == 'gunicorn.error' for doc in docs)
        entry = json.loads(access[0])
        assert (
            entry['client_ip'] == '203.0.113.9'
            and entry['method'] == 'GET'
            and entry['status'] == 404
        )
        assert (
            entry['path'].startswith('/api/v1/x\\n2026')
            and '\\t\\\\\\x85' in entry['path']
        )
        assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z', entry['time'])
        assert float(entry['duration_ms']) >= 0
    else:
        stamp = r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z'
        assert all(
            re.match(stamp + r' [A-Z]+ \S+ ', line)
            for line in lines
            if not line.startswith(' ')
        ), lines
        assert re.fullmatch(
            stamp
            + r' INFO frontdesk\.access access client_ip=203\.0\.113\.9 method=GET '
            r'path=/api/v1/x\\n2026\S*\\t\\\\\\x85 status=404 '
            r'duration_ms=\d+\.\d request_id=' + request_id,
            access[0],
        ), access[0]


def test_head_answers_every_get_route_like_get_without_a_body(testapp, admin):
    from tests.contract import document

    for template, operations in document()['paths'].items():
        if 'get' not in operations:
            continue
        path = template.replace('{account_id}', str(admin.account_id))
        get = testapp.get(path, headers=admin.headers, expect_errors=True)
        head = testapp.head(path, headers=admin.headers, expect_errors=True)
        # Single sign-on's redirects (SPEC 19) are 302s; an account without single
        # sign-on settings has none to show (404).
        assert head.status_int == get.status_int, (template, head.status, get.status)
        assert get.status_int in (200, 302) or template in (
            '/readyz',
            SETTINGS_ROUTE.replace(':id', ''),
        ), (template, get.status)
        assert head.body == b''
        assert head.headers['Content-Type'] == get.headers['Content-Type']
    assert testapp.head('/api/v1/profile', expect_errors=True).status_int == 401
