"""Schemathesis hooks for a run against a live Frontdesk (tests/test_stateful.py; by
hand, docs/api.md "Fuzzing the API").

SCHEMATHESIS_HOOKS=tests.schemathesis_hooks, with FRONTDESK_URL, FRONTDESK_EMAIL and
FRONTDESK_PASSWORD naming the service and a confirmed user of it (and optionally
FRONTDESK_DATABASE_URL, see SignedIn).

Two things a run needs that no schema can give it: credentials that survive a generated
sign-out (every request signs in anew), and which refusals of a schema-valid request are
right. Those are kept apart from every other failure by filter_failure below: a refusal
for what the request cannot show (a mailed token, a password, a code, the state of the
account), and the server's own stricter checks that the files state in words only.
"""

import json
import os
import urllib.request

import psycopg
from psycopg.rows import dict_row
import schemathesis
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.openapi.checks import RejectedPositiveData

import config as config_module
import db
from resources.accounts import ENFORCE_MFA_NEEDS_MFA
from resources.sessions import CANNOT_REVOKE_CURRENT
from services import memberships
from services import mfa
from services import passwords
from services import personal_tokens
from services import sessions
from validators import load_validators

TOKEN_HEADERS = ('access-token', 'client', 'uid')
VALIDATORS = load_validators()
QUERIES = db.load_queries()
# The defaults the service runs with in the tests: a token's lifespan and idle time.
CONFIG = config_module.Config(database_url='postgresql://unused')
# A field refused for what is stored, not for its shape.
REFUSED_FIELDS = {
    passwords.TOO_COMMON,
    passwords.PERSONAL,
    passwords.REUSED,
    passwords.BREACHED,
    'Email has already been taken',
    ENFORCE_MFA_NEEDS_MFA,
    # who the member is, not what was sent (SPEC 18)
    memberships.CANNOT_SUSPEND_SELF,
    memberships.LAST_ADMINISTRATOR,
    # an account the caller is not a member of (SPEC 17)
    personal_tokens.NOT_A_MEMBER,
}


@schemathesis.auth(refresh_interval=None)
class SignedIn:
    """A new session for every request: a generated sign-out, or the end of every other
    session, must not leave the rest of the run without credentials.

    With FRONTDESK_DATABASE_URL, straight from the database (the suite): a run's wrong
    passwords spend the user's guessing budget, and once it is spent every sign-in is
    refused for 15 minutes (docs/security.md). Without, by signing in.
    """

    def get(self, case, context):
        email = os.environ['FRONTDESK_EMAIL']
        if os.environ.get('FRONTDESK_DATABASE_URL'):
            return _issue(os.environ['FRONTDESK_DATABASE_URL'], email)
        request = urllib.request.Request(
            os.environ['FRONTDESK_URL'] + '/auth/sign_in',
            data=json.dumps(
                {'email': email, 'password': os.environ['FRONTDESK_PASSWORD']}
            ).encode(),
            headers={'Content-Type': 'application/json'},
            method='POST',
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return {name: answer.headers[name] for name in TOKEN_HEADERS}

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), **data}


def _issue(database_url, email):
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        user = conn.execute(
            'SELECT id, email FROM users WHERE email = %s', (email,)
        ).fetchone()
        with conn.transaction():
            token, client, *_ = sessions.issue(conn, QUERIES, CONFIG, user['id'])
    return {'access-token': token, 'client': client, 'uid': user['email']}


def refused_for_state(status, body):
    """A refusal the request's shape cannot avoid: the 422 of a whole request (no
    attributes: a bad mailed token, a wrong password or code, a captcha, MFA on or off),
    a wrong second-factor code at sign-in, the session of the request itself, or a field
    refused for what is stored (REFUSED_FIELDS)."""
    if status == 400:
        return body == {'error': mfa.INVALID_CODE}
    return status == 422 and (
        set(body) == {'message'}
        or body == CANNOT_REVOKE_CURRENT
        or body.get('message') in REFUSED_FIELDS
    )


def stricter_than_published(case):
    """Whether the server's own checks refuse this schema-valid body: those the
    published files state in words only (validators.SERVER_CHECKS: a password's 72
    bytes, a time zone name it knows)."""
    content = case.operation.definition.raw.get('requestBody', {}).get('content', {})
    ref = content.get('application/json', {}).get('schema', {}).get('$ref', '')
    stem = ref.rpartition('/')[2]
    return stem in VALIDATORS and bool(VALIDATORS[stem].errors(case.body))


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep every failure but a schema-valid request refused rightly (module
    docstring), and a sign-up's field accepted from a signed-in caller: signed in,
    POST /api/v1/accounts reads only account_name and locale (SPEC 4.1), and every
    request of the run is signed in."""
    if isinstance(failure, AcceptedNegativeData):
        return case.operation.path != '/api/v1/accounts'
    if not isinstance(failure, RejectedPositiveData):
        return True
    try:
        body = json.loads(response.content)
    except ValueError:
        return True
    return not (
        refused_for_state(response.status_code, body) or stricter_than_published(case)
    )
