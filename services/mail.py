"""E-mail: rendering the messages of SPEC sections 3.3 and 6 and writing them to the
outbox."""

import datetime
import html
import re
import unicodedata
import urllib.parse

from services import addresses
import tokens

CONFIRMATION_LIFESPAN = datetime.timedelta(days=3)
RESET_LIFESPAN = datetime.timedelta(hours=6)
REVERT_LIFESPAN = datetime.timedelta(days=7)
# Confirmation, reset and resend mails to one address, whoever asks for them (SPEC 3.4).
MAILS_PER_ADDRESS_PER_HOUR = 5
NAME_LIMIT = 100
# Where mail clients start a link of their own: after a scheme's colon, between the
# labels of a host name, around the @ of an address, between the segments of a path. Not
# before a digit or a space ("Firefox 120.0", "Bcc: x"): no host name or path starts
# there.
_LINK_BREAKS = re.compile(r'([.:@/])(?=[^\s0-9])')
# U+2060 WORD JOINER would be invisible too, but auto-linkers that look through it
# exist; a zero-width space ends the token they match on, and it is not rendered.
_ZERO_WIDTH_SPACE = '&#8203;'


def clean_name(name):
    """User-supplied text for a message: no control or format characters, at most 100.

    Control characters (Cc) could forge lines in the plain-text part; format characters
    (Cf: bidirectional overrides, zero-width joiners) could disguise what the text says.
    """
    text = ''.join(
        char for char in name or '' if unicodedata.category(char) not in ('Cc', 'Cf')
    )
    return ' '.join(text.split())[:NAME_LIMIT]


def _inert_html(text):
    """HTML for user-supplied text in which no mail client finds a link to make
    clickable.

    A name such as "Visit evil.example/login" is escaped, then a zero-width space
    follows every '.', ':', '@' and '/', so "http://", "evil.example" and "a@b.c" are no
    longer the unbroken runs auto-linkers look for; the reader sees the text unchanged.
    """
    return _LINK_BREAKS.sub(r'\1' + _ZERO_WIDTH_SPACE, html.escape(text))


def _link(config, path, **query):
    return f'{config.frontend_url}{path}?{urllib.parse.urlencode(query)}'


class FromRequest(tuple):
    """A line of a message that ends in text from a request: (label, text).

    The text is cleaned as names are, and inert in HTML (SPEC 3.4): a User-Agent is
    whatever the client chose to send.
    """

    def __new__(cls, label, text):
        return super().__new__(cls, (label, clean_name(text)))

    def __str__(self):
        return ''.join(self)


def _line_html(line):
    if isinstance(line, FromRequest):
        return html.escape(line[0]) + _inert_html(line[1])
    return html.escape(line)


def _message(
    kind, user_id, to_address, subject, name, lines, link=None, link_text=None
):
    """Plain text and HTML. ``name`` (user-supplied) is cleaned here, in one place.

    ``user_id``: whose mail it is (mail_outbox.user_id, migration 0022): the account it
    goes to, or for a link asked for an address, the account the link is for. The eraser
    and the export find a person's mail by it. None: mail to nobody's account.
    """
    name = clean_name(name) or to_address
    text = '\n\n'.join(
        [f'Hi {name},', *map(str, lines)] + ([f'{link_text}: {link}'] if link else [])
    )
    paragraphs = f'<p>Hi {_inert_html(name)},</p>' + ''.join(
        f'<p>{_line_html(line)}</p>' for line in lines
    )
    if link:
        paragraphs += (
            f'<p><a href="{html.escape(link, quote=True)}">'
            f'{html.escape(link_text)}</a></p>'
        )
    html_body = f'<!doctype html><html><body>{paragraphs}</body></html>'
    return {
        'kind': kind,
        'user_id': user_id,
        'to_address': to_address,
        'subject': subject,
        'text_body': text + '\n',
        'html_body': html_body,
    }


def confirmation_message(
    config, user_id, name, to_address, token, new_address=False, revert_until=None
):
    """``revert_until``: when the revert link of the old address expires (SPEC 3.4), if
    one was sent."""
    link = _link(config, '/app/auth/confirmation', confirmation_token=token)
    lines = (
        ['Please confirm your new e-mail address.']
        if new_address
        else [
            'Welcome to Frontdesk! Please confirm your e-mail address to finish '
            'signing up.'
        ]
    )
    lines.append('The link works once and expires in 3 days.')
    if new_address and revert_until is not None:
        when = revert_until.astimezone(datetime.timezone.utc).strftime(
            '%Y-%m-%d %H:%M UTC'
        )
        lines.append(
            f"The account becomes this address's for good on {when}: until then the "
            'previous address can undo the change, as it was told.'
        )
    subject = (
        'Confirm your new email address' if new_address else 'Confirmation Instructions'
    )
    return _message(
        'confirmation',
        user_id,
        to_address,
        subject,
        name,
        lines,
        link,
        'Confirm my account',
    )


