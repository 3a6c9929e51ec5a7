"""The one "credential change" step of SPEC 3.3 that every credential event goes through."""

import tokens

REASONS = frozenset(('password_change', 'password_reset', 'confirmation', 'email_confirmation',
                     'reset_access_token', 'email_revert', 'mfa_enabled', 'mfa_disabled'))


def change(conn, queries, config, user_id, *, reason, keep_client=None, rotate_pubsub=True):
    """Rotate and revoke what an earlier holder of a credential could still use.

    Runs inside the caller's transaction, so the event and its consequences commit
    together. ``keep_client`` is the one sign-in token that stays (the caller's, or the
    one a reset or confirmation has just issued; None: none stays). One-time links are
    voided except e-mail revert links and the link confirming a still unconfirmed user's
    own address (sql/queries/credentials.sql says why).
    """
    if reason not in REASONS:
        raise ValueError(f'unknown credential change {reason!r}')
    conn.execute(queries['credentials.change'], {
        'user_id': user_id,
        'keep_client': keep_client,
        'access_token': tokens.new_token(),
        'pubsub_token': tokens.new_token() if rotate_pubsub else None,
    })
