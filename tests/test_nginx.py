"""deploy/nginx.conf, run by real nginx in front of real gunicorn."""

import contextlib
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
import json
import pathlib
import re
import shutil
import socket
import tempfile
import threading
import time
import urllib.parse

import pytest

from tests.nginx_server import read_log
from tests.nginx_server import request
from tests.nginx_server import run_nginx
from tests.support.servers import http
from tests.support.servers import raw_request
from tests.support.servers import run_gunicorn
from tests.support.users import unique_email

REQUEST_ID = re.compile(r'^[0-9a-f]{32}$')
JSON_LIMIT = 1024 * 1024
UPLOAD_LIMIT = 8 * 1024 * 1024 + 64 * 1024


class CaptchaVerifier(BaseHTTPRequestHandler):
    """A stand-in for hCaptcha that notes the remoteip it was given and refuses."""

    seen = []

    def do_POST(self):
        form = urllib.parse.parse_qs(
            self.rfile.read(int(self.headers['Content-Length'])).decode()
        )
        self.seen.append(form.get('remoteip', [None])[0])
        body = b'{"success": false}'
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope='module')
def workdir():
    # Not under pytest's tmp_path: that is private to root, and nginx's workers (nobody)
    # must read the avatars and write their temp files.
    path = pathlib.Path(tempfile.mkdtemp(prefix='frontdesk-nginx-'))
    path.chmod(0o755)
    (path / 'avatars').mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope='module')
def captcha_verifier():
    server = ThreadingHTTPServer(('127.0.0.1', 0), CaptchaVerifier)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{server.server_port}/siteverify', CaptchaVerifier.seen
    server.shutdown()
    server.server_close()


@pytest.fixture(scope='module')
def gunicorn(base_env, workdir, captcha_verifier):
    """gunicorn of our own, so that its log is ours to read."""
    log_path = workdir / 'gunicorn.log'
    env = {
        **base_env,
        'AVATAR_DIR': str(workdir / 'avatars'),
        'HCAPTCHA_SECRET': 'test-secret',
        'HCAPTCHA_VERIFY_URL': captcha_verifier[0],
    }
    with run_gunicorn(env, workers=2, log_path=log_path) as base:
        yield base, log_path


@pytest.fixture(scope='module')
def nginx(workdir, gunicorn):
    """(base URL, access log) of nginx in front of the module's gunicorn."""
    upstream = gunicorn[0].removeprefix('http://')
    with run_nginx(workdir, upstream, workdir / 'avatars') as running:
        yield running


@pytest.fixture
def proxy(nginx):
    return nginx[0]


@pytest.fixture
def gunicorn_log(gunicorn):
    return lambda containing=None: read_log(gunicorn[1], containing)


def multipart(size):
    boundary = 'frontdesk-test-boundary'
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="profile[avatar]"; '
        'filename="a.png"\r\nContent-Type: image/png\r\n\r\n'
    ).encode()
    tail = f'\r\n--{boundary}--\r\n'.encode()
    body = head + b'\0' * (size - len(head) - len(tail)) + tail
    return body, {'Content-Type': f'multipart/form-data; boundary={boundary}'}


def test_nginx_request_id_replaces_the_clients_and_both_logs_have_it(
    proxy, nginx, gunicorn_log
):
    answer = http(
        'GET', proxy + '/healthz', headers={'X-Request-Id': 'chosen-by-the-client'}
    )
    assert answer.status == 200
    request_id = answer.headers['x-request-id']
    assert REQUEST_ID.match(request_id)
    line = next(
        line for line in gunicorn_log(request_id).splitlines() if request_id in line
    )
    assert re.search(
        r'client_ip=127\.0\.0\.1 method=GET path=/healthz status=200 '
        rf'duration_ms=[\d.]+ request_id={request_id}$',
        line,
    )
    assert 'chosen-by-the-client' not in gunicorn_log()
    line = next(
        line
        for line in read_log(nginx[1], request_id).splitlines()
        if request_id in line
    )
    assert re.match(
        rf'127\.0\.0\.1 \[.+\] "GET /healthz" 200 \d+ [\d.]+ request_id={request_id}$',
        line,
    )


