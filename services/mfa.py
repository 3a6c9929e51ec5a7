"""Two-factor sign-in (SPEC 12): TOTP secrets, recovery codes and sign-in challenges.

Every function runs inside the caller's transaction. Functions that check a code lock
the user row first (``mfa.lock_user``), so two requests with one code cannot both pass
the replay guard, and lock orders are always user before one-time token.
"""

import datetime
import hashlib
import hmac
import logging
import os
import re
import secrets
import time

import pyotp

import errors
from services import audit
from services import credentials
from services import guessing
from services import mail
from services import passwords
from services import security_mail
from services import sessions
import tokens

log = logging.getLogger('frontdesk')

ISSUER = 'Frontdesk'
STEP_SECONDS = 30
CHALLENGE_LIFESPAN = datetime.timedelta(minutes=5)
# Long enough to install an authenticator app, scan the code and type the first one.
SETUP_LIFESPAN = datetime.timedelta(minutes=15)
MAX_WRONG_CODES = 5
RECOVERY_CODE_COUNT = 10
# 8 characters of Crockford's base32, 40 random bits: the reference clients' code fields
# hold exactly 8 characters (SPEC 12).
CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
RECOVERY_CODE_LENGTH = 8
# Crockford's decoding: the letters people type for the digits they look like.
_CROCKFORD_LOOKALIKES = str.maketrans({'I': '1', 'L': '1', 'O': '0'})
# 40 bits need a slow hash (NIST SP 800-63B 5.1.2): scrypt with 4 MiB, about 10 ms on
# one core. One derivation checks a code against the whole batch (one salt per batch).
_KDF = {'n': 2**12, 'r': 8, 'p': 1, 'dklen': 32}
_SALT_BYTES = 16
_NO_MATCH = bytes(32)
# The codes issued before migration 0013: 4 groups of 6 base32 characters (120 bits),
# kept as bare SHA-256 digests (salt NULL), typed with the look-alikes of that alphabet.
_LEGACY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
_LEGACY_LENGTH = 24
_LEGACY_LOOKALIKES = str.maketrans({'0': 'O', '1': 'I', '8': 'B'})
_SEPARATORS = re.compile(r'[\s-]+')
_CODE = re.compile(r'^[0-9]{6}$')

# The label of the TOTP secrets' key (tokens.seal).
_SEAL_LABEL = b'frontdesk mfa totp-secret aes-256-gcm v1'

INVALID_CODE = 'Invalid verification code'
INVALID_CURRENT_PASSWORD = 'Invalid current password'
ALREADY_ENABLED = 'MFA is already enabled'
NOT_ENABLED = 'MFA is not enabled'
# Whoever signed up with someone else's address could otherwise put a second factor of
# their own in front of the owner's confirmation and reset (both answer 206 for MFA
# users).
UNCONFIRMED = 'Confirm your e-mail address before enabling MFA'
INVALID_DISABLE = 'Invalid credentials or verification code'


def available(config):
    return config.secret_key is not None


def require_available(config):
    if config.secret_key is None:
        raise errors.MFAUnavailable()


def _associated_data(user_id):
    # Binds the ciphertext to its row: copied onto another user it does not decrypt.
    return b'frontdesk users.otp_secret user_id=%d' % user_id


def seal(config, user_id, secret):
    """The TOTP ``secret`` encrypted for storage in users.otp_secret."""
    return tokens.seal(
        config.secret_key, _SEAL_LABEL, _associated_data(user_id), secret
    )


def unseal(config, user_id, stored):
    """The TOTP secret of users.otp_secret; None when it cannot be read with this
    key."""
    secret = tokens.unseal(
        config.secret_key, _SEAL_LABEL, _associated_data(user_id), stored
    )
    if secret is None and stored is not None and config.secret_key is not None:
        # SECRET_KEY changed, or the row was tampered with: no code can match.
        log.error(
            'the TOTP secret of user %s does not decrypt with this SECRET_KEY', user_id
        )
    return secret


