"""The audit log of SPEC 14: one append-only row per security event.

``record`` runs in the caller's transaction, so an event and its row commit together
(or neither does). ``details`` names what happened (fields changed, the reason a
sign-in failed), never a value that could be a secret: a text under a key that looks
like one (``password``, ``token``...) is refused, so a careless caller fails its tests
instead of leaking into the log.
"""

import dataclasses
import ipaddress
import re

from psycopg.types.json import Jsonb

# Every event the service writes; GET .../audit_events filters by these names.
EVENTS = (
    'sign_in_succeeded',
    'sign_in_failed',
    'signed_out',
    'password_changed',
    'password_reset',
    'email_confirmed',
    'email_change_requested',
    'email_change_confirmed',
    'email_change_reverted',
    'mfa_enabled',
    'mfa_disabled',
    'mfa_enabled_reverted',
    'mfa_recovery_code_used',
    'mfa_backup_codes_regenerated',
    'access_token_reset',
    'personal_access_token_created',
    'personal_access_token_revoked',
    'session_revoked',
    'sessions_ended_by_administrator',
    # SPEC 18: an administrator suspends or reactivates a member of the account.
    'member_suspended',
    'member_reactivated',
    'account_settings_changed',
    # SPEC 19: an administrator sets or removes the account's identity provider.
    'sso_settings_updated',
    'sso_settings_deleted',
    # SPEC 20: an administrator schedules or cancels the account's deletion.
    'account_deletion_scheduled',
    'account_deletion_cancelled',
    'access_refused',
    # SPEC 3.4: wrong checks on signed-in routes, and a spent guessing budget
    # (services/guessing.py).
    'password_check_failed',
    'second_factor_check_failed',
    'password_guesses_exhausted',
    'second_factor_guesses_exhausted',
    # SPEC 19: a single-sign-on callback that ends in an sso_auth_token, or fails (the
    # reason in details).
    'sso_sign_in',
    'sso_sign_in_failed',
    # SPEC 19: a password sign-in where single sign-on is enforced (an administrator's
    # break glass); a provider's back-channel logout, done or refused.
    'sso_break_glass',
    'sso_backchannel_logout',
    'sso_backchannel_logout_refused',
    # SPEC 20: the user downloaded everything stored about them.
    'profile_exported',
    # SPEC 20: a member erased themselves (DELETE /api/v1/profile). One row in each
    # account they left, naming nobody: no actor, subject, address, device or session.
    'member_erased',
)
# The events of a member an administrator sees although they name no account.
SIGN_IN_EVENTS = ('sign_in_succeeded', 'sign_in_failed', 'signed_out')
FAILURE_REASONS = (
    'password',
    'mfa',
    'unconfirmed',
    'rate_limited',
    'suspended',
    # SPEC 19: a bad, used, expired or another user's sso_auth_token.
    'sso_token',
    'sso_required',
)
USER_AGENT_LIMIT = 512
IP_ADDRESS_LIMIT = 64  # an address as text; a Unix socket peer may be longer
# The details key naming the personal access token that acted (SPEC 17); never present
# for a session or the profile's access_token.
ACTING_TOKEN = 'acting_personal_access_token_id'
_SECRET_KEY = re.compile(r'password|token|secret|otp|code|digest', re.IGNORECASE)


def _checked(details):
    for key, value in (details or {}).items():
        if _SECRET_KEY.search(key) and not isinstance(value, (bool, int)):
            raise ValueError(f'audit details must not carry {key!r}')
    return details or {}


@dataclasses.dataclass(frozen=True)
class RequestFacts:
    """What services know of the request that acts: who, from where, with what.

    Built once per request (middleware/request_facts.py), the address and User-Agent
    already cut to what the audit columns store. NO_REQUEST: none (the CLI).
    """

    ip_address: str | None = None
    user_agent: str | None = None
    caller_id: int | None = None
    caller_email: str | None = None
    session_id: int | None = None
    request_id: str | None = None
    # The personal access token the request came with (SPEC 17), so that after a leak
    # the audit log tells what that token did.
    personal_token_id: int | None = None


NO_REQUEST = RequestFacts()


def request_facts(ip_address, user_agent, caller=None, request_id=None):
    """RequestFacts of a request, from its peer address, User-Agent and Caller (or
    None)."""
    return RequestFacts(
        ip_address=ip_address[:IP_ADDRESS_LIMIT] if ip_address else None,
        user_agent=user_agent[:USER_AGENT_LIMIT].replace('\x00', '')
        if user_agent
        else None,
        caller_id=caller.id if caller is not None else None,
        caller_email=caller.email if caller is not None else None,
        session_id=caller.session_id if caller is not None else None,
        request_id=request_id,
        personal_token_id=caller.personal_token_id if caller is not None else None,
    )


def address_key(address):
    """The bucket of a client address: an IPv6 client is keyed by its /64.

    One subscriber usually holds a whole /64, so a per-address limit would be a
    per-request one. Every spelling of an address gives the same key, and an
    IPv4-mapped IPv6 address (``::ffff:192.0.2.1``) is its IPv4 address.
    """
    try:
        ip = ipaddress.ip_address(address.split('%', 1)[0])
    except ValueError:
        return 'unknown'
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return str(ip)
    return str(ipaddress.IPv6Network((ip, 64), strict=False))


def record_sign_in_failure(conn, queries, email, reason, facts):
    """A failed sign-in (SPEC 14), written the same way whether ``email`` is known or
    not."""
    if reason not in FAILURE_REASONS:
        raise ValueError(f'unknown sign-in failure {reason!r}')
    facts = facts or NO_REQUEST
    conn.execute(
        queries['audit.insert_sign_in_failure'],
        {
            'email': email,
            'ip_address': facts.ip_address,
            'address_key': address_key(facts.ip_address or ''),
            'user_agent': facts.user_agent,
            'details': Jsonb({'reason': reason}),
            'reason': reason,
        },
    )


def record(
    conn,
    queries,
    event,
    *,
    subject_id=None,
    actor_id=None,
    account_id=None,
    facts=None,
    details=None,
    session_id=None,
):
    """Append one audit row in the caller's transaction.

    ``facts``: the RequestFacts of the request, or None; the IP address, user agent and
    session come from it, and the id of the personal access token the request came
    with goes into ``details`` under ACTING_TOKEN (apart from
    ``personal_access_token_id``, the token a creation or revocation is about).
    ``actor_id`` defaults to the signed-in caller, ``subject_id`` to the actor.
    ``session_id`` overrides the request's (a sign-in records the session it opened).
    """
    if event not in EVENTS:
        raise ValueError(f'unknown audit event {event!r}')
    facts = facts or NO_REQUEST
    if facts.personal_token_id is not None:
        details = {**(details or {}), ACTING_TOKEN: facts.personal_token_id}
    if actor_id is None:
        actor_id = facts.caller_id
    conn.execute(
        queries['audit.insert'],
        {
            'event': event,
            'actor_id': actor_id,
            'subject_id': subject_id if subject_id is not None else actor_id,
            'account_id': account_id,
            'ip_address': facts.ip_address,
            'user_agent': facts.user_agent,
            'session_id': session_id if session_id is not None else facts.session_id,
            'details': Jsonb(_checked(details)),
        },
    )
