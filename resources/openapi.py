"""/api/v1/openapi.json: the API described from schemas/ and the route table."""

import orjson

import apidoc
from resources import JSON


class OpenAPIDocument:
    """The OpenAPI 3.1 document, built once when the app is."""

    access = {'GET': 'public'}
    responses = {'GET': {200: 'openapi'}}

    def __init__(self, route_table, validators):
        schemas = {stem: validator.schema for stem, validator in validators.items()}
        self.document = apidoc.build(
            [*route_table, (apidoc.OPENAPI_PATH, self)], schemas
        )
        self._body = orjson.dumps(self.document)

    def on_get(self, req, resp):
        """This document

        The OpenAPI 3.1 description of the API, which `/api/v1/docs` renders.
        """
        resp.data = self._body
        resp.content_type = JSON
