"""E-mail addresses: the one syntax check of SPEC 3.3, and masking for notices.

The pattern is ``schemas/definitions.json#/$defs/email``, the one the request schemas
of sign-up, profile and create-user use; sign-in and reset requests, whose schemas take
any string (their answers must not differ for a malformed address), call ``is_valid``.
"""

import functools
import json
import re

from validators import SCHEMAS_DIR


@functools.cache
def _definition():
    return json.loads((SCHEMAS_DIR / 'definitions.json').read_text())['$defs']['email']


@functools.cache
def _pattern():
    return re.compile(_definition()['pattern'])


def normalise(address):
    """Trimmed and lower-cased, as addresses are stored; '' for a non-string."""
    return address.strip().lower() if isinstance(address, str) else ''


def is_valid(address):
    """True for a string the contract accepts as an address (before normalising)."""
    return (
        isinstance(address, str)
        and len(address.strip()) <= _definition()['maxLength']
        and _pattern().search(address) is not None
    )


def mask(address):
    """``attacker@evil.example`` -> ``a******r@e***.example``: enough to recognise, not
    to copy."""
    local, _, domain = address.partition('@')
    host, dot, tld = domain.rpartition('.')
    return f'{_mask_part(local)}@{_mask_part(host)}{dot}{tld}'


def _mask_part(part):
    if len(part) <= 2:
        return part[:1] + '*'
    return part[0] + '*' * (len(part) - 2) + part[-1]
