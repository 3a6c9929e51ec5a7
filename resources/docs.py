"""/api/v1/docs: the API reference page, Swagger UI rendering /api/v1/openapi.json.

Swagger UI's files come from the swagger-ui-py package (requirements.txt), served from
here: no CDN, so the page works offline and under its own strict Content-Security-Policy
(scripts and styles from this origin only, nothing inline).
"""

import importlib.util
import mimetypes
import pathlib

import falcon

DOCS_PATH = '/api/v1/docs'
STATIC = pathlib.Path(__file__).resolve().parent.parent / 'static'
# Only these files are served, by name.
ASSETS = {
    'swagger-ui-bundle.js': 'swagger_ui',
    'swagger-ui.css': 'swagger_ui',
    'favicon-32x32.png': 'swagger_ui',
    'api-docs.js': None,
}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Frontdesk API reference</title>
<link rel="icon" type="image/png" href="{DOCS_PATH}/assets/favicon-32x32.png">
<link rel="stylesheet" href="{DOCS_PATH}/assets/swagger-ui.css">
</head>
<body>
<noscript>This page needs JavaScript; the same content is at \
{DOCS_PATH.rsplit('/', 1)[0]}/openapi.json.</noscript>
<div id="swagger-ui"></div>
<script src="{DOCS_PATH}/assets/swagger-ui-bundle.js"></script>
<script src="{DOCS_PATH}/assets/api-docs.js"></script>
</body>
</html>
""".encode()


def _directory(package):
    if package is None:
        return STATIC
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise RuntimeError(f'{package} is not installed (requirements.txt)')
    return pathlib.Path(spec.submodule_search_locations[0]) / 'static'


def _secure(resp):
    resp.set_header('Content-Security-Policy', CONTENT_SECURITY_POLICY)


class DocsPage:
    """The API reference (HTML)."""

    access = {'GET': 'public'}
    # HTML and files, not JSON: left out of the OpenAPI document.
    undocumented = True

    def on_get(self, req, resp):
        _secure(resp)
        resp.content_type = falcon.MEDIA_HTML
        resp.data = PAGE


class DocsAsset:
    """One file of the page; read once, then kept (about 1.6 MB in all)."""

    access = {'GET': 'public'}
    # HTML and files, not JSON: left out of the OpenAPI document.
    undocumented = True

    def __init__(self):
        self._files = {}
        # Fail at start, not on the first visit, when the package is missing.
        for name, package in ASSETS.items():
            if not (_directory(package) / name).is_file():
                raise RuntimeError(f'API docs asset {name} is missing')

    def on_get(self, req, resp, name):
        if name not in ASSETS:
            raise falcon.HTTPNotFound()
        if name not in self._files:
            self._files[name] = (_directory(ASSETS[name]) / name).read_bytes()
        _secure(resp)
        resp.content_type = mimetypes.guess_type(name)[0]
        resp.cache_control = ['public', 'max-age=86400']
        resp.data = self._files[name]
