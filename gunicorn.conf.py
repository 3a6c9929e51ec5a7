"""gunicorn settings for Frontdesk (see docs/performance.md for the measurements)."""

import os

wsgi_app = 'app:create_app()'
bind = os.environ.get('BIND', '127.0.0.1:8000')
# Sync workers, 3 on 2 cores: measured best for the DB endpoints here (GET profile
# 3,267 / 3,598 / 3,362 req/s with 2 / 3 / 4 workers; docs/performance.md); gthread was
# worse and gevent's tails longer (perf-ceiling notes). Each worker opens its own small
# pool after the fork.
worker_class = 'sync'
workers = int(os.environ.get('WEB_CONCURRENCY', '3'))
timeout = 30
graceful_timeout = 30
# The api_access_token header has underscores; gunicorn drops such headers unless told.
header_map = 'dangerous'
# Only these peers may set X-Real-IP / X-Request-Id (read by the app, not by gunicorn).
forwarded_allow_ips = os.environ.get('FORWARDED_ALLOW_IPS', '127.0.0.1,::1')
accesslog = '-'
errorlog = '-'
loglevel = os.environ.get('LOG_LEVEL', 'info')
# One line per request: method, path (never the query string), status, duration in ms,
# request id. Headers and bodies, where tokens and passwords travel, are never logged.
access_log_format = 'access method=%(m)s path=%(U)s status=%(s)s duration_ms=%(M)s request_id=%({x-request-id}o)s'
# gunicorn 27's control socket lives at one path per OS user, shared by every gunicorn
# of that user (tests, benchmarks, a dev server); nothing here uses it.
control_socket_disable = True
# preload_app stays False: psycopg connections must not cross a fork.
preload_app = False


def on_starting(server):
    """Check the configuration once in the master, so a bad variable stops the start
    with one line instead of workers failing to boot over and over."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import config

    config.load_or_exit()
