"""/healthz, /readyz and /api (the version, and the reference clients' server check)."""

import datetime

import falcon

from config import VERSION
import db


def _ask(pool, sql, timeout):
    """The rows of ``sql``, or None when the database does not answer within
    ``timeout``."""
    try:
        with pool.connection(timeout=timeout) as conn:
            return conn.execute(sql).fetchall()
    except Exception:  # noqa: BLE001 - any failure to ask means it did not answer
        return None


class Health:
    access = {'GET': 'public'}
    responses = {'GET': {200: 'health'}}

    def on_get(self, req, resp):
        """Liveness

        Answers while the process runs; no database involved.
        """
        resp.media = {'status': 'ok'}


class Ready:
    """Ready when the database answers and every migration file is applied."""

    access = {'GET': 'public'}
    responses = {'GET': {200: 'ready', 503: 'not_ready'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._applied_sql = queries['health.applied_migrations']
        self._expected = {path.stem for path in db.migration_files()}

    def on_get(self, req, resp):
        """Readiness

        The database answers and every migration is applied; else 503.
        """
        rows = _ask(self._pool, self._applied_sql, timeout=2)
        applied = None if rows is None else {row['version'] for row in rows}
        missing = None if applied is None else sorted(self._expected - applied)
        if applied is None or missing:
            resp.status = falcon.HTTP_503
            resp.set_header('Retry-After', '5')
            resp.media = {
                'message': 'Service temporarily unavailable',
                'database': applied is not None,
                'pending_migrations': missing,
            }
            return
        resp.media = {'status': 'ready'}


class ApiInfo:
    """GET /api: what the mobile app asks before it accepts a server address.

    Always 200 while the process runs; ``data_services`` says whether the database
    answered within a second, so operators can read both the version and the state.
    """

    access = {'GET': 'public'}
    responses = {'GET': {200: 'api_info'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._ping_sql = queries['health.ping']

    def on_get(self, req, resp):
        """Version and status

        The service version, the time, and whether the database answers
        (`data_services`); 200 either way. The mobile app calls it to accept a server
        address.
        """
        answered = _ask(self._pool, self._ping_sql, timeout=1) is not None
        resp.media = {
            'version': VERSION,
            'timestamp': datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec='seconds')
            .replace('+00:00', 'Z'),
            # The "queue" is the mail outbox, a table of the same database.
            'queue_services': 'ok',
            'data_services': 'ok' if answered else 'error',
        }
