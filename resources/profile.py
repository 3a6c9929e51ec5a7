"""/api/v1/profile and its sub-resources: the caller's own user."""

import io
import re

from bodies import JSONHandler
import db
import errors
from resources import send_json_text
from services import avatars
from services import credentials
from services import erasure
from services import export
from services import memberships
from services import profiles
import userdoc

# Multipart text fields; anything else named profile[...] is ignored like an unknown
# JSON key.
_TEXT_FIELDS = frozenset(
    (
        'name',
        'display_name',
        'email',
        'phone_number',
        'message_signature',
        'current_password',
        'password',
        'password_confirmation',
    )
)
_FIELD_NAME = re.compile(r'profile\[(\w+)\]')
_JSON = JSONHandler()
# Decoding an avatar is the costliest thing a signed-in user can ask for: 10 uploads per
# user per hour (docs/security.md), counted only for requests that carry a file.
AVATAR_UPLOADS = ('user', 10, 60 * 60, 'avatar')
EXPORTS = ('user', 5, 60 * 60)


def read_multipart(req, avatar_max_bytes):
    """The hook of ``Profile.multipart``: ``profile[...]`` parts into the JSON shape;
    the avatar goes to req.context."""
    if req.content_length is None:
        raise errors.BadRequest('A multipart body needs a Content-Length header')
    profile, upload = {}, None
    for part in req.get_media():
        match = _FIELD_NAME.fullmatch(_part_name(part))
        key = match.group(1) if match else None
        if key == 'avatar':
            data = avatars.read_upload(part.stream, avatar_max_bytes)
            # An empty part without a file name is a browser's "no file chosen"; an
            # empty file is a file that is not an image (SPEC 8).
            upload = data if data or part.filename else None
        elif key == 'ui_settings':
            profile[key] = _JSON.deserialize(io.BytesIO(part.get_data()), None, None)
        elif key in _TEXT_FIELDS:
            profile[key] = _text(key, part.get_data())
    req.context.avatar = upload
    return {'profile': profile}


class Profile:
    # DELETE (erasing yourself) is for a signed-in session only: api_access_token and
    # personal access tokens get the 403 of SPEC 3.4 (no scope opens it).
    access = {'GET': 'user', 'PUT': 'user', 'PATCH': 'user', 'DELETE': 'session'}
    # An e-mail or password change is refused to personal access tokens whatever their
    # scope, as to api_access_token (profiles.update).
    scopes = {'GET': 'profile:read', 'PUT': 'profile:write', 'PATCH': 'profile:write'}
    caller_document = {'GET'}
    # 403: an e-mail or password change with api_access_token, or an e-mail change
    # without recent authentication (SPEC 3.4); 429: the sixth e-mail change in 24 hours
    # (SPEC 3.3).
    _update = {
        200: 'user',
        403: ('needs_session', 'reauthentication_required'),
        429: 'rate_limited',
    }
    responses = {
        'GET': {200: 'user'},
        'PUT': _update,
        'PATCH': _update,
        # 403: no password, and no session signed in within REAUTH_WINDOW_MINUTES (a
        # user of single sign-on); 422: a wrong password or code, or the last
        # administrator of accounts with other members; 429: a spent guessing budget.
        'DELETE': {
            200: 'empty',
            403: 'reauthentication_required',
            422: 'administers_accounts',
            429: 'rate_limited',
        },
    }
    schemas = {
        'PUT': 'profile_update',
        'PATCH': 'profile_update',
        'DELETE': 'profile_delete',
    }
    # Hook: JSONSchemaValidation reads a multipart/form-data body with it.
    multipart = {'PUT': read_multipart, 'PATCH': read_multipart}
    rate_limits = {'PUT': (AVATAR_UPLOADS,), 'PATCH': (AVATAR_UPLOADS,)}
    # SPEC 5.4 checks the current password before the password rules.
    deferred_validation = {'PUT', 'PATCH'}

    def __init__(self, pool, queries, config, validators):
        self._pool = pool
        self._queries = queries
        self._config = config
        self._validator = validators['profile_update']

    def on_get(self, req, resp):
        """Read your profile

        The user JSON of the caller. Needs the token headers of a sign-in or
        `api_access_token`.
        """
        # TokenAuth rendered the user JSON in the query that authenticated the caller.
        send_json_text(resp, req.context.caller.doc_text)

    def on_put(self, req, resp):
        """Change your profile

        Fields go under `profile`; only those sent change. A new `email` waits in
        `unconfirmed_email` until the link mailed to it is used. A new `password` needs
        `current_password` and ends every other session. Needs the token headers of a
        sign-in or `api_access_token`. As multipart/form-data, `profile[avatar]` uploads
        an avatar (JPEG, PNG, GIF, WebP).
        """
        caller = req.context.caller
        keep_client = caller.token.client if caller.token else None
        # db.borrow: the hot path's checkout; update() opens its transactions itself.
        with db.borrow(self._pool) as conn:
            doc = profiles.update(
                conn,
                self._queries,
                self._config,
                self._validator,
                caller.id,
                req.context.doc,
                req.context.get('avatar'),
                keep_client,
                facts=req.context.facts,
            )
        send_json_text(resp, doc)

    on_patch = on_put

    def on_delete(self, req, resp):
        """Erase yourself

        Irreversible: your user, memberships, sessions, tokens, links, two-factor
        secrets, avatar and the audit rows about you are deleted, and your address gets
        one last mail. Needs the token headers of a sign-in (403 with
        `api_access_token` or a personal access token) and, in the body, your current
        `password` (422 when wrong), plus `otp_code` or `backup_code` when two-factor
        sign-in is on. A user without a password (signed up through single sign-on)
        sends none: the session must have signed in within the last 15 minutes
        (`REAUTH_WINDOW_MINUTES`; else 403 `reauthentication_required`). While you are
        the last active administrator of an account that has other members: 422 with
        those `account_ids`, and nothing changes. An account you leave without members
        is scheduled for deletion (`ACCOUNT_DELETION_GRACE_DAYS`).
        """
        with self._pool.connection() as conn:
            erasure.erase_self(
                conn,
                self._queries,
                self._config,
                req.context.caller,
                req.context.doc,
                req.context.facts,
            )
        resp.media = {}


