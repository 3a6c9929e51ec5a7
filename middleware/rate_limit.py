"""Rate limits of SPEC sections 7 and 12, counted in PostgreSQL so they hold across
workers and hosts.

A resource declares ``rate_limits = {'POST': (('ip', 5, 300), ('email', 10, 900))}``:
at most N requests per key per window of S seconds, keyed by the client address
(``req.context.client_ip``: X-Real-IP from a trusted proxy, else the peer; an IPv6
client by its /64, see ``services.audit.address_key``), by the normalised ``email`` of
the body, by the digest of the body's ``mfa_token`` (the second sign-in step), or by
the signed-in ``user``. A rule whose key the request lacks is skipped.

A fourth element names what must be set in ``req.context`` for the rule to count, a
dotted path into it for a field of the parsed body, ``!`` in front for what must not
be set: ``('user', 10, 3600, 'avatar')`` counts avatar uploads only, and sign-in counts
its password step (``'!doc.mfa_token'``) apart from its code step (``'doc.mfa_token'``).
Such a rule has one bucket per route whatever the method (PUT and PATCH alike).
A resource that wants a refusal recorded declares a hook (docs/architecture.md),
``when_rate_limited = {'POST': record_refusal}``, called as
``record_refusal(pool, queries, req)`` before the 429 (sign-in: an audit event).
Fixed windows: simple, one statement per request, and at worst twice the limit across a
window boundary.
"""

import errors
from services import addresses
from services.audit import address_key
import tokens


class RateLimit:
    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries
        self._hit_sql = queries['rate_limits.hit']

    def process_resource(self, req, resp, resource, params):
        rules = getattr(resource, 'rate_limits', {}).get(req.method)
        if not rules:
            return
        buckets, periods, limits = [], [], {}
        for key, limit, period, *when in rules:
            if when and not _applies(req, when[0]):
                continue
            value = self._key(req, key)
            if value is None:
                continue
            name = (
                f'{req.uri_template} {when[0]}'
                if when
                else f'{req.method} {req.uri_template}'
            )
            bucket = f'{name}|{key}={value}|{period}'
            buckets.append(bucket)
            periods.append(period)
            limits[bucket] = limit
        if not buckets:
            return
        with self._pool.connection() as conn:
            rows = conn.execute(
                self._hit_sql, {'buckets': buckets, 'periods': periods}
            ).fetchall()
        over = [
            row['retry_after'] for row in rows if row['hits'] > limits[row['bucket']]
        ]
        if over:
            refused = getattr(resource, 'when_rate_limited', {}).get(req.method)
            if refused is not None:
                refused(self._pool, self._queries, req)
            raise errors.TooManyRequests(max(1, max(over)))

    @staticmethod
    def _key(req, key):
        if key == 'ip':
            return address_key(req.context.client_ip or '')
        if key == 'user':
            caller = req.context.get('caller')
            return str(caller.id) if caller is not None else None
        value = _context_value(req, f'doc.{key}')
        if not isinstance(value, str) or not value.strip():
            return None
        if key == 'mfa_token':
            # Never the token itself: the counters table is not a place for credentials.
            return tokens.digest(value).hex()
        return addresses.normalise(value)[:255]


def _context_value(req, path):
    """``req.context`` at a dotted path (``avatar``, ``doc.mfa_token``); None if
    absent."""
    first, *rest = path.split('.')
    value = req.context.get(first)
    for part in rest:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _applies(req, when):
    value = _context_value(req, when.lstrip('!'))
    return (value is None) if when.startswith('!') else (value is not None)
