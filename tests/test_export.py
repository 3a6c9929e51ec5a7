"""GET /api/v1/profile/export (SPEC 20): everything stored about the caller.

Completeness is held to the database catalogue: every table and column that holds a
user's data (a foreign key to users, a column named like a user id or an address, the
users table itself) must be exported or withheld with a reason by services/export.py.
"""

import base64
import datetime
import json
import re

import psycopg
from psycopg import sql
import pytest

from services import export
from tests.smtp_server import deliver
from tests.support.rate_windows import start_clear_of_a_window_boundary
from tests.support.users import unique_email
from tests.test_access_tokens import bearer
from tests.test_access_tokens import join
from tests.test_access_tokens import new_token
from tests.test_mail import enqueue
from tests.test_mfa import enable
from tests.test_security_mail import assert_facts
from tests.test_security_mail import client
from tests.test_suspension import reactivate

EXPORT = '/api/v1/profile/export'
NEEDS_SESSION = {'error': 'This action needs a signed-in session'}
REAUTHENTICATE = {
    'error': 'Sign in again to change this',
    'error_code': 'reauthentication_required',
}
SUBJECT = 'A copy of your data was downloaded'

# --- the catalogue ------------------------------------------------------------------

# Every column of the application's tables, and whether a foreign key of it points at
# users.
_CATALOGUE = """
SELECT c.relname AS table_name, a.attname AS column_name,
       EXISTS (SELECT FROM pg_constraint k
                WHERE k.contype = 'f' AND k.conrelid = c.oid
                  AND k.confrelid = 'public.users'::regclass
                  AND a.attnum = ANY (k.conkey)) AS references_users
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = c.oid
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
   AND a.attnum > 0 AND NOT a.attisdropped
   AND c.relname <> 'schema_migrations'
"""
# A user's id by its name (user_id, actor_id, subject_id, scheduled_by,
# deletion_requested_by...), or an address (email, unconfirmed_email, to_address...).
_USER_DATA_NAME = re.compile(
    r'^(user_id|actor_id|subject_id)$|_user_id$|_by$|e_?mail'
    r'|^(to|from|reply_to|cc|bcc)_address(es)?$'
)


def catalogue(conn):
    """{(table, column)}, and the user-data ones among them."""
    rows = conn.execute(_CATALOGUE).fetchall()
    every = {(row['table_name'], row['column_name']) for row in rows}
    user_data = {
        (row['table_name'], row['column_name'])
        for row in rows
        if row['references_users']
        or row['table_name'] == 'users'
        or _USER_DATA_NAME.search(row['column_name'])
    }
    return every, user_data


def declared(exported=None, excluded=None):
    exported = export.EXPORTED if exported is None else exported
    excluded = export.EXCLUDED if excluded is None else excluded
    shown = {
        (table, column)
        for table, parts in exported.items()
        for columns in parts.values()
        for column in columns
    }
    return shown, set(excluded)


def undeclared(conn, exported=None, excluded=None):
    """(columns of a user-data table in neither map, declared columns that do not
    exist): both empty when the export is complete."""
    every, user_data = catalogue(conn)
    shown, withheld = declared(exported, excluded)
    tables = {table for table, _ in user_data | shown | withheld}
    missing = {(table, column) for table, column in every if table in tables}
    return missing - shown - withheld, (shown | withheld) - every


def test_every_user_data_column_is_exported_or_withheld_with_a_reason(conn):
    missing, unknown = undeclared(conn)
    assert missing == set(), 'export or withhold (services/export.py)'
    assert unknown == set(), 'declared, but the database has no such column'
    shown, withheld = declared()
    assert shown & withheld == set()
    assert all(reason.strip() for reason in export.EXCLUDED.values())
    # What the catalogue finds, besides the foreign keys: ids by name (migration 0021's
    # among them) and addresses.
    _, user_data = catalogue(conn)
    assert {
        ('accounts', 'deletion_requested_by'),
        ('account_deletions', 'scheduled_by'),
        ('audit_events', 'actor_id'),
        ('audit_events', 'subject_id'),
        ('mail_outbox', 'to_address'),
        ('users', 'unconfirmed_email'),
        ('one_time_tokens', 'email'),
        ('sso_flows', 'email'),
        ('user_tokens', 'user_id'),
    } <= user_data


