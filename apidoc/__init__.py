"""The OpenAPI 3.1 document of /api/v1/openapi.json, built once from ``schemas/`` and
the route table.

engine.py builds it from what each resource declares; responses.py names the answers
and their headers; examples.py adds the tags and examples a reader of /api/v1/docs
needs.
"""

from apidoc.engine import build
from apidoc.engine import component_name
from apidoc.engine import components
from apidoc.engine import OPENAPI_PATH
from apidoc.engine import refs
from apidoc.examples import EXAMPLES
from apidoc.examples import REQUEST_EXAMPLES

__all__ = [
    'build',
    'component_name',
    'components',
    'EXAMPLES',
    'OPENAPI_PATH',
    'refs',
    'REQUEST_EXAMPLES',
]
