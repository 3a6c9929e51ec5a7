"""/api/v1/password_policy: the password rules, for clients to show before
submitting."""

from services import passwords


class PasswordPolicy:
    """The rules of SPEC 15 that a new password must pass."""

    access = {'GET': 'public'}
    responses = {'GET': {200: 'password_policy'}}

    def __init__(self, config):
        self._policy = passwords.policy(config)

    def on_get(self, req, resp):
        resp.media = self._policy