def test_a_new_user_data_column_or_table_fails_the_check(direct_database_url):
    """A schema change rolled back: each kind of new user data is caught."""
    with psycopg.connect(
        direct_database_url, row_factory=psycopg.rows.dict_row
    ) as conn:
        conn.execute("SET LOCAL lock_timeout = '10s'")
        conn.execute('ALTER TABLE user_tokens ADD COLUMN probe_note text')
        conn.execute('CREATE TABLE probe_reviews (id bigint, reviewed_by bigint)')
        conn.execute(
            'CREATE TABLE probe_notes (owner bigint REFERENCES users (id), body text)'
        )
        conn.execute('CREATE TABLE probe_contacts (backup_email text, note text)')
        missing, unknown = undeclared(conn)
        conn.rollback()
    assert missing == {
        ('user_tokens', 'probe_note'),
        ('probe_reviews', 'id'),
        ('probe_reviews', 'reviewed_by'),
        ('probe_notes', 'owner'),
        ('probe_notes', 'body'),
        ('probe_contacts', 'backup_email'),
        ('probe_contacts', 'note'),
    }
    assert unknown == set()


def test_a_declared_column_the_database_lacks_fails_the_check(conn):
    exported = {**export.EXPORTED, 'users': {'profile': ('id', 'nickname')}}
    excluded = {**export.EXCLUDED, ('gone_table', 'secret'): 'a secret'}
    missing, unknown = undeclared(conn, exported, excluded)
    assert unknown == {('users', 'nickname'), ('gone_table', 'secret')}
    assert ('users', 'name') in missing


# --- what the export holds -----------------------------------------------------------

# How the tests find a user's rows of each table (what the export should list).
_ROWS_OF = {
    'users': 'id = %(user_id)s',
    'mfa_recovery_codes': 'user_id = %(user_id)s',
    'account_users': 'user_id = %(user_id)s',
    'user_tokens': 'user_id = %(user_id)s',
    'personal_access_tokens': 'user_id = %(user_id)s',
    'one_time_tokens': 'user_id = %(user_id)s',
    'email_change_requests': 'user_id = %(user_id)s',
    'sso_flows': 'email = %(email)s',
    'accounts': 'deletion_requested_by = %(user_id)s',
    'account_deletions': 'scheduled_by = %(user_id)s',
    'audit_events': 'actor_id = %(user_id)s OR subject_id = %(user_id)s',
    'mail_outbox': 'user_id = %(user_id)s OR (user_id IS NULL'
    ' AND to_address IN (%(email)s, %(unconfirmed_email)s))',
}


def _json_value(value):
    if isinstance(value, datetime.datetime):
        utc = value.astimezone(datetime.timezone.utc)
        return utc.strftime('%Y-%m-%dT%H:%M:%S.') + f'{utc.microsecond // 1000:03d}Z'
    return value


def _projected(rows, columns):
    return sorted(
        json.dumps({column: _json_value(row[column]) for column in columns})
        for row in rows
    )


def stored(conn, user_id):
    """{(table, part): the user's rows of it, as the export should show them}."""
    user = conn.execute(
        'SELECT email, unconfirmed_email FROM users WHERE id = %s', (user_id,)
    ).fetchone()
    found = {}
    for table, parts in export.EXPORTED.items():
        for part, columns in parts.items():
            query = sql.SQL('SELECT {} FROM {} WHERE ' + _ROWS_OF[table]).format(
                sql.SQL(', ').join(map(sql.Identifier, columns)),
                sql.Identifier(table),
            )
            rows = conn.execute(query, {'user_id': user_id, **user}).fetchall()
            found[table, part] = _projected(rows, columns)
    return found


