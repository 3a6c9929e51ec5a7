"""Who is calling: TokenAuth resolves the credential a request carries into
``req.context.caller``, a Caller, in one look-up; middleware/access.py decides what it
may do.

The credentials: the token headers of a sign-in (``access-token``, ``client``,
``uid``), the profile's access_token or a personal access token (SPEC 17) in
``api_access_token`` or ``Authorization: Bearer``, and the ``mfa_token`` of an
account's MFA requirement on the ``enrolment`` endpoints (SPEC 12). Nobody is looked up
for a ``public`` method.
"""

import hmac
import re
from typing import NamedTuple

import orjson

import db
from middleware.access import access_level
from middleware.access import IMPLIED
from services import addresses
from services import audit
from services import sessions
import tokens
import userdoc

# What an answer to a personal access token never carries (SPEC 17), and how a JSON
# body that carries one looks (a string value; PostgreSQL writes ' : ' between key and
# value, orjson ':').
CREDENTIAL_FIELDS = ('access_token', 'pubsub_token')
_CARRIES_CREDENTIAL = re.compile(rb'"(?:access_token|pubsub_token)"\s*:\s*"')
_EMPTY = frozenset()


# The rows of the look-ups below (sql/queries/auth.sql), as db.Lookup reads them: times
# in seconds since the epoch; the stored document as sent, for orjson; the client as
# bytes, for the constant-time comparison with the header.
class TokenRow(NamedTuple):
    id: int
    client: bytes
    expires_at: float
    idle_for: float
    used: bool
    now: float
    doc: bytes


class AccessTokenRow(NamedTuple):
    now: float
    doc: bytes


class PersonalTokenRow(NamedTuple):
    id: int
    scopes: list
    account_ids: list | None
    stale: bool
    now: float
    doc: bytes


class Caller:
    """The authenticated user: ids and roles for the access rules, and the user JSON."""

    __slots__ = (
        'id',
        'email',
        'doc_text',
        'roles',
        'suspended',
        'token',
        'session_id',
        'mfa_enabled',
        'enrollment_required',
        'setup',
        'personal_token_id',
        'scopes',
        'token_accounts',
        'legacy_refused',
    )

    def __init__(
        self,
        doc,
        token=None,
        session_id=None,
        doc_text=None,
        setup=False,
        personal_token=None,
        legacy=False,
    ):
        self.id = doc['id']
        self.email = doc['email']
        self.mfa_enabled = doc.get('mfa_enabled', False)
        # An account of the user requires MFA and it is off (SPEC 12).
        self.enrollment_required = doc.get('_mfa_required', False) and not (
            self.mfa_enabled
        )
        # Authenticated with the mfa_token of an enrolment requirement (``enrolment``
        # only).
        self.setup = setup
        # {account id: role} of the active memberships, and the suspended ones apart
        # (SPEC 18): access.membership_role refuses those.
        accounts = doc.get('accounts', ())
        self.roles = {
            entry['id']: entry['role']
            for entry in accounts
            if entry['membership_status'] == 'active'
        }
        self.suspended = (
            frozenset(entry['id'] for entry in accounts) - self.roles.keys()
            if len(self.roles) < len(accounts)
            else _EMPTY
        )
        # The user JSON when the resource declared it wants it (``caller_document``).
        self.doc_text = doc_text
        # The tokens.Session of the token headers it authenticated with, if it did.
        self.token = token
        self.session_id = session_id
        # A personal access token, (id, scopes, account_ids): its scopes (write ones
        # with the read ones they include) and the accounts it is limited to (None:
        # every account of the user). The roles above are the user's, from the same
        # stored document a session reads.
        self.personal_token_id = self.scopes = self.token_accounts = None
        if personal_token is not None:
            self.personal_token_id, granted, account_ids = personal_token
            self.scopes = frozenset(granted).union(
                IMPLIED[scope] for scope in granted if scope in IMPLIED
            )
            if account_ids is not None:
                self.token_accounts = frozenset(account_ids)
        # The profile's access_token (``legacy``): the accounts that no longer take it.
        refused = doc.get('_legacy_refused') if legacy else None
        self.legacy_refused = frozenset(refused) if refused else _EMPTY


