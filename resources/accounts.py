"""/api/v1/accounts (sign-up) and /api/v1/accounts/{account_id}[/...]."""

from typing import NamedTuple

from psycopg.types.json import Jsonb

import db
import errors
from resources import send_json_text
from resources import send_outcome
from services import audit
from services import deletion_schedule
from services import memberships
from services import sign_in
from services import users
import userdoc

CACHE_CONTROL = 'max-age=10, private, stale-while-revalidate=300'
ENFORCE_MFA_NEEDS_MFA = (
    'Enforce mfa needs two-factor sign-in turned on for yourself first'
)


class DocumentRow(NamedTuple):
    """What accounts.document returns, as db.Lookup reads it."""

    doc: str


def _send_account(resp, doc):
    # The membership was checked a moment ago; the account may have gone since.
    if doc is None:
        raise errors.NotFound()
    send_json_text(resp, doc)


class AccountCollection:
    """Sign-up, or a new account for the signed-in caller (SPEC 4.1)."""

    access = {'POST': 'optional'}
    responses = {'POST': {200: 'signed_in', 403: 'sign_up_refused', 404: 'not_found'}}
    schemas = {'POST': 'account_create'}
    rate_limits = {'POST': (('ip', 5, 30 * 60),)}
    # The contract puts the 403s, the captcha and the taken address before field rules.
    deferred_validation = {'POST'}

    def __init__(self, pool, queries, config, validators):
        self._pool = pool
        self._queries = queries
        self._config = config
        self._validate = validators['account_create'].check

    def on_post(self, req, resp):
        """Sign up, or add an account

        Without credentials: creates the user (unconfirmed), the account, the
        administrator membership and the API access token, and mails a confirmation
        link; sign-in needs the confirmed address. With credentials: adds a new account
        to the caller as its administrator (only `account_name` needed). Refused
        parameters are a 403 with a message (SPEC 4.1); 5 sign-ups per IP per 30
        minutes. Answers with the five token headers (`access-token`, `token-type`,
        `client`, `expiry`, `uid`).
        """
        doc, caller = req.context.doc, req.context.caller
        if not isinstance(doc, dict):
            raise errors.Forbidden(users.INVALID_PARAMS)
        if caller is not None:
            return self._add_account(req, resp, doc, caller)
        outcome = sign_in.sign_up(
            self._pool,
            self._queries,
            self._config,
            self._validate,
            doc,
            req.context.facts,
            req.context.client_ip,
        )
        send_outcome(resp, outcome)

    def _add_account(self, req, resp, doc, caller):
        if not users.text(doc, 'account_name'):
            raise errors.Forbidden(users.INVALID_PARAMS)
        self._validate(
            {key: doc[key] for key in ('account_name', 'locale') if key in doc}
        )
        with self._pool.connection() as conn:
            with conn.transaction():
                users.add_account(
                    conn,
                    self._queries,
                    user_id=caller.id,
                    account_name=users.text(doc, 'account_name'),
                    locale=doc.get('locale') or 'en',
                    stamp_active=True,
                )
            user_doc = userdoc.read(conn, self._queries, self._config, caller.id)
        send_json_text(resp, user_doc, key='data')


