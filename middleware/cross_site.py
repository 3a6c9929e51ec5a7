"""Form bodies from other sites are refused (SPEC 3.4).

A browser sends an HTML form (application/x-www-form-urlencoded or
multipart/form-data) to any site without asking it first (no CORS preflight), with the
page's ``Origin``. Such a body is accepted only from the service's own origin
(``FRONTEND_URL``, or the host the request was sent to: a dashboard served by the API's
own host, as the reference clients' harness serves it) and those of
``CORS_ALLOWED_ORIGINS``; a request without ``Origin`` (curl, the reference clients'
server-side code) is no browser's cross-site form and passes. JSON from another origin
needs a preflight, which CORS answers.
"""

import urllib.parse

import falcon

import errors

CROSS_SITE_FORM = {'error': 'Cross-site form refused'}
_FORM_TYPES = (falcon.MEDIA_URLENCODED, 'multipart/form-data')
_DEFAULT_PORTS = {'http': 80, 'https': 443}


def origin_of(url):
    """The origin a browser names for ``url``, without a default port.

    What is no URL at all (``http://[``: urlsplit and ``port`` raise) is returned as
    sent, so it matches no allowed origin: refused, never a 500.
    """
    try:
        parts = urllib.parse.urlsplit(url.strip().lower())
        port = parts.port
    except ValueError:
        return url
    host = parts.hostname or ''
    if ':' in host:
        host = f'[{host}]'
    shown = (
        '' if port is None or port == _DEFAULT_PORTS.get(parts.scheme) else f':{port}'
    )
    return f'{parts.scheme}://{host}{shown}'


class RefuseCrossSiteForms:
    """403 for a form body whose ``Origin`` is not FRONTEND_URL's or an allowed one.

    Only where a body is read (the method declares a schema): elsewhere it is ignored;
    and not where the resource lists the method in ``cross_site_forms`` (the start of
    single sign-on, SPEC 19: it only answers a redirect).
    """

    def __init__(self, frontend_url, allowed_origins):
        self._origins = frozenset(
            origin_of(url) for url in (frontend_url, *allowed_origins)
        )

    def process_resource(self, req, resp, resource, params):
        origin = req.get_header('Origin')
        if (
            origin is None
            or not getattr(resource, 'schemas', {}).get(req.method)
            or req.method in getattr(resource, 'cross_site_forms', ())
        ):
            return
        content_type = (req.content_type or '').strip().lower()
        if (
            not content_type.startswith(_FORM_TYPES)
            or origin_of(origin) in self._origins
        ):
            return
        # A browser names the host it sends to in Host; no other site's page changes it.
        same_host = _netloc(origin) == (req.get_header('Host') or '').lower()
        if not same_host:
            raise errors.APIError(falcon.HTTP_403, CROSS_SITE_FORM)


def _netloc(origin):
    try:
        return urllib.parse.urlsplit(origin.strip().lower()).netloc
    except ValueError:
        return None
