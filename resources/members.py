"""/api/v1/accounts/{account_id}/agents: an account's members, for its administrators,
and suspending or reactivating one (SPEC 18)."""

import errors
from resources import send_json_text
from services import memberships


class AgentCollection:
    """GET .../agents: every member, in the reference system's agent shape."""

    access = {'GET': 'administrator'}
    responses = {'GET': {200: 'agents'}}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp, account_id):
        """List an account's members

        Every member, by name, in the reference system's agent shape plus
        `membership_status` (`active` or `suspended`), `mfa_enabled` and
        `last_sign_in_at`. Administrators of the account only (an agent gets 401 with
        the role body).
        """
        with self._pool.connection() as conn:
            doc = memberships.list_agents(conn, self._queries, self._config, account_id)
        send_json_text(resp, doc)


class MemberStatus:
    """POST .../agents/{user_id}/suspend or /reactivate: one transaction each.

    Member security, so token headers only (SPEC 3.4): integration credentials get the
    403 of ``administrator_session``.
    """

    access = {'POST': 'administrator_session'}
    responses = {'POST': {200: 'agent', 404: 'not_found', 422: 'unprocessable'}}

    DESCRIPTIONS = {
        'suspended': (
            'Suspend a member',
            "From now on the member's requests to this account answer 403 "
            '`membership_suspended`, whatever the credential; the account stays in '
            'their `accounts` with `membership_status: suspended` and is never their '
            '`account_id`. A member whose every membership is then suspended is locked '
            'out: every session ends, the access token is replaced, and signing in (a '
            'password, a second factor, a reset or confirmation link) answers 401 '
            '`account_suspended`. Audited and mailed to the member. Yourself, or the '
            'last active administrator: 422; not a member: 404; already suspended: '
            '200, nothing changes. Token headers only (403 with `api_access_token`). '
            'Administrators of the account only (an agent gets 401 with the role '
            'body).',
        ),
        'active': (
            'Reactivate a member',
            'The membership is active again (a locked-out member can sign in again); '
            'no session or token ended by the suspension comes back. Audited and '
            'mailed to the member. Not a member: 404; already active: 200, nothing '
            'changes. Token headers only. Administrators of the account only (an agent '
            'gets 401 with the role body).',
        ),
    }

    def __init__(self, pool, queries, config, status):
        self._pool = pool
        self._queries = queries
        self._config = config
        self._status = status
        self.descriptions = {'POST': self.DESCRIPTIONS[status]}

    def on_post(self, req, resp, account_id, user_id):
        try:
            with self._pool.connection() as conn, conn.transaction():
                doc = memberships.set_status(
                    conn,
                    self._queries,
                    self._config,
                    account_id,
                    user_id,
                    self._status,
                    req.context.facts,
                )
        except memberships.NotAMember:
            raise errors.NotFound() from None
        send_json_text(resp, doc)
