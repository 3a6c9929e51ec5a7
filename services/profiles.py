"""PUT /api/v1/profile (SPEC 5.4): every check first, then the writes in one transaction."""

from psycopg.types.json import Jsonb

import errors
from services import avatars
from services import mail
from services import passwords

# What profile.update may write; any other key inside ``profile`` is never applied.
PLAIN_FIELDS = ('name', 'display_name', 'message_signature', 'phone_number', 'ui_settings')
# Fields checked against the stored row (current password, address taken), under its lock.
CHECKED_FIELDS = frozenset(('email', 'password', 'current_password', 'password_confirmation'))
INVALID_CURRENT_PASSWORD = 'Invalid current password'


def update(conn, queries, config, validator, user_id, doc, upload=None, keep_client=None):
    """Apply ``doc`` (and the uploaded avatar bytes) to the user; return the user JSON.

    A 422 anywhere changes nothing. ``keep_client`` is the caller's token client, the
    only token a password change leaves valid.
    """
    profile = _profile(validator, doc, upload)
    if not upload and not CHECKED_FIELDS & profile.keys():
        # Nothing to check against the stored row: one statement, no lock, no transaction.
        problems = validator.errors(doc)
        if problems:
            raise errors.Unprocessable(problems)
        return _write(conn, queries, config, user_id, {key: profile[key] for key in PLAIN_FIELDS if key in profile})
    image = avatars.prepare(upload) if upload else None
    email = _normalised_email(profile)
    stored = None
    try:
        with conn.transaction():
            user = conn.execute(queries['profile.lock_user'], {'user_id': user_id, 'email': email}).fetchone()
            _check(validator, doc, profile, user)
            patch = {key: profile[key] for key in PLAIN_FIELDS if key in profile}
            new_email = email if email is not None and email != user['email'] else None
            if new_email:
                patch['unconfirmed_email'] = new_email
            if image:
                stored = patch['avatar'] = avatars.store(config.avatar_dir, *image)
            user_doc = _write(conn, queries, config, user_id, patch)
            if new_email:
                mail.send_confirmation(conn, queries, config, user_id, profile.get('name') or user['name'],
                                       new_email, new_address=True)
            if _changes_password(profile):
                passwords.change(conn, queries, config, user_id, profile['password'], keep_client=keep_client)
    except BaseException:
        avatars.remove(config.avatar_dir, stored)
        raise
    if stored:
        avatars.remove(config.avatar_dir, user['avatar'])
    return user_doc


def _write(conn, queries, config, user_id, patch):
    """Apply ``patch`` in one statement; return the user JSON of the row it wrote."""
    return conn.execute(queries['profile.update'], {
        'user_id': user_id, 'patch': Jsonb(patch), 'avatar_url_prefix': config.avatar_url_prefix,
    }).fetchone()['doc']


def remove_avatar(conn, queries, config, user_id):
    """Forget the avatar, then delete its file; return the user JSON."""
    with conn.transaction():
        user = conn.execute(queries['profile.lock_user'], {'user_id': user_id, 'email': None}).fetchone()
        conn.execute(queries['profile.clear_avatar'], {'user_id': user_id})
    avatars.remove(config.avatar_dir, user['avatar'])
    return document(conn, queries, config, user_id)


def document(conn, queries, config, user_id):
    return conn.execute(queries['users.document'], {
        'user_id': user_id, 'avatar_url_prefix': config.avatar_url_prefix,
    }).fetchone()['doc']


def _profile(validator, doc, upload):
    profile = doc.get('profile') if isinstance(doc, dict) else None
    if not isinstance(profile, dict) or not (profile or upload):
        validator.check(doc)  # a body or profile of the wrong type
        raise errors.Unprocessable.field('profile', "Profile can't be blank")
    return profile


def _changes_password(profile):
    # A null password is no password change, as when the field is absent.
    return profile.get('password') is not None


def _normalised_email(profile):
    email = profile.get('email')
    return email.strip().lower() if isinstance(email, str) else None


def _check(validator, doc, profile, user):
    """Raise the 422: the current password first, then every field rule at once."""
    if _changes_password(profile):
        current = profile.get('current_password')
        if not (isinstance(current, str) and passwords.check_password(current, user['encrypted_password'])):
            raise errors.Unprocessable(message=INVALID_CURRENT_PASSWORD)
    problems = dict(validator.errors(doc))
    confirmation = profile.get('password_confirmation')
    if _changes_password(profile) and confirmation is not None and confirmation != profile['password']:
        problems.setdefault('password_confirmation', "Password confirmation doesn't match Password")
    if user['email_taken']:
        problems.setdefault('email', 'Email has already been taken')
    if problems:
        raise errors.Unprocessable(problems.items())
