"""/api/v1/profile/mfa[/verify|/backup_codes]: two-factor sign-in of the caller
(SPEC 12).

Access level ``enrolment``: the token headers of a sign-in, or the ``mfa_token`` header
that an account's MFA requirement hands out at sign-in; never ``api_access_token``.
Enabling and disabling are credential changes (SPEC 3.3).
"""

from services import guessing
from services import mfa

# Per user, beside the sign-in limits: 5 codes a minute cannot walk a 6-digit space.
_PER_USER = (('user', 5, 60),)
NO_STORE = ['no-store']


def _keep_client(caller):
    """The caller's own sign-in survives the credential change; a setup token has
    none."""
    return caller.token.client if caller.token else None


class MFA:
    """The caller's MFA state; start enrolment (POST); turn MFA off (DELETE)."""

    access = {'GET': 'enrolment', 'POST': 'enrolment', 'DELETE': 'enrolment'}
    responses = {
        'GET': {200: 'mfa_status'},
        # 429: the caller's password guessing budget is spent (SPEC 3.4).
        'POST': {200: 'mfa_provisioning', 403: 'mfa_unavailable', 429: 'rate_limited'},
        'DELETE': {200: 'mfa_disabled', 403: 'mfa_unavailable'},
    }
    schemas = {'POST': 'mfa_enable', 'DELETE': 'mfa_disable'}
    rate_limits = {'DELETE': _PER_USER}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp):
        """Your two-factor sign-in

        Whether it is on, and how many recovery codes are left; `feature_available` is
        false while the server has no `SECRET_KEY`. Token headers of a sign-in (403 with
        `api_access_token`), or the `mfa_token` header of an enrolment an account
        requires.
        """
        with self._pool.connection() as conn:
            resp.media = mfa.status(
                conn, self._queries, self._config, req.context.caller.id
            )

    def on_post(self, req, resp):
        """Start two-factor enrolment

        A new TOTP secret (RFC 6238, SHA-1, 6 digits, 30 s) as an `otpauth://` URL for a
        QR code, and as text. MFA stays off until `/verify` gets a code from it. No body
        is needed; a `password` sent is checked (422 when wrong). Token headers or the
        enrolment `mfa_token`; never `api_access_token`.
        """
        mfa.require_available(self._config)
        caller, password = req.context.caller, req.context.doc.get('password')
        # The password, when sent, spends the caller's guessing budget (SPEC 3.4).
        kinds = ('password',) if isinstance(password, str) else ()
        with self._pool.connection() as conn:
            with guessing.guard(
                conn, self._queries, self._config, caller.id, kinds, req.context.facts
            ) as checks:
                with conn.transaction():
                    resp.media = mfa.start_enrolment(
                        conn,
                        self._queries,
                        self._config,
                        caller.id,
                        password,
                        checks=checks,
                    )
        resp.cache_control = NO_STORE

    def on_delete(self, req, resp):
        """Turn two-factor sign-in off

        Needs the password and a code (`otp_code` or `backup_code`; an empty one counts
        as absent). A credential change: every other session, the access token and open
        links end; you get a security e-mail. 5 a minute.
        """
        mfa.require_available(self._config)
        doc, caller = req.context.doc, req.context.caller
        with self._pool.connection() as conn:
            with guessing.guard(
                conn,
                self._queries,
                self._config,
                caller.id,
                ('password', 'second_factor'),
                req.context.facts,
            ) as checks:
                with conn.transaction():
                    mfa.disable(
                        conn,
                        self._queries,
                        self._config,
                        caller.id,
                        doc.get('password'),
                        doc.get('otp_code'),
                        doc.get('backup_code'),
                        _keep_client(caller),
                        facts=req.context.facts,
                        checks=checks,
                    )
        resp.media = {'enabled': False}


class MFACodeAction:
    """POST /verify (turn MFA on: the recovery codes, once) or /backup_codes (new ones),
    each behind a TOTP code."""

    access = {'POST': 'enrolment'}
    rate_limits = {'POST': _PER_USER}

    # action: (request schema, response name, the service function)
    ACTIONS = {
        'verify': ('mfa_verify', 'mfa_enabled', mfa.enable),
        'backup_codes': (
            'mfa_backup_codes',
            'mfa_backup_codes',
            mfa.regenerate_recovery_codes,
        ),
    }

    # action: (summary, description) of its route in the API reference.
    DESCRIPTIONS = {
        'verify': (
            'Turn two-factor sign-in on',
            'The first code of the new secret turns MFA on and answers the 10 recovery '
            'codes, shown this once. A credential change: every other session, the '
            'access token and open links end; you get a security e-mail whose link (7 '
            'days) turns this enablement off again. With the enrolment `mfa_token` it '
            'signs nobody in: sign in again, with a code. 5 a minute.',
        ),
        'backup_codes': (
            'New recovery codes',
            'Behind a TOTP code: 10 new recovery codes, shown this once; the old ones '
            'stop working. 5 a minute.',
        ),
    }

    def __init__(self, pool, queries, config, action):
        self._pool = pool
        self._queries = queries
        self._config = config
        schema, response, self._action = self.ACTIONS[action]
        self.schemas = {'POST': schema}
        self.responses = {'POST': {200: response, 403: 'mfa_unavailable'}}
        self.descriptions = {'POST': self.DESCRIPTIONS[action]}

    def on_post(self, req, resp):
        mfa.require_available(self._config)
        caller = req.context.caller
        with self._pool.connection() as conn:
            with guessing.guard(
                conn,
                self._queries,
                self._config,
                caller.id,
                ('second_factor',),
                req.context.facts,
            ) as checks:
                with conn.transaction():
                    resp.media = self._action(
                        conn,
                        self._queries,
                        self._config,
                        caller.id,
                        req.context.doc.get('otp_code'),
                        _keep_client(caller),
                        facts=req.context.facts,
                        checks=checks,
                    )
        resp.cache_control = NO_STORE
