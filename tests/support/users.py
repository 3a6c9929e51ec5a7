"""Users the tests make: unique addresses, the password, the sign-in headers."""

import dataclasses
import itertools
import uuid

PASSWORD = 'correct horse 1'
TEST_SECRET_KEY = 'ZnJvbnRkZXNrIHRlc3RzIGtleSBvZiAzMiBieXRlcyE='


def unique_email(prefix='user'):
    return f'{prefix}-{uuid.uuid4().hex[:10]}@example.com'


_addresses = itertools.count(1)


def unique_ip():
    """A client address (X-Real-IP) that no other test of this process sends: the audit
    log and the rate limits count per address, and a worker's tests share its database.
    Counted, not drawn at random: two tests that drew the same of 250 addresses saw each
    other's audit rows. From 100.64.0.0/10, which no test names itself."""
    n = next(_addresses)
    return f'100.{64 + (n >> 16 & 63)}.{n >> 8 & 255}.{n & 255}'


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