def test_the_app_sees_nginx_peer_address_not_the_clients_x_real_ip(
    proxy, captcha_verifier
):
    seen = captcha_verifier[1]
    seen.clear()
    body = json.dumps(
        {
            'account_name': 'Acme',
            'email': unique_email(),
            'user_full_name': 'Ada',
            'password': 'correct horse 1',
            'h_captcha_client_response': 'token',
        }
    )
    # From 127.0.0.2, so nginx's $remote_addr differs from the peer gunicorn sees.
    status, _, payload = request(
        'POST',
        proxy + '/api/v1/accounts',
        body.encode(),
        source='127.0.0.2',
        headers={
            'Content-Type': 'application/json',
            'X-Real-IP': '203.0.113.7',
            'X-Forwarded-For': '203.0.113.7',
        },
    )
    assert (status, json.loads(payload)) == (422, {'message': 'Invalid captcha'})
    assert seen == ['127.0.0.2']


def test_json_body_over_1_mib_is_nginx_json_413(proxy, gunicorn_log):
    body = b'{"account_name": "' + b'a' * JSON_LIMIT + b'"}'
    status, headers, payload = request(
        'POST',
        proxy + '/api/v1/accounts',
        body,
        headers={'Content-Type': 'application/json'},
    )
    assert status == 413
    assert headers['content-type'] == 'application/json; charset=utf-8'
    assert json.loads(payload) == {
        'message': f'Request body is too large (maximum is {JSON_LIMIT} bytes)'
    }
    # gunicorn never saw it.
    assert headers['x-request-id'] not in gunicorn_log()


def test_profile_upload_limit_is_the_avatar_limit(proxy, gunicorn_log, make_user):
    user = make_user()
    body, headers = multipart(UPLOAD_LIMIT + 1)
    status, answer_headers, payload = request(
        'PUT', proxy + '/api/v1/profile', body, headers={**headers, **user.headers}
    )
    assert status == 413
    assert answer_headers['content-type'] == 'application/json; charset=utf-8'
    assert json.loads(payload) == {
        'message': f'Request body is too large (maximum is {UPLOAD_LIMIT} bytes)'
    }

    # Far over the JSON limit but within the avatar limit: it goes through to gunicorn.
    body, headers = multipart(2 * JSON_LIMIT)
    status, answer_headers, _ = request(
        'PUT', proxy + '/api/v1/profile', body, headers={**headers, **user.headers}
    )
    assert status != 413
    assert f'path=/api/v1/profile status={status}' in gunicorn_log(
        answer_headers['x-request-id']
    )


def test_an_upload_refused_before_it_is_read_gets_the_apps_answer_not_a_502(proxy):
    # The app answers 401 without reading the body; gunicorn then closes the connection
    # while nginx is still sending the rest, which nginx would turn into a 502.
    body, headers = multipart(8 * JSON_LIMIT)
    statuses = {
        request('PUT', proxy + '/api/v1/profile', body, headers=headers)[0]
        for _ in range(10)
    }
    assert statuses == {401}


def test_api_access_token_reaches_the_app_and_no_token_is_logged(
    proxy, nginx, gunicorn_log, make_user
):
    user = make_user()
    answer = http(
        'GET',
        proxy + '/api/v1/profile',
        headers={'api_access_token': user.access_token},
    )
    assert answer.status == 200
    assert answer.json['email'] == user.email
    answer = http('GET', proxy + '/api/v1/profile', headers=user.headers)
    assert answer.status == 200
    log = gunicorn_log(answer.headers['x-request-id'])
    assert user.access_token not in log
    assert user.token not in log
    assert user.client not in log
    nginx_log = read_log(nginx[1], answer.headers['x-request-id'])
    assert user.access_token not in nginx_log and user.token not in nginx_log


def test_avatars_are_served_as_images_with_nosniff(proxy, workdir):
    for name, content_type in [
        ('a1.jpg', 'image/jpeg'),
        ('a2.png', 'image/png'),
        ('a3.gif', 'image/gif'),
        ('a4.webp', 'image/webp'),
    ]:
        (workdir / 'avatars' / name).write_bytes(b'<html>not really an image</html>')
        answer = http('GET', f'{proxy}/avatars/{name}')
        assert answer.status == 200, name
        assert answer.headers['content-type'] == content_type
        assert answer.headers['x-content-type-options'] == 'nosniff'
        assert answer.body == b'<html>not really an image</html>'


