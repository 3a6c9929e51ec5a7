"""Sign-in tokens: issuing one (sign-in, sign-up, confirmation, password reset)."""

import tokens


class PasswordChanged(Exception):
    """The password verified a moment ago is no longer the user's."""


def issue(conn, queries, config, user_id, verified_hash=None):
    """Store a new token for ``user_id``; return (token, client, expires_at).

    Must run inside a transaction: the user row stays locked until it commits, so
    parallel sign-ins of one user cannot overrun MAX_TOKENS_PER_USER.
    """
    row = conn.execute(queries['users.lock_for_token'], {'user_id': user_id}).fetchone()
    if verified_hash is not None and row['encrypted_password'] != verified_hash:
        raise PasswordChanged()
    token, client = tokens.new_token(), tokens.new_client_id()
    issued = conn.execute(queries['sessions.issue'], {
        'user_id': user_id,
        'client': client,
        'token_digest': tokens.digest(token),
        'lifespan_days': config.token_lifespan_days,
        'keep': config.max_tokens_per_user - 1,
    }).fetchone()
    return token, client, issued['expires_at']
