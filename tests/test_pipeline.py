"""What every request goes through: request ids, error shapes, body limits, config."""

import logging
import os
import re
import subprocess
import sys
from urllib.parse import quote

import falcon
import psycopg_pool
import pytest
import webtest

import app as app_module
import config as config_module
from tests.support import ROOT
from tests.support.sso import SETTINGS_ROUTE
from tests.test_profile import multipart
from tests.test_profile import send_multipart
from tests.test_profile import text_part
from tests.test_suspension import call
from tests.test_suspension import concrete
from tests.test_suspension import route_table

NOT_FOUND = {'error': 'Resource could not be found'}


def test_health_and_readiness(testapp):
    assert testapp.get('/healthz', status=200).json == {'status': 'ok'}
    assert testapp.get('/readyz', status=200).json == {'status': 'ready'}


def test_unknown_routes_and_methods_are_json_404s_whatever_the_accept_header(testapp):
    for resp in (
        testapp.get('/nope', status=404),
        testapp.get('/api/v1/nope', headers={'Accept': 'text/html'}, status=404),
        testapp.delete('/healthz', headers={'Accept': 'text/plain'}, status=404),
        testapp.get('/api/v1/accounts/abc', status=404),
        testapp.get('/api/v1/accounts/0', status=404),
    ):
        assert resp.json == NOT_FOUND
        assert resp.content_type == 'application/json'


def misspellings(number):
    """Spellings of ``number`` that Python's int() reads as a number, none of them the
    id's one spelling, and a number past bigint."""
    digits = str(number)
    other_scripts = {
        script: digits.translate({ord('0') + n: script + n for n in range(10)})
        for script in (0x0660, 0x0966, 0xFF10)  # Arabic-Indic, Devanagari, fullwidth
    }
    return [
        f'+{digits}',
        f'0{digits}',
        f'00{digits}',
        f'-{digits}',
        f'{digits[0]}_{digits[1:]}' if len(digits) > 1 else f'{digits}_0',
        *other_scripts.values(),
        '9223372036854775808',
    ]


def test_path_ids_are_ascii_digits_and_anything_else_is_a_404(
    testapp, config, pool, queries, make_account, make_user, conn
):
    """Generated from the route table: every method of every route with an id, each id
    spelled with a sign, a leading zero, an underscore or another script's digits is
    the JSON 404; spelled as itself, the route answers."""
    checked = 0
    for template, resource in route_table(config, pool, queries):
        fields = re.findall(r'\{(\w+):id\}', template)
        for method in sorted(getattr(resource, 'access', {}) if fields else ()):
            admin = make_user(account_id=make_account(), role='administrator')
            account_id = conn.execute(
                'SELECT account_id FROM account_users WHERE user_id = %s', (admin.id,)
            ).fetchone()['account_id']
            testapp.post_json(
                '/auth/sign_in', {'email': admin.email, 'password': admin.password}
            )
            token = testapp.post_json(
                '/api/v1/profile/access_tokens',
                {'name': 'CI', 'scopes': ['profile:read'], 'expires_in_days': 1},
                headers=admin.headers,
            ).json['id']
            ids = {
                'account_id': account_id,
                'user_id': make_user(account_id=account_id).id,
                'session_id': conn.execute(
                    'SELECT max(id) AS id FROM user_tokens WHERE user_id = %s',
                    (admin.id,),
                ).fetchone()['id'],
                'token_id': token,
            }
            for field in fields:
                for spelling in misspellings(ids[field]):
                    path = concrete(template, {**ids, field: quote(spelling)})
                    answer = call(testapp, method, path, admin.headers)
                    assert (answer.status_int, answer.json) == (404, NOT_FOUND), (
                        f'{method} {path}'
                    )
                    checked += 1
            answer = call(testapp, method, concrete(template, ids), admin.headers)
            assert answer.status_int != 404 or template == SETTINGS_ROUTE, (
                f'{method} {template}: {answer.body}'
            )
    assert checked >= 100, checked


