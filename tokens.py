"""Random credentials, their digests, and the devise_token_auth response headers."""

import hashlib
import secrets

# The five headers of a token (SPEC 3): new ones after signing in, the same ones echoed
# on the successes of requests authenticated with them.
TOKEN_HEADERS = ('access-token', 'token-type', 'client', 'expiry', 'uid')


def new_token():
    """A 256-bit random token, URL-safe; only its digest is ever stored."""
    return secrets.token_urlsafe(32)


def new_client_id():
    return secrets.token_urlsafe(16)


def digest(token):
    return hashlib.sha256(token.encode('utf-8', 'surrogatepass')).digest()


def set_headers(resp, token, client, expires_at, uid):
    """The five headers a client stores to authenticate its next requests."""
    resp.set_header('access-token', token)
    resp.set_header('token-type', 'Bearer')
    resp.set_header('client', client)
    resp.set_header('expiry', str(int(expires_at.timestamp())))
    resp.set_header('uid', uid)
