"""/api/v1/profile/audit_events and /api/v1/accounts/{account_id}/audit_events
(SPEC 14)."""

import datetime

from resources import send_json_text
from services import audit

DEFAULT_LIMIT = 25
NO_BOUND = 2**63 - 1  # before= absent: every id is below it


def _page(query):
    return {
        'before': query.get('before', NO_BOUND),
        'limit': query.get('limit', DEFAULT_LIMIT),
    }


def _time(value):
    """A validated ISO 8601 text as an aware datetime; without an offset it is UTC."""
    if value is None:
        return None
    moment = datetime.datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


class ProfileAuditEvents:
    """The caller's own security events, newest first, keyset paged."""

    access = {'GET': 'session'}
    responses = {'GET': {200: 'audit_events'}}
    query = {'GET': 'audit_events_query'}

    def __init__(self, pool, queries):
        self._pool = pool
        self._list_sql = queries['audit.for_user']

    def on_get(self, req, resp):
        """Your security events

        Sign-ins, password and e-mail changes, sessions ended and the like, newest
        first; page with `before=<next_before>` and `limit` (at most 100). Needs the
        token headers of a sign-in or `api_access_token`.
        """
        with self._pool.connection() as conn:
            row = conn.execute(
                self._list_sql,
                {'user_id': req.context.caller.id, **_page(req.context.query)},
            ).fetchone()
        send_json_text(resp, row['doc'])


class AccountAuditEvents:
    """An account's events and its members' sign-ins, for its administrators."""

    access = {'GET': 'administrator_session'}
    responses = {'GET': {200: 'audit_events'}}
    query = {'GET': 'account_audit_events_query'}

    def __init__(self, pool, queries):
        self._pool = pool
        self._list_sql = queries['audit.for_account']

    def on_get(self, req, resp, account_id):
        """An account's security events

        The events that concern the account and its members' sign-ins, newest first,
        paged like your own; filters `event`, `user_id`, `since`, `until`.
        Administrators of the account only (an agent gets 401 with the role body).
        """
        query = req.context.query
        with self._pool.connection() as conn:
            row = conn.execute(
                self._list_sql,
                {
                    'account_id': account_id,
                    'sign_in_events': list(audit.SIGN_IN_EVENTS),
                    **_page(query),
                    'event': query.get('event'),
                    'user_id': query.get('user_id'),
                    'since': _time(query.get('since')),
                    'until': _time(query.get('until')),
                },
            ).fetchone()
        send_json_text(resp, row['doc'])
