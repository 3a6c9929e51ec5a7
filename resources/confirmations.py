"""/auth/confirmation, /auth/password, /auth/email_revert, /auth/mfa_revert,
/resend_confirmation and /api/v1/profile/resend_confirmation.

Using a confirmation, reset or revert link is a credential change (SPEC 3.3): it keeps
no sign-in token but the one it issues.
"""

from resources import presented_sessions
from resources import send_outcome
from services import addresses
from services import captcha
from services import credentials
from services import mail
from services import profiles
from services import sign_in

RESET_REQUESTED = {
    'message': 'Request for password reset is successful. '
    'A email with instructions will be sent to your email if it exists.'
}


class Confirmation:
    """Confirm the address a confirmation link was mailed to, and sign in (SPEC 3.1)."""

    access = {'POST': 'public'}
    responses = {
        'POST': {
            200: 'signed_in',
            206: 'mfa_challenge',
            401: ('account_suspended', 'sso_required'),
        }
    }
    schemas = {'POST': 'confirmation_create'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Confirm an e-mail address

        With the `confirmation_token` of the mailed link
        (`.../app/auth/confirmation?confirmation_token=T`): confirms the address (a
        pending new one becomes `email`) and signs in. A user's first confirmation
        made without a live session of that user (token headers or the dashboard's
        `cw_d_session_info` cookie) also mails the address a notice with a
        password-reset link. Tokens work once and expire after 3 days. Answers with
        the five token headers (`access-token`, `token-type`, `client`, `expiry`,
        `uid`). For a user with two-factor sign-in: confirms, then 206 with an
        `mfa_token` for the second step of `POST /auth/sign_in`, no token headers.
        Where single sign-on is enforced for the address's domain: confirms and ends
        every session as above, then answers 401 `sso_required` instead of a session
        (an administrator of that account with MFA gets the 206: break glass).
        """
        outcome = sign_in.confirm(
            self._pool,
            self._queries,
            self._config,
            req.context.doc,
            req.context.facts,
            presented_sessions(req),
        )
        send_outcome(resp, outcome)


class Password:
    """Ask for a password reset link (POST), and use it (PUT) (SPEC 3.1)."""

    access = {'POST': 'public', 'PUT': 'public'}
    responses = {
        'POST': {200: 'reset_requested'},
        'PUT': {
            200: 'signed_in',
            206: 'mfa_challenge',
            401: ('account_suspended', 'sso_required'),
        },
    }
    rate_limits = {'POST': (('ip', 5, 30 * 60),)}
    schemas = {'POST': 'password_reset_create', 'PUT': 'password_reset_update'}
    # A bad link is reported before the password rules: no new password can fix it.
    deferred_validation = {'PUT'}

    def __init__(self, pool, queries, config, validators):
        self._pool = pool
        self._queries = queries
        self._config = config
        self._validator = validators['password_reset_update']

    def on_post(self, req, resp):
        """Ask for a password reset link

        Always the same answer, whether or not the address belongs to a user; a user
        gets a link (`.../app/auth/password/edit?reset_password_token=T`), valid 6
        hours.
        """
        email = req.context.doc.get('email')
        # No mail to what is not one address (SPEC 3.3: "root,victim@example.com").
        if addresses.is_valid(email):
            with self._pool.connection() as conn:
                with conn.transaction():
                    mail.request_password_reset(
                        conn, self._queries, self._config, addresses.normalise(email)
                    )
        resp.media = RESET_REQUESTED

    def on_put(self, req, resp):
        """Set a new password with a reset link

        With the `reset_password_token` of the mailed link: sets the password, confirms
        the address, ends every other session and signs in. Answers with the five token
        headers (`access-token`, `token-type`, `client`, `expiry`, `uid`). For a user
        with two-factor sign-in: sets the password, ends every session, then 206 with an
        `mfa_token` for the second step of `POST /auth/sign_in`, no token headers.
        Where single sign-on is enforced for the address's domain: the password is set
        and every session ends all the same (a reset is how the owner of the mailbox
        takes the account back), but no session opens: 401 `sso_required`, since that
        password signs nobody in while single sign-on is enforced. An administrator of
        that account with MFA gets the 206 (break glass).
        """
        outcome = sign_in.reset_password(
            self._pool,
            self._queries,
            self._config,
            self._validator,
            req.context.doc,
            req.context.facts,
        )
        send_outcome(resp, outcome)


def _resend(pool, queries, config, user_id=None, email=None):
    """Mail a fresh confirmation link when the user has an address to confirm
    (SPEC 5.7).

    A signed-in user's link to a pending address counts as an e-mail change (SPEC 3.3:
    at most 5 a day), taken or not, so the 429 of the next change tells nothing. An
    anonymous resend (``email``) never spends that quota: anyone could use it up, and
    tell a taken pending address from a free one by it; mail to one address is bounded
    per address instead (mail.sql, SPEC 3.4). Without a user to mail, the same
    statements run (mail.request_confirmation).
    """
    with pool.connection() as conn:
        with conn.transaction():
            row = conn.execute(
                queries['confirmations.address_to_confirm'],
                {'user_id': user_id, 'email': email},
            ).fetchone()
            if (
                row is not None
                and row['new_address']
                and user_id is not None
                and profiles.email_changes_exhausted(conn, queries, row['id'])
            ):
                row = None
            if row is not None and row['taken']:
                row = None
            # The signed-in resend has no address to hide: nothing to confirm, nothing
            # to do.
            if row is not None or email is not None:
                mail.request_confirmation(conn, queries, config, row, email)


class RevertLink:
    """Undo a change from the "this was not me" link mailed about it (SPEC 3.3, 12).

    ``email_revert``: the link mailed to the old address of an e-mail change; the old
    address comes back and the pending change goes. ``mfa_revert``: the link of the
    MFA-enabled e-mail; MFA goes off, if that enablement is still the user's. Either way
    every sign-in token and the access token are revoked and the password cleared
    (whoever made the change may know it), and a reset link goes to the address so that
    its owner can choose a new one.
    """

    access = {'POST': 'public'}
    responses = {'POST': {200: 'empty'}}
    rate_limits = {'POST': (('ip', 5, 30 * 60),)}
    # kind: (summary, description) of its route in the API reference.
    DESCRIPTIONS = {
        'email_revert': (
            'Undo an e-mail change',
            'With the `token` of the link mailed to the old address when the address '
            'was changed (`.../app/auth/email_revert?token=T`, valid 7 days): restores '
            'the old address, cancels the pending change, ends every session and the '
            'access token, clears the password and mails a password-reset link to the '
            'restored address. 200 `{}`; a bad token is 422 `Invalid token`.',
        ),
        'mfa_revert': (
            'Undo turning two-factor sign-in on',
            'With the `token` of the "this was not me" link of the MFA-enabled e-mail '
            '(`.../app/auth/mfa_revert?token=T`, valid 7 days): turns that enablement '
            'off (MFA and its recovery codes), ends every session and the access '
            'token, clears the password and mails a password-reset link. 200 `{}`; a '
            'bad, used or expired token, or one whose enablement has ended (MFA turned '
            'off, or off and on again, since) or whose address is no longer the '
            "account's, is 422 `Invalid token`.",
        ),
    }

    def __init__(self, pool, queries, config, kind):
        self._pool = pool
        self._queries = queries
        self._config = config
        # The link's purpose (sign_in.use_link), and the credential change's reason.
        self._reason = kind
        self.schemas = {'POST': kind}
        self.descriptions = {'POST': self.DESCRIPTIONS[kind]}

    def on_post(self, req, resp):
        digest = sign_in.link_digest(req.context.doc, 'token')
        with self._pool.connection() as conn:
            with conn.transaction():
                user = sign_in.use_link(conn, self._queries, self._reason, digest)
                credentials.change(
                    conn,
                    self._queries,
                    self._config,
                    user['id'],
                    reason=self._reason,
                    facts=req.context.facts,
                )
                mail.send_reset_password(
                    conn,
                    self._queries,
                    self._config,
                    user['id'],
                    user['name'],
                    user['email'],
                )
        resp.media = {}


class ResendConfirmation:
    """The signed-in user's own resend (the dashboard's banner)."""

    access = {'POST': 'user'}
    responses = {'POST': {200: 'empty'}}
    schemas = {}
    rate_limits = {'POST': (('ip', 5, 30 * 60),)}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Mail the confirmation link again

        When your address (or a pending new one) is unconfirmed, mails a fresh link;
        otherwise sends nothing. Always 200 `{}`. Needs the token headers of a sign-in
        or `api_access_token`.
        """
        _resend(self._pool, self._queries, self._config, user_id=req.context.caller.id)
        resp.media = {}


class PublicResendConfirmation:
    """POST /resend_confirmation: the verify-e-mail page of a user who cannot sign in
    yet.

    The same 200 whether or not the address belongs to anyone, so it tells nobody which
    addresses are registered; captcha-checked like sign-up and limited like reset
    requests.
    """

    access = {'POST': 'public'}
    responses = {'POST': {200: 'empty'}}
    schemas = {'POST': 'resend_confirmation'}
    rate_limits = {'POST': (('ip', 5, 30 * 60),)}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Mail the confirmation link again, signed out

        For an address that is not confirmed yet (or a pending new one): mails a fresh
        link. Always 200 `{}` with the same timing whether or not the address belongs to
        a user. Rate limited like password reset requests; hCaptcha-checked like sign-up
        when the operator set HCAPTCHA_SECRET.
        """
        doc = req.context.doc
        captcha.verify(
            self._config, doc.get('h_captcha_client_response'), req.context.client_ip
        )
        email = doc.get('email')
        # No mail to what is not one address (SPEC 3.3: "root,victim@example.com").
        if addresses.is_valid(email):
            _resend(
                self._pool,
                self._queries,
                self._config,
                email=addresses.normalise(email),
            )
        resp.media = {}