def _reset_url(config, token):
    return _link(config, '/app/auth/password/edit', reset_password_token=token)


def reset_password_message(config, user_id, name, to_address, token):
    link = _reset_url(config, token)
    lines = [
        'Someone asked to reset the password of your Frontdesk account.',
        'If it was not you, ignore this e-mail; your password stays as it is.',
        'The link works once and expires in 6 hours.',
    ]
    return _message(
        'reset_password',
        user_id,
        to_address,
        'Reset password instructions',
        name,
        lines,
        link,
        'Change my password',
    )


def email_change_notice(
    config, user_id, name, to_address, new_address, token, facts=None
):
    """The notice to the old address; ``facts`` (time, address, device) as
    security_notice."""
    link = _link(config, '/app/auth/email_revert', token=token)
    lines = [
        f'Someone asked to change the e-mail address of your Frontdesk account to '
        f'{addresses.mask(new_address)}.',
        *(fact_lines(facts) if facts else ()),
        'If it was you, there is nothing to do: the change happens once the new '
        'address is confirmed.',
        'If it was not you, use the link below within 7 days: it puts this address '
        'back, cancels the change, signs every device out and mails you a link to '
        'choose a new password.',
    ]
    return _message(
        'email_change_notice',
        user_id,
        to_address,
        'Your e-mail address is being changed',
        name,
        lines,
        link,
        'This was not me: undo the change',
    )


def address_taken_notice(owner_id, name, to_address):
    """To the owner of ``to_address`` (``owner_id``, ``name``): it is their mail."""
    lines = [
        'Someone asked to change the e-mail address of another Frontdesk account to '
        'this one, which is already yours. Nothing was changed, and your account is '
        'not affected.',
        'No action is needed. If you keep getting these messages, tell us.',
    ]
    return _message(
        'address_taken_notice',
        owner_id,
        to_address,
        'Someone tried to use your e-mail address',
        name,
        lines,
    )


def account_purged_notice(to_address, account_id, deleted_at, people):
    """To INSTANCE_ADMIN_EMAIL (SPEC 20): which account went and when; no name and no
    address of the account or of anyone in it."""
    when = deleted_at.astimezone(datetime.timezone.utc).strftime(
        '%Y-%m-%d %H:%M:%S UTC'
    )
    lines = [
        f'Account {account_id} was deleted on {when}: its scheduled deletion date had '
        'passed.',
        f'Members left with no other account and erased: {people}.',
        'What stays is its compliance record (account id, when it was deleted, when '
        'and by whom its deletion was scheduled) in the table account_deletions.',
    ]
    return _message(
        'account_purged',
        None,  # to the instance's administrator, nobody's account
        to_address,
        f'Account {account_id} was deleted',
        None,
        lines,
    )


def _issue(conn, queries, user_id, purpose, to_address, lifespan, replace=True):
    token = tokens.new_token()
    conn.execute(
        queries['one_time_tokens.issue'] if replace else queries['one_time_tokens.add'],
        {
            'user_id': user_id,
            'purpose': purpose,
            'email': to_address,
            'token_digest': tokens.digest(token),
            'lifespan': lifespan,
        },
    )
    return token


def send_confirmation(
    conn,
    queries,
    config,
    user_id,
    name,
    to_address,
    new_address=False,
    revert_until=None,
):
    """Issue a confirmation token for ``to_address`` and queue its e-mail (bounded per
    address, as every link mail is: _enqueue_or_suppress)."""
    token = tokens.new_token()
    _enqueue_or_suppress(
        conn,
        queries,
        'confirmation',
        CONFIRMATION_LIFESPAN,
        token,
        confirmation_message(
            config, user_id, name, to_address, token, new_address, revert_until
        ),
    )


def send_reset_password(conn, queries, config, user_id, name, to_address):
    token = _issue(conn, queries, user_id, 'reset_password', to_address, RESET_LIFESPAN)
    conn.execute(
        queries['mail.enqueue'],
        reset_password_message(config, user_id, name, to_address, token),
    )


def reset_link(conn, queries, config, user_id, to_address):
    """Issue a reset link for ``user_id`` at ``to_address`` (it replaces an earlier
    one, as send_reset_password's does) and return its URL, for a message that carries
    it among other things (security_mail.send_sign_up_notice)."""
    token = _issue(conn, queries, user_id, 'reset_password', to_address, RESET_LIFESPAN)
    return _reset_url(config, token)