def in_document(doc, part):
    node = doc
    for key in part.split('.'):
        node = node[key]
    return node if isinstance(node, list) else [node]


def exported(doc):
    return {
        (table, part): _projected(in_document(doc, part), columns)
        for table, parts in export.EXPORTED.items()
        for part, columns in parts.items()
    }


def fill(testapp, conn, make_account, make_user):
    """A user with every kind of row: MFA and recovery codes, a personal access token,
    an e-mail change, a reset link, an SSO session and a flow in progress, an account
    whose deletion they scheduled and one purged on their request, audit rows and
    mails. Returns (user, the secrets that must never be exported)."""
    account_id = make_account('Export Co')
    user = make_user(account_id=account_id, role='administrator')
    authenticator, codes = enable(testapp, user)
    token = new_token(testapp, user, account_ids=[account_id])
    new_address = unique_email('moved')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': new_address}}, headers=user.headers
    )
    testapp.post_json('/auth/password', {'email': user.email})
    conn.execute(
        'INSERT INTO sso_providers (account_id, issuer, client_id,'
        " client_secret_encrypted, discovery) VALUES (%s, 'https://idp.test/x', 'fd',"
        " '\\x00'::bytea, '{}')",
        (account_id,),
    )
    conn.execute(
        'INSERT INTO sso_flows (id_digest, state_digest, nonce, code_verifier,'
        " account_id, email, target, expires_at) VALUES (sha256('id'::bytea ||"
        " %(u)s::text::bytea), sha256('st'::bytea || %(u)s::text::bytea),"
        " 'nonce-of-the-flow-0123456789', repeat('v', 43), %(a)s, %(e)s, 'web',"
        " now() + interval '10 minutes')",
        {'u': user.id, 'a': account_id, 'e': user.email},
    )
    conn.execute(
        "UPDATE user_tokens SET sign_in_method = 'sso', sso_account_id = %s,"
        " sso_sub = 'sub-123', sso_sid = 'sid-456' WHERE user_id = %s",
        (account_id, user.id),
    )
    conn.execute(
        "UPDATE accounts SET deletion_due_at = now() + interval '7 days',"
        ' deletion_requested_at = now(), deletion_requested_by = %s WHERE id = %s',
        (user.id, account_id),
    )
    conn.execute(
        'INSERT INTO account_deletions (account_id, scheduled_at, scheduled_by, reason)'
        " VALUES (%s, now() - interval '8 days', %s, 'manual_deletion')",
        (10**12 + user.id, user.id),
    )
    secrets = [user.token, token, authenticator.totp.secret, *codes]
    row = conn.execute(
        'SELECT encrypted_password, otp_secret, access_token, pubsub_token'
        ' FROM users WHERE id = %s',
        (user.id,),
    ).fetchone()
    secrets += [row['encrypted_password'], row['access_token'], row['pubsub_token']]
    digests = [bytes(row['otp_secret'])]
    for query in (
        'SELECT token_digest FROM user_tokens WHERE user_id = %(u)s',
        'SELECT token_digest FROM personal_access_tokens WHERE user_id = %(u)s',
        'SELECT token_digest FROM one_time_tokens WHERE user_id = %(u)s',
        'SELECT code_digest FROM mfa_recovery_codes WHERE user_id = %(u)s',
        'SELECT salt FROM mfa_recovery_codes WHERE user_id = %(u)s'
        ' AND salt IS NOT NULL',
        'SELECT id_digest FROM sso_flows WHERE email = %(e)s',
        'SELECT state_digest FROM sso_flows WHERE email = %(e)s',
    ):
        digests += [
            bytes(next(iter(found.values())))
            for found in conn.execute(query, {'u': user.id, 'e': user.email})
        ]
    for digest in digests:
        secrets += [digest.hex(), base64.b64encode(digest).decode()]
    secrets += ['nonce-of-the-flow-0123456789', 'v' * 43]
    # The links in the mails (reset, confirmation, MFA revert): credentials.
    for mail in conn.execute(
        'SELECT text_body FROM mail_outbox WHERE to_address IN (%s, %s)',
        (user.email, new_address),
    ):
        secrets += re.findall(r'token=([A-Za-z0-9_-]{16,})', mail['text_body'] or '')
    return user, secrets


