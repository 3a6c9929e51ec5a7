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
        """The password rules

        What a new password must pass, so a client can show the rules before submitting:
        8 characters to 72 bytes, not a common password, not containing your name or
        e-mail, not the current one (and not a known breached one when the operator
        turned that check on).
        """
        resp.media = self._policy
