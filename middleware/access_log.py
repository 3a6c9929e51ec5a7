"""One access line per request, written by the app (not gunicorn's access log).

The app knows what gunicorn does not: the client address it believes (X-Real-IP from a
trusted proxy) and the request id. Headers, bodies and the query string, where tokens
and passwords travel, are never logged.
"""

import logging
import time

from logs import escape

log = logging.getLogger('frontdesk.access')


class AccessLog:
    """First in the middleware list, so its process_response runs last."""

    def process_request(self, req, resp):
        req.context.started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded):
        started = req.context.get('started')
        duration = (time.perf_counter() - started) * 1000 if started else 0.0
        log.info(
            'access',
            extra={
                'fields': {
                    'client_ip': req.context.get('client_ip') or req.remote_addr,
                    'method': req.method,
                    'path': escape(req.path),
                    'status': resp.status_code,
                    'duration_ms': f'{duration:.1f}',
                    'request_id': req.context.get('request_id', '-'),
                }
            },
        )
