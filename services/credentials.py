"""The one "credential change" step of SPEC 3.3 that every credential event goes
through."""

from services import audit
from services import security_mail
from services import sessions
import tokens

# reason: (its audit event, its security e-mail or None) (SPEC 14)
ANNOUNCEMENTS = {
    'password_change': ('password_changed', 'password_changed'),
    'password_reset': ('password_reset', 'password_reset'),
    'confirmation': ('email_confirmed', None),
    'email_confirmation': ('email_change_confirmed', None),
    'reset_access_token': ('access_token_reset', 'access_token_reset'),
    'email_revert': ('email_change_reverted', None),
    'mfa_enabled': ('mfa_enabled', 'mfa_enabled'),
    'mfa_disabled': ('mfa_disabled', 'mfa_disabled'),
    # The reset link it mails says enough.
    'mfa_revert': ('mfa_enabled_reverted', None),
}
REASONS = frozenset(ANNOUNCEMENTS)
# The changes by which the mailbox takes the account back (SPEC 3.4, 17): they end the
# personal access tokens too, whoever made them. The others (a password or MFA change
# with a session, reset_access_token, confirming a new address) leave them: the owner
# lists and revokes them, and a takeover that made one is undone by a reset or revert.
REVOKES_PERSONAL_TOKENS = frozenset(
    ('password_reset', 'confirmation', 'email_revert', 'mfa_revert')
)


def change(
    conn,
    queries,
    config,
    user_id,
    *,
    reason,
    keep_client=None,
    rotate_pubsub=True,
    facts=None,
    session_id=None,
    mail_extra=None,
):
    """Rotate and revoke what an earlier holder of a credential could still use.

    Runs inside the caller's transaction, so the event and its consequences commit
    together. ``keep_client`` is the one sign-in token that stays (the caller's, or the
    one a reset or confirmation has just issued; None: none stays). One-time links are
    voided except revert links and the link confirming a still unconfirmed user's own
    address (sql/queries/credentials.sql says why); for REVOKES_PERSONAL_TOKENS, every
    personal access token is revoked. The change is also announced: its
    audit event and security e-mail (``facts``, ``session_id`` and ``mail_extra`` as for
    announce).
    """
    if reason not in REASONS:
        raise ValueError(f'unknown credential change {reason!r}')
    changed = conn.execute(
        queries['credentials.change'],
        {
            'user_id': user_id,
            'keep_client': keep_client,
            'access_token': tokens.new_token(),
            'pubsub_token': tokens.new_token() if rotate_pubsub else None,
            'revoke_personal_tokens': reason in REVOKES_PERSONAL_TOKENS,
        },
    ).fetchone()
    if keep_client is not None:
        # The statement above waited for the user row: the session it keeps must have
        # outlived whatever committed meanwhile (a lockout, SPEC 18), or the new access
        # token would reach whoever held it.
        sessions.require_kept(conn, queries, user_id, keep_client)
    revoked = changed['personal_tokens_revoked']
    if revoked:
        mail_extra = dict(mail_extra or {})
        mail_extra['lines'] = [
            *mail_extra.get('lines', ()),
            f'Personal access tokens revoked: {revoked}; integrations using them '
            'stopped working.',
        ]
    announce(
        conn,
        queries,
        config,
        user_id,
        reason,
        facts=facts,
        session_id=session_id,
        mail_extra=mail_extra,
        details={'personal_access_tokens_revoked': revoked} if revoked else None,
    )


def reset_access_token(conn, queries, config, caller, facts):
    """``POST /api/v1/profile/reset_access_token``: a new access token, minted only for
    a session that checked a password or a second factor recently (SPEC 3.4), in the
    caller's transaction; the caller's session stays."""
    sessions.require_recent_authentication(
        conn, queries, config, caller.id, caller.session_id
    )
    change(
        conn,
        queries,
        config,
        caller.id,
        reason='reset_access_token',
        keep_client=caller.token.client,
        rotate_pubsub=False,
        facts=facts,
    )


def end_other_sessions(conn, queries, config, caller, include_access_token, facts):
    """The owner ends every session but this one, and with ``include_access_token``
    replaces the access token too (SPEC 3.4; the reference dashboard asks for sessions
    only). Inside the caller's transaction; returns how many sessions ended.

    A replaced token is announced as reset_access_token is (its audit event and
    e-mail), but needs no recent authentication: it ends a credential, and the new one
    is read as the old one was (GET /api/v1/profile).
    """
    if include_access_token:
        conn.execute(
            queries['credentials.replace_access_token'],
            {'user_id': caller.id, 'access_token': tokens.new_token()},
        )
        # The row lock waited for whatever committed meanwhile (a lockout, a reset).
        sessions.require_kept(conn, queries, caller.id, caller.token.client)
    revoked = sessions.revoke_others(
        conn, queries, caller.id, caller.token.client, facts
    )
    if include_access_token:
        announce(conn, queries, config, caller.id, 'reset_access_token', facts=facts)
    return revoked


def announce(
    conn,
    queries,
    config,
    user_id,
    reason,
    *,
    facts=None,
    session_id=None,
    mail_extra=None,
    details=None,
):
    """The audit event and the security e-mail of a credential change (SPEC 14).

    ``facts``: the RequestFacts of the request that made the change (address, device,
    session);
    ``session_id``: the session a reset or confirmation has just opened, when there is
    one;
    ``mail_extra``: what the e-mail adds (security_mail.send's ``extra``);
    ``details``: the audit row's (what else the change ended).
    """
    event, mail_kind = ANNOUNCEMENTS[reason]
    audit.record(
        conn,
        queries,
        event,
        subject_id=user_id,
        actor_id=user_id,
        facts=facts,
        session_id=session_id,
        details=details,
    )
    if mail_kind is not None:
        security_mail.send_to_user(
            conn, queries, config, mail_kind, user_id, facts, mail_extra
        )


def lock_out(conn, queries, user_id):
    """End every credential of a member whose every membership is suspended (SPEC 18):
    sessions, the access token, personal access tokens (SPEC 17), pending second steps.

    Inside the suspension's transaction, with the user row locked and the membership
    already suspended (services/memberships.py). Returns how many sessions ended, or
    None when the user still has an active membership (then nothing is done).
    """
    row = conn.execute(
        queries['credentials.lock_out'],
        {
            'user_id': user_id,
            'access_token': tokens.new_token(),
            'pubsub_token': tokens.new_token(),
        },
    ).fetchone()
    return None if row is None else row['revoked']