class AccountItem:
    access = {'GET': 'member', 'PUT': 'administrator', 'PATCH': 'administrator'}
    # account:write still needs the member's role (SPEC 17).
    scopes = {'GET': 'account:read', 'PUT': 'account:write', 'PATCH': 'account:write'}
    responses = {
        'GET': {200: 'account'},
        'PUT': {200: 'account'},
        'PATCH': {200: 'account'},
    }
    schemas = {'PUT': 'account_update', 'PATCH': 'account_update'}
    # Whether members must use MFA, and which credentials reach the account, are account
    # security: not for integration tokens (SPEC 3.4, 17).
    _SECURITY_FIELDS = ('enforce_mfa', 'restrict_legacy_access_token')
    session_fields = {'PUT': _SECURITY_FIELDS, 'PATCH': _SECURITY_FIELDS}

    def __init__(self, pool, queries, config, validators):
        self._pool = pool
        self._queries = queries
        self._document = db.Lookup(
            'account_document', queries['accounts.document'], config, DocumentRow
        )
        self._update_sql = queries['accounts.update']
        self._fields = tuple(validators['account_update'].schema['properties'])

    def on_get(self, req, resp, account_id):
        """Read an account

        The account, for its members; anyone else gets 404. Needs the token headers of a
        sign-in or `api_access_token`.
        """
        # The hot path's checkout and statement (db.borrow, db.Lookup).
        with db.borrow(self._pool) as conn:
            row = self._document.fetchone(conn, account_id)
        _send_account(resp, row and row.doc)

    def on_put(self, req, resp, account_id):
        """Change an account

        Only the fields sent change; `timezone`, `industry` and `company_size` are kept
        in `custom_attributes`. All failures are reported together in one 422, and
        nothing is written then. Administrators of the account only (an agent gets 401
        with the role body).
        """
        doc = req.context.doc
        patch = {key: doc[key] for key in self._fields if key in doc}
        # Requiring MFA of everyone starts with oneself: otherwise the administrator's
        # own sessions would be refused at once (SPEC 12, docs/security.md).
        if patch.get('enforce_mfa') is True and not req.context.caller.mfa_enabled:
            raise errors.Unprocessable.field('enforce_mfa', ENFORCE_MFA_NEEDS_MFA)
        with self._pool.connection() as conn, conn.transaction():
            memberships.hold_as_administrator(
                conn, self._queries, account_id, req.context.caller.id
            )
            row = conn.execute(
                self._update_sql, {'account_id': account_id, 'patch': Jsonb(patch)}
            ).fetchone()
            if row is not None and patch:
                # The fields, never their values (SPEC 14).
                audit.record(
                    conn,
                    self._queries,
                    'account_settings_changed',
                    account_id=account_id,
                    facts=req.context.facts,
                    details={'fields': sorted(patch)},
                )
        _send_account(resp, row and row['doc'])

    on_patch = on_put


class AccountCacheKeys:
    access = {'GET': 'member'}
    scopes = {'GET': 'account:read'}
    responses = {'GET': {200: 'cache_keys'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._cache_keys_sql = queries['accounts.cache_keys']

    def on_get(self, req, resp, account_id):
        """Read an account's cache keys

        Epoch seconds of the last change of labels, inboxes and teams, for client
        caches; sent with `Cache-Control: max-age=10, private,
        stale-while-revalidate=300`. Needs the token headers of a sign-in or
        `api_access_token`.
        """
        with self._pool.connection() as conn:
            row = conn.execute(
                self._cache_keys_sql, {'account_id': account_id}
            ).fetchone()
        _send_account(resp, row and row['doc'])
        resp.cache_control = [CACHE_CONTROL]


class AccountActiveAt:
    """POST .../update_active_at: the caller's heartbeat in this account."""

    access = {'POST': 'member'}
    scopes = {'POST': 'account:write'}
    responses = {'POST': {200: 'empty'}}

    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries
        self._stamp_sql = queries['memberships.stamp_active']

    def on_post(self, req, resp, account_id):
        """Heartbeat in an account

        Stamps the caller's membership as active now: `availability_status` stays as set
        for 5 minutes after the last heartbeat when `auto_offline` is on. Needs the
        token headers of a sign-in or `api_access_token`.
        """
        user_id = req.context.caller.id
        with self._pool.connection() as conn:
            # No row: a suspension committed while the stamp waited for the membership
            # row; the member is refused as the access rules refuse them (SPEC 18).
            if (
                conn.execute(
                    self._stamp_sql, {'user_id': user_id, 'account_id': account_id}
                ).fetchone()
                is None
            ):
                raise memberships.refusal(conn, self._queries, account_id, user_id)
        resp.media = {}


class AccountDeletion:
    """POST /enterprise/api/v1/accounts/{id}/toggle_deletion: the reference dashboard's
    "Delete account" (SPEC 20)."""

    # Deleting an account is account security: token headers only (SPEC 3.4).
    access = {'POST': 'administrator_session'}
    responses = {'POST': {200: 'deletion_toggled'}}
    schemas = {'POST': 'account_toggle_deletion'}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp, account_id):
        """Schedule or cancel the account's deletion

        `delete`: the account is deleted `ACCOUNT_DELETION_GRACE_DAYS` (default 7) from
        now; until then it works as before, and its `custom_attributes` carry
        `marked_for_deletion_at` (ISO 8601 UTC) and `marked_for_deletion_reason`
        (`manual_deletion`). An account already scheduled keeps its date. `undelete`:
        cancels it, both keys go. Each change is audited and mailed to every
        administrator of the account. Administrators only (an agent gets 401 with the
        role body), with the token headers of a sign-in.
        """
        with self._pool.connection() as conn, conn.transaction():
            message = deletion_schedule.toggle(
                conn,
                self._queries,
                self._config,
                account_id,
                req.context.doc['action_type'],
                req.context.facts,
            )
        resp.media = {'message': message}
