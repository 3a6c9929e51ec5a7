"""Real gunicorn and real HTTP: for the tests that go over the wire."""

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

from tests import contract
from tests.support import ROOT
from tests.support.processes import wait_ready


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def answers_200(url):
    """True once a GET of ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def run_gunicorn(env, workers=2, port=None, log_path=None):
    """Start real gunicorn from gunicorn.conf.py; yield its base URL; stop it."""
    port = port or free_port()
    full_env = {
        **os.environ,
        **env,
        'BIND': f'127.0.0.1:{port}',
        'WEB_CONCURRENCY': str(workers),
    }
    log = open(log_path, 'wb') if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, '-m', 'gunicorn', '-c', 'gunicorn.conf.py'],
        cwd=ROOT,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f'http://127.0.0.1:{port}'
    try:
        wait_ready(proc, lambda: answers_200(base + '/healthz'), 'gunicorn')
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log_path:
            log.close()


@dataclasses.dataclass
class Answer:
    status: int
    headers: dict
    body: bytes

    @property
    def json(self):
        import json

        return json.loads(self.body)


def http(method, url, json_body=None, headers=None, data=None, timeout=30):
    """One real HTTP request with urllib; errors are answers, not exceptions."""
    import json

    headers = dict(headers or {})
    if json_body is not None:
        data = json.dumps(json_body).encode()
        headers.setdefault('Content-Type', 'application/json')
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            result = Answer(
                answer.status,
                {k.lower(): v for k, v in answer.headers.items()},
                answer.read(),
            )
    except urllib.error.HTTPError as ex:
        result = Answer(
            ex.code, {k.lower(): v for k, v in ex.headers.items()}, ex.read()
        )
    contract.check(method, url, headers, result.status, result.headers, result.body)
    return result


def raw_request(base, data, timeout=10):
    """Send ``data`` as is on a new connection; return (status, headers, body)."""
    parts = urllib.parse.urlsplit(base)
    with socket.create_connection(
        (parts.hostname, parts.port), timeout=timeout
    ) as sock:
        sock.sendall(data)
        answer = b''
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b'\r\n\r\n')
    lines = head.decode('latin-1').split('\r\n')
    headers = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(':') for line in lines[1:])
    }
    return int(lines[0].split()[1]), headers, body