def send_email_change_notice(
    conn, queries, config, user_id, name, old_address, new_address, facts=None
):
    """Tell the old address, with a link that undoes the change (bound to that
    address)."""
    token = _issue(
        conn,
        queries,
        user_id,
        'email_revert',
        old_address,
        REVERT_LIFESPAN,
        replace=False,
    )
    conn.execute(
        queries['mail.enqueue'],
        email_change_notice(
            config, user_id, name, old_address, new_address, token, facts
        ),
    )


def send_address_taken_notice(conn, queries, owner_id, name, to_address):
    """Tell the owner of ``to_address`` (``owner_id``) someone tried to use it: one of
    the address's MAILS_PER_ADDRESS_PER_HOUR, as a link mail is (SPEC 3.4)."""
    conn.execute(
        queries['mail.enqueue_bounded'],
        {
            **address_taken_notice(owner_id, name, to_address),
            'per_hour': MAILS_PER_ADDRESS_PER_HOUR,
        },
    )


def request_password_reset(conn, queries, config, email):
    """Queue a reset link to the user registered with ``email``
    (POST /auth/password)."""
    user = conn.execute(
        queries['confirmations.user_by_email'], {'email': email}
    ).fetchone()
    token = tokens.new_token()
    message = reset_password_message(
        config, user and user['id'], user['name'] if user else None, email, token
    )
    _enqueue_or_suppress(
        conn, queries, 'reset_password', RESET_LIFESPAN, token, message
    )


def request_confirmation(conn, queries, config, target, email):
    """Queue a confirmation link for ``target`` (a confirmations.address_to_confirm
    row, or None when there is nothing to confirm for ``email``:
    POST /resend_confirmation)."""
    token = tokens.new_token()
    message = confirmation_message(
        config,
        target and target['id'],
        target and target['name'],
        target['to_address'] if target else email,
        token,
        new_address=bool(target and target['new_address']),
        revert_until=target and target['revert_until'],
    )
    _enqueue_or_suppress(
        conn, queries, 'confirmation', CONFIRMATION_LIFESPAN, token, message
    )


def _enqueue_or_suppress(conn, queries, purpose, lifespan, token, message):
    """The same statement whether or not there is a user to mail (``message``'s
    user_id, None when there is none).

    Without one the outbox row is written as 'suppressed' (never sent, no bodies, no
    token stored): the same work, so the answer's timing does not tell who is
    registered. So it is past MAILS_PER_ADDRESS_PER_HOUR links to the address, whoever
    asked (SPEC 3.4).
    """
    conn.execute(
        queries['mail.enqueue_with_token'],
        {
            **message,
            'purpose': purpose,
            'per_hour': MAILS_PER_ADDRESS_PER_HOUR,
            'token_digest': tokens.digest(token),
            'lifespan': lifespan,
        },
    )


def fact_lines(facts):
    """When, from which address and which device (SPEC 14); ``facts`` as
    security_notice's."""
    when = (
        facts['when']
        .astimezone(datetime.timezone.utc)
        .strftime('%Y-%m-%d %H:%M:%S UTC')
    )
    return [
        f'Time: {when}',
        f'IP address: {facts.get("ip_address") or "unknown"}',
        FromRequest('Device: ', clean_name(facts.get('device')) or 'an unknown device'),
    ]


def security_notice(
    config,
    kind,
    user_id,
    to_address,
    name,
    subject,
    what,
    facts,
    advice=None,
    lines=(),
    link=None,
):
    """A security e-mail (SPEC 14): what happened, when, from which address and device,
    and what to do if it was not the user. ``facts``: when (datetime), ip_address,
    device; ``link``: (url, text) instead of the sign-in link. ``user_id``: the
    recipient's."""
    body = [
        what,
        *fact_lines(facts),
        *lines,
        advice
        or (
            'If this was you, there is nothing to do. If it was not, reset your '
            'password now ("Forgot password?" on the sign-in page), then end the '
            'sessions you do not recognise under Profile, Sessions.'
        ),
    ]
    url, text = link or (f'{config.frontend_url}/app/login', 'Sign in to Frontdesk')
    return _message(kind, user_id, to_address, subject, name, body, url, text)


def mfa_revert_link(config, token):
    """What the MFA-enabled e-mail says instead of the sign-in link (SPEC 12): the link
    that undoes this enablement, for security_mail.send's ``extra``."""
    return {
        'advice': (
            'If this was you, there is nothing to do. If it was not, use the link '
            'below within 7 days: it turns two-factor sign-in off again, signs every '
            'device out and mails you a link to choose a new password.'
        ),
        'link': (
            _link(config, '/app/auth/mfa_revert', token=token),
            'This was not me: turn it off',
        ),
    }
