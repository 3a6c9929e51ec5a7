"""Creating users: sign-up (a user, an account and its first administrator) and the
CLI."""

from services import mail
from services import sessions
import tokens

INVALID_PARAMS = 'Invalid, please check the signup parameters and try again'


class EmailTaken(Exception):
    pass


def text(doc, key):
    """``doc[key]`` trimmed, or '' when it is not a string (the sign-up fields)."""
    value = doc.get(key)
    return value.strip() if isinstance(value, str) else ''


def create_user(conn, queries, *, name, email, encrypted_password, confirmed=False):
    """Insert a user; raise EmailTaken when the address exists (in any case)."""
    row = conn.execute(
        queries['users.insert'],
        {
            'name': name,
            'email': email,
            'encrypted_password': encrypted_password,
            'access_token': tokens.new_token(),
            'confirmed': confirmed,
        },
    ).fetchone()
    if row is None:
        raise EmailTaken(email)
    return row['id']


def add_account(conn, queries, *, user_id, account_name, locale, stamp_active=False):
    """Create an account with ``user_id`` as its administrator; return its id."""
    account_id = conn.execute(
        queries['accounts.insert'], {'name': account_name, 'locale': locale}
    ).fetchone()['id']
    conn.execute(
        queries['memberships.insert'],
        {
            'account_id': account_id,
            'user_id': user_id,
            'role': 'administrator',
            'stamp_active': stamp_active,
        },
    )
    return account_id


def sign_up(
    conn,
    queries,
    config,
    *,
    account_name,
    locale,
    name,
    email,
    encrypted_password,
    facts=None,
):
    """The one transaction of SPEC 4.1 step 7; return (user_id, the sessions.Issued)."""
    with conn.transaction():
        user_id = create_user(
            conn, queries, name=name, email=email, encrypted_password=encrypted_password
        )
        add_account(
            conn, queries, user_id=user_id, account_name=account_name, locale=locale
        )
        mail.send_confirmation(conn, queries, config, user_id, name, email)
        session = sessions.issue(conn, queries, config, user_id, facts=facts)
    return user_id, session
