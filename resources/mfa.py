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
    return caller.token[1] if caller.token else None


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
        with self._pool.connection() as conn:
            resp.media = mfa.status(
                conn, self._queries, self._config, req.context.caller.id
            )

    def on_post(self, req, resp):
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

    def __init__(self, pool, queries, config, action):
        self._pool = pool
        self._queries = queries
        self._config = config
        schema, response, self._action = self.ACTIONS[action]
        self.schemas = {'POST': schema}
        self.responses = {'POST': {200: response, 403: 'mfa_unavailable'}}

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