@pytest.mark.parametrize(
    'name', ['evil.html', 'evil.svg', 'evil.png.html', '', 'missing.png', '.png']
)
def test_anything_else_under_avatars_is_a_json_404(proxy, workdir, name):
    for planted in ('evil.html', 'evil.svg', 'evil.png.html'):
        (workdir / 'avatars' / planted).write_text('<script>alert(1)</script>')
    answer = http('GET', f'{proxy}/avatars/{name}')
    assert answer.status == 404
    assert answer.headers['content-type'] == 'application/json; charset=utf-8'
    assert answer.json == {'error': 'Resource could not be found'}


def test_stopped_gunicorn_is_a_json_502(base_env, workdir):
    with contextlib.ExitStack() as app:
        upstream = app.enter_context(run_gunicorn(base_env, workers=1)).removeprefix(
            'http://'
        )
        with run_nginx(workdir, upstream, workdir / 'avatars') as (proxy, _):
            assert http('GET', proxy + '/healthz').status == 200
            app.close()
            answer = http('GET', proxy + '/healthz')
    assert answer.status == 502
    assert answer.headers['content-type'] == 'application/json; charset=utf-8'
    assert answer.headers['retry-after'] == '5'
    assert answer.json == {'message': 'Service temporarily unavailable'}


def test_slow_upstream_is_a_json_504(workdir):
    # An upstream that accepts and never answers: the one thing gunicorn won't do on
    # cue.
    with socket.create_server(('127.0.0.1', 0)) as silent:
        upstream = f'127.0.0.1:{silent.getsockname()[1]}'
        with run_nginx(workdir, upstream, workdir / 'avatars', read_timeout='1s') as (
            proxy,
            _,
        ):
            started = time.monotonic()
            answer = http('GET', proxy + '/healthz')
            elapsed = time.monotonic() - started
    assert answer.status == 504
    assert elapsed < 30  # after read_timeout's 1 s, not never; wide for a loaded host
    assert answer.headers['content-type'] == 'application/json; charset=utf-8'
    assert answer.headers['retry-after'] == '5'
    assert answer.json == {'message': 'Service temporarily unavailable'}


@pytest.mark.parametrize('path', ['/', '/api/v1/profile'])
@pytest.mark.parametrize(
    'request_bytes, status, message',
    [
        (
            b'GET /' + b'a' * 9000 + b' HTTP/1.1\r\nHost: x\r\n\r\n',
            414,
            'Request line is too long',
        ),
        (
            b'GET {path} HTTP/1.1\r\nHost: x\r\nX-Big: ' + b'b' * 9000 + b'\r\n\r\n',
            431,
            'Request headers are too large',
        ),
        (
            b'GET {path} HTTP/1.1\r\nHost: x\r\nCookie: ' + b'c' * 9000 + b'\r\n\r\n',
            431,
            'Request headers are too large',
        ),
        (
            b'GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n'
            b'Content-Length: 2\r\n\r\nab',
            400,
            'Bad request',
        ),
        (b'GET {path} HTTP/1.1\r\n\r\n', 400, 'Bad request'),  # HTTP/1.1 without Host
    ],
    ids=['414', 'big-header', 'big-cookie', 'two-lengths', 'no-host'],
)
def test_nginx_own_refusals_are_json(
    proxy, gunicorn_log, path, request_bytes, status, message
):
    got, headers, body = raw_request(
        proxy, request_bytes.replace(b'{path}', path.encode())
    )
    assert got == status
    assert headers['content-type'] == 'application/json; charset=utf-8'
    assert json.loads(body) == {'message': message}
    assert REQUEST_ID.match(headers['x-request-id'])
    assert headers['x-request-id'] not in gunicorn_log()


def test_the_error_pages_cannot_be_asked_for(proxy):
    status, headers, body = raw_request(
        proxy,
        b'GET /.frontdesk-error/400 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    )
    assert (status, json.loads(body)) == (404, {'error': 'Resource could not be found'})


def test_the_mfa_token_header_reaches_the_app(proxy, testapp, admin, make_user):
    from tests.test_mfa import enable

    enable(testapp, admin)
    testapp.put_json(
        f'/api/v1/accounts/{admin.account_id}',
        {'enforce_mfa': True},
        headers=admin.headers,
    )
    member = make_user(account_id=admin.account_id)
    challenge = http(
        'POST',
        proxy + '/auth/sign_in',
        {'email': member.email, 'password': member.password},
    )
    assert challenge.status == 206 and challenge.json['mfa_setup_required'] is True
    answer = http(
        'GET',
        proxy + '/api/v1/profile/mfa',
        headers={'mfa_token': challenge.json['mfa_token']},
    )
    assert answer.status == 200 and answer.json['enabled'] is False
