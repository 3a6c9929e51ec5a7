"""Per-user budgets of password and second-factor checks (SPEC 3.4), whatever the route.

Every check of a user's password (sign-in, the profile's current_password, MFA enrolment
and disabling) spends the user's one password budget; every check of a second factor
(sign-in step two, verify, backup codes, disabling) its one second-factor budget. Past
the budget every such check is a 429 until the window ends, the right answer too.
Password checks, right or wrong, are also capped (``Budget.cap``): each is a bcrypt run,
and a right password must not let one user's requests take the service's CPU (a reset
link's reuse rule counts too, ``within_cap``, but is never refused). They hold
with RATE_LIMITS=off: they protect the user's account and the service, whatever the
rate limits say.

A check is counted before it is made (``take``, its own statement, committed at once on
the pool's autocommit connections) and given back when it passes (to the cap too when
it is never made), so concurrent checks can never exceed the budget or the cap. The
counters share rate_limit_counters with the rate limits (buckets ``password|user=<id>``,
``password_checks|user=<id>`` and ``second_factor|user=<id>``).
"""

import contextlib
import dataclasses

import errors
from services import audit
from services import security_mail


@dataclasses.dataclass(frozen=True)
class Budget:
    limit: int
    period: int  # seconds, a fixed window
    wrong_event: str  # the audit event of one wrong check on a signed-in route
    exhausted: str  # the audit event and security e-mail of the spent budget
    cap: int | None = (
        None  # checks made in a window, right or wrong (bucket <kind>_checks)
    )


BUDGETS = {
    'password': Budget(
        10, 15 * 60, 'password_check_failed', 'password_guesses_exhausted', cap=30
    ),
    'second_factor': Budget(
        10, 60 * 60, 'second_factor_check_failed', 'second_factor_guesses_exhausted'
    ),
}


def _params(kind, user_id, cap=True):
    """The buckets of ``kind`` for ``user_id``: wrong checks, then (``cap``) all."""
    buckets = [f'{kind}|user={user_id}']
    if cap and BUDGETS[kind].cap is not None:
        buckets.append(f'{kind}_checks|user={user_id}')
    return {'buckets': buckets, 'period': BUDGETS[kind].period}


def take(conn, queries, kind, user_id):
    """Count one ``kind`` check of the user before it is made; 429 past the budget.

    Returns the check's number in the window, for ``settle``.
    """
    row = conn.execute(queries['guessing.take'], _params(kind, user_id)).fetchone()
    return over_budget(kind, row)


def within_cap(conn, queries, kind, user_id):
    """Count one ``kind`` check on the cap alone, for a check no refusal may stop (a
    password reset's reuse rule: the reset is how the owner takes the account back);
    False past the cap, and the check is then not to be made."""
    params = _params(kind, user_id)
    params['buckets'] = params['buckets'][1:]
    row = conn.execute(queries['guessing.take'], params).fetchone()
    return row['hits'] <= BUDGETS[kind].cap


def over_budget(kind, row):
    """``row['hits']``, the count of a take; 429 when it is past the budget, or its
    ``row['checks']`` past the cap."""
    budget = BUDGETS[kind]
    if row['hits'] > budget.limit or (
        budget.cap is not None and row['checks'] > budget.cap
    ):
        raise errors.TooManyRequests(max(1, row['retry_after']))
    return row['hits']


def settle(
    conn, queries, config, kind, user_id, count, passed, facts=None, signed_in=True
):
    """After a check counted by ``take``: give the count back unless it failed.

    ``passed`` None: the check was never made (a refusal before it), which costs
    nothing; a check made, right or wrong, stays counted against the cap.
    A wrong check on a signed-in route is an audit event (SPEC 14; sign-in writes its
    sign_in_failed rows, ``signed_in=False``). The check that spends the budget is
    announced to the user: an audit event and a security e-mail, once per window.
    """
    if passed is not False:
        conn.execute(
            queries['guessing.give_back'], _params(kind, user_id, cap=passed is None)
        )
        return
    budget = BUDGETS[kind]
    if signed_in:
        audit.record(conn, queries, budget.wrong_event, subject_id=user_id, facts=facts)
    if count == budget.limit:
        audit.record(
            conn,
            queries,
            budget.exhausted,
            subject_id=user_id,
            actor_id=user_id,
            facts=facts,
        )
        security_mail.send_to_user(
            conn, queries, config, budget.exhausted, user_id, facts
        )


class Checks:
    """What the checks of one request found: ``note(kind, passed)`` for each made."""

    def __init__(self):
        self.outcomes = {}

    def note(self, kind, passed):
        # One wrong check fails the request's check of that kind.
        self.outcomes[kind] = self.outcomes.get(kind, True) and bool(passed)
        return passed


# For callers without a budget to spend (the CLI, tests of the services).
class _NoChecks(Checks):
    def note(self, kind, passed):
        return passed


NO_CHECKS = _NoChecks()


@contextlib.contextmanager
def guard(conn, queries, config, user_id, kinds, facts=None):
    """Count the ``kinds`` checks a request is about to make; settle them afterwards.

    Enter it outside the request's transaction and open that transaction inside: the
    counts must stick when the transaction rolls back (a wrong password is a 422). The
    services report each check to the yielded Checks.
    """
    checks, taken = Checks(), {}
    try:
        for kind in kinds:
            taken[kind] = take(conn, queries, kind, user_id)
        yield checks
    finally:
        for kind, count in taken.items():
            settle(
                conn,
                queries,
                config,
                kind,
                user_id,
                count,
                checks.outcomes.get(kind),
                facts,
            )
