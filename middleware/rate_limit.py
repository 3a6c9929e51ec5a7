"""Rate limits of SPEC section 7, counted in PostgreSQL so they hold across workers and hosts.

A resource declares ``rate_limits = {'POST': (('ip', 5, 300), ('email', 10, 900))}``:
at most N requests per key per window of S seconds, keyed by the client address
(``req.context.client_ip``: X-Real-IP from a trusted proxy, else the peer) or by the
normalised ``email`` of the body. Fixed windows: simple, one statement per request, and
at worst twice the limit across a window boundary.
"""

import errors


class RateLimit:
    def __init__(self, pool, queries):
        self._pool = pool
        self._hit_sql = queries['rate_limits.hit']

    def process_resource(self, req, resp, resource, params):
        rules = getattr(resource, 'rate_limits', {}).get(req.method)
        if not rules:
            return
        name = f'{req.method} {req.uri_template}'
        buckets, periods, limits = [], [], {}
        for key, limit, period in rules:
            value = self._key(req, key)
            if value is None:
                continue
            bucket = f'{name}|{key}={value}|{period}'
            buckets.append(bucket)
            periods.append(period)
            limits[bucket] = limit
        with self._pool.connection() as conn:
            rows = conn.execute(self._hit_sql, {'buckets': buckets, 'periods': periods}).fetchall()
        over = [row['retry_after'] for row in rows if row['hits'] > limits[row['bucket']]]
        if over:
            raise errors.TooManyRequests(max(1, max(over)))

    @staticmethod
    def _key(req, key):
        if key == 'ip':
            return req.context.client_ip or 'unknown'
        doc = req.context.get('doc')
        email = doc.get('email') if isinstance(doc, dict) else None
        return email.strip().lower()[:255] if isinstance(email, str) and email.strip() else None
