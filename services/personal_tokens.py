"""Personal access tokens (SPEC 17): creating, listing and revoking them, with their
audit events and security e-mails. Using one is middleware/auth.py's (the look-up,
sql/queries/auth.sql) and middleware/access.py's (scopes, accounts); a reset or revert
ends them all (services/credentials.py)."""

import orjson

import errors
from services import audit
from services import security_mail
from services import sessions
from services.mail import FromRequest
import tokens

MAX_LIVE = 50
NOT_CONFIRMED = 'Confirm your e-mail address before creating an access token'
TOO_MANY = f'You have {MAX_LIVE} live access tokens: revoke one before creating another'
NOT_A_MEMBER = 'Account ids must name accounts you are a member of'


def create(conn, queries, config, user_id, session_id, doc, facts):
    """A new token for ``user_id``; its JSON with the token, shown this once.

    Inside the caller's transaction. ``doc`` is the validated body. The session must
    have checked a password or second factor within REAUTH_WINDOW_MINUTES (SPEC 3.4): a
    stolen session alone cannot mint a credential that outlives it.
    """
    # The user row it locks serialises creation per user: the cap of MAX_LIVE holds
    # under concurrency.
    sessions.require_recent_authentication(conn, queries, config, user_id, session_id)
    scopes = sorted(set(doc['scopes']))
    account_ids = doc.get('account_ids')
    if account_ids is not None:
        account_ids = sorted({int(account_id) for account_id in account_ids})
    token = tokens.new_personal_token()
    row = conn.execute(
        queries['personal_tokens.create'],
        {
            'user_id': user_id,
            'name': doc['name'].strip(),
            'token_digest': tokens.digest(token),
            'scopes': scopes,
            'account_ids': account_ids,
            'expires_in_days': int(doc['expires_in_days']),
            'max_live': MAX_LIVE,
        },
    ).fetchone()
    if row['unconfirmed']:
        raise errors.Unprocessable(message=NOT_CONFIRMED)
    if row['too_many']:
        raise errors.Unprocessable(message=TOO_MANY)
    if row['not_member']:
        raise errors.Unprocessable.field('account_ids', NOT_A_MEMBER)
    created = orjson.loads(row['doc'])
    audit.record(
        conn,
        queries,
        'personal_access_token_created',
        subject_id=user_id,
        facts=facts,
        details={
            'personal_access_token_id': created['id'],
            'scopes': scopes,
            'account_ids': account_ids,
            'expires_at': created['expires_at'],
        },
    )
    security_mail.send_to_user(
        conn,
        queries,
        config,
        'personal_access_token_created',
        user_id,
        facts,
        {
            'lines': [
                FromRequest('Token: ', created['name']),
                f'Scopes: {", ".join(scopes)}',
                'Accounts: '
                + (
                    'every account of yours'
                    if account_ids is None
                    else ', '.join(map(str, account_ids)) or 'none'
                ),
                f'Expires: {created["expires_at"]}',
            ]
        },
    )
    return {
        'id': created['id'],
        'name': created['name'],
        'token': token,
        'scopes': scopes,
        'account_ids': account_ids,
        'expires_at': created['expires_at'],
        'created_at': created['created_at'],
    }


def list_for(conn, queries, user_id):
    """JSON text of the user's live tokens, newest first, without secrets."""
    return conn.execute(
        queries['personal_tokens.list_for_user'], {'user_id': user_id}
    ).fetchone()['doc']


def revoke(conn, queries, config, user_id, token_id, facts):
    """The user revokes one of their tokens; False when they have none with that id."""
    row = conn.execute(
        queries['personal_tokens.revoke'], {'user_id': user_id, 'token_id': token_id}
    ).fetchone()
    if row is None:
        return False
    _record_revoked(conn, queries, user_id, token_id, facts)
    security_mail.send_to_user(
        conn,
        queries,
        config,
        'personal_access_token_revoked',
        user_id,
        facts,
        {'lines': [FromRequest('Token: ', row['name'])]},
    )
    return True


def list_for_account(conn, queries, account_id):
    """JSON text of the live tokens of the account's members that can reach it."""
    return conn.execute(
        queries['personal_tokens.list_for_account'], {'account_id': account_id}
    ).fetchone()['doc']


def revoke_for_account(conn, queries, config, account_id, token_id, facts):
    """An administrator revokes a member's token that can reach their account; False
    when there is no such token. The member is told, with the administrator's name."""
    row = conn.execute(
        queries['personal_tokens.revoke_for_account'],
        {'account_id': account_id, 'token_id': token_id},
    ).fetchone()
    if row is None:
        return False
    _record_revoked(conn, queries, row['user_id'], token_id, facts, account_id)
    security_mail.send(
        conn,
        queries,
        config,
        'personal_access_token_revoked',
        user_id=row['user_id'],
        to_address=row['email'],
        name=row['user_name'],
        facts=facts,
        extra={
            'lines': [
                FromRequest('Token: ', row['name']),
                f'Revoked by: {facts.caller_email}, an administrator of account '
                f'{account_id}',
            ]
        },
    )
    return True


def _record_revoked(conn, queries, user_id, token_id, facts, account_id=None):
    """The audit event of a revocation: by its owner, or (``account_id``) by an
    administrator of that account."""
    audit.record(
        conn,
        queries,
        'personal_access_token_revoked',
        subject_id=user_id,
        account_id=account_id,
        facts=facts,
        details={
            'personal_access_token_id': token_id,
            'by_administrator': account_id is not None,
        },
    )
