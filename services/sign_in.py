"""Every way in (SPEC 3.1, 4.1, 12, 13): the password and its second step, a
confirmation or reset link, sign-up; and the one way each ends (``_outcome``).

A way in ends in a session (the five token headers and the user JSON), or, before any
session, in the MFA challenge of SPEC 12 (206); at the session cap a browser's password
step is the 409 of SPEC 13 (sessions.issue). Resources send the Outcome
(resources.send_outcome).
"""

import dataclasses
import functools

import errors
from services import addresses
from services import audit
from services import captcha
from services import credentials
from services import guessing
from services import mfa
from services import passwords
from services import security_mail
from services import sessions
from services import sso_enforcement
from services import sso_providers
from services import users
import tokens
import userdoc

INVALID_LOGIN = {
    'success': False,
    'errors': ['Invalid login credentials. Please try again.'],
}
INVALID_TOKEN = 'Invalid token'
# What a single-sign-on session records of its provider (SPEC 19).
SSO_COLUMNS = ('sso_account_id', 'sso_sid', 'sso_sub')


def _unconfirmed(email):
    return {
        'success': False,
        'error_code': 'user_not_confirmed',
        'errors': [
            f"A confirmation email was sent to your account at '{email}'. You must "
            'follow the instructions in the email before your account can be activated'
        ],
    }


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a way in ended: ``challenge``, the 206 body of SPEC 12; else ``session``
    (sessions.Issued) for ``uid``, with ``document``, the user JSON."""

    challenge: dict | None = None
    session: sessions.Issued | None = None
    uid: str | None = None
    document: str | None = None


def with_password(pool, queries, config, doc, facts):
    """The password step of POST /auth/sign_in: the Outcome, or the 401 (audited).

    The check is counted against the user's guessing budget (SPEC 3.4) in the lookup
    itself; an unknown address against a budget of its own, alike. bcrypt runs with
    no connection held. Where single sign-on is enforced (SPEC 19), the lookup says so,
    and only the right password learns it: 401 sso_required, unless break glass.
    """
    email, password = doc.get('email', ''), doc.get('password', '')
    user = row = None
    if addresses.is_valid(email):
        email = addresses.normalise(email)
        with pool.connection() as conn:
            row = conn.execute(
                queries['guessing.sign_in'],
                {
                    'email': email,
                    'domain': sso_providers.domain_of(email),
                    'period': guessing.BUDGETS['password'].period,
                },
            ).fetchone()
        user = row if row['id'] is not None else None
        try:
            count = guessing.over_budget('password', row)
        except errors.TooManyRequests:
            record_failure(pool, queries, email, 'rate_limited', facts)
            raise
    # An unknown address (or a user without a password, after an e-mail revert) costs
    # one bcrypt check too, so timing does not reveal it; what is no address costs none
    # (SPEC 3.4), nor is it counted.
    hashed = (user and user['encrypted_password']) or _dummy_hash(config.bcrypt_rounds)
    matches = row is not None and passwords.check_password(password, hashed)
    if user is not None:
        with pool.connection() as conn:
            guessing.settle(
                conn,
                queries,
                config,
                'password',
                user['id'],
                count,
                bool(matches and user['encrypted_password']),
                facts,
                signed_in=False,
            )
    if user is None or user['encrypted_password'] is None or not matches:
        _refuse(
            pool, queries, email if isinstance(email, str) else '', 'password', facts
        )
    # Before the unconfirmed refusal: single sign-on confirms an address (SPEC 19).
    if user['sso_enforced']:
        with pool.connection() as conn:
            enforced = sso_enforcement.state(conn, queries, user_id=user['id'])
        if enforced is not None and not enforced['break_glass']:
            _refuse(
                pool,
                queries,
                email,
                'sso_required',
                facts,
                sso_enforcement.SSO_REQUIRED,
            )
    if user['confirmed_at'] is None:
        _refuse(pool, queries, email, 'unconfirmed', facts, _unconfirmed(user['email']))
    try:
        with pool.connection() as conn, conn.transaction():
            kind = _challenge_kind(conn, queries, user['id'])
            if kind:
                # The password checked above must still be the user's when the
                # challenge is issued (a reset may have committed meanwhile).
                sessions.check_password_unchanged(conn, queries, user['id'], hashed)
            session = (
                None
                if kind
                else sessions.sign_in(conn, queries, config, user, doc, facts)
            )
            return _outcome(
                conn, queries, config, user['id'], user['email'], kind, session
            )
    except sessions.PasswordChanged:
        _refuse(pool, queries, email, 'password', facts)
    except errors.AccountSuspended as refused:
        _refuse(pool, queries, email, 'suspended', facts, refused.body)


def with_sso_token(pool, queries, config, doc, facts):
    """``email`` and the ``sso_auth_token`` of a single-sign-on callback (SPEC 19): the
    Outcome of a password sign-in (the session limits of SPEC 13 included), or its
    401 (audited).

    The token is used up and the session issued in one transaction: a 409 at the
    session cap rolls the use back, so the same token may be sent again with the
    sessions to end. A second factor is asked for as after a password (206), unless
    the provider's ``amr`` named one the account trusts; the challenge then carries the
    single-sign-on data to the session the second step opens.
    """
    email = doc.get('email')
    email = addresses.normalise(email) if addresses.is_valid(email) else ''
    digest = tokens.digest(doc['sso_auth_token'])
    try:
        with pool.connection() as conn, conn.transaction():
            row = use_link(conn, queries, 'sso', digest)
            if row['email'] != email:
                # Another user's token: theirs stays usable (rolled back).
                raise errors.Unprocessable(message=INVALID_TOKEN)
            if not row['member']:
                # Suspended in the provider's account since the callback.
                raise errors.AccountSuspended()
            kind = None
            if not row['idp_second_factor']:
                kind = _challenge_kind(conn, queries, row['id'])
            session = None
            if not kind:
                session = sessions.sign_in(
                    conn, queries, config, row, doc, facts, sso=row
                )
            outcome = _outcome(
                conn, queries, config, row['id'], row['email'], kind, session
            )
            if kind:
                conn.execute(
                    queries['sso.flow_mark_challenge'],
                    {
                        'token_digest': tokens.digest(outcome.challenge['mfa_token']),
                        **{key: row[key] for key in SSO_COLUMNS},
                    },
                )
            return outcome
    except (errors.Unprocessable, sessions.PasswordChanged):
        _refuse(pool, queries, email, 'sso_token', facts)
    except errors.AccountSuspended as refused:
        _refuse(pool, queries, email, 'suspended', facts, refused.body)


def second_step(pool, queries, config, doc, facts):
    """``mfa_token`` with ``otp_code`` or ``backup_code`` (SPEC 12): the Outcome, or
    why not (audited).

    A challenge not opened by single sign-on, for an address where it is enforced
    (SPEC 19): the right code of break glass signs in and tells the administrators;
    anyone else's is the 401 sso_required (a challenge issued before enforcement).
    """
    with pool.connection() as conn:
        try:
            with conn.transaction():
                sso = _challenge_sso(conn, queries, doc.get('mfa_token'))
                enforced = sso_enforcement.for_challenge(
                    conn, queries, doc.get('mfa_token')
                )
                user, factor = mfa.answer_challenge(
                    conn,
                    queries,
                    config,
                    doc.get('mfa_token'),
                    doc.get('otp_code'),
                    doc.get('backup_code'),
                    facts=facts,
                )
                if factor:
                    if enforced is not None and not enforced['break_glass']:
                        raise sso_enforcement.Required()
                    session = sessions.sign_in(
                        conn,
                        queries,
                        config,
                        user,
                        doc,
                        facts,
                        second_factor=True,
                        sso=sso,
                    )
                    if enforced is not None:
                        sso_enforcement.break_glass(
                            conn, queries, config, enforced, user, session.id, facts
                        )
                    return _outcome(
                        conn, queries, config, user['id'], user['email'], None, session
                    )
        except errors.AccountSuspended:
            # Rolled back: nothing of the step stays but this row.
            audit.record_sign_in_failure(
                conn, queries, user['email'], 'suspended', facts
            )
            raise
        except sso_enforcement.Required:
            audit.record_sign_in_failure(
                conn, queries, user['email'], 'sso_required', facts
            )
            raise
        # After the commit: a wrong code must stay counted.
        audit.record_sign_in_failure(
            conn, queries, user['email'] if user else '', 'mfa', facts
        )
        raise errors.InvalidCode() if user else errors.InvalidMFAToken()


def confirm(pool, queries, config, doc, facts, presented):
    """POST /auth/confirmation: confirm the address the link was mailed to, and enter.

    ``presented``: the sign-in credentials the request carries (resources'
    presented_sessions); without a live session of the user among them, a first
    confirmation also mails the notice of SPEC 3.4 rule 1.

    A pending address taken by someone else meanwhile fails the UPDATE on
    users_email_key, which errors.py answers with "Email has already been taken".
    """
    digest = link_digest(doc, 'confirmation_token')
    with pool.connection() as conn, conn.transaction():
        row = use_link(conn, queries, 'confirmation', digest)
        if row['user_id'] is None:
            raise errors.Unprocessable(
                message='Already confirmed'
                if row['already_confirmed']
                else INVALID_TOKEN
            )
        # Decided before the credential change ends the sessions it looks for.
        notice = security_mail.sign_up_notice(conn, queries, config, row, presented)
        refused = sso_enforcement.refused(conn, queries, row['user_id'])
        kind, session = (
            (None, None)
            if refused
            else _admit(conn, queries, config, row['user_id'], facts)
        )
        # Sessions and links from before the address was proven may be someone else's
        # (who signed up with it, or asked to move the account to it).
        credentials.change(
            conn,
            queries,
            config,
            row['user_id'],
            reason='email_confirmation' if row['changed_address'] else 'confirmation',
            keep_client=session and session.client,
            facts=facts,
            session_id=session and session.id,
        )
        # After the credential change, which would void the notice's reset link.
        security_mail.send_sign_up_notice(conn, queries, config, notice)
        if not refused:
            return _outcome(
                conn, queries, config, row['user_id'], row['email'], kind, session
            )
    # Committed: the address is confirmed, only no session opens (SPEC 19).
    _refuse(
        pool, queries, row['email'], 'sso_required', facts, sso_enforcement.SSO_REQUIRED
    )


def reset_password(pool, queries, config, validator, doc, facts):
    """PUT /auth/password: set a new password with a reset link, and enter.

    The password is checked before the transaction, which holds the user's row: bcrypt
    and the breached-password lookup take up to seconds, and a refusal leaves the link
    working for a better password. A bad link is reported before the password rules.
    """
    digest = link_digest(doc, 'reset_password_token')
    problems = _reset_problems(validator, doc)
    with pool.connection() as conn:
        user = conn.execute(
            queries['confirmations.reset_link_user'], {'token_digest': digest}
        ).fetchone()
        if user is None:
            raise errors.Unprocessable(message=INVALID_TOKEN)
        found = problems or [
            passwords.problem(
                config,
                doc['password'],
                email=user['email'],
                name=user['name'],
                # The reuse rule's bcrypt run spends the user's cap on password checks
                # (SPEC 3.4); past the cap the rule is left out, no 429.
                current_hash=user['encrypted_password']
                if guessing.within_cap(conn, queries, 'password', user['id'])
                else None,
            )
        ]
        if any(found):
            raise errors.Unprocessable(filter(None, found))
        with conn.transaction():
            # Used, or voided by a credential change, since it was read: a 422.
            user = use_link(conn, queries, 'reset_password', digest)
            refused = sso_enforcement.refused(conn, queries, user['id'])
            kind, session = (
                (None, None)
                if refused
                else _admit(conn, queries, config, user['id'], facts)
            )
            passwords.change(
                conn,
                queries,
                config,
                user['id'],
                doc['password'],
                keep_client=session and session.client,
                confirm=True,
                reason='password_reset',
                facts=facts,
                session_id=session and session.id,
            )
            if not refused:
                return _outcome(
                    conn, queries, config, user['id'], user['email'], kind, session
                )
    # Committed: the password is set and every session ended; none opens (SPEC 19).
    _refuse(
        pool,
        queries,
        user['email'],
        'sso_required',
        facts,
        sso_enforcement.SSO_REQUIRED,
    )


def sign_up(pool, queries, config, validate, doc, facts, client_ip):
    """POST /api/v1/accounts without credentials (SPEC 4.1): the refusals in the
    contract's order (403s, the captcha, the taken address, then the field rules), then
    the user, the account and the session."""
    if not all(
        users.text(doc, key) for key in ('account_name', 'email', 'user_full_name')
    ):
        raise errors.Forbidden(users.INVALID_PARAMS)
    if not addresses.is_valid(doc['email']):
        raise errors.Forbidden('You have entered an invalid email')
    email = addresses.normalise(doc['email'])
    already = f'You have already signed up for an account with {email}'
    captcha.verify(config, doc.get('h_captcha_client_response'), client_ip)
    with pool.connection() as conn:
        taken = conn.execute(queries['users.email_taken'], {'email': email}).fetchone()[
            'taken'
        ]
    if taken:
        raise errors.Forbidden(already)
    validate(doc)
    name = users.text(doc, 'user_full_name')
    found = passwords.problem(config, doc['password'], email=email, name=name)
    if found:
        raise errors.Unprocessable([found])
    hashed = passwords.hash_password(doc['password'], config.bcrypt_rounds)
    with pool.connection() as conn:
        try:
            user_id, session = users.sign_up(
                conn,
                queries,
                config,
                account_name=users.text(doc, 'account_name'),
                locale=doc.get('locale') or 'en',
                name=name,
                email=email,
                encrypted_password=hashed,
                facts=facts,
            )
        except users.EmailTaken:
            raise errors.Forbidden(already) from None
        return _outcome(conn, queries, config, user_id, email, None, session)


def link_digest(doc, key):
    """The digest of the one-time token in ``doc[key]``; an unusable one is a 422."""
    token = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token:
        raise errors.Unprocessable(message=INVALID_TOKEN)
    return tokens.digest(token)


def use_link(conn, queries, purpose, digest):
    """Use up the live one-time link of ``purpose`` whose token has ``digest``; return
    the row of the statement that does (``_take_sql``); none is a 422 Invalid token.

    Inside the caller's transaction. The user's row first (one_time_tokens.lock_user),
    then the link: the order of every credential change, of a resend and of a revert.
    The other order deadlocks with such a request for the same user.
    """
    conn.execute(
        queries['one_time_tokens.lock_user'],
        {'token_digest': digest, 'purpose': purpose},
    )
    row = conn.execute(_take_sql(queries, purpose), {'token_digest': digest}).fetchone()
    if row is None:
        raise errors.Unprocessable(message=INVALID_TOKEN)
    return row


def _take_sql(queries, purpose):
    """The statement that uses a link of ``purpose`` up (names written out, so that
    db.query_lookups and the tests see them)."""
    return {
        'confirmation': queries['confirmations.confirm'],
        'reset_password': queries['confirmations.take_reset_token'],
        'email_revert': queries['confirmations.take_revert_token'],
        'mfa_revert': queries['mfa.take_revert_link'],
        'sso': queries['sso.flow_take_token'],
    }[purpose]


def _challenge_sso(conn, queries, mfa_token):
    """The single-sign-on data of the MFA challenge ``mfa_token`` (with_sso_token), or
    None."""
    if not isinstance(mfa_token, str) or not mfa_token:
        return None
    return conn.execute(
        queries['sso.flow_challenge_sso'], {'token_digest': tokens.digest(mfa_token)}
    ).fetchone()


def _challenge_kind(conn, queries, user_id):
    """Whether a session may be issued now (None), or which challenge comes first:
    'mfa_challenge' (MFA is on) or 'mfa_setup' (an account requires MFA and it is off).

    Every way in that proves no second factor asks here (the password, a reset or
    confirmation link), so none hands out a session that skips the second factor or the
    enrolment an account requires.
    """
    state = conn.execute(queries['mfa.sign_in_state'], {'user_id': user_id}).fetchone()
    if state['mfa_enabled']:
        return 'mfa_challenge'
    return 'mfa_setup' if state['setup_required'] else None


def _admit(conn, queries, config, user_id, facts):
    """``(kind, session)`` of a way in through a link: an MFA user gets the challenge of
    ``kind``, not a session (SPEC 12: no bypass); else a new session, issued before the
    link's credential change (SPEC 3.3), so that revoking "every other token" spares
    it."""
    kind = _challenge_kind(conn, queries, user_id)
    if kind:
        return kind, None
    return None, sessions.issue(
        conn, queries, config, user_id, facts=facts, method='link'
    )


def _outcome(conn, queries, config, user_id, uid, kind, session):
    """How every way in ends, inside its transaction: the challenge of ``kind``, else
    ``session`` with the user JSON.

    The challenge comes after any credential change of the way in, which voids every
    earlier one-time token.
    """
    if kind:
        return Outcome(challenge=mfa.issue_challenge(conn, queries, user_id, uid, kind))
    document = userdoc.read(conn, queries, config, user_id)
    return Outcome(session=session, uid=uid, document=document)


def _reset_problems(validator, doc):
    found = validator.errors(doc)
    confirmation = doc.get('password_confirmation')
    if isinstance(confirmation, str) and confirmation != doc.get('password'):
        found.append(
            ('password_confirmation', "Password confirmation doesn't match Password")
        )
    return found


@functools.lru_cache(maxsize=4)
def _dummy_hash(rounds):
    """A hash to check against when the address is unknown, so timing tells nothing."""
    return passwords.hash_password('not a password of anyone', rounds)


def record_failure(pool, queries, email, reason, facts):
    """A failed sign-in's audit row (SPEC 14), on a connection of its own."""
    with pool.connection() as conn:
        audit.record_sign_in_failure(conn, queries, email, reason, facts)


def _refuse(pool, queries, email, reason, facts, body=INVALID_LOGIN):
    """Record the failed sign-in, then answer 401.

    A known and an unknown address write the same row with the same statement (the
    subject is null for the unknown one), so the audit costs both the same time.
    """
    record_failure(pool, queries, email, reason, facts)
    raise errors.Unauthenticated(body)