def test_malformed_json_is_a_400(testapp, admin):
    for body in (
        b'{bad',
        b'{"name": "x",}',
        b'\xff\xfe',
        b'"\\ud800"',
        b'{"name": "\\ud83d"}',
    ):
        resp = testapp.put(
            f'/api/v1/accounts/{admin.account_id}',
            body,
            content_type='application/json',
            headers=admin.headers,
            status=400,
        )
        assert resp.json['message'].startswith('Malformed JSON')


def test_a_body_that_is_not_utf8_is_a_400_in_the_apis_words(testapp, admin, conn):
    """Bytes that are not UTF-8 (a stray \\xff, an encoded surrogate) are one answer on
    every route, public or signed in, JSON or a multipart part; nothing changes."""
    not_utf8 = {'message': 'Malformed JSON: not UTF-8'}
    before = conn.execute(
        'SELECT name, email FROM users WHERE id = %s', (admin.id,)
    ).fetchone()
    for body in (b'{"email": "\xff"}', b'{"name": "\xed\xa0\x80"}', b'\xff\xfe'):
        for method, path, headers in (
            ('POST', '/auth/sign_in', {}),
            ('POST', '/api/v1/accounts', {}),
            ('POST', '/auth/password', {}),
            ('PUT', '/api/v1/profile', admin.headers),
            ('PUT', f'/api/v1/accounts/{admin.account_id}', admin.headers),
        ):
            answer = testapp.request(
                path,
                method=method,
                body=body,
                content_type='application/json',
                headers=headers,
                status=400,
            )
            assert answer.json == not_utf8, (method, path, body)
        parts, content_type = multipart(text_part('profile[ui_settings]', body))
        answer = send_multipart(testapp, admin, parts, content_type, 400)
        assert answer.json == not_utf8
    after = conn.execute(
        'SELECT name, email FROM users WHERE id = %s', (admin.id,)
    ).fetchone()
    assert after == before


def test_a_body_of_whitespace_is_a_400_and_no_body_is_none(testapp, admin):
    account = f'/api/v1/accounts/{admin.account_id}'
    for body in (b' ', b'\r\n', b'\t '):
        answer = testapp.put(
            account,
            body,
            content_type='application/json',
            headers=admin.headers,
            status=400,
        )
        assert answer.json == {'message': 'Malformed JSON: only whitespace, no value'}
    # No body at all changes nothing, as `{}` would.
    testapp.put(account, b'', content_type='application/json', headers=admin.headers)


def test_nul_characters_are_refused_before_the_database(testapp, admin, conn):
    resp = testapp.put(
        f'/api/v1/accounts/{admin.account_id}',
        b'{"name": "a\\u0000b"}',
        content_type='application/json',
        headers=admin.headers,
        status=400,
    )
    assert resp.json == {'message': 'Malformed JSON: NUL characters are not allowed'}
    assert (
        conn.execute(
            'SELECT name FROM accounts WHERE id = %s', (admin.account_id,)
        ).fetchone()['name']
        == 'Acme'
    )
    # An escaped backslash followed by u0000 is ordinary text, and accepted.
    testapp.put(
        f'/api/v1/accounts/{admin.account_id}',
        b'{"name": "a\\\\u0000b"}',
        content_type='application/json',
        headers=admin.headers,
        status=200,
    )


def test_non_object_bodies_are_422(testapp, admin):
    for body in (b'[]', b'"name"', b'42', b'null'):
        resp = testapp.put(
            f'/api/v1/accounts/{admin.account_id}',
            body,
            content_type='application/json',
            headers=admin.headers,
            status=422,
        )
        assert resp.json['message'] == 'Request body must be a JSON object'


