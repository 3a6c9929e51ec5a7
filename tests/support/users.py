"""Users the tests make: unique addresses, the password, the sign-in headers."""

import dataclasses
import uuid

PASSWORD = 'correct horse 1'
TEST_SECRET_KEY = 'ZnJvbnRkZXNrIHRlc3RzIGtleSBvZiAzMiBieXRlcyE='


def unique_email(prefix='user'):
    return f'{prefix}-{uuid.uuid4().hex[:10]}@example.com'


@dataclasses.dataclass
class User:
    id: int
    email: str
    password: str
    token: str
    client: str
    access_token: str

    @property
    def headers(self):
        """The devise_token_auth headers a signed-in client sends."""
        return {'access-token': self.token, 'client': self.client, 'uid': self.email}
