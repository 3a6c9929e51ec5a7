"""PUT /api/v1/profile (SPEC 5.4): every check first, then the writes in one
transaction."""

import datetime
from typing import NamedTuple

import orjson

import db
import errors
from services import addresses
from services import audit
from services import avatars
from services import guessing
from services import mail
from services import passwords
from services import security_mail
from services import sessions
import userdoc

# What profile.update may write; any other key inside ``profile`` is never applied.
PLAIN_FIELDS = (
    'name',
    'display_name',
    'message_signature',
    'phone_number',
    'ui_settings',
)
# Fields checked against the stored row (current password, address taken), under its
# lock.
CHECKED_FIELDS = frozenset(
    ('email', 'password', 'current_password', 'password_confirmation')
)
INVALID_CURRENT_PASSWORD = 'Invalid current password'
EMAIL_CHANGES_PER_DAY = 5


def update(
    conn,
    queries,
    config,
    validator,
    user_id,
    doc,
    upload=None,
    keep_client=None,
    facts=None,
):
    """Apply ``doc`` (and the uploaded avatar bytes) to the user; return the user JSON.

    A 422 anywhere changes nothing. ``keep_client`` is the caller's token client, the
    only token a password change leaves valid; None means the caller used
    ``api_access_token``, which may not change the e-mail address or the password.
    """
    profile = _profile(validator, doc, upload)
    if upload is None and not CHECKED_FIELDS & profile.keys():
        # Nothing to check against the stored row: one statement, no lock, no
        # transaction.
        problems = validator.errors(doc)
        if problems:
            raise errors.Unprocessable(problems)
        return _write(
            conn,
            queries,
            config,
            user_id,
            {key: profile[key] for key in PLAIN_FIELDS if key in profile},
        )
    image = avatars.prepare(upload) if upload is not None else None
    email = _normalised_email(profile)
    stored = None
    # The current password, checked for a password change or an address change, spends
    # the user's guessing budget (SPEC 3.4); counted outside the transaction, which a
    # wrong one rolls back. A count for a check that is never made is given back.
    kinds = (
        ('password',)
        if _changes_password(profile)
        or (email is not None and profile.get('current_password') is not None)
        else ()
    )
    try:
        with (
            guessing.guard(conn, queries, config, user_id, kinds, facts) as checks,
            conn.transaction(),
        ):
            user = _locked(conn, queries, user_id, email)
            new_email = (
                email
                if email is not None
                and email not in (user['email'], user['unconfirmed_email'])
                else None
            )
            if keep_client is None and (new_email or _changes_password(profile)):
                raise errors.NeedsSession()
            if new_email:
                # Before any password check: a change the daily limit refuses runs no
                # bcrypt (SPEC 3.4). A refusal after it rolls the count back.
                _count_email_change(conn, queries, user_id)
            _check(config, validator, doc, profile, user, checks)
            if new_email:
                _check_recent_authentication(
                    conn, queries, config, profile, user, facts, checks
                )
            if _changes_password(profile):
                # Before the new address is written: a credential change drops a pending
                # one.
                passwords.change(
                    conn,
                    queries,
                    config,
                    user_id,
                    profile['password'],
                    keep_client=keep_client,
                    facts=facts,
                )
            patch = {key: profile[key] for key in PLAIN_FIELDS if key in profile}
            if new_email:
                patch['unconfirmed_email'] = new_email
            if image:
                stored = patch['avatar'] = avatars.store(config.avatar_dir, *image)
            user_doc = _write(conn, queries, config, user_id, patch)
            if new_email:
                _mail_email_change(
                    conn,
                    queries,
                    config,
                    user_id,
                    profile.get('name') or user['name'],
                    user,
                    new_email,
                    facts,
                )
                audit.record(
                    conn,
                    queries,
                    'email_change_requested',
                    subject_id=user_id,
                    facts=facts,
                )
    except BaseException:
        avatars.remove(config.avatar_dir, stored)
        raise
    if stored:
        avatars.remove(config.avatar_dir, user['avatar'])
    return user_doc


def _check_recent_authentication(conn, queries, config, profile, user, facts, checks):
    """An e-mail change needs the current password, or a session that checked one (or a
    second factor) within REAUTH_WINDOW_MINUTES (SPEC 3.4): a stolen session alone
    cannot move the account. A current password that is sent must be right (the 422 of
    5.4), and its check spends the password budget like every other (``checks``), or a
    stolen session could guess the password here without limit."""
    current = profile.get('current_password')
    session_id = facts.session_id if facts else None
    if current is not None:
        if not checks.note(
            'password',
            isinstance(current, str)
            and passwords.check_password(current, user['encrypted_password']),
        ):
            raise errors.Unprocessable(message=INVALID_CURRENT_PASSWORD)
        sessions.mark_authenticated(conn, queries, session_id)
    elif not sessions.recently_authenticated(conn, queries, config, session_id):
        raise errors.ReauthenticationRequired()


