"""Passwords: bcrypt, and the rules of SPEC 15 beyond the length the schemas check."""

import ast
import functools
import hashlib
import importlib.util
import logging
import pathlib
import re

import bcrypt

from services import credentials

log = logging.getLogger('frontdesk')

TOO_COMMON = 'Password is too common'
PERSONAL = 'Password must not contain your name or e-mail'
REUSED = 'Password must differ from the current one'
BREACHED = 'Password has appeared in a data breach'
# A local part or name shorter than this is not looked for: "al" or "jo" would refuse a
# good share of all passwords and protect nothing (documented in docs/security.md).
PERSONAL_PART_MIN = 3
HIBP_TIMEOUT_SECONDS = 2


def hash_password(password, rounds):
    return bcrypt.hashpw(password.encode('utf-8'), bcrypt.gensalt(rounds)).decode(
        'ascii'
    )


def check_password(password, hashed):
    """True when ``password`` matches; False for any unusable input, never an error.

    ``hashed`` is None for a user without a password (after an e-mail revert). An empty
    password is nobody's (SPEC 15): refused without a bcrypt run, which costs the same
    for every user and every address (SPEC 3.4: a missing field runs no bcrypt).
    """
    if hashed is None or not isinstance(password, str) or not password:
        return False
    try:
        return bcrypt.checkpw(password.encode('utf-8'), hashed.encode('ascii'))
    except (ValueError, UnicodeEncodeError):
        return False


@functools.cache
def common_passwords():
    """The 30,000 most common passwords of zxcvbn's frequency lists, lower-cased.

    From the installed package, not a copy in this repository: the list is maintained
    there (it is what zxcvbn itself ranks passwords against), and read once per
    process.

    NOTE: read as text, neither imported nor run: importing anything of zxcvbn runs the
    package's ``__init__``, whose matcher ranks every list (English words, names, TV
    and film words) into dictionaries kept for the life of the process (10.7 MB a
    worker), and even running the lists' module alone leaves its garbage in the
    worker's heap (docs/performance.md, "Worker memory"). The module is generated:
    each list is one comma-separated string literal.
    """
    location = importlib.util.find_spec('zxcvbn').submodule_search_locations[0]
    text = pathlib.Path(location, 'frequency_lists.py').read_text(encoding='utf-8')
    literal = re.search(r'^\s*"passwords": ("(?:[^"\\]|\\.)*")', text, re.MULTILINE)
    return WordList(ast.literal_eval(literal[1]).lower().split(','))


class WordList:
    """Words kept as one string, ``,w1,w2,...,``: 0.3 MB where a frozenset of these
    30,000 took 3.6 MB of every worker. A lookup scans the string, tens of
    microseconds, made only beside a bcrypt run of a quarter of a second."""

    __slots__ = ('_count', '_text')

    def __init__(self, words):
        self._text = ',' + ','.join(words) + ','
        self._count = len(words)

    def __contains__(self, word):
        return ',' not in word and f',{word},' in self._text

    def __len__(self):
        return self._count


def _personal_parts(email, name):
    """The e-mail local part and the name (also without its spaces), lower-cased.

    Whole, as SPEC 15 words it, not word by word: single words of names ("Rose",
    "Mobile") are everyday words, and the predictable ones are in the common list
    anyway.
    """
    local = (email or '').partition('@')[0].lower()
    name = ' '.join((name or '').lower().split())
    parts = {local, name, name.replace(' ', '')}
    return {part for part in parts if len(part) >= PERSONAL_PART_MIN}


def problem(
    config, password, *, email=None, name=None, current_hash=None, current=None
):
    """The first SPEC 15 rule ``password`` breaks, as (attribute, message), else None.

    The length rules are the schemas'; call this only for a password they accepted.
    ``current``: the current password, when the caller has just checked it, so that the
    reuse rule needs no second bcrypt run; else ``current_hash``.
    """
    lowered = password.lower()
    if lowered in common_passwords():
        return ('password', TOO_COMMON)
    if any(part in lowered for part in _personal_parts(email, name)):
        return ('password', PERSONAL)
    if (
        password == current
        if current is not None
        else current_hash is not None and check_password(password, current_hash)
    ):
        return ('password', REUSED)
    if config.breached_password_check == 'hibp' and breached(
        password, config.hibp_range_url
    ):
        return ('password', BREACHED)
    return None


def breached(password, range_url):
    """Whether the k-anonymity range API knows ``password``; False when it cannot say.

    Only the first 5 hex digits of the SHA-1 leave the server. Fail open: a breach list
    that is down must not stop people from choosing passwords (the other rules still
    hold).
    """
    digest = hashlib.sha1(password.encode('utf-8')).hexdigest().upper()
    prefix, suffix = digest[:5], digest[5:]
    # Imported at first use (docs/performance.md, "Worker memory").
    from urllib.request import Request
    from urllib.request import urlopen

    request = Request(
        f'{range_url.rstrip("/")}/{prefix}',
        headers={'Add-Padding': 'true', 'User-Agent': 'frontdesk'},
    )
    try:
        with urlopen(request, timeout=HIBP_TIMEOUT_SECONDS) as answer:
            body = answer.read(4 * 1024 * 1024).decode('ascii', 'replace')
    except Exception as ex:  # noqa: BLE001 - any failure means "cannot say"
        log.warning('breached password check failed open: %s', type(ex).__name__)
        return False
    for line in body.splitlines():
        found, _, count = line.strip().partition(':')
        if found.upper() == suffix:
            return count.strip() not in ('', '0')  # padding lines have a count of 0
    return False


def change(
    conn,
    queries,
    config,
    user_id,
    new_password,
    keep_client=None,
    confirm=False,
    reason='password_change',
    facts=None,
    session_id=None,
):
    """Set a new password, as a credential change (SPEC 3.3), in the caller's
    transaction.

    ``confirm`` also confirms an unconfirmed user (a password reset proves the address).
    ``facts`` and ``session_id``: for the change's audit event and e-mail (credentials).
    """
    hashed = hash_password(new_password, config.bcrypt_rounds)
    with conn.transaction():
        conn.execute(
            queries['users.set_password'],
            {'user_id': user_id, 'encrypted_password': hashed, 'confirm': confirm},
        )
        credentials.change(
            conn,
            queries,
            config,
            user_id,
            reason=reason,
            keep_client=keep_client,
            facts=facts,
            session_id=session_id,
        )


def policy(config):
    """What GET /api/v1/password_policy tells clients (SPEC 15)."""
    checks = ['common', 'personal', 'reuse'] + (
        ['breached'] if config.breached_password_check == 'hibp' else []
    )
    return {'min_length': 8, 'max_bytes': 72, 'checks': checks}