def code_step(secret, code, last_step, now=None):
    """The 30 s step whose code ``code`` is, within one step of now and after
    ``last_step`` (the replay guard); None when there is none."""
    if secret is None or not isinstance(code, str):
        return None
    code = _SEPARATORS.sub('', code)
    if not _CODE.match(code):
        return None
    totp = pyotp.TOTP(secret)
    current = int((time.time() if now is None else now) // STEP_SECONDS)
    found = None
    for step in (current - 1, current, current + 1):
        # Every candidate is compared, in constant time, whatever matched before.
        matches = hmac.compare_digest(totp.generate_otp(step), code)
        if matches and found is None and (last_step is None or step > last_step):
            found = step
    return found


def _new_recovery_code():
    return ''.join(secrets.choice(CROCKFORD) for _ in range(RECOVERY_CODE_LENGTH))


def _typed(code, alphabet, length, lookalikes):
    """``code`` as issued, whatever its case, spaces, dashes and look-alikes; None if it
    cannot be one of ``length`` characters of ``alphabet``."""
    if not isinstance(code, str):
        return None
    normal = _SEPARATORS.sub('', code).upper().translate(lookalikes)
    if len(normal) != length or not set(normal) <= set(alphabet):
        return None
    return normal


def _derive(code, salt):
    return hashlib.scrypt(code.encode('ascii'), salt=salt, **_KDF)


def _expected_digest(code, salt, derived):
    """What a stored digest with ``salt`` equals when ``code`` is its code.

    ``derived`` caches one derivation per salt, so a batch costs one.
    """
    if salt is None:  # a 24-character code of before migration 0013
        legacy = _typed(code, _LEGACY_ALPHABET, _LEGACY_LENGTH, _LEGACY_LOOKALIKES)
        return hashlib.sha256(legacy.encode('ascii')).digest() if legacy else _NO_MATCH
    salt = bytes(salt)
    if salt not in derived:
        typed = _typed(code, CROCKFORD, RECOVERY_CODE_LENGTH, _CROCKFORD_LOOKALIKES)
        derived[salt] = _derive(typed, salt) if typed else _NO_MATCH
    return derived[salt]


def new_recovery_codes(conn, queries, user_id):
    """Replace the user's recovery codes with new ones; return them (shown once)."""
    codes = []
    while len(codes) < RECOVERY_CODE_COUNT:
        code = _new_recovery_code()
        if code not in codes:  # one salt for the batch: a twin would share a digest
            codes.append(code)
    salt = os.urandom(_SALT_BYTES)
    conn.execute(
        queries['mfa.replace_recovery_codes'],
        {
            'user_id': user_id,
            'salt': salt,
            'digests': [_derive(code, salt) for code in codes],
        },
    )
    return codes


def use_recovery_code(conn, queries, user_id, code):
    """Use up ``code`` when it is one of the user's unused codes; True when it was."""
    rows = conn.execute(
        queries['mfa.unused_recovery_codes'], {'user_id': user_id}
    ).fetchall()
    derived = {}
    match = None
    for row in rows:
        # Compared with each one, in constant time: the answer's timing names none.
        wanted = _expected_digest(code, row['salt'], derived)
        if hmac.compare_digest(bytes(row['code_digest']), wanted) and match is None:
            match = row['id']
    if match is None:
        return False
    return (
        conn.execute(queries['mfa.use_recovery_code'], {'id': match}).fetchone()
        is not None
    )


def _given(code):
    """A code as sent; an empty one counts as absent (SPEC 12: the reference dashboard
    sends ``otp_code: ""`` beside a recovery code, and ``backup_code: ""`` beside a TOTP
    code)."""
    return None if isinstance(code, str) and not code.strip() else code


def second_factor(conn, queries, config, user, otp_code=None, backup_code=None):
    """Check and use up a TOTP code or a recovery code of the locked ``user`` row.

    Returns 'otp' or 'recovery_code' for the factor that passed, None when none did.
    An empty code counts as absent.
    """
    otp_code, backup_code = _given(otp_code), _given(backup_code)
    if otp_code is not None:
        step = code_step(
            unseal(config, user['id'], user['otp_secret']),
            otp_code,
            user['otp_last_step'],
        )
        if step is None:
            return None
        conn.execute(queries['mfa.use_step'], {'user_id': user['id'], 'step': step})
        return 'otp'
    if backup_code is not None and use_recovery_code(
        conn, queries, user['id'], backup_code
    ):
        return 'recovery_code'
    return None


def check_current_password(user, password, checks):
    """422 unless ``password`` is the current password of the locked ``user`` row; the
    check spends the user's password budget (``checks``, services/guessing.py)."""
    if not (
        isinstance(password, str)
        and checks.note(
            'password', passwords.check_password(password, user['encrypted_password'])
        )
    ):
        raise errors.Unprocessable(message=INVALID_CURRENT_PASSWORD)


def check_password_and_factor(
    conn, queries, config, user, password, otp_code, backup_code, checks
):
    """The password and a second factor of the locked ``user`` row (turning MFA off,
    erasing oneself): 422 INVALID_DISABLE unless both pass. Returns the factor used
    ('otp' or 'recovery_code'), which is used up.

    No code: refused before the password is checked, without a bcrypt run (SPEC 3.4),
    and spending neither budget: nothing was guessed. A wrong password checks no code.
    """
    if _given(otp_code) is None and _given(backup_code) is None:
        raise errors.Unprocessable(message=INVALID_DISABLE)
    password_ok = checks.note(
        'password',
        isinstance(password, str)
        and passwords.check_password(password, user['encrypted_password']),
    )
    factor = None
    if password_ok:
        factor = checks.note(
            'second_factor',
            second_factor(conn, queries, config, user, otp_code, backup_code),
        )
    if factor is None:
        raise errors.Unprocessable(message=INVALID_DISABLE)
    return factor


def _announce(conn, queries, config, event, user, facts):
    """An audit event and a security e-mail (SPEC 12, 14). Turning MFA on or off is
    announced by credentials.change, as every credential change is."""
    audit.record(
        conn, queries, event, subject_id=user['id'], actor_id=user['id'], facts=facts
    )
    security_mail.send(
        conn,
        queries,
        config,
        event,
        user_id=user['id'],
        to_address=user['email'],
        name=user['name'],
        facts=facts,
    )


def _lock_user(conn, queries, user_id):
    return conn.execute(queries['mfa.lock_user'], {'user_id': user_id}).fetchone()


def _lock_caller(conn, queries, user_id):
    """The signed-in caller's row, locked. Erased (SPEC 20) while the request waited
    for it: the 401 of a credential that no longer exists."""
    user = _lock_user(conn, queries, user_id)
    if user is None:
        raise errors.Unauthenticated()
    return user


def status(conn, queries, config, user_id):
    row = conn.execute(queries['mfa.status'], {'user_id': user_id}).fetchone()
    return {'feature_available': available(config), **row}


def start_enrolment(
    conn, queries, config, user_id, password=None, checks=guessing.NO_CHECKS
):
    """A new pending secret; the provisioning URL and secret.

    ``password`` is checked when sent, and need not be (SPEC 12: the reference dashboard
    sends none). The "this was not me" link of the MFA-enabled e-mail is what undoes an
    enrolment made with someone else's session. ``checks``: where the password check is
    reported (services/guessing.py), as for the other functions that check a password or
    a code.
    """
    user = _lock_caller(conn, queries, user_id)
    # The refusals that need no password first: they run no bcrypt (SPEC 3.4).
    if user['enabled']:
        raise errors.Unprocessable(message=ALREADY_ENABLED)
    if not user['confirmed']:
        raise errors.Unprocessable(message=UNCONFIRMED)
    if password is not None:
        check_current_password(user, password, checks)
    secret = pyotp.random_base32()
    conn.execute(
        queries['mfa.start_enrolment'],
        {'user_id': user_id, 'otp_secret': seal(config, user_id, secret)},
    )
    url = pyotp.TOTP(secret).provisioning_uri(name=user['email'], issuer_name=ISSUER)
    return {'provisioning_url': url, 'secret': secret}


def enable(
    conn,
    queries,
    config,
    user_id,
    otp_code,
    keep_client,
    facts=None,
    checks=guessing.NO_CHECKS,
):
    """Turn MFA on with the pending secret: a credential change (SPEC 3.3), whose e-mail
    carries the link that undoes this enablement (SPEC 12)."""
    user = _lock_caller(conn, queries, user_id)
    if user['enabled']:
        raise errors.Unprocessable(message=ALREADY_ENABLED)
    if not user['confirmed']:
        raise errors.Unprocessable(message=UNCONFIRMED)
    if (
        checks.note(
            'second_factor',
            second_factor(conn, queries, config, user, otp_code=otp_code),
        )
        is None
    ):
        raise errors.Unprocessable(message=INVALID_CODE)
    conn.execute(queries['mfa.enable'], {'user_id': user_id})
    token = tokens.new_token()
    # Revert links survive the credential change below, as e-mail revert links do.
    conn.execute(
        queries['mfa.issue_revert_link'],
        {
            'user_id': user_id,
            'token_digest': tokens.digest(token),
            'lifespan': mail.REVERT_LIFESPAN,
        },
    )
    credentials.change(
        conn,
        queries,
        config,
        user_id,
        reason='mfa_enabled',
        keep_client=keep_client,
        facts=facts,
        mail_extra=mail.mfa_revert_link(config, token),
    )
    return {'enabled': True, 'backup_codes': new_recovery_codes(conn, queries, user_id)}


def regenerate_recovery_codes(
    conn,
    queries,
    config,
    user_id,
    otp_code,
    keep_client=None,
    facts=None,
    checks=guessing.NO_CHECKS,
):
    """New recovery codes behind a TOTP code (not a credential change: nothing is
    revoked)."""
    user = _lock_caller(conn, queries, user_id)
    if not user['enabled']:
        raise errors.Unprocessable(message=NOT_ENABLED)
    if (
        checks.note(
            'second_factor',
            second_factor(conn, queries, config, user, otp_code=otp_code),
        )
        is None
    ):
        raise errors.Unprocessable(message=INVALID_CODE)
    _announce(conn, queries, config, 'mfa_backup_codes_regenerated', user, facts)
    return {'backup_codes': new_recovery_codes(conn, queries, user_id)}


def disable(
    conn,
    queries,
    config,
    user_id,
    password,
    otp_code,
    backup_code,
    keep_client,
    facts=None,
    checks=guessing.NO_CHECKS,
):
    """Turn MFA off behind the password and a second factor: a credential change.

    Returns the factor used ('otp' or 'recovery_code').
    """
    user = _lock_caller(conn, queries, user_id)
    if not user['enabled']:
        raise errors.Unprocessable(message=NOT_ENABLED)
    factor = check_password_and_factor(
        conn, queries, config, user, password, otp_code, backup_code, checks
    )
    conn.execute(queries['mfa.disable'], {'user_id': user_id})
    if factor == 'recovery_code':
        _announce(conn, queries, config, 'mfa_recovery_code_used', user, facts)
    credentials.change(
        conn,
        queries,
        config,
        user_id,
        reason='mfa_disabled',
        keep_client=keep_client,
        facts=facts,
    )
    return factor


def disable_by_operator(conn, queries, config, user_id):
    """``manage.py disable-mfa``: MFA off without a factor, every session ended.

    Returns whether it was on. A credential change like any other disabling, so a
    session the attacker may hold ends too.
    """
    user = _lock_user(conn, queries, user_id)
    conn.execute(queries['mfa.disable'], {'user_id': user_id})
    credentials.change(conn, queries, config, user_id, reason='mfa_disabled')
    return user['enabled']


def _issue(conn, queries, user_id, email, purpose, lifespan):
    token = tokens.new_token()
    conn.execute(
        queries['one_time_tokens.issue'],
        {
            'user_id': user_id,
            'purpose': purpose,
            'email': email,
            'token_digest': tokens.digest(token),
            'lifespan': lifespan,
        },
    )
    return token


def issue_challenge(conn, queries, user_id, email, kind):
    """The 206 body of SPEC 12 with a new token of ``kind``.

    Issue it after any credential change in the same transaction: that voids every
    one-time token of the user, this one included. A locked-out member gets none
    (401 ``account_suspended``, SPEC 18): the refusal rolls the transaction back, so a
    reset or confirmation that would end in a challenge changes nothing either.
    """
    sessions.refuse_locked_out(conn, queries, user_id)
    if kind == 'mfa_challenge':
        return {
            'mfa_required': True,
            'mfa_token': _issue(
                conn, queries, user_id, email, kind, CHALLENGE_LIFESPAN
            ),
        }
    return {
        'mfa_setup_required': True,
        'mfa_token': _issue(conn, queries, user_id, email, kind, SETUP_LIFESPAN),
    }


def answer_challenge(
    conn, queries, config, mfa_token, otp_code, backup_code, facts=None
):
    """Check the second sign-in step against the challenge ``mfa_token``.

    Returns (user row, factor): no user row when the token is unknown, used, expired or
    exhausted; no factor when the code was wrong, which is counted against the token.
    Commit either way: the count must stick.
    """
    if not isinstance(mfa_token, str) or not mfa_token:
        return None, None
    digest = tokens.digest(mfa_token)
    found = conn.execute(
        queries['mfa.find_challenge'], {'token_digest': digest}
    ).fetchone()
    if found is None:
        return None, None
    user = _lock_user(conn, queries, found['user_id'])
    challenge = conn.execute(
        queries['mfa.lock_challenge'],
        {'token_digest': digest, 'max_wrong': MAX_WRONG_CODES},
    ).fetchone()
    if challenge is None:
        return None, None
    # The user's second-factor budget (SPEC 3.4), in this transaction, which commits
    # whether the code was right or wrong; past the budget the 429 rolls it back.
    count = guessing.take(conn, queries, 'second_factor', user['id'])
    factor = second_factor(conn, queries, config, user, otp_code, backup_code)
    guessing.settle(
        conn,
        queries,
        config,
        'second_factor',
        user['id'],
        count,
        factor is not None,
        facts,
        signed_in=False,
    )
    if factor is None:
        conn.execute(queries['mfa.count_wrong_code'], {'id': challenge['id']})
        return user, None
    conn.execute(queries['mfa.use_challenge'], {'id': challenge['id']})
    if factor == 'recovery_code':
        _announce(conn, queries, config, 'mfa_recovery_code_used', user, facts)
    return user, factor