def test_another_content_type_is_a_415(testapp, admin):
    for content_type in (
        'text/plain',
        'application/xml',
        'multipart/form-data; boundary=x',
    ):
        resp = testapp.put(
            f'/api/v1/accounts/{admin.account_id}',
            b'name=x',
            content_type=content_type,
            headers=admin.headers,
            status=415,
        )
        assert resp.json == {
            'message': (
                'Content-Type must be application/json or '
                'application/x-www-form-urlencoded'
            )
        }


def test_a_body_over_one_mebibyte_is_a_413(testapp, admin):
    body = b'{"name": "' + b'x' * (1024 * 1024) + b'"}'
    resp = testapp.put(
        f'/api/v1/accounts/{admin.account_id}',
        body,
        content_type='application/json',
        headers=admin.headers,
        status=413,
    )
    assert resp.json == {
        'message': 'Request body is too large (maximum is 1048576 bytes)'
    }


def test_deeply_nested_json_is_handled(testapp, admin):
    deep = b'[' * 100_000 + b']' * 100_000
    resp = testapp.put(
        f'/api/v1/accounts/{admin.account_id}',
        deep,
        content_type='application/json',
        headers=admin.headers,
        status=400,
    )
    assert resp.json['message'].startswith('Malformed JSON')


def test_request_id_is_echoed_or_made(testapp):
    made = testapp.get('/healthz').headers['X-Request-Id']
    assert len(made) == 32
    # From a trusted proxy (WebTest's peer is 127.0.0.1 by default) a sane id is kept.
    kept = testapp.get('/healthz', headers={'X-Request-Id': 'abc-123'}).headers[
        'X-Request-Id'
    ]
    assert kept == 'abc-123'
    replaced = testapp.get(
        '/healthz', headers={'X-Request-Id': 'bad id\twith spaces'}
    ).headers['X-Request-Id']
    assert len(replaced) == 32 and replaced != 'bad id\twith spaces'
    assert (
        testapp.get('/nope', headers={'X-Request-Id': 'r-404'}, status=404).headers[
            'X-Request-Id'
        ]
        == 'r-404'
    )


def test_request_id_from_an_untrusted_peer_is_not_trusted(testapp):
    resp = testapp.get(
        '/healthz',
        headers={'X-Request-Id': 'spoofed'},
        extra_environ={'REMOTE_ADDR': '203.0.113.9'},
    )
    assert resp.headers['X-Request-Id'] != 'spoofed'


@pytest.mark.parametrize(
    'allow, peer, trusted',
    [
        ('10.0.0.0/8', '10.20.30.40', True),
        ('10.0.0.0/8', '11.0.0.1', False),
        ('10.0.0.0/8', '::ffff:10.1.1.1', True),  # an IPv4 peer on a dual-stack socket
        ('192.0.2.7, 2001:db8::/32', '2001:db8:1::5', True),
        ('192.0.2.7, 2001:db8::/32', '2001:db9::5', False),
        ('*', '203.0.113.9', True),
        ('*', '2001:db8::1', True),
    ],
)
def test_forwarded_allow_ips_takes_networks_and_star(
    make_testapp, allow, peer, trusted
):
    app = make_testapp(FORWARDED_ALLOW_IPS=allow)
    resp = app.get(
        '/healthz',
        headers={'X-Request-Id': 'from-the-proxy'},
        extra_environ={'REMOTE_ADDR': peer},
    )
    assert (resp.headers['X-Request-Id'] == 'from-the-proxy') is trusted


def test_one_app_decides_trust_for_each_peer_it_sees(make_testapp):
    """RequestId keeps its decision per peer address: in one app, a proxy's id is taken
    and an outsider's never, however their requests alternate."""
    app = make_testapp(FORWARDED_ALLOW_IPS='10.0.0.0/8')
    for peer, trusted in [
        ('10.0.0.1', True),
        ('11.0.0.1', False),
        ('10.0.0.1', True),
        ('11.0.0.1', False),
        ('10.0.0.2', True),
    ]:
        resp = app.get(
            '/healthz',
            headers={'X-Request-Id': 'from-the-proxy'},
            extra_environ={'REMOTE_ADDR': peer},
        )
        assert (resp.headers['X-Request-Id'] == 'from-the-proxy') is trusted, peer


