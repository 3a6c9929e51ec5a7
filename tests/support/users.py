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


def insert_personal_tokens(conn, user_id, count):
    """``count`` live personal access tokens of ``user_id`` (names 'old 1'...), made
    in the database: for tests that need a user near the cap of 50."""
    conn.execute(
        'INSERT INTO personal_access_tokens (user_id, name, token_digest, scopes,'
        " expires_at) SELECT %s, 'old ' || i, sha256(('t' || i || '-' || %s)::bytea),"
        " '{profile:read}', now() + interval '1 day' FROM generate_series(1, %s) i",
        (user_id, str(user_id), count),
    )
