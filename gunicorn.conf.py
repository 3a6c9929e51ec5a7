"""gunicorn settings for Frontdesk (see docs/performance.md for the measurements)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logs  # noqa: E402 - needs the path above

wsgi_app = 'app:create_app()'
bind = os.environ.get('BIND', '127.0.0.1:8000')
# Sync workers, 3 on 2 cores: measured best for the DB endpoints here (GET profile
# 3,267 / 3,598 / 3,362 req/s with 2 / 3 / 4 workers; docs/performance.md); gthread was
# worse and gevent's tails longer (docs/performance.md). Each worker opens its own small
# pool after the fork.
worker_class = 'sync'
workers = int(os.environ.get('WEB_CONCURRENCY', '3'))
timeout = 30
graceful_timeout = 30
# Header names with underscores are dropped ('dangerous' mapped them too, so a
# client's X_Real_IP merged with nginx's X-Real-IP into one HTTP_X_REAL_IP). The two
# such headers we need, api_access_token and mfa_token (SPEC 12), are listed in
# forwarder_headers: gunicorn then passes them as HTTP_API_ACCESS_TOKEN and
# HTTP_MFA_TOKEN, but only from FORWARDED_ALLOW_IPS (nginx passes the client's own).
# Nothing else is listed: gunicorn's default SCRIPT_NAME and PATH_INFO would let a
# client behind nginx rewrite the app's routing.
header_map = 'drop'
forwarder_headers = 'API_ACCESS_TOKEN,MFA_TOKEN'
# Only these peers may set X-Real-IP / X-Request-Id, api_access_token and mfa_token;
# addresses, CIDR networks or *, parsed alike here and by config.py (the app's own
# check).
forwarded_allow_ips = os.environ.get('FORWARDED_ALLOW_IPS') or '127.0.0.1,::1'
# gunicorn checks it before reading this file (its default is the variable), with the
# same rules as config.py; a mistake stops it with
# "Error: 10.0.0.1/8 has host bits set".
# The app writes the access lines (middleware/access_log.py: it knows the client IP it
# trusts and the request id); gunicorn's own lines share their format (logs.py).
accesslog = None
errorlog = '-'
loglevel = os.environ.get('LOG_LEVEL', 'info')
logconfig_dict = logs.gunicorn_logconfig(os.environ.get('LOG_FORMAT') or 'text')
# gunicorn 27's control socket lives at one path per OS user, shared by every gunicorn
# of that user (tests, benchmarks, a dev server); nothing here uses it.
control_socket_disable = True
# preload_app stays False: psycopg connections must not cross a fork (on_starting below
# loads the code without them).
preload_app = False


def on_starting(server):
    """Check the configuration once in the master, so a bad variable stops the start
    with one line instead of workers failing to boot over and over.

    Then import the app's code and build what every worker would build the same
    (the compiled request schemas, the common-password list), still without a
    connection: each worker forks with them and only makes its app and its own pool
    (``app:create_app()``). A worker's boot takes a third of the CPU it did, and the
    pages stay shared. As with preload_app, a HUP reload keeps this code: restart to
    deploy new code."""
    import config

    config.load_or_exit()
    import app  # noqa: F401 - for the workers to inherit
    from services import passwords
    import validators

    validators.load_validators()
    passwords.common_passwords()


def post_worker_init(worker):
    """Answer gunicorn's own refusals (bad request line, 414, 431) in JSON.

    gunicorn 27 renders them with ``gunicorn.util.write_error`` (an HTML page, from
    ``Worker.handle_error``) and offers no setting for it; this replaces that one
    function in the worker. tests/test_gunicorn.py checks it still takes effect.
    """
    import gunicorn.util

    gunicorn.util.write_error = write_json_error


def write_json_error(sock, status_int, reason, mesg):
    """SPEC 0's error bodies for what gunicorn refuses before the app sees it."""
    import json
    import uuid

    import gunicorn.util

    request_id = uuid.uuid4().hex
    if status_int >= 500:
        body = {'message': 'Internal server error', 'request_id': request_id}
    else:
        # reason, not mesg: mesg quotes the client's request line or header.
        body = {'message': reason}
    payload = json.dumps(body).encode() + b'\n'
    head = (
        f'HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n'
        'Content-Type: application/json; charset=utf-8\r\n'
        f'Content-Length: {len(payload)}\r\nX-Content-Type-Options: nosniff\r\n'
        f'X-Request-Id: {request_id}\r\n\r\n'
    )
    gunicorn.util.write_nonblock(sock, head.encode('latin-1') + payload)