class Boom:
    access = {'GET': 'public'}

    def on_get(self, req, resp):
        raise RuntimeError('secret detail that must not leak')


def test_an_unexpected_exception_is_a_generic_500_logged_with_the_request_id(
    config, pool, caplog
):
    app = app_module.create_app(config, pool)
    app.add_route('/boom', Boom())
    with caplog.at_level(logging.ERROR, logger='frontdesk'):
        resp = webtest.TestApp(app).get(
            '/boom', headers={'X-Request-Id': 'req-500'}, status=500, expect_errors=True
        )
    assert resp.json == {'message': 'Internal server error', 'request_id': 'req-500'}
    assert 'secret detail' not in resp.text
    assert any(
        'req-500' in record.getMessage() and record.exc_info
        for record in caplog.records
    )


def test_an_unreachable_database_is_a_503_with_retry_after(config):
    dead = psycopg_pool.ConnectionPool(
        'postgresql://postgres@127.0.0.1:9/nowhere',
        min_size=0,
        max_size=1,
        timeout=0.5,
        open=True,
    )
    try:
        app = webtest.TestApp(app_module.create_app(config, dead))
        resp = app.get(
            '/api/v1/profile',
            headers={'access-token': 'a', 'client': 'b', 'uid': 'c@d.io'},
            status=503,
        )
        assert resp.json == {'message': 'Service temporarily unavailable'}
        assert resp.headers['Retry-After'] == '5'
        ready = app.get('/readyz', status=503)
        assert ready.json['message'] == 'Service temporarily unavailable'
        assert app.get('/healthz', status=200).json == {'status': 'ok'}
    finally:
        dead.close()


@pytest.mark.parametrize(
    'env, variable',
    [
        ({'ENABLE_ACCOUNT_SIGNUP': 'maybe'}, 'ENABLE_ACCOUNT_SIGNUP'),
        ({'BCRYPT_ROUNDS': 'twelve'}, 'BCRYPT_ROUNDS'),
        ({'MAX_TOKENS_PER_USER': '0'}, 'MAX_TOKENS_PER_USER'),
        ({'RATE_LIMITS': 'yes'}, 'RATE_LIMITS'),
        ({'HCAPTCHA_VERIFY_URL': 'ftp://x'}, 'HCAPTCHA_VERIFY_URL'),
        ({'AVATAR_URL_PREFIX': '/avatars'}, 'AVATAR_URL_PREFIX'),
        ({'DATABASE_URL': ''}, 'DATABASE_URL'),
        ({'FORWARDED_ALLOW_IPS': '10.0.0.1/8'}, 'FORWARDED_ALLOW_IPS'),
        ({'FORWARDED_ALLOW_IPS': '127.0.0.1,proxy.local'}, 'FORWARDED_ALLOW_IPS'),
    ],
)
def test_invalid_configuration_names_the_variable(base_env, env, variable):
    with pytest.raises(config_module.ConfigError, match=variable):
        config_module.load({**base_env, **env})


