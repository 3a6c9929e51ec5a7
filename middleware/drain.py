"""Read the rest of a request body the app answered without reading."""

import contextlib


class DrainRequestBody:
    """After an early answer (401, 404, 415...), read what is left of the body.

    gunicorn's sync worker closes the connection after each response. With body bytes
    still unread that close is a reset, and nginx, still sending the body it buffered,
    answers 502 instead of passing on the app's response. nginx caps bodies at
    ``limit``, so the rest is cheap to read; a bigger one (a client talking to gunicorn
    directly) is left unread.
    """

    def __init__(self, limit):
        self._limit = limit

    def process_response(self, req, resp, resource, req_succeeded):
        if req.content_length and req.content_length <= self._limit:
            with contextlib.suppress(OSError):
                req.bounded_stream.exhaust()