def test_every_kind_of_row_is_exported_as_stored_and_no_secret(
    testapp, conn, make_account, make_user
):
    user, secrets = fill(testapp, conn, make_account, make_user)
    expected = stored(conn, user.id)
    answer = testapp.get(EXPORT, headers=user.headers, status=200)

    doc = answer.json
    assert exported(doc) == expected
    # Each kind is there: nothing above compared empty lists.
    for table, part in expected:
        assert expected[table, part], (table, part)
    assert doc['user_id'] == user.id
    assert doc['withheld'] == {
        f'{table}.{column}': reason
        for (table, column), reason in export.EXCLUDED.items()
    }
    assert doc['mfa']['enabled'] is True
    assert doc['mfa']['recovery_codes_remaining'] == 10
    assert [m['current'] for m in doc['sessions']] == [True]
    assert {m['kind'] for m in doc['mails']} >= {
        'personal_access_token_created',
        'mfa_enabled',
    }
    assert doc['audit_events_truncated'] is False
    assert doc['mails_truncated'] is False
    assert len(secrets) > 20
    for secret in secrets:
        assert secret not in answer.text, secret


def test_the_export_is_a_download_kept_by_no_cache(testapp, make_user):
    user = make_user()
    answer = testapp.get(EXPORT, headers=user.headers, status=200)
    assert answer.headers['Content-Disposition'] == (
        f'attachment; filename="frontdesk-export-{user.id}.json"'
    )
    assert answer.headers['Cache-Control'] == 'no-store'
    assert answer.headers['Content-Type'] == 'application/json; charset=utf-8'
    assert answer.json['profile']['email'] == user.email


def test_the_export_is_audited_and_mailed(testapp, make_user, conn, inbox, base_env):
    user = make_user()
    testapp.get(EXPORT, headers=client(user.headers), status=200)
    [row] = conn.execute(
        'SELECT e.actor_id, e.subject_id, e.ip_address, t.user_id AS session_user'
        ' FROM audit_events e JOIN user_tokens t ON t.id = e.session_id'
        " WHERE e.event = 'profile_exported' AND e.subject_id = %s",
        (user.id,),
    ).fetchall()
    assert row == {
        'actor_id': user.id,
        'subject_id': user.id,
        'ip_address': '192.0.2.55',
        'session_user': user.id,
    }
    deliver(base_env, inbox.port)
    [message] = [
        item for item in inbox.to(user.email) if item.message['Subject'] == SUBJECT
    ]
    assert 'A copy of everything Frontdesk stores about your account' in message.text
    assert_facts(message, 'Firefox 120.0 on Linux')


def _traces(conn, user_id):
    events = conn.execute(
        "SELECT count(*) AS n FROM audit_events WHERE event = 'profile_exported'"
        ' AND subject_id = %s',
        (user_id,),
    ).fetchone()['n']
    mails = conn.execute(
        'SELECT count(*) AS n FROM mail_outbox m JOIN users u ON u.email = m.to_address'
        ' WHERE u.id = %s AND m.subject = %s',
        (user_id, SUBJECT),
    ).fetchone()['n']
    return events, mails


def test_the_export_needs_recent_authentication(testapp, make_user, conn):
    user = make_user()
    conn.execute(
        "UPDATE user_tokens SET authenticated_at = now() - interval '16 minutes'"
        ' WHERE user_id = %s',
        (user.id,),
    )
    assert testapp.get(EXPORT, headers=user.headers, status=403).json == (
        REAUTHENTICATE
    )
    testapp.head(EXPORT, headers=user.headers, status=403)
    assert _traces(conn, user.id) == (0, 0)
    # Signing in again is recent authentication.
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': user.email, 'password': user.password}
    )
    headers = {key: signed_in.headers[key] for key in ('access-token', 'client', 'uid')}
    testapp.get(EXPORT, headers=headers, status=200)
    assert _traces(conn, user.id) == (1, 1)


