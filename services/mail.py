"""E-mail: rendering the messages of SPEC section 6 and writing them to the outbox."""

import datetime
import html
import urllib.parse

import tokens

CONFIRMATION_LIFESPAN = datetime.timedelta(days=3)
RESET_LIFESPAN = datetime.timedelta(hours=6)


def _link(config, path, **query):
    return f'{config.frontend_url}{path}?{urllib.parse.urlencode(query)}'


def _message(kind, to_address, subject, greeting, lines, link, link_text):
    text = '\n\n'.join([greeting, *lines, f'{link_text}: {link}'])
    paragraphs = ''.join(f'<p>{html.escape(line)}</p>' for line in [greeting, *lines])
    html_body = (
        f'<!doctype html><html><body>{paragraphs}'
        f'<p><a href="{html.escape(link, quote=True)}">{html.escape(link_text)}</a></p>'
        f'</body></html>'
    )
    return {'kind': kind, 'to_address': to_address, 'subject': subject,
            'text_body': text + '\n', 'html_body': html_body}


def confirmation_message(config, name, to_address, token, new_address=False):
    link = _link(config, '/app/auth/confirmation', confirmation_token=token)
    lines = (['Please confirm your new e-mail address.'] if new_address
             else ['Welcome to Frontdesk! Please confirm your e-mail address to finish signing up.'])
    lines.append('The link works once and expires in 3 days.')
    subject = 'Confirm your new email address' if new_address else 'Confirmation Instructions'
    return _message('confirmation', to_address, subject, f'Hi {name or to_address},', lines, link,
                    'Confirm my account')


def reset_password_message(config, name, to_address, token):
    link = _link(config, '/app/auth/password/edit', reset_password_token=token)
    lines = ['Someone asked to reset the password of your Frontdesk account.',
             'If it was not you, ignore this e-mail; your password stays as it is.',
             'The link works once and expires in 6 hours.']
    return _message('reset_password', to_address, 'Reset password instructions',
                    f'Hi {name or to_address},', lines, link, 'Change my password')


def send_confirmation(conn, queries, config, user_id, name, to_address, new_address=False):
    """Issue a confirmation token for ``to_address`` and queue its e-mail."""
    token = tokens.new_token()
    conn.execute(queries['one_time_tokens.issue'], {
        'user_id': user_id, 'purpose': 'confirmation', 'email': to_address,
        'token_digest': tokens.digest(token), 'lifespan': CONFIRMATION_LIFESPAN,
    })
    conn.execute(queries['mail.enqueue'], confirmation_message(config, name, to_address, token, new_address))


def send_reset_password(conn, queries, config, user_id, name, to_address):
    token = tokens.new_token()
    conn.execute(queries['one_time_tokens.issue'], {
        'user_id': user_id, 'purpose': 'reset_password', 'email': to_address,
        'token_digest': tokens.digest(token), 'lifespan': RESET_LIFESPAN,
    })
    conn.execute(queries['mail.enqueue'], reset_password_message(config, name, to_address, token))
