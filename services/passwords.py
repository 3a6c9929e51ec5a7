"""bcrypt, with the 72-byte limit enforced by the schemas before it is reached."""

import functools

import bcrypt


def hash_password(password, rounds):
    return bcrypt.hashpw(password.encode('utf-8'), bcrypt.gensalt(rounds)).decode('ascii')


def check_password(password, hashed):
    """True when ``password`` matches; False for any unusable input, never an error."""
    try:
        return bcrypt.checkpw(password.encode('utf-8'), hashed.encode('ascii'))
    except (ValueError, UnicodeEncodeError):
        return False


@functools.lru_cache(maxsize=4)
def dummy_hash(rounds):
    """A hash to check against when the address is unknown, so timing tells nothing."""
    return hash_password('not a password of anyone', rounds)