def _count_email_change(conn, queries, user_id):
    """SPEC 3.3: at most 5 e-mail changes a day, whatever RATE_LIMITS says (429 beyond).

    Taken addresses count too, or the 429 would tell them apart from free ones.
    """
    recent = conn.execute(
        queries['profile.recent_email_changes'], {'user_id': user_id}
    ).fetchone()
    if recent['n'] >= EMAIL_CHANGES_PER_DAY:
        raise errors.TooManyRequests(max(recent['retry_after'], 1))
    conn.execute(queries['profile.record_email_change'], {'user_id': user_id})


def email_changes_exhausted(conn, queries, user_id):
    """Count one more confirmation mail to a pending address; True when over the limit.

    A resent link goes to an address the user chose, so it counts as an e-mail change.
    """
    try:
        _count_email_change(conn, queries, user_id)
    except errors.TooManyRequests:
        return True
    return False


def _mail_email_change(
    conn, queries, config, user_id, name, user, new_email, facts=None
):
    """The link to the new address, or a notice to its owner; a revert link to the old
    one.

    A taken address gets the same answer and the same pending state as a free one (no
    oracle, SPEC 3.3), but no link: its owner is told someone tried to use it. Only a
    confirmed old address gets a revert link (SPEC 3.4): an unproven one may be
    anybody's, and the link would reserve it for this user.
    """
    # Ownership moves when the revert window closes (SPEC 3.4); the new address is told
    # when.
    revert_until = (
        datetime.datetime.now(datetime.timezone.utc) + mail.REVERT_LIFESPAN
        if user['confirmed']
        else None
    )
    if user['email_taken']:
        mail.send_address_taken_notice(
            conn, queries, user['taken_by_id'], user['taken_by_name'], new_email
        )
    else:
        mail.send_confirmation(
            conn,
            queries,
            config,
            user_id,
            name,
            new_email,
            new_address=True,
            revert_until=revert_until,
        )
    if user['confirmed']:
        mail.send_email_change_notice(
            conn,
            queries,
            config,
            user_id,
            user['name'],
            user['email'],
            new_email,
            security_mail.origin(facts),
        )


class UpdatedRow(NamedTuple):
    """What profile.update returns, as db.Lookup reads it."""

    doc: bytes
    now: float


def _write(conn, queries, config, user_id, patch):
    """Apply ``patch`` in one statement; return the user JSON of the row it wrote."""
    row = db.Lookup(
        'profile_update', queries['profile.update'], config, UpdatedRow
    ).fetchone(conn, user_id, orjson.dumps(patch).decode())
    if row is None:
        raise errors.Unauthenticated()  # erased since the access rules let it in
    return userdoc.render_text(
        row.doc, userdoc.from_epoch(row.now), config.avatar_url_prefix
    )


def remove_avatar(conn, queries, config, user_id):
    """Forget the avatar, then delete its file; return the user JSON."""
    with conn.transaction():
        user = _locked(conn, queries, user_id, None)
        conn.execute(queries['profile.clear_avatar'], {'user_id': user_id})
    avatars.remove(config.avatar_dir, user['avatar'])
    return userdoc.read(conn, queries, config, user_id)


def _locked(conn, queries, user_id, email):
    """The caller's row, locked for the change (profile.lock_user). A user erased
    (SPEC 20) after the access rules let the request in, while it waited for the row,
    is gone: the 401 of a credential that no longer exists, before any file is
    stored."""
    user = conn.execute(
        queries['profile.lock_user'], {'user_id': user_id, 'email': email}
    ).fetchone()
    if user is None:
        raise errors.Unauthenticated()
    return user


def _profile(validator, doc, upload):
    profile = doc.get('profile') if isinstance(doc, dict) else None
    if not isinstance(profile, dict) or not (profile or upload is not None):
        validator.check(doc)  # a body or profile of the wrong type
        raise errors.Unprocessable.field('profile', "Profile can't be blank")
    return profile


def _changes_password(profile):
    # A null password is no password change, as when the field is absent.
    return profile.get('password') is not None


def _normalised_email(profile):
    email = profile.get('email')
    return addresses.normalise(email) if isinstance(email, str) else None


def _check(config, validator, doc, profile, user, checks):
    """Raise the 422: the current password first, then every field rule at once."""
    if _changes_password(profile):
        current = profile.get('current_password')
        if not checks.note(
            'password',
            isinstance(current, str)
            and passwords.check_password(current, user['encrypted_password']),
        ):
            raise errors.Unprocessable(message=INVALID_CURRENT_PASSWORD)
    # An avatar alone (multipart) has no field to check; the schema's "not blank" is
    # for a profile sent without one.
    problems = dict(validator.errors(doc)) if profile else {}
    confirmation = profile.get('password_confirmation')
    if (
        _changes_password(profile)
        and confirmation is not None
        and confirmation != profile['password']
    ):
        problems.setdefault(
            'password_confirmation', "Password confirmation doesn't match Password"
        )
    if _changes_password(profile) and 'password' not in problems:
        name = (
            profile.get('name')
            if isinstance(profile.get('name'), str)
            else user['name']
        )
        found = passwords.problem(
            config,
            profile['password'],
            email=user['email'],
            name=name,
            # Checked right above: the reuse rule compares it, no second bcrypt.
            current=profile['current_password'],
        )
        if found:
            problems.setdefault(*found)
    if problems:
        raise errors.Unprocessable(problems.items())
