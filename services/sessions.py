"""Sessions (sign-in tokens, SPEC 13): issuing one, the per-user cap, listing and ending
them."""

import datetime

import orjson

import errors
from services import audit
from services import devices
from services import security_mail
from services.devices import request_device
import tokens

BROWSER_MARK = 'Mozilla'
NO_SESSION = 0  # an id no session has: the "current" of a list seen from outside
# A session's last activity is stamped at most this often (SPEC 13), so a read stays one
# query; with an idle timeout shorter than twice this, at half the timeout.
TOUCH_AFTER = datetime.timedelta(minutes=5)


class PasswordChanged(Exception):
    """The password verified a moment ago is no longer the user's (or MFA came on)."""


class Issued(tokens.Session):
    """A new session's token headers; ``.id`` is the session's id."""

    def __new__(cls, token, client, expires_at, session_id):
        issued = super().__new__(cls, token, client, expires_at)
        issued.id = session_id
        return issued


def touch_after(config):
    """How often at most a session's last activity is stamped (middleware/auth.py)."""
    return min(TOUCH_AFTER, datetime.timedelta(seconds=config.idle_seconds / 2))


def issue(
    conn,
    queries,
    config,
    user_id,
    facts=None,
    picker=False,
    method='password',
    sso=None,
):
    """Store a new session for ``user_id``; return its Issued.

    ``method``: how it was opened, 'password' or 'link' (a confirmation or reset link);
    with ``sso`` (sso_account_id, sso_sid, sso_sub of the sso_auth_token, SPEC 19) it
    is 'sso', and records the provider's session for back-channel logout.

    Must run inside a transaction: the user row stays locked until it commits, so
    parallel sign-ins of one user cannot overrun MAX_USER_SESSIONS, and a suspension
    cannot slip between the check of refuse_locked_out and the new session. At the cap
    the least recently active session ends, unless ``picker`` (a browser's password
    sign-in), which is the 409 of SPEC 13 instead (errors.SessionsLimitReached).
    """
    refuse_locked_out(conn, queries, user_id)
    if picker:
        live = list_for(conn, queries, config, user_id)
        if live['count'] >= config.max_user_sessions:
            raise errors.SessionsLimitReached(orjson.loads(live['sessions']))
    token, client = tokens.new_token(), tokens.new_client_id()
    issued = conn.execute(
        queries['sessions.issue'],
        {
            'user_id': user_id,
            'client': client,
            'token_digest': tokens.digest(token),
            'lifespan_days': config.token_lifespan_days,
            'keep': config.max_user_sessions - 1,
            'idle_seconds': config.idle_seconds,
            'touch_seconds': touch_after(config).total_seconds(),
            **request_device(facts),
            'sign_in_method': 'sso' if sso else method,
            'sso_account_id': sso and sso['sso_account_id'],
            'sso_sid': sso and sso['sso_sid'],
            'sso_sub': sso and sso['sso_sub'],
        },
    ).fetchone()
    return Issued(token, client, issued['expires_at'].timestamp(), issued['id'])


def refuse_locked_out(conn, queries, user_id):
    """Lock the user row (users.lock_for_token); 401 ``account_suspended`` when every
    membership of the user is suspended (SPEC 18).

    Every session (issue) and every sign-in challenge (mfa.issue_challenge) is issued
    behind this check, so no path that signs in (password, second step, reset,
    confirmation) lets a locked-out member in. A suspension locks the same row
    (services/memberships.py): a sign-in racing it either commits first, and the
    suspension then revokes what it issued, or waits and is refused here.
    """
    conn.execute(queries['users.lock_for_token'], {'user_id': user_id})
    if conn.execute(queries['users.locked_out'], {'user_id': user_id}).fetchone()[
        'locked_out'
    ]:
        raise errors.AccountSuspended()


def list_for(conn, queries, config, user_id, current_id=NO_SESSION):
    """{'sessions': JSON text of the live sessions, 'count': how many}."""
    return conn.execute(
        queries['sessions.list'],
        {
            'user_id': user_id,
            'current_id': current_id,
            'idle_seconds': config.idle_seconds,
        },
    ).fetchone()


def revoke_others(conn, queries, user_id, keep_client, facts=None):
    """End every session of the user but ``keep_client``'s; audit it; return how
    many."""
    row = conn.execute(
        queries['sessions.revoke_others'],
        {'user_id': user_id, 'keep_client': keep_client},
    ).fetchone()
    if row['revoked']:
        audit.record(
            conn,
            queries,
            'session_revoked',
            subject_id=user_id,
            actor_id=user_id,
            facts=facts,
            details={'session_ids': row['ids']},
        )
    return row['revoked']


def revoke_one(conn, queries, user_id, session_id, facts=None):
    """End one session of the user; False when the user has none with that id."""
    if (
        conn.execute(
            queries['sessions.revoke_by_id'],
            {'user_id': user_id, 'session_id': session_id},
        ).fetchone()
        is None
    ):
        return False
    audit.record(
        conn,
        queries,
        'session_revoked',
        subject_id=user_id,
        actor_id=user_id,
        facts=facts,
        details={'session_ids': [session_id]},
    )
    return True


def recently_authenticated(conn, queries, config, session_id):
    """Whether session ``session_id`` checked a password or a second factor within
    REAUTH_WINDOW_MINUTES (SPEC 3.4); False for no session (an integration token).

    A session that is gone since the access rules found it (a lockout, SPEC 18; a
    reset; the owner ending sessions) is the 401 of a revoked credential: asked with the
    user row locked, this sees what committed while the request waited for it.
    """
    if session_id is None:
        return False
    row = conn.execute(
        queries['sessions.recently_authenticated'],
        {'session_id': session_id, 'window_minutes': config.reauth_window_minutes},
    ).fetchone()
    if row is None:
        raise errors.Unauthenticated()
    return row['recent']


