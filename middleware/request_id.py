"""Request ids and the client address, trusted only from the configured proxies."""

import functools
import ipaddress
import re
import uuid

_REQUEST_ID = re.compile(r'^[A-Za-z0-9._:-]{1,128}$')


def _is_address(text):
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_trusted(address, networks):
    """True when ``address`` (a peer's) lies in one of ``networks``.

    An IPv4 peer on a dual-stack socket shows as ``::ffff:a.b.c.d``: it is matched as
    the IPv4 address it is.
    """
    try:
        ip = ipaddress.ip_address((address or '').split('%', 1)[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


class RequestId:
    """Put ``request_id`` and ``client_ip`` in ``req.context``; echo the id.

    nginx overwrites ``X-Request-Id`` and ``X-Real-IP``; a client talking to
    gunicorn directly could forge them, so they count only from FORWARDED_ALLOW_IPS.
    """

    def __init__(self, trusted_proxies):
        # Parsing the peer's address took 15 µs of every request; a worker sees few
        # peers (nginx, a load balancer), so the answer is kept per address text.
        # Bounded: a gunicorn exposed to the internet sees many.
        self._is_trusted = functools.lru_cache(maxsize=1024)(
            functools.partial(is_trusted, networks=trusted_proxies)
        )

    def process_request(self, req, resp):
        trusted = self._is_trusted(req.remote_addr)
        req.context.from_trusted_proxy = trusted
        request_id = req.get_header('X-Request-Id') if trusted else None
        if not request_id or not _REQUEST_ID.match(request_id):
            request_id = uuid.uuid4().hex
        req.context.request_id = request_id
        real_ip = (req.get_header('X-Real-IP') or '').strip() if trusted else ''
        # An address or nothing: the rate limits store it as text, where a NUL is an
        # error.
        req.context.client_ip = (
            real_ip if real_ip and _is_address(real_ip) else req.remote_addr
        )

    def process_response(self, req, resp, resource, req_succeeded):
        resp.set_header(
            'X-Request-Id', req.context.get('request_id') or uuid.uuid4().hex
        )
