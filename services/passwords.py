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


def change(conn, queries, config, user_id, new_password, keep_client=None, confirm=False):
    """Set a new password and revoke every token but ``keep_client``'s, atomically.

    ``confirm`` also confirms an unconfirmed user (a password reset proves the address).
    """
    hashed = hash_password(new_password, config.bcrypt_rounds)
    with conn.transaction():
        conn.execute(queries['users.set_password'],
                     {'user_id': user_id, 'encrypted_password': hashed, 'confirm': confirm})
        conn.execute(queries['sessions.revoke_others'], {'user_id': user_id, 'keep_client': keep_client})