def _forwarded_header(req, name):
    """``api_access_token`` or ``mfa_token``, when the peer is one of
    FORWARDED_ALLOW_IPS.

    NOTE: gunicorn passes the underscore spelling only from those peers
    (gunicorn.conf.py, docs/security.md), but the hyphenated one (``Api-Access-Token``)
    is an ordinary header that reaches the WSGI environ under the same name from anyone.
    The documented rule is that a client talking to gunicorn directly from elsewhere
    cannot use these headers, so both spellings are held to it here; through nginx (a
    trusted peer) both still work.
    """
    return req.get_header(name) if req.context.get('from_trusted_proxy') else None


def _integration_credential(req):
    """(credential, whether it came as ``Authorization: Bearer``): Bearer first, else
    ``api_access_token``; (None, False) when neither is sent."""
    scheme, _, credential = (req.auth or '').partition(' ')
    if scheme.lower() == 'bearer' and credential.strip():
        return credential.strip(), True
    return _forwarded_header(req, 'api_access_token'), False


def _withhold_credentials(node):
    """Blank CREDENTIAL_FIELDS wherever they are in a JSON document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CREDENTIAL_FIELDS:
                node[key] = None
            elif isinstance(value, (dict, list)):
                _withhold_credentials(value)
    elif isinstance(node, list):
        for value in node:
            _withhold_credentials(value)


class TokenAuth:
    """Resolve the token headers, ``api_access_token`` or ``Authorization: Bearer``
    into ``req.context.caller``.

    ``api_access_token`` carries the profile's access_token or a personal access token
    (SPEC 17), Bearer only the latter; a personal access token whose checksum fails is
    refused before any database look-up. Resources whose answer is the caller's own
    user JSON declare the methods in ``caller_document``; the lookup then renders it in
    the same round trip.

    A missing, malformed, unknown, expired or revoked credential leaves the caller
    None; access.RequireAccess then answers the one 401 that never says which part was
    wrong. Answers to a personal access token have every CREDENTIAL_FIELDS value
    blanked.
    """

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._avatar_url_prefix = config.avatar_url_prefix
        self._by_token = db.Lookup(
            'user_for_token', queries['auth.user_for_token'], config, TokenRow
        )
        self._by_access_token = db.Lookup(
            'user_for_access_token',
            queries['auth.user_for_access_token'],
            config,
            AccessTokenRow,
        )
        self._by_personal_token = db.Lookup(
            'user_for_personal_token',
            queries['auth.user_for_personal_token'],
            config,
            PersonalTokenRow,
        )
        self._touch_personal_sql = queries['auth.touch_personal_token']
        self._touch_sql = queries['auth.touch_token']
        self._expire_idle_sql = queries['auth.expire_idle']
        self._idle_seconds = config.idle_seconds
        self._touch_after_seconds = sessions.touch_after(config).total_seconds()
        self._by_setup_token_sql = queries['auth.user_for_setup_token']

    def process_resource(self, req, resp, resource, params):
        req.context.caller = None
        level = access_level(resource, req.method)
        if level in (None, 'public'):
            return
        # The WSGI names: req.get_header would derive them from these on each call.
        env = req.env
        token, client, uid = (
            env.get('HTTP_ACCESS_TOKEN'),
            env.get('HTTP_CLIENT'),
            env.get('HTTP_UID'),
        )
        with_doc = req.method in getattr(resource, 'caller_document', ())
        if token and client and uid:
            req.context.caller = self._session(token, client, uid, with_doc)
            return
        credential, bearer = _integration_credential(req)
        if credential:
            req.context.caller = self._integration(
                credential, bearer, req.context.client_ip, with_doc
            )
        elif level == 'enrolment' and (
            setup_token := _forwarded_header(req, 'mfa_token')
        ):
            with self._pool.connection() as conn:
                row = conn.execute(
                    self._by_setup_token_sql, {'digest': tokens.digest(setup_token)}
                ).fetchone()
            req.context.caller = Caller(row, setup=True) if row else None

    def _integration(self, credential, bearer, client_ip, with_doc):
        """The profile's access_token, or a personal access token: one look-up."""
        if credential.startswith(tokens.PERSONAL_PREFIX):
            return self._personal(credential, client_ip, with_doc)
        # Bearer is for personal access tokens only; PostgreSQL text holds no NUL.
        if bearer or '\x00' in credential:
            return None
        with db.borrow(self._pool) as conn:
            row = self._by_access_token.fetchone(conn, credential)
        if row is None:
            return None
        doc = userdoc.parse(row.doc)
        return self._with_doc(Caller(doc, legacy=True), doc, row.now, with_doc)

    def _personal(self, credential, client_ip, with_doc):
        if not tokens.is_personal_token(credential):
            return None  # a typo or a forgery: no database look-up
        with db.borrow(self._pool) as conn:
            row = self._by_personal_token.fetchone(conn, tokens.digest(credential))
            if row is None:
                return None
            if row.stale:
                conn.execute(
                    self._touch_personal_sql,
                    {
                        'token_id': row.id,
                        'ip_address': client_ip[: audit.IP_ADDRESS_LIMIT]
                        if client_ip
                        else None,
                    },
                )
        doc = userdoc.parse(row.doc)
        caller = Caller(doc, personal_token=(row.id, row.scopes, row.account_ids))
        # Blanked before it is rendered; process_response would find it anyway.
        doc['access_token'] = doc['pubsub_token'] = None
        return self._with_doc(caller, doc, row.now, with_doc)

    def _with_doc(self, caller, doc, now, with_doc):
        if with_doc:
            caller.doc_text = userdoc.render(
                doc, userdoc.from_epoch(now), self._avatar_url_prefix
            )
        return caller

    def _session(self, token, client, uid, with_doc):
        with db.borrow(self._pool) as conn:
            row = self._by_token.fetchone(conn, tokens.digest(token))
            if row is None:
                return None
            doc = userdoc.parse(row.doc)
            # The digest found the row; client and uid must match too, compared in
            # constant time so a response's timing tells nothing about either.
            client_ok = hmac.compare_digest(
                row.client, client.encode('utf-8', 'surrogatepass')
            )
            uid_ok = hmac.compare_digest(
                doc['email'].encode(),
                addresses.normalise(uid).encode('utf-8', 'surrogatepass'),
            )
            if not (client_ok and uid_ok):
                return None
            if row.idle_for >= self._idle_seconds:
                conn.execute(
                    self._expire_idle_sql,
                    {'token_id': row.id, 'idle_seconds': self._idle_seconds},
                )
                return None
            refresh = row.idle_for > self._touch_after_seconds
            if refresh or not row.used:
                conn.execute(self._touch_sql, {'token_id': row.id, 'refresh': refresh})
        caller = Caller(
            doc,
            token=tokens.Session(token, row.client.decode(), row.expires_at),
            session_id=row.id,
        )
        return self._with_doc(caller, doc, row.now, with_doc)

    def process_response(self, req, resp, resource, req_succeeded):
        caller = req.context.get('caller')
        if caller is None:
            return
        if caller.token is not None and resp.status_code < 400:
            tokens.set_headers(resp, caller.token, caller.email)
        if caller.scopes is not None:
            # A read-only token must not read the full-power one (SPEC 17).
            if resp.data and _CARRIES_CREDENTIAL.search(resp.data):
                doc = orjson.loads(resp.data)
                _withhold_credentials(doc)
                resp.data = orjson.dumps(doc)
            elif resp.media is not None:
                _withhold_credentials(resp.media)
