"""Rate limits of SPEC section 7, counted in PostgreSQL so they hold across workers and hosts.

A resource declares ``rate_limits = {'POST': (('ip', 5, 300), ('email', 10, 900))}``:
at most N requests per key per window of S seconds, keyed by the client address
(``req.context.client_ip``: X-Real-IP from a trusted proxy, else the peer; an IPv6
client by its /64, see ``address_key``), by the normalised ``email`` of the body, or by
the signed-in ``user``. A fourth element names a ``req.context`` attribute the rule
counts only when it is set, e.g. ``('user', 10, 3600, 'avatar')``: avatar uploads
only; such a rule has one bucket per route whatever the method (PUT and PATCH alike).
Fixed windows: simple, one statement per request, and at worst twice the limit across a
window boundary.
"""

import ipaddress

import errors


def address_key(address):
    """The bucket of a client address: an IPv6 client is keyed by its /64.

    One subscriber usually holds a whole /64, so a per-address limit would be a
    per-request one. Every spelling of an address gives the same key, and an
    IPv4-mapped IPv6 address (``::ffff:192.0.2.1``) is its IPv4 address.
    """
    try:
        ip = ipaddress.ip_address(address.split('%', 1)[0])
    except ValueError:
        return 'unknown'
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return str(ip)
    return str(ipaddress.IPv6Network((ip, 64), strict=False))


class RateLimit:
    def __init__(self, pool, queries):
        self._pool = pool
        self._hit_sql = queries['rate_limits.hit']

    def process_resource(self, req, resp, resource, params):
        rules = getattr(resource, 'rate_limits', {}).get(req.method)
        if not rules:
            return
        buckets, periods, limits = [], [], {}
        for key, limit, period, *when in rules:
            if when and not req.context.get(when[0]):
                continue
            value = self._key(req, key)
            if value is None:
                continue
            name = f'{req.uri_template} {when[0]}' if when else f'{req.method} {req.uri_template}'
            bucket = f'{name}|{key}={value}|{period}'
            buckets.append(bucket)
            periods.append(period)
            limits[bucket] = limit
        if not buckets:
            return
        with self._pool.connection() as conn:
            rows = conn.execute(self._hit_sql, {'buckets': buckets, 'periods': periods}).fetchall()
        over = [row['retry_after'] for row in rows if row['hits'] > limits[row['bucket']]]
        if over:
            # A resource may want the refusal recorded (sign-in: an audit event).
            if hasattr(resource, 'on_rate_limited'):
                resource.on_rate_limited(req)
            raise errors.TooManyRequests(max(1, max(over)))

    @staticmethod
    def _key(req, key):
        if key == 'ip':
            return address_key(req.context.client_ip or '')
        if key == 'user':
            caller = req.context.get('caller')
            return str(caller.id) if caller is not None else None
        doc = req.context.get('doc')
        email = doc.get('email') if isinstance(doc, dict) else None
        return email.strip().lower()[:255] if isinstance(email, str) and email.strip() else None
