"""/healthz and /readyz."""

import falcon

import db


class Health:
    access = {'GET': 'public'}
    responses = {'GET': {200: 'health'}}

    def on_get(self, req, resp):
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
        try:
            with self._pool.connection(timeout=2) as conn:
                applied = {row['version'] for row in conn.execute(self._applied_sql)}
        except Exception:  # noqa: BLE001 - any failure to ask means not ready
            applied = None
        missing = None if applied is None else sorted(self._expected - applied)
        if applied is None or missing:
            resp.status = falcon.HTTP_503
            resp.set_header('Retry-After', '5')
            resp.media = {'message': 'Service temporarily unavailable',
                          'database': applied is not None, 'pending_migrations': missing}
            return
        resp.media = {'status': 'ready'}
