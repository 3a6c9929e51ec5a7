"""Real nginx running deploy/nginx.conf for the tests (test_nginx, test_smoke,
test_two_instances)."""

import contextlib
from http.client import HTTPConnection
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from tests.support import ROOT
from tests.support.processes import listening
from tests.support.processes import wait_ready
from tests.support.servers import free_port

SITE = ROOT / 'deploy' / 'nginx.conf'

# What Debian's /etc/nginx/nginx.conf does for a site, with every path inside the test's
# directory. The site itself comes only from deploy/nginx.conf.
MAIN_CONF = """
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {dir}/frontdesk.conf;
}}
"""


def nginx_binary():
    found = shutil.which('nginx') or (
        '/usr/sbin/nginx' if os.path.exists('/usr/sbin/nginx') else None
    )
    if found is None:
        # scripts/bootstrap installs it; in CI a missing nginx is a failure, not a skip.
        if os.environ.get('CI'):
            pytest.fail(
                'nginx is not installed (scripts/bootstrap installs nginx-light)'
            )
        pytest.skip('nginx is not installed; run scripts/test, which installs it')
    return found


def render_site(upstream, port, avatar_dir, access_log, read_timeout='60s'):
    """deploy/nginx.conf with the EDIT values of this test run.

    ``upstream`` is one gunicorn address or a list of them: the upstream's ``server``
    line is repeated once per address, as an operator adding an instance would.
    """
    text = SITE.read_text()
    marker = 'server 127.0.0.1:8000 '
    assert text.count(marker) == 1, (
        f'deploy/nginx.conf should contain {marker!r} exactly once'
    )
    line = next(line for line in text.splitlines(keepends=True) if marker in line)
    upstreams = [upstream] if isinstance(upstream, str) else upstream
    text = text.replace(
        line, ''.join(line.replace('127.0.0.1:8000', address) for address in upstreams)
    )
    for old, new in [
        ('listen 80;', f'listen 127.0.0.1:{port};'),
        ('/srv/frontdesk/var/avatars/', f'{avatar_dir}/'),
        ('/var/log/nginx/frontdesk.access.log', str(access_log)),
        ('proxy_read_timeout 60s;', f'proxy_read_timeout {read_timeout};'),
    ]:
        assert text.count(old) == 1, (
            f'deploy/nginx.conf should contain {old!r} exactly once'
        )
        text = text.replace(old, new)
    return text


@contextlib.contextmanager
def run_nginx(workdir, upstream, avatar_dir, read_timeout='60s'):
    """Start nginx with the rendered site; yield (base URL, access log path)."""
    conf_dir = pathlib.Path(tempfile.mkdtemp(dir=workdir, prefix='nginx-'))
    conf_dir.chmod(0o755)  # the workers run as nobody and need the temp dirs in here
    port = free_port()
    access_log = conf_dir / 'access.log'
    (conf_dir / 'frontdesk.conf').write_text(
        render_site(upstream, port, avatar_dir, access_log, read_timeout)
    )
    (conf_dir / 'nginx.conf').write_text(MAIN_CONF.format(dir=conf_dir))
    proc = subprocess.Popen(
        [
            nginx_binary(),
            '-p',
            str(conf_dir),
            '-c',
            str(conf_dir / 'nginx.conf'),
            '-e',
            str(conf_dir / 'error.log'),
            '-g',
            'daemon off;',
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        try:
            wait_ready(proc, lambda: listening(port), 'nginx')
        except (RuntimeError, TimeoutError) as ex:
            proc.kill()
            errors = proc.communicate()[1].decode(errors='replace')
            raise RuntimeError(
                f'{ex}\n{errors}\n{(conf_dir / "error.log").read_text()}'
            ) from None
        yield f'http://127.0.0.1:{port}', access_log
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def read_log(path, containing=None, timeout=5.0):
    """The log so far; with ``containing``, wait until it shows up (logs lag
    replies)."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors='replace')
        if containing is None or containing in text or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def request(method, url, body=b'', headers=None, source='127.0.0.1'):
    """One request with http.client, which can choose the source address."""
    parts = urllib.parse.urlsplit(url)
    conn = HTTPConnection(
        parts.hostname, parts.port, timeout=30, source_address=(source, 0)
    )
    try:
        conn.request(method, parts.path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return (
            answer.status,
            {k.lower(): v for k, v in answer.getheaders()},
            answer.read(),
        )
    finally:
        conn.close()


@contextlib.contextmanager
def shared_workdir():
    """A directory for nginx's files and AVATAR_DIR (``<dir>/avatars``).

    Not under pytest's tmp_path: that is private to root, and nginx's workers (nobody)
    must read the avatars and write their temp files.
    """
    path = pathlib.Path(tempfile.mkdtemp(prefix='frontdesk-nginx-'))
    path.chmod(0o755)
    (path / 'avatars').mkdir(mode=0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
