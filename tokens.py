"""Random credentials, their digests, secrets sealed for storage, and the
devise_token_auth response headers."""

import functools
import hashlib
import os
import re
import secrets
import string
from typing import NamedTuple
import zlib

# The five headers of a token (SPEC 3): new ones after signing in, the same ones echoed
# on the successes of requests authenticated with them.
TOKEN_HEADERS = ('access-token', 'token-type', 'client', 'expiry', 'uid')


class Session(NamedTuple):
    """A sign-in as its token headers carry it: a new one (services.sessions.issue), or
    the one a request authenticated with (``Caller.token``)."""

    token: str
    client: str
    # Seconds since the epoch, as the expiry header gives it.
    expires_at: float


def new_token():
    """A 256-bit random token, URL-safe; only its digest is ever stored."""
    return secrets.token_urlsafe(32)


# Personal access tokens (SPEC 17): the prefix lets secret scanners recognise them, the
# checksum lets them (and the service, before any database lookup) tell one from a typo.
PERSONAL_PREFIX = 'fdpat_'
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_SECRET_LENGTH = 32  # about 190 bits
_CHECKSUM_LENGTH = 6  # 62**6 > 2**32: a CRC32 fits
_PERSONAL_TOKEN = re.compile(
    re.escape(PERSONAL_PREFIX) + f'([0-9A-Za-z]{{{_SECRET_LENGTH}}})([0-9A-Za-z]{{6}})'
)


def _base62(number, width):
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return ''.join(reversed(digits))


def _checksum(secret):
    """A CRC32 of the random part, as 6 base62 characters (zero-padded)."""
    return _base62(zlib.crc32(secret.encode('ascii')), _CHECKSUM_LENGTH)


def new_personal_token():
    """``fdpat_`` + 32 random base62 characters + their 6-character checksum."""
    secret = ''.join(secrets.choice(_BASE62) for _ in range(_SECRET_LENGTH))
    return PERSONAL_PREFIX + secret + _checksum(secret)


def is_personal_token(text):
    """Whether ``text`` is a well-formed personal access token: prefix, alphabet,
    length and checksum (no database involved)."""
    match = _PERSONAL_TOKEN.fullmatch(text)
    return match is not None and _checksum(match.group(1)) == match.group(2)


def new_client_id():
    return secrets.token_urlsafe(16)


def digest(token):
    return hashlib.sha256(token.encode('utf-8', 'surrogatepass')).digest()


def set_headers(resp, session, uid):
    """The five headers of ``session`` (a Session) a client stores to authenticate its
    next requests."""
    resp.set_header('access-token', session.token)
    resp.set_header('token-type', 'Bearer')
    resp.set_header('client', session.client)
    resp.set_header('expiry', str(int(session.expires_at)))
    resp.set_header('uid', uid)


# Secrets at rest (the TOTP secrets of SPEC 12, a provider's client secret of SPEC 19):
# AES-256-GCM under a key derived from SECRET_KEY with a label of their own, so one
# SECRET_KEY keys each kind apart. The version byte leads every stored value so a later
# key or algorithm can be told apart; the associated data binds a value to its row.
_SEAL_VERSION = b'\x01'
_NONCE_BYTES = 12


@functools.lru_cache(maxsize=8)
def _aead(secret_key, label):
    # cryptography is imported at a worker's first sealed value (a two-factor sign-in
    # or setup, single sign-on's state): about 7 MB a worker that serves only the hot
    # paths does not carry (against the house rule of imports at the top, for that
    # reason; docs/performance.md, "Worker memory").
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(
        secret_key
    )
    return AESGCM(key)


def seal(secret_key, label, associated, text):
    """``text`` encrypted for storage under ``label``, bound to ``associated``."""
    nonce = os.urandom(_NONCE_BYTES)
    sealed = _aead(secret_key, label).encrypt(nonce, text.encode(), associated)
    return _SEAL_VERSION + nonce + sealed


def unseal(secret_key, label, associated, stored):
    """The text ``seal`` stored; None when it cannot be read with this key (changed
    SECRET_KEY, a value copied to another row, tampering)."""
    if stored is None or secret_key is None:
        return None
    stored = bytes(stored)
    if stored[:1] != _SEAL_VERSION:
        return None
    nonce, sealed = stored[1 : 1 + _NONCE_BYTES], stored[1 + _NONCE_BYTES :]
    aead = _aead(secret_key, label)
    from cryptography.exceptions import InvalidTag  # loaded by _aead already

    try:
        return aead.decrypt(nonce, sealed, associated).decode()
    except InvalidTag:
        return None