def _part_name(part):
    try:
        return part.name or ''
    except UnicodeDecodeError:
        # Falcon decodes the part's headers as UTF-8 and lets the error through.
        raise errors.BadRequest('Multipart part headers are not UTF-8') from None


def _text(key, data):
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError:
        raise errors.BadRequest(f'profile[{key}] is not UTF-8 text') from None
    # PostgreSQL can store no NUL character.
    if '\x00' in text:
        raise errors.BadRequest(f'profile[{key}] contains a NUL character')
    return text


class ProfileAvatar:
    access = {'DELETE': 'user'}
    scopes = {'DELETE': 'profile:write'}
    responses = {'DELETE': {200: 'user'}}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_delete(self, req, resp):
        """Remove your avatar

        Idempotent. Needs the token headers of a sign-in or `api_access_token`.
        """
        with self._pool.connection() as conn:
            doc = profiles.remove_avatar(
                conn, self._queries, self._config, req.context.caller.id
            )
        send_json_text(resp, doc)


class ProfileMembershipSetting:
    """POST /availability or /auto_offline: one setting of the caller's membership.

    404 when the caller is not a member of ``account_id``, 403 when that membership is
    suspended (RequireBodyMembership; when the UPDATE finds no active row, because a
    suspension committed while it waited, memberships.refusal tells which).
    """

    access = {'POST': 'user'}
    scopes = {'POST': 'profile:write'}
    account_in_body = {'POST': ('profile', 'account_id')}
    responses = {'POST': {200: 'user', 404: 'not_found'}}
    # field: (summary, description) of its route in the API reference.
    DESCRIPTIONS = {
        'availability': (
            'Set your availability in an account',
            '`online`, `offline` or `busy`, for one of your accounts. Needs the token '
            'headers of a sign-in or `api_access_token`.',
        ),
        'auto_offline': (
            'Set auto-offline in an account',
            'Whether you appear offline after 5 minutes without a heartbeat. Needs the '
            'token headers of a sign-in or `api_access_token`.',
        ),
    }

    def __init__(self, pool, queries, config, field, schema, set_sql):
        self._pool = pool
        self._queries = queries
        self._config = config
        self._field = field
        self.schemas = {'POST': schema}
        self.descriptions = {'POST': self.DESCRIPTIONS[field]}
        self._set_sql = set_sql

    def on_post(self, req, resp):
        profile, user_id = req.context.doc['profile'], req.context.caller.id
        params = {
            'value': profile[self._field],
            'account_id': int(profile['account_id']),
            'user_id': user_id,
        }
        with self._pool.connection() as conn:
            if conn.execute(self._set_sql, params).fetchone() is None:
                raise memberships.refusal(
                    conn, self._queries, params['account_id'], user_id
                )
            send_json_text(
                resp, userdoc.read(conn, self._queries, self._config, user_id)
            )


