"""Rails routing semantics, in one place, before Falcon routes the request (SPEC 11)."""

import re

import falcon

_SLASHES = re.compile(r'//+')
FORMAT_SUFFIX = '.json'


def normalize(path, literal_paths=frozenset()):
    """``/api/v1//accounts/42.json/`` -> ``/api/v1/accounts/42``.

    Repeated slashes are one, one trailing slash is ignored, and a ``.json`` format
    suffix names the same route as the path without it (``literal_paths``, routes whose
    own name ends in .json such as the OpenAPI document, keep theirs). Any other suffix
    is left alone, so it matches no route: the JSON 404.
    """
    if '//' in path:
        path = _SLASHES.sub('/', path)
    if len(path) > 1 and path.endswith('/'):
        path = path[:-1]
    if path.endswith(FORMAT_SUFFIX) and path not in literal_paths:
        path = path[: -len(FORMAT_SUFFIX)]
        if len(path) > 1 and path.endswith('/'):
            path = path[:-1]
    return path or '/'


class RailsPaths:
    """Rewrite ``req.path`` as Rails' router reads it; Falcon then routes the result.

    The reference system's clients depend on it: the dashboard signs up at
    ``POST /api/v1/accounts.json`` and saves settings at
    ``PATCH /api/v1/accounts/42//``.
    """

    def __init__(self, literal_paths):
        self._literal = frozenset(literal_paths)

    def process_request(self, req, resp):
        req.path = normalize(req.path, self._literal)


class PathId(falcon.routing.BaseConverter):
    """``{account_id:id}``: a path id is ASCII digits, no sign, no leading zero, at
    most PostgreSQL's bigint; anything else matches no route, the JSON 404 (SPEC 3.4).

    Falcon's ``int`` converter takes what Python's ``int()`` does: ``+1``, ``007``,
    ``1_0`` and other scripts' digits (``\u0663``) would name id 1, 7, 10 and 3.
    """

    MAXIMUM = 2**63 - 1  # past it an id is unknown (404), not a database error

    def convert(self, value):
        if not (value.isascii() and value.isdigit()) or value.startswith('0'):
            return None
        number = int(value)
        return number if number <= self.MAXIMUM else None