def test_integration_credentials_get_no_export(testapp, make_user, conn):
    user = make_user()
    token = new_token(testapp, user, scopes=['profile:read', 'profile:write'])
    for headers in ({'api_access_token': user.access_token}, bearer(token)):
        assert testapp.get(EXPORT, headers=headers, status=403).json == NEEDS_SESSION
    testapp.get(EXPORT, status=401)
    assert _traces(conn, user.id) == (0, 0)


def test_a_sixth_export_in_the_hour_is_refused_and_leaves_no_trace(
    make_testapp, make_user, conn
):
    start_clear_of_a_window_boundary(60 * 60)
    limited = make_testapp(RATE_LIMITS='on')
    user = make_user()
    for _ in range(5):
        limited.get(EXPORT, headers=user.headers, status=200)
    assert limited.get(EXPORT, headers=user.headers, status=429).json == {
        'message': 'Retry later'
    }
    assert _traces(conn, user.id) == (5, 5)
    # The bucket is the user's: another member exports as before.
    limited.get(EXPORT, headers=make_user().headers, status=200)


def test_a_head_request_exports_records_and_mails_nothing(testapp, make_user, conn):
    user = make_user()
    answer = testapp.head(EXPORT, headers=user.headers, status=200)
    assert answer.headers['Content-Disposition'] == (
        f'attachment; filename="frontdesk-export-{user.id}.json"'
    )
    assert _traces(conn, user.id) == (0, 0)


def test_another_members_data_never_appears(testapp, admin, make_user, conn):
    """Two members of one account: each export holds its own sessions, tokens, links
    and mails only. An administrator's action on a member is in both exports: the
    administrator's as their own doing (the member named by id only), the member's
    naming the administrator by id and nothing more (not their address, device or
    session)."""
    member = make_user()
    join(conn, admin.account_id, member.id)
    new_token(testapp, admin)
    testapp.post(
        f'/api/v1/accounts/{admin.account_id}/agents/{member.id}/suspend',
        headers=client(admin.headers),
    )
    reactivate(testapp, admin, member.id)
    signed_in = testapp.post_json(
        '/auth/sign_in', {'email': member.email, 'password': member.password}
    )
    headers = {key: signed_in.headers[key] for key in ('access-token', 'client', 'uid')}
    new_token(testapp, member, headers=headers)
    testapp.post_json('/auth/password', {'email': member.email})
    tables = {part: table for table, parts in export.EXPORTED.items() for part in parts}

    mine = testapp.get(EXPORT, headers=client(admin.headers), status=200)
    assert member.email not in mine.text and signed_in.headers['client'] not in (
        mine.text
    )
    doc = mine.json
    for part in ('sessions', 'personal_access_tokens', 'links', 'memberships'):
        assert {row['user_id'] for row in doc[part]} <= {admin.id}, part
        # ...although the member has rows of each kind.
        assert conn.execute(
            sql.SQL('SELECT count(*) AS n FROM {} WHERE user_id = %s').format(
                sql.Identifier(tables[part])
            ),
            (member.id,),
        ).fetchone()['n'], part
    assert {mail['to_address'] for mail in doc['mails']} == {admin.email}
    [done] = [e for e in doc['audit_events'] if e['event'] == 'member_suspended']
    assert (done['actor_id'], done['subject_id']) == (admin.id, member.id)
    assert done['ip_address'] == '192.0.2.55' and done['session_id'] is not None
    assert all(
        admin.id in (e['actor_id'], e['subject_id']) for e in doc['audit_events']
    )

    theirs = testapp.get(EXPORT, headers=headers, status=200)
    assert admin.email not in theirs.text and admin.client not in theirs.text
    [suffered] = [
        e for e in theirs.json['audit_events'] if e['event'] == 'member_suspended'
    ]
    assert suffered['actor_id'] == admin.id
    assert (suffered['ip_address'], suffered['user_agent'], suffered['session_id']) == (
        None,
        None,
        None,
    )
    for part in ('sessions', 'personal_access_tokens', 'links', 'memberships'):
        assert {row['user_id'] for row in theirs.json[part]} == {member.id}, part