class ProfileActiveAccount:
    access = {'PUT': 'user'}
    scopes = {'PUT': 'profile:write'}
    account_in_body = {'PUT': ('profile', 'account_id')}
    responses = {'PUT': {200: 'empty', 404: 'not_found'}}
    schemas = {'PUT': 'profile_active_account'}

    def __init__(self, pool, queries):
        self._pool = pool
        self._queries = queries
        self._stamp_sql = queries['memberships.stamp_active']

    def on_put(self, req, resp):
        """Make an account your current one

        It becomes the `account_id` of your user JSON. Needs the token headers of a
        sign-in or `api_access_token`.
        """
        params = {
            'user_id': req.context.caller.id,
            'account_id': int(req.context.doc['profile']['account_id']),
        }
        with self._pool.connection() as conn:
            if conn.execute(self._stamp_sql, params).fetchone() is None:
                raise memberships.refusal(
                    conn, self._queries, params['account_id'], params['user_id']
                )
        resp.media = {}


class ProfileExport:
    """GET /export: everything stored about the caller, as a JSON download (SPEC 20)."""

    access = {'GET': 'session'}
    # 429: a sixth export in the hour. Each one can be large (docs/api.md) and mails the
    # owner; a stolen fresh session gains nothing from more.
    responses = {
        'GET': {
            200: 'profile_export',
            403: 'reauthentication_required',
            429: 'rate_limited',
        }
    }
    rate_limits = {'GET': (EXPORTS,)}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_get(self, req, resp):
        """Download everything stored about you

        One JSON document: your profile, memberships, sessions (addresses, devices),
        personal access tokens, two-factor sign-in status, pending links, the audit
        events you did or that concern you and the mails sent to you within the audit
        retention (`AUDIT_RETENTION_DAYS`); never a password, key or token, nor a digest
        of one (`withheld` names each left out, and why). Needs the token headers of a
        sign-in that checked the password or a second factor within the last 15 minutes
        (`REAUTH_WINDOW_MINUTES`; else 403 `reauthentication_required`: sign in again).
        You get a security e-mail. At most 5 exports an hour (then 429). A HEAD
        request makes the same checks and sends the headers only: nothing is exported,
        recorded or mailed.
        """
        caller = req.context.caller
        with self._pool.connection() as conn, conn.transaction():
            doc = export.export(
                conn,
                self._queries,
                self._config,
                caller.id,
                caller.session_id,
                req.context.facts,
                head=req.method == 'HEAD',
            )
        send_json_text(resp, doc)
        resp.downloadable_as = f'frontdesk-export-{caller.id}.json'
        resp.cache_control = ['no-store']


class ProfileAccessToken:
    """POST /reset_access_token: a new access_token; the old one stops working at
    once."""

    access = {'POST': 'session'}
    responses = {'POST': {200: 'user', 403: 'reauthentication_required'}}

    def __init__(self, pool, queries, config):
        self._pool = pool
        self._queries = queries
        self._config = config

    def on_post(self, req, resp):
        """Replace your API access token

        A new `access_token`; the old one stops working at once. Needs the token headers
        of a sign-in (403 with `api_access_token`) that checked the password or a second
        factor within the last 15 minutes (`REAUTH_WINDOW_MINUTES`; else 403
        `reauthentication_required`: sign in again).
        """
        caller = req.context.caller
        with self._pool.connection() as conn:
            with conn.transaction():
                credentials.reset_access_token(
                    conn,
                    self._queries,
                    self._config,
                    caller,
                    req.context.facts,
                )
            send_json_text(
                resp, userdoc.read(conn, self._queries, self._config, caller.id)
            )