def test_gunicorn_refuses_to_start_on_invalid_configuration(base_env):
    env = {
        **os.environ,
        **base_env,
        'ENABLE_ACCOUNT_SIGNUP': 'sometimes',
        'BIND': '127.0.0.1:0',
    }
    done = subprocess.run(
        [sys.executable, '-m', 'gunicorn', '-c', 'gunicorn.conf.py'],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert (
        'invalid configuration: ENABLE_ACCOUNT_SIGNUP must be one of true, false, '
        'api_only' in done.stdout + done.stderr
    )


def test_gunicorn_refuses_a_forwarded_allow_ips_it_would_misread(base_env):
    env = {
        **os.environ,
        **base_env,
        'FORWARDED_ALLOW_IPS': '127.0.0.1,10.0.0.1/8',
        'BIND': '127.0.0.1:0',
    }
    done = subprocess.run(
        [sys.executable, '-m', 'gunicorn', '-c', 'gunicorn.conf.py'],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    # gunicorn's own check, before it reads gunicorn.conf.py; config.py agrees with it.
    assert (done.stdout + done.stderr).strip() == 'Error: 10.0.0.1/8 has host bits set'
    with pytest.raises(config_module.ConfigError, match='FORWARDED_ALLOW_IPS'):
        config_module.load(env)


def test_options_is_answered_without_credentials(testapp):
    resp = testapp.options('/api/v1/profile', status=200)
    assert 'GET' in resp.headers['Allow']
    assert falcon.HTTP_200.startswith('200')


class BadInsert:
    access = {'GET': 'public'}

    def __init__(self, pool):
        self._pool = pool

    def on_get(self, req, resp, tail):
        with self._pool.connection() as conn:
            conn.execute(
                'INSERT INTO users (name, email, encrypted_password, access_token)'
                " VALUES ('x', 'UPPER@CASE.IO', '$2b$secret-hash-value',"
                " 'tok-secret-0123456789abcdef0123456789')"
            )


def test_a_database_error_is_logged_without_the_row_it_quotes(config, pool, caplog):
    app = app_module.create_app(config, pool)
    app.add_route('/bad-insert/{tail}', BadInsert(pool))
    with caplog.at_level(logging.ERROR, logger='frontdesk'):
        resp = webtest.TestApp(app).get(
            '/bad-insert/x%0Aforged', status=500, expect_errors=True
        )
    assert resp.json['message'] == 'Internal server error'
    logged = caplog.text
    # The client's path is escaped: it cannot start a line of its own (logs.py).
    assert 'GET /bad-insert/x\\nforged request_id=' in logged
    assert 'CheckViolation' in logged and 'users_email_check' in logged
    assert 'secret-hash-value' not in logged and 'tok-secret' not in logged


class RolledBack:
    """A statement PostgreSQL fails with the SQLSTATE of a broken deadlock or a
    serialization conflict."""

    access = {'GET': 'public'}

    def __init__(self, pool, sqlstate):
        self._pool = pool
        self._sqlstate = sqlstate

    def on_get(self, req, resp, tail):
        with self._pool.connection() as conn:
            conn.execute(
                "DO $$ BEGIN RAISE EXCEPTION 'rolled back' USING ERRCODE = '%s';"
                ' END $$' % self._sqlstate
            )


@pytest.mark.parametrize(
    'sqlstate, name',
    [('40P01', 'DeadlockDetected'), ('40001', 'SerializationFailure')],
)
def test_a_transaction_the_database_rolled_back_is_a_503_logged_as_an_error(
    config, pool, caplog, sqlstate, name
):
    """Nothing was written, so the client may send it again: the 503 of section 0 with
    Retry-After, never a 500; the log says what happened (a deadlock is a lock-order
    bug), not that the database is away."""
    app = app_module.create_app(config, pool)
    app.add_route('/rolled-back/{tail}', RolledBack(pool, sqlstate))
    with caplog.at_level(logging.WARNING, logger='frontdesk'):
        resp = webtest.TestApp(app).get(
            '/rolled-back/x%0Aforged', headers={'X-Request-Id': 'req-40'}, status=503
        )
    assert resp.json == {'message': 'Service temporarily unavailable'}
    assert resp.headers['Retry-After'] == '5'
    [record] = [r for r in caplog.records if 'req-40' in r.getMessage()]
    assert record.levelno == logging.ERROR
    assert f'{name} sqlstate={sqlstate}' in record.getMessage()
    # The client's path is escaped: it cannot start a line of its own (logs.py).
    assert 'GET /rolled-back/x\\nforged request_id=req-40' in record.getMessage()
    assert 'database unavailable' not in caplog.text