def require_recent_authentication(conn, queries, config, user_id, session_id):
    """403 reauthentication_required unless session ``session_id`` checked a password
    or a second factor within REAUTH_WINDOW_MINUTES (SPEC 3.4: minting a credential).

    Locks the user row first (serialising what the caller mints next), so that a session
    a lockout (SPEC 18) or a reset ended while this waited is the 401 of a revoked one.
    """
    conn.execute(queries['users.lock_for_token'], {'user_id': user_id})
    if not recently_authenticated(conn, queries, config, session_id):
        raise errors.ReauthenticationRequired()


def require_kept(conn, queries, user_id, client):
    """401 when the caller's session ``client`` is gone since the access rules found
    it. For a request that acts with a session and hands out a credential (a new access
    token, a personal access token): asked with the user row locked, so that what a
    lockout (SPEC 18), a reset or the owner ending sessions ended while the request
    waited for that row stays ended, and nothing new reaches the caller."""
    if not conn.execute(
        queries['sessions.kept'], {'user_id': user_id, 'client': client}
    ).fetchone()['kept']:
        raise errors.Unauthenticated()


def mark_authenticated(conn, queries, session_id):
    """Session ``session_id`` has just checked the user's password or a second
    factor."""
    if session_id is not None:
        conn.execute(queries['sessions.mark_authenticated'], {'session_id': session_id})


def check_password_unchanged(conn, queries, user_id, verified_hash):
    """Lock the user; raise PasswordChanged unless ``verified_hash`` is still its
    password."""
    lock = conn.execute(
        queries['users.lock_for_token'], {'user_id': user_id}
    ).fetchone()
    if lock is None or lock['encrypted_password'] != verified_hash:
        # None: erased (SPEC 20) since the password was checked.
        raise PasswordChanged()
    return lock


def sign_in(
    conn,
    queries,
    config,
    user,
    choices,
    facts,
    second_factor=False,
    sso=None,
):
    """A password sign-in (SPEC 13): the sessions the user chose to end (``choices``,
    the request's ``revoke_session_id`` or ``revoke_all_sessions``), the new one, its
    audit event and, from a browser and platform new to this user, the security e-mail.
    ``user['encrypted_password']`` is the hash the password was checked against.

    Inside the caller's transaction; raises PasswordChanged or SessionsLimitReached
    (nothing is then written). The second step of an MFA sign-in (``second_factor``)
    never raises SessionsLimitReached: the reference dashboard's code form has no
    session picker (SPEC 12), so at the cap it ends the least recently active session.
    With ``sso`` (the row of an sso_auth_token or of the MFA challenge that followed
    it, SPEC 19) it is a single-sign-on session, and the provider's ``amr`` may stand
    for the second factor (``idp_second_factor``). Returns the Issued session.
    """
    user_id = user['id']
    # The password was checked outside this lock; MFA may have come on since (SPEC 12)
    # unless this is the second step, which checked a code under the lock.
    lock = check_password_unchanged(conn, queries, user_id, user['encrypted_password'])
    if lock['mfa_enabled'] and not (
        second_factor or (sso and sso['idp_second_factor'])
    ):
        raise PasswordChanged()
    if choices.get('revoke_all_sessions') is True:
        revoke_others(conn, queries, user_id, None, facts)
    elif choices.get('revoke_session_id') is not None:
        revoke_one(conn, queries, user_id, choices['revoke_session_id'], facts)
    device = request_device(facts)
    seen = conn.execute(
        queries['sessions.known_device'],
        {
            'user_id': user_id,
            'browser_name': device['browser_name'],
            'platform_name': device['platform_name'],
        },
    ).fetchone()
    issued = issue(
        conn,
        queries,
        config,
        user_id,
        facts=facts,
        # A browser's password step picks what to end at the cap.
        picker=BROWSER_MARK in ((facts and facts.user_agent) or '')
        and not second_factor,
        sso=sso,
    )
    audit.record(
        conn,
        queries,
        'sign_in_succeeded',
        subject_id=user_id,
        actor_id=user_id,
        facts=facts,
        session_id=issued.id,
        details={key: device[key] for key in devices.FIELDS},
    )
    if seen['has_history'] and not seen['known']:
        security_mail.send(
            conn,
            queries,
            config,
            'new_device_sign_in',
            user_id=user_id,
            to_address=user['email'],
            name=user['name'],
            facts=facts,
        )
    return issued


def end_member_sessions(
    conn, queries, config, account_id, user_id, include_access_token, facts
):
    """An administrator ends every session of a member (SPEC 13): audit and e-mail it.

    Returns the member's row with ``revoked``, or None when ``user_id`` is not a member.
    """
    params = {'account_id': account_id, 'user_id': user_id}
    conn.execute(queries['sessions.lock_member'], params)
    member = conn.execute(
        queries['sessions.end_member_sessions'],
        {
            **params,
            'new_access_token': tokens.new_token() if include_access_token else None,
        },
    ).fetchone()
    if member is None:
        return None
    audit.record(
        conn,
        queries,
        'sessions_ended_by_administrator',
        subject_id=user_id,
        account_id=account_id,
        facts=facts,
        details={
            'revoked': member['revoked'],
            'access_token_replaced': member['access_token_reset'],
        },
    )
    lines = [f'Signed out by: {facts.caller_email}']
    if member['access_token_reset']:
        lines.append(
            'Your API access token was replaced too; integrations using it stopped '
            'working.'
        )
    security_mail.send(
        conn,
        queries,
        config,
        'sessions_ended_by_administrator',
        user_id=user_id,
        to_address=member['email'],
        name=member['name'],
        facts=facts,
        extra={'lines': lines},
    )
    return member
