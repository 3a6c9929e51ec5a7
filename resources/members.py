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

    def __init__(self, pool, queries, config, status):
        self._pool = pool
        self._queries = queries
        self._config = config
        self._status = status

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
