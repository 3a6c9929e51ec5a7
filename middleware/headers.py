"""Headers every answer carries (SPEC 3.3), set in one place so no route can forget
them."""


class SecurityHeaders:
    """``X-Content-Type-Options: nosniff`` on every answer, errors included, and
    ``Cache-Control: no-store`` unless the resource set its own (cache_keys, SPEC 4.3).

    no-store everywhere else, rather than on a list of token-carrying answers: the user
    JSON (with ``access_token``) and echoed token headers reach most routes, and a list
    would be one more thing a new route could forget.
    """

    def process_response(self, req, resp, resource, req_succeeded):
        resp.set_header('X-Content-Type-Options', 'nosniff')
        if resp.get_header('Cache-Control') is None:
            resp.set_header('Cache-Control', 'no-store')