def test_mails_are_the_callers_by_owner_whatever_the_address(
    testapp, make_user, conn, queries
):
    """A mail is the caller's when it names them as its owner: the confirmation to a
    new address whose request was since voided is; another user's mail to the address
    that is now the caller's is not. A row that names nobody (queued before the outbox
    named owners) is the caller's by its address."""
    user, earlier = make_user(), make_user()
    new_address = unique_email('never-confirmed')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': new_address}}, headers=user.headers
    )
    enable(testapp, user)  # a credential change: the request is void
    assert conn.execute(
        'SELECT unconfirmed_email FROM users WHERE id = %s', (user.id,)
    ).fetchone() == {'unconfirmed_email': None}
    theirs = enqueue(conn, queries, user.email, user_id=earlier.id)
    nobodys = enqueue(conn, queries, user.email)

    ids = {
        mail['id']: mail['to_address']
        for mail in testapp.get(EXPORT, headers=user.headers, status=200).json['mails']
    }

    assert new_address in ids.values()
    assert theirs not in ids and ids[nobodys] == user.email
    assert set(ids) == {
        row['id']
        for row in conn.execute(
            'SELECT id FROM mail_outbox WHERE (user_id = %s OR id = %s)'
            ' AND subject <> %s',  # the export's own notice comes after
            (user.id, nobodys, SUBJECT),
        )
    }


def test_mail_of_nobody_to_an_address_you_only_asked_for_is_not_yours(
    testapp, make_user, conn, queries
):
    """Anyone may ask to move to any address: that does not make the mail nobody owns
    to it (a reset link asked for an address no account has) theirs to read."""
    user = make_user()
    wanted = unique_email('somebody-elses')
    testapp.put_json(
        '/api/v1/profile', {'profile': {'email': wanted}}, headers=user.headers
    )
    nobodys = enqueue(conn, queries, wanted)
    assert conn.execute(
        'SELECT unconfirmed_email FROM users WHERE id = %s', (user.id,)
    ).fetchone() == {'unconfirmed_email': wanted}
    mails = testapp.get(EXPORT, headers=user.headers, status=200).json['mails']
    assert nobodys not in {mail['id'] for mail in mails}
    # The confirmation mailed to it for this user is theirs.
    assert wanted in {mail['to_address'] for mail in mails}


@pytest.mark.parametrize('part', ['audit_events', 'mails'])
def test_long_lists_are_cut_and_say_so(testapp, make_user, conn, monkeypatch, part):
    user = make_user()
    for _ in range(3):
        testapp.post_json('/auth/password', {'email': user.email})
        conn.execute(
            "INSERT INTO audit_events (event, subject_id) VALUES ('signed_out', %s)",
            (user.id,),
        )
    newest = conn.execute(
        {
            'audit_events': 'SELECT max(id) AS id FROM audit_events'
            ' WHERE subject_id = %s',
            'mails': 'SELECT max(m.id) AS id FROM mail_outbox m, users u'
            ' WHERE u.id = %s AND m.to_address = u.email',
        }[part],
        (user.id,),
    ).fetchone()['id']
    monkeypatch.setattr(export, 'MAX_ROWS', 2)
    doc = testapp.get(EXPORT, headers=user.headers, status=200).json
    assert len(doc[part]) == 2
    assert doc[f'{part}_truncated'] is True
    assert doc[part][0]['id'] == newest
