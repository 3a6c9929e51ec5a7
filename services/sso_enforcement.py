"""Single sign-on enforced (SPEC 19): while an account's provider sets ``enforce``, an
address of its domains opens no session but through the provider.

Every way in that is not single sign-on asks here before it opens a session or an MFA
challenge: the password (services/sign_in.with_password, after the password proved
right, so the refusal tells nothing to whoever does not know it), the second sign-in
step of a challenge not opened by single sign-on, a reset link and a confirmation link
(these still do what they are for, and then answer the refusal instead of a session).
E-mail and MFA revert links open no session: they end them all and mail a reset link,
which then comes here.

Break glass: an active administrator of the provider's account with MFA on may still
sign in with password and second factor (the provider may be down); that sign-in, once
its second step succeeds, mails every administrator of the account and writes the audit
event ``sso_break_glass``.
"""

import errors
from services import audit
from services import mail
from services import security_mail
from services import sessions
import tokens

SSO_REQUIRED = {
    'success': False,
    'errors': ["Sign in with your organisation's single sign-on"],
    'error_code': 'sso_required',
}


ADVICE = (
    'If you expected this (the identity provider is down, say), there is nothing to '
    "do. If not, end that administrator's sessions and reset their password."
)


class Required(errors.Unauthenticated):
    """The 401 sso_required: right credentials, but only single sign-on opens a
    session for this address."""

    def __init__(self):
        super().__init__(SSO_REQUIRED)


def state(conn, queries, user_id=None, challenge_digest=None):
    """The enforcing provider's ``account_id`` and ``break_glass`` for the user (or for
    the user of a challenge not opened by single sign-on, sso.enforce_state); None when
    nothing is enforced for that address."""
    return conn.execute(
        queries['sso.enforce_state'],
        {'user_id': user_id, 'challenge_digest': challenge_digest},
    ).fetchone()


def for_challenge(conn, queries, mfa_token):
    """state() of the user of the MFA challenge ``mfa_token`` unless single sign-on
    opened it; read before the second step uses the challenge up."""
    if not isinstance(mfa_token, str) or not mfa_token:
        return None
    return state(conn, queries, challenge_digest=tokens.digest(mfa_token))


def refused(conn, queries, user_id):
    """Whether a link's way in must end in the refusal rather than a session or a
    challenge: enforced, and no break glass (whose MFA challenge comes as usual).

    A user locked out everywhere (SPEC 18) gets the 401 account_suspended first, as a
    session or challenge would: it rolls the link's work back.
    """
    found = state(conn, queries, user_id=user_id)
    if found is None or found['break_glass']:
        return False
    sessions.refuse_locked_out(conn, queries, user_id)
    return True


def break_glass(conn, queries, config, enforced, user, session_id, facts):
    """A break-glass sign-in completed (``enforced``: its state()): the audit event,
    and a notice to every active administrator of the account (the one who signed in
    included), in the sign-in's transaction."""
    account_id = enforced['account_id']
    audit.record(
        conn,
        queries,
        'sso_break_glass',
        actor_id=user['id'],
        subject_id=user['id'],
        account_id=account_id,
        facts=facts,
        session_id=session_id,
    )
    lines = [mail.FromRequest('Signed in: ', user['name']), f'Address: {user["email"]}']
    security_mail.send_to_administrators(
        conn,
        queries,
        config,
        'sso_break_glass',
        account_id,
        facts,
        {'lines': lines, 'advice': ADVICE},
    )
