"""Calls to an identity provider (SPEC 19): discovery, the token endpoint, the JWKS.

A provider is another system, and its URLs are an administrator's input: every call
has one deadline for the whole exchange (TIMEOUT_SECONDS, not per read, so a provider
that drips bytes cannot hold a worker), a size bound, no redirects, and goes only to
an address the issuer rule allows: not loopback, private, link-local or otherwise
special-use (unless OIDC_ALLOW_PRIVATE_ISSUERS=true). The connection is made to the
address that was checked (the Host header and TLS server name stay the URL's host), so a
name that resolves differently a moment later cannot send it elsewhere.

Every failure is a ProviderError: ``reason`` is a short word for the audit event,
``message`` a sentence for the administrator's 422.
"""

import concurrent.futures
import functools
import ipaddress
import socket
import time
import urllib.parse

import orjson

TIMEOUT_SECONDS = 5.0
MAX_BYTES = 256 * 1024
DISCOVERY_PATH = '/.well-known/openid-configuration'


class ProviderError(Exception):
    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason
        self.message = message


@functools.cache
def _client():
    """One client per process: its connection pool and TLS context are reused. Made,
    and httpx imported, at the first call to a provider: about 6 MB a worker that never
    talks to one does not carry (httpx is imported in the functions that use it, against
    the house rule of imports at the top, for that reason; docs/performance.md)."""
    import httpx

    return httpx.Client(
        timeout=httpx.Timeout(TIMEOUT_SECONDS),
        follow_redirects=False,
        trust_env=False,
        limits=httpx.Limits(max_connections=10, max_keepalive_connections=2),
    )


def check_url(config, url, what='The issuer'):
    """``url`` if a provider URL may be it: https (or http where private issuers are
    allowed), a host, no user info nor fragment; else ProviderError."""
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    schemes = ('https', 'http') if config.oidc_allow_private_issuers else ('https',)
    if (
        parts is None
        or parts.scheme not in schemes
        or not parts.hostname
        or parts.username is not None
        or parts.fragment
        or len(url) > 2048
    ):
        raise ProviderError('bad_url', f'{what} must be an https URL')
    return url


def _allowed(address):
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


# Name lookups run here so that one that hangs (getaddrinfo has no timeout of its own)
# costs the request no more than its deadline; two at a time per process.
_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=2)


def _resolve(config, host, port, deadline):
    """The address to connect to: the first the name resolves to, once every address
    it resolves to is allowed."""
    lookup = _resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        found = lookup.result(timeout=max(0.0, deadline - time.monotonic()))
    except concurrent.futures.TimeoutError:
        raise ProviderError(
            'timeout', f'{host} did not resolve within {TIMEOUT_SECONDS:g} s'
        ) from None
    except (OSError, UnicodeError):
        raise ProviderError('unreachable', f'{host} does not resolve') from None
    addresses = [ipaddress.ip_address(info[4][0].split('%')[0]) for info in found]
    if not config.oidc_allow_private_issuers and not all(map(_allowed, addresses)):
        raise ProviderError(
            'private_address',
            f'{host} resolves to a private or special-use address; the service calls '
            'no address inside its own network',
        )
    return addresses[0]


def request_json(config, method, url, data=None, auth=None):
    """The JSON object a provider answers to ``method url`` (``data``: a form body;
    ``auth``: (user, password) for HTTP Basic), within TIMEOUT_SECONDS in all."""
    check_url(config, url, 'A provider URL')
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == 'https' else 80)
    deadline = time.monotonic() + TIMEOUT_SECONDS
    address = _resolve(config, parts.hostname, port, deadline)
    literal = f'[{address}]' if address.version == 6 else str(address)
    pinned = parts._replace(netloc=f'{literal}:{port}').geturl()
    headers = {'Host': parts.netloc.rpartition('@')[2], 'Accept': 'application/json'}
    body = bytearray()
    import httpx  # imported at the first call: _client()

    try:
        with _client().stream(
            method,
            pinned,
            data=data,
            auth=auth,
            headers=headers,
            extensions={'sni_hostname': parts.hostname},
        ) as answer:
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise ProviderError('too_large', f'{url} answered too much')
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout('deadline')
            status = answer.status_code
    except httpx.TimeoutException:
        raise ProviderError(
            'timeout', f'{url} did not answer within {TIMEOUT_SECONDS:g} s'
        ) from None
    except httpx.HTTPError as failed:
        raise ProviderError('unreachable', f'{url} is unreachable ({failed})') from None
    if status != 200:
        raise ProviderError(f'http_{status}', f'{url} answered HTTP {status}')
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ProviderError('not_json', f'{url} did not answer JSON') from None
    if not isinstance(document, dict):
        raise ProviderError('not_json', f'{url} did not answer a JSON object')
    return document


def discover(config, issuer):
    """The provider's discovery document, checked as SPEC 19 says (ProviderError
    naming what failed otherwise)."""
    check_url(config, issuer)
    url = issuer.rstrip('/') + DISCOVERY_PATH
    document = request_json(config, 'GET', url)
    if document.get('issuer') != issuer:
        raise ProviderError(
            'issuer_mismatch',
            f'The discovery document names the issuer '
            f'{str(document.get("issuer"))[:200]!r}, not {issuer!r}',
        )
    for key in ('authorization_endpoint', 'token_endpoint', 'jwks_uri'):
        value = document.get(key)
        if not isinstance(value, str):
            raise ProviderError('incomplete', f'The discovery document has no {key}')
        check_url(config, value, key)
    if 'code' not in (document.get('response_types_supported') or ()):
        raise ProviderError(
            'incomplete', 'The provider does not support the "code" response type'
        )
    if 'S256' not in (document.get('code_challenge_methods_supported') or ()):
        raise ProviderError('incomplete', 'The provider does not support PKCE S256')
    return document
