"""/api/v1/profile and its sub-resources: the caller's own user."""

from resources import send_json_text


class Profile:
    access = {'GET': 'user'}

    def on_get(self, req, resp):
        # TokenAuth rendered the user JSON in the query that authenticated the caller.
        send_json_text(resp, req.context.caller.doc_text)
