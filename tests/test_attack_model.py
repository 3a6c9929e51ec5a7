"""A machine that attacks the ownership model of SPEC 3.4.

Two actors, an owner and an attacker, act in any order through the public API over
real HTTP (gunicorn, mail through the outbox worker to a real SMTP sink). The attacker
starts from one capability of the model's table: a squatter who signed up first with
the owner's address, the holder of a stolen session, the holder of the password, the
holder of a mailbox the owner used to have (after its revert window closed), an
integration (the owner's api_access_token), or an integration with one of the owner's
personal access tokens (SPEC 17). Each actor reads only the mailboxes the model gives
him; either may mint personal access tokens with the sessions he holds.

A third party, the administrator of a team account the owner belongs to (SPEC 18),
may at any time suspend the owner there, or in every account of his (a
lockout), and reactivate him. While the owner's team membership is suspended nothing
the attacker holds reaches the team account; once locked out, nothing held then ever
acts as the owner again, reactivation included, and no password signs in as him until
he is reactivated.

The invariant: once the owner has run the documented recovery from his mailbox (every
live revert and "this was not me" link in it, then a password reset), he is back in the
account he proved (not one a thief opened with his address since), nothing the attacker
holds or can obtain without that mailbox signs in or acts as any account he proved, and
the owner can always sign in with the password he set (plus his second factor). On the
way, every live revert link of a change he did not make works, and he is never asked for
a second factor that is neither his nor one the attacker set on his proven account. No
answer is ever a 5xx. docs/security.md ("The attack machine") says how to run the long
profile and what it found.
"""

import collections
import datetime
import re
import time
import urllib.parse
import uuid

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import precondition
from hypothesis.stateful import rule
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import run_state_machine_as_test
import psycopg
from psycopg.rows import dict_row
import pyotp
import pytest

import config as config_module
import db
from services import guessing
from services import outbox
from services import passwords
from tests.smtp_server import smtp_env
from tests.smtp_server import smtp_server
from tests.support.fake_idp import fake_idp
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.sso import insert_provider
from tests.support.sso import unique_domain
from tests.support.sso_browser import SsoBrowser
from tests.support.users import unique_email
import tokens

MAX_USER_SESSIONS = 3
STEP = 30
CODES_PER_USER = 2
# The bounded run of the suite, per capability; `--hypothesis-profile=attack`
# (tests/conftest.py) runs the long one.
SUITE = {'max_examples': 10, 'stateful_step_count': 12}
# Not again through PgBouncer (tests/conftest.py): its requests are the other tests'.
pytestmark = pytest.mark.direct_only
CAPABILITIES = (
    'squatter',
    'stolen_session',
    'password',
    'old_mailbox',
    'api_token',
    'personal_token',
)
SCOPES = ('profile:read', 'profile:write', 'account:read', 'account:write')
TOKENS = '/api/v1/profile/access_tokens'
# SPEC 19: the provider of the owner's company, which vouches for his mailbox.
SSO_ENV = {'OIDC_ALLOW_PRIVATE_ISSUERS': 'true'}
SSO_CLIENT = 'frontdesk-attack'
SSO_SECRET = 'the company provider secret'
CALLBACK = '/omniauth/oidc/callback'
# What of the owner's single sign-on reaches the attacker (browser history on a shared
# computer, a proxy's log): nothing; the final redirect after the owner used its token;
# the callback's address; or a token the owner never used (he closed the tab).
SSO_LEAKS = ('nothing', 'used token', 'callback', 'unused token')

LINKS = {
    'confirm': r'/app/auth/confirmation\?confirmation_token=([A-Za-z0-9_-]+)',
    'reset': r'/app/auth/password/edit\?reset_password_token=([A-Za-z0-9_-]+)',
    'revert': r'/app/auth/email_revert\?token=([A-Za-z0-9_-]+)',
    'mfa_revert': r'/app/auth/mfa_revert\?token=([A-Za-z0-9_-]+)',
}
REVERT_PATHS = {'revert': '/auth/email_revert', 'mfa_revert': '/auth/mfa_revert'}
REVERT_PURPOSES = {'revert': 'email_revert', 'mfa_revert': 'mfa_revert'}
TOKEN_HEADERS = ('access-token', 'client', 'uid')
BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'
# What the machine did, printed at the end (pytest -s shows it).
TALLY = collections.Counter()
PICK = st.integers(min_value=0, max_value=63)


def new_password():
    return f'lantern {uuid.uuid4().hex[:10]} harbour'


class Actor:
    """What one actor knows and holds."""

    def __init__(self, name, boxes):
        self.name = name
        self.boxes = list(boxes)  # addresses whose mail this actor reads
        self.passwords = []
        self.sessions = []  # {'headers': ..., 'user_id': ...}
        self.api_tokens = []
        self.personal_tokens = []  # personal access tokens (SPEC 17)
        self.mfa_tokens = []
        self.secrets = []  # (TOTP secret, user id)
        self.backup_codes = []
        self.sso_tokens = []  # (sso_auth_token, whether it was used when seen)
        self.sso_callbacks = []  # the query of a callback the owner's browser made

    def __repr__(self):
        return self.name

    def add_session(self, answer):
        headers = {name: answer.headers[name] for name in TOKEN_HEADERS}
        self.sessions.append({'headers': headers, 'user_id': answer.json['data']['id']})
        self.learn_user(answer.json['data'])

    def learn_user(self, user):
        token = user.get('access_token')
        if token and token not in self.api_tokens:
            self.api_tokens.append(token)


class AttackMachine(RuleBasedStateMachine):
    # Set by the test function below (fixtures cannot reach a state machine).
    base = None
    inbox = None
    mail_config = None
    queries = None
    # Two connections held for the whole test, not one per look: the machine's own
    # (as the database's owner) and the mail worker's (as the service's role).
    db = None
    mail_db = None
    starts_from = None  # one of CAPABILITIES, set per test (below)
    idp = None  # the owner's company provider (tests/support/fake_idp.py)

    def __init__(self):
        super().__init__()
        # The owner's address is at his company, whose provider speaks for its domain
        # (an account of its own, made when he first signs in through it).
        self.owner = Actor(
            'owner', [f'owner-{uuid.uuid4().hex[:10]}@{unique_domain()}']
        )
        self.sso_account = None
        self.sso_sub = f'sub-{uuid.uuid4().hex}'
        self.attacker = Actor('attacker', [unique_email('mallory')])
        self.addresses = [self.owner.boxes[0], self.attacker.boxes[0]]
        self.account_email = self.owner.boxes[0]  # the owner's idea of it
        self.owner_user_id = None
        # The user the owner proved from his mailbox (signed up and confirmed, or
        # confirmed or reset a squatter's): his recovery lands on it, unless the address
        # left every account (then on the one he opens anew). Every user he ever proved:
        # no attacker credential acts as one after a recovery.
        self.proved = None
        self.owner_ids = set()
        self.owner_mfa = False  # MFA the owner turned on himself and has factors for
        self.foreign_mfa = False  # MFA the attacker turned on for the proved user
        self.recovered = False
        self.last_step = {}  # user id -> last TOTP step used
        self.codes_used = {}  # user id -> TOTP codes used in this example
        self.seen = 0
        self.links = []  # (seq, kind, token, address)
        self.dead = set()  # attacker credentials seen refused after the recovery
        self.capability = None
        self.own_links = set()  # revert links of the owner's own changes
        self.waiting = False  # the owner's sign-up waits for the address's mail hour
        # SPEC 18: the team's administrator, the user id the team knows as the owner,
        # the accounts where that user is suspended, the user locked out (if any), and
        # the credentials held when a lockout happened (they never act as him again).
        self.administrator = None
        self.member_id = None
        self.suspended_in = set()
        self.locked = None
        self.cut_off = {}  # probe key -> (headers, locked user id)

    # --- plumbing -----------------------------------------------------------------

    def call(self, method, path, body=None, headers=None):
        answer = http(method, self.base + path, body, headers=headers)
        TALLY[(method, re.sub(r'/\d+', '/N', path), answer.status)] += 1
        assert answer.status < 500, (method, path, answer.status, answer.body)
        return answer

    def actor(self, who):
        return self.owner if who == 'owner' else self.attacker

    def sync_mail(self):
        """Deliver what the outbox holds; index the links of the new messages."""
        outbox.deliver_due(self.mail_db, self.queries, self.mail_config)
        for item in self.inbox.received[self.seen :]:
            self.seen += 1
            text = item.text
            for kind, pattern in LINKS.items():
                for token in re.findall(pattern, text):
                    for address in item.rcpt_tos:
                        self.links.append((self.seen, kind, token, address))

    def mark_own_links(self):
        """The revert links the owner's own change just had mailed: "this was not
        me" links he will not click."""
        known = len(self.links)
        self.sync_mail()
        for link in self.links[known:]:
            if link[1] in REVERT_PATHS:
                self.own_links.add(link[2])

    def links_of(self, actor, *kinds):
        return [
            link for link in self.links if link[1] in kinds and link[3] in actor.boxes
        ]

    def session_headers(self, actor, pick):
        return actor.sessions[pick % len(actor.sessions)]['headers']

    def step_for(self, user_id):
        """The TOTP step to use next for ``user_id``, or None when it has had its two.

        The server takes steps now-1, now and now+1, each once and in increasing
        order. The machine uses now, then now+1 (or later: the step after the last
        one used), so the second is good even when the clock crosses a boundary in
        between, and never sleeps. Two codes per user and example, whatever the clock
        says, so that whether a rule can run never depends on the time (Hypothesis
        replays a sequence and must see the same choices).
        """
        if self.codes_used.get(user_id, 0) >= CODES_PER_USER:
            return None
        current = int(time.time() // STEP)
        return max(current, self.last_step.get(user_id, current - 1) + 1)

    def totp(self, actor, user_id=None):
        """A code of the actor's authenticator (for ``user_id``), or None."""
        for secret, owner_id in reversed(actor.secrets):
            if user_id is not None and owner_id != user_id:
                continue
            step = self.step_for(owner_id)
            if step is not None:
                self.last_step[owner_id] = step
                self.codes_used[owner_id] = self.codes_used.get(owner_id, 0) + 1
                return pyotp.TOTP(secret).at(step * STEP)
        return None

    def has_totp(self, actor):
        return any(self.step_for(user_id) is not None for _, user_id in actor.secrets)

    def owners(self):
        """The users that are the owner's: every one he proved, and the one he uses."""
        return (self.owner_ids | {self.owner_user_id}) - {None}

    def prove(self, user_id, anew=False):
        """The owner proved ``user_id`` from his mailbox; ``anew``: his address left
        every account and this is the one he opened with it since."""
        if self.proved is None or anew:
            self.proved = user_id
        self.owner_ids.add(user_id)

    def holder_of(self, address):
        """The id of the user whose address ``address`` is, or None."""
        rows = self.sql('SELECT id FROM users WHERE email = %s', address)
        return rows[0][0] if rows else None

    def got_session(self, actor, answer):
        actor.add_session(answer)
        user_id = answer.json['data']['id']
        if actor is self.attacker and self.recovered:
            assert user_id not in self.owners(), 'the attacker signed in as the owner'
        if actor is self.owner and self.owner_user_id is None:
            self.owner_user_id = user_id
        return user_id

    def signed_in(self, actor, answer):
        """File a 200 (session) or 206 (challenge) answer under ``actor``.

        A challenge to the owner needs a second factor of his own, or one the attacker
        turned on for the user the owner proved (its notice carries the "this was not
        me" link): nothing set up before the first confirmation outlives it (SPEC 3.4).
        """
        if answer.status == 200 and 'access-token' in answer.headers:
            return self.got_session(actor, answer)
        if answer.status == 206 and 'mfa_token' in answer.json:
            if actor is self.owner:
                assert self.owner_mfa or self.foreign_mfa, (
                    'the owner is asked for a second factor he never set'
                )
            actor.mfa_tokens.append(answer.json['mfa_token'])
        return None

    def sign_up(self, actor, email, password):
        answer = self.call(
            'POST',
            '/api/v1/accounts',
            {
                'account_name': 'Frontdesk',
                'email': email,
                'user_full_name': 'Olive' if actor is self.owner else 'Mallory',
                'password': password,
            },
        )
        if answer.status == 200:
            actor.passwords.append(password)
            self.got_session(actor, answer)
        return answer

    def confirm_with(self, actor, token, headers=None):
        answer = self.call(
            'POST', '/auth/confirmation', {'confirmation_token': token}, headers
        )
        self.signed_in(actor, answer)
        return answer

    def age_session(self, client):
        self.db.execute(
            'UPDATE user_tokens SET authenticated_at = authenticated_at - %s'
            ' WHERE client = %s',
            (datetime.timedelta(hours=1), client),
        )

    # --- the capabilities ---------------------------------------------------------

    def owner_signs_up_and_confirms(self, address):
        password = new_password()
        signup = self.sign_up(self.owner, address, password)
        assert signup.status == 200, signup.body
        self.sync_mail()
        [(_, _, token, _)] = self.links_of(self.owner, 'confirm')[-1:]
        # The dashboard confirms in the browser that signed up, with its session.
        confirmed = self.confirm_with(
            self.owner, token, self.owner.sessions[-1]['headers']
        )
        assert confirmed.status == 200, confirmed.body
        self.owner.passwords = [password]
        self.account_email = address
        signed_in = self.call(
            'POST', '/auth/sign_in', {'email': address, 'password': password}
        )
        assert signed_in.status == 200, signed_in.body
        self.prove(self.got_session(self.owner, signed_in))
        return signed_in

    @initialize(separate=st.booleans(), stale=st.booleans(), order=st.booleans())
    def start(self, separate, stale, order):
        """``separate``: the stolen session is another of the owner's devices, not a
        copy of his own; ``stale``: its last password check is older than the
        REAUTH_WINDOW_MINUTES (15) of SPEC 3.4; ``order``: of the links in the
        recovery that ends every example (teardown)."""
        self.final_order = order
        capability = self.capability = self.starts_from
        owner, attacker = self.owner, self.attacker
        address = owner.boxes[0]
        if capability == 'squatter':
            self.sign_up(attacker, address, new_password())
            return
        if capability == 'old_mailbox':
            # The owner moved from an address the attacker now reads, more than the
            # revert window (7 days) ago: until then its holder is the owner (3.4).
            old = unique_email('oldbox')
            self.owner.boxes.append(old)
            self.owner_signs_up_and_confirms(old)
            moved = self.call(
                'PUT',
                '/api/v1/profile',
                {
                    'profile': {
                        'email': address,
                        'current_password': owner.passwords[-1],
                    }
                },
                owner.sessions[-1]['headers'],
            )
            assert moved.status == 200, moved.body
            self.sync_mail()
            [(_, _, token, _)] = [
                link for link in self.links_of(owner, 'confirm') if link[3] == address
            ]
            confirmed = self.confirm_with(owner, token)
            assert confirmed.status == 200, confirmed.body
            self.account_email = address
            self.db.execute(
                'UPDATE one_time_tokens SET expires_at = now() - %s'
                " WHERE user_id = %s AND purpose LIKE '%%revert%%'",
                (datetime.timedelta(seconds=1), self.owner_user_id),
            )
            owner.boxes.remove(old)
            attacker.boxes.append(old)
            self.addresses.append(old)
            return
        signed_in = self.owner_signs_up_and_confirms(address)
        if capability == 'stolen_session':
            if separate:
                # A session of the owner's on a device the attacker has.
                other = self.call(
                    'POST',
                    '/auth/sign_in',
                    {'email': address, 'password': owner.passwords[-1]},
                )
                self.got_session(attacker, other)
            else:
                attacker.sessions.append(dict(owner.sessions[-1]))
            if stale:
                self.age_session(attacker.sessions[-1]['headers']['client'])
        elif capability == 'password':
            attacker.passwords.append(owner.passwords[-1])
        elif capability == 'api_token':
            attacker.api_tokens.append(signed_in.json['data']['access_token'])
        elif capability == 'personal_token':
            # The owner made it for an integration, with every scope; it leaked.
            created = self.call(
                'POST',
                TOKENS,
                {'name': 'CRM sync', 'scopes': list(SCOPES), 'expires_in_days': 30},
                owner.sessions[-1]['headers'],
            )
            assert created.status == 201, created.body
            attacker.personal_tokens.append(created.json['token'])

    # --- either actor ---------------------------------------------------------------
    # ``data`` draws the actor among those who can do the thing, so few steps are
    # wasted; a credential the server refuses (401) is dropped from its holder.

    def who(self, data, can):
        actors = [actor for actor in (self.owner, self.attacker) if can(actor)]
        return data.draw(st.sampled_from(actors), label='actor')

    def with_session(self, actor, session, method, path, body=None):
        answer = self.call(method, path, body, session['headers'])
        if answer.status == 401 and session in actor.sessions:
            actor.sessions.remove(session)
        return answer

    def can_sign_in(self, actor):
        return bool(actor.passwords)

    def can_second_step(self, actor):
        return actor.mfa_tokens and (actor.backup_codes or self.has_totp(actor))

    def can_confirm(self, actor):
        return bool(self.links_of(actor, 'confirm'))

    def can_reset(self, actor):
        return bool(self.links_of(actor, 'reset'))

    def can_revert(self, actor):
        return bool(self.links_of(actor, *REVERT_PATHS))

    def has_session(self, actor):
        return bool(actor.sessions)

    def can_use_codes(self, actor):
        return actor.sessions and actor.secrets and self.has_totp(actor)

    def any_actor(self, can):
        return any(can(actor) for actor in (self.owner, self.attacker))

    @precondition(lambda self: self.any_actor(self.can_sign_in))
    @rule(data=st.data(), pick=PICK, email_pick=PICK, browser=st.booleans())
    def sign_in(self, data, pick, email_pick, browser):
        """A password sign-in; from a browser at the cap, the picker ends the others."""
        self.sign_in_as(self.who(data, self.can_sign_in), pick, email_pick, browser)

    def sign_in_as(self, actor, pick, email_pick, browser):
        email = (
            self.account_email
            if actor is self.owner
            else self.addresses[email_pick % len(self.addresses)]
        )
        body = {
            'email': email,
            'password': actor.passwords[pick % len(actor.passwords)],
        }
        headers = {'User-Agent': BROWSER} if browser else None
        answer = self.call('POST', '/auth/sign_in', body, headers)
        assert answer.status in (200, 206, 401, 409, 429), answer.body
        if answer.status == 409:
            body['revoke_all_sessions'] = True
            answer = self.call('POST', '/auth/sign_in', body, headers)
            assert answer.status in (200, 206, 401, 429), answer.body
        self.signed_in(actor, answer)

    @rule()
    def attacker_floods_the_owners_mailbox(self):
        """Anyone may ask for resets of any address: five fill its hourly mail bound."""
        for _ in range(5):
            answer = self.call('POST', '/auth/password', {'email': self.account_email})
            assert answer.status in (200, 429), answer.body

    @rule(code=st.booleans())
    def attacker_guesses(self, code):
        """A wrong password for the owner's address, or a wrong code to a challenge."""
        if code and self.attacker.mfa_tokens:
            body = {'mfa_token': self.attacker.mfa_tokens[-1], 'otp_code': '000000'}
        else:
            body = {'email': self.account_email, 'password': new_password()}
        answer = self.call('POST', '/auth/sign_in', body)
        assert answer.status in (400, 401, 429), answer.body

    @precondition(lambda self: self.any_actor(self.can_second_step))
    @rule(data=st.data(), pick=PICK, backup=st.booleans())
    def second_step(self, data, pick, backup):
        actor = self.who(data, self.can_second_step)
        mfa_token = actor.mfa_tokens[pick % len(actor.mfa_tokens)]
        body = {'mfa_token': mfa_token}
        code = None if backup and actor.backup_codes else self.totp(actor)
        if code is None:
            body['backup_code'] = actor.backup_codes.pop(0)
        else:
            body['otp_code'] = code
        answer = self.call('POST', '/auth/sign_in', body)
        assert answer.status in (200, 400, 401, 409, 429), answer.body
        if answer.status in (200, 401):
            actor.mfa_tokens.remove(mfa_token)
        self.signed_in(actor, answer)

    @precondition(lambda self: self.any_actor(self.can_confirm))
    @rule(data=st.data(), pick=PICK, with_session=st.booleans())
    def confirm(self, data, pick, with_session):
        self.confirm_as(self.who(data, self.can_confirm), pick, with_session)

    def confirm_as(self, actor, pick, with_session):
        links = self.links_to_click(actor, 'confirm')
        if not links:
            return
        _, _, token, address = links[pick % len(links)]
        headers = None
        if with_session and actor.sessions:
            headers = self.session_headers(actor, pick)
        # A user's first confirmation, made without a session: SPEC 3.4 rule 1.
        first = headers is None and self.sql(
            'SELECT 1 FROM one_time_tokens t JOIN users u ON u.id = t.user_id'
            ' WHERE t.token_digest = %s AND t.expires_at > now()'
            ' AND u.confirmed_at IS NULL',
            tokens.digest(token),
        )
        answer = self.confirm_with(actor, token, headers)
        assert answer.status in (200, 206, 401, 422, 429), answer.body
        if actor is self.owner and answer.status in (200, 206):
            self.account_email = address
            self.prove(self.holder_of(address))
            if first:
                self.owner_was_told(address)

    def owner_was_told(self, address):
        """Whoever chose the password of a sign-up with the owner's address may be
        anyone: the owner's first confirmation without a session mails him a reset link
        he did not ask for (the notice of SPEC 3.4 rule 1), so a quiet squatter who
        never triggers another mail does not keep the password unseen."""
        known = len(self.links)
        self.sync_mail()
        told = [
            link
            for link in self.links[known:]
            if link[1] == 'reset' and link[3] == address
        ]
        assert told, 'a first confirmation without a session mailed the owner no link'
        TALLY[('owner told of the sign-up', self.capability)] += 1

    def link_user(self, token):
        """The user a live one-time link was issued to, or None."""
        rows = self.sql(
            'SELECT user_id FROM one_time_tokens'
            ' WHERE token_digest = %s AND expires_at > now()',
            tokens.digest(token),
        )
        return rows[0][0] if rows else None

    def links_to_click(self, actor, kind):
        """Links of ``kind`` in the actor's mailboxes that he would click: once the
        owner has proved an account, not those of another one (a stranger's sign-up
        with an address of his, which the mail names)."""
        links = self.links_of(actor, kind)
        if actor is self.owner and self.proved is not None:
            links = [
                link for link in links if self.link_user(link[2]) in (None, self.proved)
            ]
        return links

    @rule(email_pick=PICK)
    def request_reset(self, email_pick):
        email = self.addresses[email_pick % len(self.addresses)]
        answer = self.call('POST', '/auth/password', {'email': email})
        assert answer.status in (200, 429), answer.body

    @precondition(lambda self: self.any_actor(self.can_reset))
    @rule(data=st.data(), pick=PICK)
    def reset(self, data, pick):
        actor = self.who(data, self.can_reset)
        links = self.links_to_click(actor, 'reset')
        if links:
            _, _, token, address = links[pick % len(links)]
            answer = self.use_reset(actor, token, address)
            if actor is self.owner and answer.status in (200, 206):
                self.prove(self.holder_of(address))

    def use_reset(self, actor, token, address):
        password = new_password()
        answer = self.call(
            'PUT',
            '/auth/password',
            {
                'reset_password_token': token,
                'password': password,
                'password_confirmation': password,
            },
        )
        assert answer.status in (200, 206, 422, 429) or self.is_lockout(answer), (
            answer.body
        )
        if answer.status in (200, 206):
            actor.passwords.append(password)
            if actor is self.owner:
                self.owner.passwords = [password]
                self.account_email = address
            self.signed_in(actor, answer)
        return answer

    @precondition(lambda self: self.any_actor(self.has_session))
    @rule(
        data=st.data(),
        pick=PICK,
        fresh=st.booleans(),
        with_password=st.booleans(),
        and_confirm=st.booleans(),
    )
    def change_email(self, data, pick, fresh, with_password, and_confirm):
        """Ask for a new address (the actor's own), and maybe confirm it at once."""
        actor = self.who(data, self.has_session)
        self.change_email_as(actor, pick, fresh, with_password, and_confirm)

    def change_email_as(self, actor, pick, fresh, with_password, and_confirm):
        session = actor.sessions[pick % len(actor.sessions)]
        own = [box for box in actor.boxes if box != self.account_email]
        if fresh or not own:
            target = unique_email('owner' if actor is self.owner else 'mallory')
            actor.boxes.append(target)
            self.addresses.append(target)
        else:
            target = own[pick % len(own)]
        profile = {'email': target}
        if with_password and actor.passwords:
            profile['current_password'] = actor.passwords[-1]
        answer = self.with_session(
            actor, session, 'PUT', '/api/v1/profile', {'profile': profile}
        )
        assert answer.status in (200, 401, 403, 422, 429), answer.body
        if answer.status == 200 and actor is self.owner:
            self.mark_own_links()
        if answer.status != 200 or not and_confirm:
            return
        self.sync_mail()
        links = [link for link in self.links_of(actor, 'confirm') if link[3] == target]
        if links:
            confirmed = self.confirm_with(actor, links[-1][2], session['headers'])
            assert confirmed.status in (200, 206, 422, 429) or self.is_lockout(
                confirmed
            ), confirmed.body
            if actor is self.owner and confirmed.status in (200, 206):
                self.account_email = target

    @precondition(lambda self: self.any_actor(self.can_revert))
    @rule(data=st.data(), pick=PICK)
    def revert(self, data, pick):
        actor = self.who(data, self.can_revert)
        links = self.links_of(actor, *REVERT_PATHS)
        _, kind, token, address = links[pick % len(links)]
        if actor is self.owner:
            self.owner_reverts(kind, token, address)
            return
        answer = self.call('POST', REVERT_PATHS[kind], {'token': token})
        assert answer.status in (200, 404, 422, 429), answer.body

    def owner_reverts(self, kind, token, address):
        """The owner clicks a revert or "this was not me" link. One mailed for a change
        he did not make answers 200 while it is live (SPEC 3.4: a revert always
        succeeds within its 7 days; a "this was not me" link while its enablement and
        address are still the account's), whoever has meanwhile signed up or moved to
        the address."""
        expected = (
            self.locked is None
            and token not in self.own_links
            and self.revert_works(kind, token)
        )
        answer = self.call('POST', REVERT_PATHS[kind], {'token': token})
        if expected:
            assert answer.status == 200, (
                'a revert link of a change the owner did not make is refused',
                kind,
                answer.status,
                answer.body,
            )
        assert answer.status in (200, 404, 422, 429), answer.body
        if answer.status == 200:
            self.reverted(kind, address)
        return answer

    def revert_works(self, kind, token):
        """Is the link live, and (a "this was not me" link) its enablement and address
        still the account's?"""
        return bool(
            self.sql(
                'SELECT 1 FROM one_time_tokens t JOIN users u ON u.id = t.user_id'
                ' WHERE t.token_digest = %s AND t.purpose = %s'
                ' AND t.expires_at > now()'
                " AND (t.purpose = 'email_revert' OR (u.email = t.email"
                ' AND u.mfa_enabled_at = t.mfa_enabled_at))',
                tokens.digest(token),
                REVERT_PURPOSES[kind],
            )
        )

    def reverted(self, kind, address):
        """The owner used a revert link: no password until the reset it mails.

        (One the attacker uses changes nothing here: if it was the owner's account,
        the owner's next sign-in fails the invariant.)
        """
        self.owner.passwords = []
        self.owner.sessions = []
        self.recovered = False  # the owner's recovery sets a password and MFA state
        if kind == 'revert':
            self.account_email = address

    @precondition(lambda self: self.any_actor(self.has_session))
    @rule(data=st.data(), pick=PICK, with_password=st.booleans())
    def enable_mfa(self, data, pick, with_password):
        self.enable_mfa_as(self.who(data, self.has_session), pick, with_password)

    def enable_mfa_as(self, actor, pick, with_password):
        session = actor.sessions[pick % len(actor.sessions)]
        if self.step_for(session['user_id']) is None:
            return
        body = {}
        if with_password and actor.passwords:
            body['password'] = actor.passwords[-1]
        started = self.with_session(actor, session, 'POST', '/api/v1/profile/mfa', body)
        assert started.status in (200, 401, 403, 422, 429), started.body
        if started.status != 200:
            return
        secret = started.json['secret']
        actor.secrets.append((secret, session['user_id']))
        code = self.totp(actor, session['user_id'])
        verified = self.with_session(
            actor, session, 'POST', '/api/v1/profile/mfa/verify', {'otp_code': code}
        )
        assert verified.status in (200, 401, 422, 429), verified.body
        if verified.status == 200:
            actor.backup_codes = list(verified.json['backup_codes'])
            if actor is self.owner and session['user_id'] == self.owner_user_id:
                self.owner_mfa = True
                self.mark_own_links()
            if actor is self.attacker and session['user_id'] == self.proved:
                self.foreign_mfa = True

    def can_disable(self, actor):
        return (
            actor.sessions
            and actor.passwords
            and (actor.backup_codes or self.has_totp(actor))
        )

    @precondition(lambda self: self.any_actor(self.can_disable))
    @rule(data=st.data(), pick=PICK, backup=st.booleans())
    def disable_mfa(self, data, pick, backup):
        actor = self.who(data, self.can_disable)
        session = actor.sessions[pick % len(actor.sessions)]
        body = {'password': actor.passwords[-1]}
        code = None
        if not (backup and actor.backup_codes):
            code = self.totp(actor, session['user_id'])
        if code is None:
            if not actor.backup_codes:
                return
            body['backup_code'] = actor.backup_codes.pop(0)
        else:
            body['otp_code'] = code
        answer = self.with_session(
            actor, session, 'DELETE', '/api/v1/profile/mfa', body
        )
        assert answer.status in (200, 401, 403, 422, 429), answer.body
        if answer.status == 200 and actor is self.owner:
            self.owner_mfa = False

    @precondition(lambda self: self.any_actor(self.can_use_codes))
    @rule(data=st.data(), pick=PICK)
    def new_recovery_codes(self, data, pick):
        actor = self.who(data, self.can_use_codes)
        session = actor.sessions[pick % len(actor.sessions)]
        code = self.totp(actor, session['user_id'])
        if code is None:
            return
        answer = self.with_session(
            actor,
            session,
            'POST',
            '/api/v1/profile/mfa/backup_codes',
            {'otp_code': code},
        )
        assert answer.status in (200, 401, 403, 422, 429), answer.body
        if answer.status == 200:
            actor.backup_codes = list(answer.json['backup_codes'])

    @precondition(lambda self: self.any_actor(self.has_session))
    @rule(data=st.data(), pick=PICK, everyone=st.booleans())
    def end_sessions(self, data, pick, everyone):
        actor = self.who(data, self.has_session)
        session = actor.sessions[pick % len(actor.sessions)]
        if everyone:
            answer = self.with_session(
                actor, session, 'DELETE', '/api/v1/profile/sessions'
            )
            assert answer.status in (200, 401, 403), answer.body
            return
        listed = self.with_session(actor, session, 'GET', '/api/v1/profile/sessions')
        assert listed.status in (200, 401, 403), listed.body
        others = (
            [s for s in listed.json if not s['current']] if listed.status == 200 else []
        )
        if others:
            gone = others[pick % len(others)]['id']
            answer = self.with_session(
                actor, session, 'DELETE', f'/api/v1/profile/sessions/{gone}'
            )
            assert answer.status in (200, 401, 403, 404), answer.body

    @precondition(lambda self: self.any_actor(self.has_session))
    @rule(data=st.data(), pick=PICK, sign_out=st.booleans())
    def session_action(self, data, pick, sign_out):
        """reset_access_token, or sign out."""
        actor = self.who(data, self.has_session)
        session = actor.sessions[pick % len(actor.sessions)]
        if sign_out:
            answer = self.with_session(actor, session, 'DELETE', '/auth/sign_out')
            assert answer.status in (200, 401), answer.body
            if answer.status == 200:
                actor.sessions.remove(session)
            return
        answer = self.with_session(
            actor, session, 'POST', '/api/v1/profile/reset_access_token'
        )
        assert answer.status in (200, 401, 403), answer.body
        if answer.status == 200:
            actor.learn_user(answer.json)

    @precondition(lambda self: self.any_actor(self.has_session))
    @rule(data=st.data(), pick=PICK)
    def change_password(self, data, pick):
        self.change_password_as(self.who(data, self.has_session), pick)

    def change_password_as(self, actor, pick):
        if not actor.passwords:
            return
        session = actor.sessions[pick % len(actor.sessions)]
        password = new_password()
        answer = self.with_session(
            actor,
            session,
            'PUT',
            '/api/v1/profile',
            {
                'profile': {
                    'current_password': actor.passwords[-1],
                    'password': password,
                    'password_confirmation': password,
                }
            },
        )
        assert answer.status in (200, 401, 403, 422, 429), answer.body
        if answer.status == 200:
            actor.passwords.append(password)
            actor.learn_user(answer.json)
            if actor is self.owner:
                self.owner.passwords = [password]

    @rule(email_pick=PICK)
    def attacker_signs_up(self, email_pick):
        """With any address he knows: the owner's (taken, or free again) or his own."""
        email = self.addresses[email_pick % len(self.addresses)]
        answer = self.sign_up(self.attacker, email, new_password())
        assert answer.status in (200, 403, 422, 429), answer.body

    @precondition(lambda self: self.owner_user_id is None)
    @rule()
    def owner_signs_up(self):
        """An owner without an account tries to open one with his address."""
        answer = self.sign_up(self.owner, self.owner.boxes[0], new_password())
        assert answer.status in (200, 403, 422, 429), answer.body
        if answer.status == 200:
            self.owner.passwords = self.owner.passwords[-1:]
            self.account_email = self.owner.boxes[0]

    @rule(email_pick=PICK)
    def resend_confirmation(self, email_pick):
        email = self.addresses[email_pick % len(self.addresses)]
        answer = self.call('POST', '/resend_confirmation', {'email': email})
        assert answer.status in (200, 429), answer.body

    # --- the attacker with the integration token --------------------------------------

    def integration_route(self, route):
        """(method, path, body, whether it is account security) of route ``route``."""
        password = new_password()
        return [
            ('GET', '/api/v1/profile', None, False),
            ('PUT', '/api/v1/profile', {'profile': {'display_name': 'Bot'}}, False),
            ('GET', '/auth/validate_token', None, False),
            ('POST', '/api/v1/accounts', {'account_name': 'Side door'}, False),
            (
                'PUT',
                '/api/v1/profile',
                {'profile': {'email': unique_email('api')}},
                True,
            ),
            (
                'PUT',
                '/api/v1/profile',
                {'profile': {'password': password, 'password_confirmation': password}},
                True,
            ),
            ('POST', '/api/v1/profile/reset_access_token', None, True),
            ('GET', '/api/v1/profile/sessions', None, True),
            ('DELETE', '/api/v1/profile/sessions', None, True),
            ('POST', '/api/v1/profile/mfa', {}, True),
            ('DELETE', '/auth/sign_out', None, True),
            (
                'POST',
                TOKENS,
                {'name': 'mine', 'scopes': list(SCOPES), 'expires_in_days': 366},
                True,
            ),
            ('GET', TOKENS, None, True),
        ][route]

    def integration_acts(self, headers, route):
        """One request with an integration credential: never a 2xx on a security
        route (SPEC 3.3/3.4), never a session."""
        method, path, body, security = self.integration_route(route)
        answer = self.call(method, path, body, headers)
        if security:
            assert answer.status in (401, 403), (method, path, answer.status)
        for name in TOKEN_HEADERS:
            assert name not in answer.headers, f'{method} {path} issued a session'
        return answer

    @precondition(lambda self: self.attacker.api_tokens)
    @rule(pick=PICK, route=st.integers(min_value=0, max_value=12))
    def api_token_acts(self, pick, route):
        token = self.attacker.api_tokens[pick % len(self.attacker.api_tokens)]
        answer = self.integration_acts({'api_access_token': token}, route)
        if answer.status == 200 and answer.json.get('access_token'):
            self.attacker.learn_user(answer.json)

    @precondition(lambda self: self.attacker.personal_tokens)
    @rule(pick=PICK, route=st.integers(min_value=0, max_value=12))
    def personal_token_acts(self, pick, route):
        """The attacker uses a personal access token (Bearer): within its scopes it is
        the owner's integration, but it reads no credential and mints none."""
        token = self.attacker.personal_tokens[pick % len(self.attacker.personal_tokens)]
        answer = self.integration_acts({'Authorization': f'Bearer {token}'}, route)
        if answer.status == 401:
            self.attacker.personal_tokens.remove(token)  # revoked or expired: for good
        if answer.status == 200 and isinstance(answer.json, dict):
            user = answer.json.get('payload', {}).get('data', answer.json)
            assert user.get('access_token') is None, (
                'a personal token read a credential'
            )
            assert user.get('pubsub_token') is None

    @precondition(lambda self: self.any_actor(self.has_session))
    @rule(
        data=st.data(), pick=PICK, scopes=st.sets(st.sampled_from(SCOPES), min_size=1)
    )
    def create_personal_token(self, data, pick, scopes):
        """A session mints a personal access token: only one whose last password or
        code check is recent (SPEC 3.4), so a stale stolen session cannot."""
        actor = self.who(data, self.has_session)
        session = actor.sessions[pick % len(actor.sessions)]
        body = {'name': 'integration', 'scopes': sorted(scopes), 'expires_in_days': 30}
        answer = self.with_session(actor, session, 'POST', TOKENS, body)
        assert answer.status in (201, 401, 403, 422), answer.body
        if answer.status == 201:
            actor.personal_tokens.append(answer.json['token'])
            if actor is self.attacker and session['user_id'] == self.owner_user_id:
                TALLY[('attacker minted a personal token', self.capability)] += 1
        elif answer.status == 403:
            assert answer.json['error_code'] == 'reauthentication_required'

    # --- erasing the owner (SPEC 20) ---------------------------------------------

    def may_erase(self, user_id, session, body):
        """Whether SPEC 3.4 lets this request erase ``user_id``: the password in the
        body is the user's current one, and with MFA on a code comes with it; or, for a
        user without a password, the session signed in within REAUTH_WINDOW_MINUTES
        (and a code, with MFA). Looked up in the database; a code sent counts as right
        (the machine cannot tell a stale secret's code from a good one), so this may
        leave a refusable request unsent, never send one the owner's model allows."""
        rows = self.sql(
            'SELECT u.encrypted_password, u.mfa_enabled_at IS NOT NULL,'
            " t.authenticated_at > now() - interval '15 minutes'"
            ' FROM users u LEFT JOIN user_tokens t'
            ' ON t.user_id = u.id AND t.client = %s WHERE u.id = %s',
            session['headers']['client'],
            user_id,
        )
        if not rows:
            return False
        hashed, mfa_on, recent = rows[0]
        proven = (
            bool(recent)
            if hashed is None
            else passwords.check_password(body.get('password'), hashed)
        )
        return proven and (not mfa_on or 'otp_code' in body or 'backup_code' in body)

    @precondition(lambda self: self.attacker.sessions)
    @rule(pick=PICK, with_password=st.booleans(), with_code=st.booleans())
    def attacker_erases_the_owner(self, pick, with_password, with_code):
        """With a session of one of the owner's users, and whatever password and
        second factor he has: erasing the owner needs what a stolen session does not
        carry. An erasure the model allows (he holds the password, and the second
        factor if any) is not sent: it is the documented power of a password holder
        without MFA (docs/security.md), and the owner would have nothing to recover."""
        attacker = self.attacker
        session = attacker.sessions[pick % len(attacker.sessions)]
        user_id = session['user_id']
        if user_id not in self.owners():
            return
        body = {}
        if with_password:
            body['password'] = (
                attacker.passwords[-1] if attacker.passwords else new_password()
            )
        if with_code:
            if attacker.backup_codes:
                body['backup_code'] = attacker.backup_codes[0]
            elif any(owner_id == user_id for _, owner_id in attacker.secrets):
                code = self.totp(attacker, user_id)
                if code is not None:
                    body['otp_code'] = code
        if self.may_erase(user_id, session, body):
            TALLY[('erasure the model allows, not sent', self.capability)] += 1
            return
        answer = self.with_session(attacker, session, 'DELETE', '/api/v1/profile', body)
        assert answer.status in (401, 403, 422, 429), (
            "the attacker erased one of the owner's users",
            answer.status,
            answer.body,
        )
        TALLY[('erasure refused', answer.status, self.capability)] += 1

    @precondition(lambda self: self.attacker.sessions)
    @rule(pick=PICK)
    def attacker_exports_the_owner(self, pick):
        """With a session of one of the owner's users, the attacker asks for everything
        stored about them (SPEC 20): the model allows it only to a session whose last
        password or code check is recent (SPEC 3.4); a stale stolen session gets the
        403 of reauthentication (or the 401 of a session the owner ended)."""
        attacker = self.attacker
        session = attacker.sessions[pick % len(attacker.sessions)]
        if session['user_id'] not in self.owners():
            return
        rows = self.sql(
            "SELECT t.authenticated_at > now() - interval '15 minutes'"
            ' FROM user_tokens t WHERE t.user_id = %s AND t.client = %s',
            session['user_id'],
            session['headers']['client'],
        )
        recent = bool(rows and rows[0][0])
        answer = self.with_session(
            attacker, session, 'GET', '/api/v1/profile/export', None
        )
        if answer.status == 200:
            assert recent, ('a stale stolen session exported the owner', answer.body)
            TALLY[('export the model allows', self.capability)] += 1
        else:
            assert answer.status in (401, 403, 429), answer.body
            if answer.status == 403:
                assert answer.json['error_code'] in (
                    'reauthentication_required',
                    'mfa_enrollment_required',
                ), answer.body
            TALLY[('export refused', answer.status, self.capability)] += 1

    @invariant()
    def the_owners_users_exist(self):
        """No user the owner proved, or uses, is ever erased by the attacker (the
        machine sends no erasure the model allows)."""
        owners = sorted(self.owners())
        if owners:
            rows = self.sql('SELECT id FROM users WHERE id = ANY(%s)', owners)
            assert sorted(row[0] for row in rows) == owners, (
                'a user of the owner was erased',
                owners,
            )

    # --- the team's administrator (SPEC 18) ---------------------------------------

    def is_lockout(self, answer):
        return answer.status == 401 and answer.json.get('error_code') == (
            'account_suspended'
        )

    def sql(self, query, *args):
        cursor = self.db.execute(query, args)
        return cursor.fetchall() if cursor.description else None

    def administrator_acts(self, account_id, user_id, action):
        answer = self.call(
            'POST',
            f'/api/v1/accounts/{account_id}/agents/{user_id}/{action}',
            None,
            self.administrator['headers'],
        )
        assert answer.status == 200, (action, answer.body)
        return answer

    def team_up(self):
        """The administrator, with an account of his own (the team), and the owner as a
        member of it (Frontdesk has no invitations: the machine inserts the row, as
        a later invitation would)."""
        if self.administrator is None:
            answer = self.call(
                'POST',
                '/api/v1/accounts',
                {
                    'account_name': 'Team',
                    'email': unique_email('admin'),
                    'user_full_name': 'Ada Admin',
                    'password': new_password(),
                },
            )
            assert answer.status == 200, answer.body
            self.administrator = {
                'headers': {name: answer.headers[name] for name in TOKEN_HEADERS},
                'id': answer.json['data']['id'],
                'team': answer.json['data']['account_id'],
            }
        if self.member_id != self.owner_user_id:
            self.administrator_reactivates_owner()  # the user the team knew
            self.member_id = self.owner_user_id
            self.sql(
                'INSERT INTO account_users (account_id, user_id) VALUES (%s, %s)'
                ' ON CONFLICT DO NOTHING',
                self.administrator['team'],
                self.member_id,
            )

    def holdings(self):
        """Every session, API token and personal access token either actor holds:
        (probe key, headers)."""
        held = []
        for actor in (self.owner, self.attacker):
            for session in actor.sessions:
                held.append(
                    (
                        ('session', tuple(sorted(session['headers'].items()))),
                        session['headers'],
                    )
                )
            for token in actor.api_tokens:
                held.append((('api token', token), {'api_access_token': token}))
            for token in actor.personal_tokens:
                held.append(
                    (('personal token', token), {'Authorization': f'Bearer {token}'})
                )
        return held

    @precondition(lambda self: self.owner_user_id is not None and not self.waiting)
    @rule(everywhere=st.booleans())
    def administrator_suspends_owner(self, everywhere):
        """In the team account, or in every account of the owner (a lockout: the
        administrator is made a co-administrator of each, so it is his to do)."""
        self.team_up()
        accounts = [self.administrator['team']]
        if everywhere:
            accounts = [
                row[0]
                for row in self.sql(
                    'SELECT account_id FROM account_users WHERE user_id = %s',
                    self.member_id,
                )
            ]
            for account_id in accounts:
                self.sql(
                    'INSERT INTO account_users (account_id, user_id, role)'
                    " VALUES (%s, %s, 'administrator') ON CONFLICT DO NOTHING",
                    account_id,
                    self.administrator['id'],
                )
        for account_id in accounts:
            answer = self.administrator_acts(account_id, self.member_id, 'suspend')
            assert answer.json['membership_status'] == 'suspended'
            self.suspended_in.add(account_id)
        [(active,)] = self.sql(
            'SELECT count(*) FROM account_users'
            " WHERE user_id = %s AND status = 'active'",
            self.member_id,
        )
        if active == 0:
            self.locked = self.member_id
            for key, headers in self.holdings():
                self.cut_off.setdefault(key, (headers, self.member_id))
            TALLY[('owner locked out', self.capability)] += 1
        else:
            TALLY[('owner suspended in the team', self.capability)] += 1

    @precondition(lambda self: self.suspended_in)
    @rule()
    def administrator_reactivates_owner(self):
        for account_id in sorted(self.suspended_in):
            answer = self.administrator_acts(account_id, self.member_id, 'reactivate')
            assert answer.json['membership_status'] == 'active'
        self.suspended_in = set()
        self.locked = None

    @invariant()
    def suspension_ends_what_the_attacker_holds(self):
        """The team account answers nothing the attacker holds while the owner is
        suspended there; what anyone held at a lockout never acts as the locked-out
        user again; no password signs in as him while he is locked out."""
        if self.administrator is None:
            return
        if self.administrator['team'] in self.suspended_in:
            team = f'/api/v1/accounts/{self.administrator["team"]}'
            for session in self.attacker.sessions:
                answer = self.call('GET', team, None, session['headers'])
                assert answer.status in (401, 403, 404), answer.body
            for token in self.attacker.api_tokens:
                answer = self.call('GET', team, None, {'api_access_token': token})
                assert answer.status in (401, 403, 404), answer.body
            for token in self.attacker.personal_tokens:
                bearer = {'Authorization': f'Bearer {token}'}
                answer = self.call('GET', team, None, bearer)
                assert answer.status in (401, 403, 404), answer.body
        # Reactivation included: no session or token of before comes back.
        for key, (headers, user_id) in self.cut_off.items():
            answer = self.call('GET', '/api/v1/profile', None, headers)
            if answer.status == 200:
                assert answer.json['id'] != user_id, (
                    f'a {key[0]} held at the lockout acts as the member again'
                )
            else:
                assert answer.status == 401, answer.body
        if self.locked is None:
            return
        holder = self.sql('SELECT id FROM users WHERE email = %s', self.account_email)
        if holder != [(self.locked,)]:
            return
        for password in self.attacker.passwords:
            answer = self.call(
                'POST',
                '/auth/sign_in',
                {'email': self.account_email, 'password': password},
            )
            # A wrong password, the lockout, or a spent guessing budget; never a
            # session nor a challenge.
            assert answer.status in (401, 429), answer.body

    # --- single sign-on (SPEC 19) ----------------------------------------------------
    # The owner holds his mailbox and the provider account for his address: the
    # provider vouches for the mailbox, and the machine plays it honestly for him
    # only. The attacker has no provider account in the owner's domain; he replays
    # what of the owner's single sign-on reached him.

    def provider_account(self):
        """The owner's company: an account whose provider speaks for his domain,
        with jit_provisioning (he becomes a member when he first signs in)."""
        if self.sso_account is None:
            self.sso_account = self.db.execute(
                self.queries['accounts.insert'], {'name': 'Company', 'locale': 'en'}
            ).fetchone()[0]
            insert_provider(
                self.db,
                self.mail_config,
                self.sso_account,
                self.idp.issuer,
                SSO_CLIENT,
                SSO_SECRET,
                [self.owner.boxes[0].rpartition('@')[2]],
                jit_provisioning=True,
            )
        return self.sso_account

    def browser(self):
        browser = SsoBrowser()
        browser.base_origin = self.base
        return browser

    def callback(self, browser, params):
        """The browser at the callback with ``params``: the login page's query it is
        sent to."""
        answer = browser.request(
            'GET', f'{self.base}{CALLBACK}?{urllib.parse.urlencode(params)}'
        )
        assert answer.status == 302, answer.body
        location = urllib.parse.urlsplit(answer.headers['location'])
        return dict(urllib.parse.parse_qsl(location.query))

    def sso_barred(self, user_id):
        """Why the callback refuses ``user_id`` (SPEC 19, 18): suspended in the
        company account, or locked out; None: it does not."""
        status = dict(
            self.sql(
                'SELECT account_id, status FROM account_users WHERE user_id = %s',
                user_id,
            )
        )
        if status.get(self.sso_account) == 'suspended':
            return 'suspended'
        if status and 'active' not in status.values():
            return 'locked out'
        return None

    def reserved(self, address):
        """Does a live e-mail revert link reserve ``address`` (SPEC 3.4)?"""
        return bool(
            self.sql(
                'SELECT 1 FROM one_time_tokens WHERE email = %s'
                " AND purpose = 'email_revert' AND expires_at > now()",
                address,
            )
        )

    def at_the_company(self):
        """Is the owner's address still the one his company's provider vouches for
        (he may have moved to another)?"""
        return self.account_email == self.owner.boxes[0]

    @precondition(lambda self: not self.waiting and self.at_the_company())
    @rule(leak=st.sampled_from(SSO_LEAKS))
    def owner_signs_in_with_sso(self, leak):
        """The owner signs in through his provider: start, the provider's ID token for
        his address, the callback, the token sign-in (a second step follows as after a
        password).

        Who he lands on: the user of his address, or (none) a new member. When that
        user was not confirmed (a squatter's sign-up), this was the owner's first
        confirmation (SPEC 19, 3.4): the squatter's password, sessions and tokens are
        dead at once. Otherwise single sign-on is a way in, not a credential change:
        what the attacker holds stays until the owner's recovery (SPEC 3.3).
        """
        self.provider_account()
        address = self.account_email
        holder = self.sql(
            'SELECT id, confirmed_at IS NOT NULL FROM users WHERE email = %s', address
        )
        browser = self.browser()
        started = browser.request(
            'GET', f'{self.base}/auth/sso?{urllib.parse.urlencode({"email": address})}'
        )
        assert started.status == 302, started.body
        flow = dict(
            urllib.parse.parse_qsl(
                urllib.parse.urlsplit(started.headers['location']).query
            )
        )
        self.idp.id_token = self.idp.sign(
            self.idp.claims(SSO_CLIENT, flow['nonce'], email=address, sub=self.sso_sub)
        )
        params = {'code': uuid.uuid4().hex, 'state': flow['state']}
        ended = self.callback(browser, params)
        if leak == 'callback':
            self.attacker.sso_callbacks.append(params)
        if 'sso_auth_token' not in ended:
            # A suspended or locked-out user (SPEC 18), or an address a live revert
            # link reserves (no new user takes it: SPEC 3.4).
            if holder:
                why = self.sso_barred(holder[0][0])
            else:
                why = 'reserved' if self.reserved(address) else None
            assert why is not None, ('the owner is refused by single sign-on', ended)
            TALLY[('sso refused', why, self.capability)] += 1
            return
        assert ended['email'] == address
        [(landed,)] = self.sql('SELECT id FROM users WHERE email = %s', address)
        if holder:
            assert landed == holder[0][0], 'single sign-on moved the address'
        if not holder or not holder[0][1]:
            # A new user, or the first confirmation: no password, no second factor;
            # whatever the owner knew of this address before signs in no more.
            self.owner.passwords = []
            self.owner_mfa = self.foreign_mfa = False
            self.recovered = False
        self.prove(landed, anew=not holder)
        if holder and not holder[0][1]:
            self.attacker_holds_nothing_of({landed}, {address})
            TALLY[('sso first confirmation', self.capability)] += 1
        token = ended['sso_auth_token']
        if leak == 'unused token':
            # A live credential of the owner's in the attacker's hands: the owner
            # recovers anew, and that must void it.
            self.attacker.sso_tokens.append((token, False))
            self.recovered = False
            TALLY[('sso token abandoned', self.capability)] += 1
            return
        answer = self.call(
            'POST', '/auth/sign_in', {'email': address, 'sso_auth_token': token}
        )
        assert answer.status in (200, 206), answer.body
        if leak == 'used token':
            self.attacker.sso_tokens.append((token, True))
        self.signed_in(self.owner, answer)
        TALLY[('sso sign-in', answer.status, self.capability)] += 1

    @precondition(lambda self: self.attacker.sso_tokens)
    @rule(pick=PICK)
    def attacker_replays_sso_token(self, pick):
        """A used token is spent; an unused one is the owner's session until a
        credential change voids it (the invariant checks that a recovery does)."""
        token, used = self.attacker.sso_tokens.pop(pick % len(self.attacker.sso_tokens))
        answer = self.call(
            'POST',
            '/auth/sign_in',
            {'email': self.account_email, 'sso_auth_token': token},
        )
        assert answer.status in ((401,) if used else (200, 206, 401)), answer.body
        self.signed_in(self.attacker, answer)
        TALLY[('sso token replayed', used, answer.status)] += 1

    @precondition(lambda self: self.attacker.sso_callbacks)
    @rule(pick=PICK, own_flow=st.booleans())
    def attacker_replays_callback(self, pick, own_flow):
        """The owner's callback address, from the attacker's browser (with a flow of
        his own for the owner's address, or none): the fd_sso cookie binds a flow to
        the browser that started it, and a flow is used once."""
        params = self.attacker.sso_callbacks[pick % len(self.attacker.sso_callbacks)]
        browser = self.browser()
        if own_flow:
            query = urllib.parse.urlencode({'email': self.account_email})
            browser.request('GET', f'{self.base}/auth/sso?{query}')
        ended = self.callback(browser, params)
        assert 'sso_auth_token' not in ended, 'a replayed callback got a token'
        TALLY[('sso callback replayed', own_flow)] += 1

    # --- the owner's recovery from the mailbox --------------------------------------

    @precondition(lambda self: not self.waiting)
    @rule(newest_first=st.booleans())
    def owner_recovers(self, newest_first):
        """Every live revert link of the owner's mailbox (but those of his own
        changes), then a password reset.

        The owner clicks each link; one refused while the account had another address
        (an MFA link is bound to the address it was mailed to) is clicked again after a
        revert brought the address back, until a round changes nothing.
        """
        owner = self.owner
        # A suspended owner first asks the administrator to let him back in: no
        # mailbox link signs a locked-out member in (SPEC 18).
        self.administrator_reactivates_owner()
        self.sync_mail()
        worked = set()
        while True:
            links = sorted(self.links_of(owner, *REVERT_PATHS), reverse=newest_first)
            links = [
                link
                for link in links
                if link[2] not in worked and link[2] not in self.own_links
            ]
            progress = False
            for _, kind, token, address in links:
                answer = self.owner_reverts(kind, token, address)
                if answer.status == 200:
                    worked.add(token)
                    progress = True
                    TALLY[('link used', kind, newest_first)] += 1
            if not progress:
                break
        requested = self.call('POST', '/auth/password', {'email': self.account_email})
        assert requested.status == 200, requested.body
        self.sync_mail()
        resets = [
            link
            for link in self.links_of(owner, 'reset')
            if link[3] == self.account_email
        ]
        answer = None
        anew = False
        for _, _, token, address in reversed(resets):
            answer = self.use_reset(owner, token, address)
            if answer.status in (200, 206):
                break
        else:
            # Finding F1 (docs/security.md, "The attack machine"), fixed: with the
            # address's 5 mails of the hour spent and its last link voided by a
            # credential change, a reset request still mails a link to an account's
            # address. (A request for an address no account has is suppressed too.)
            assert not (self.reset_mail_suppressed() and self.address_taken()), (
                'F1: no reset link this hour'
            )
            # No account has the address (a squatter moved away from it before it
            # was ever confirmed): the owner signs up and confirms as anyone would.
            signup = self.sign_up(owner, self.account_email, new_password())
            assert signup.status == 200, (
                'the owner can neither reset nor sign up with his address',
                signup.body,
            )
            self.sync_mail()
            if self.reset_mail_suppressed():
                # SPEC 3.4's bound of 5 mails per address and hour, spent by anyone on
                # an address no account had: the owner's confirmation waits for the
                # hour (docs/security.md, "The attack machine"), as designed.
                assert self.address_mail_spent(), 'a confirmation suppressed early'
                TALLY[('sign-up waits for the hour', self.capability)] += 1
                self.waiting = True
                return
            token = self.links_of(owner, 'confirm')[-1][2]
            answer = self.confirm_with(owner, token, owner.sessions[-1]['headers'])
            owner.passwords = owner.passwords[-1:]
            anew = True
        self.recovered = True
        self.dead = set()
        if answer.status == 206:
            answer = self.owner_second_step(answer.json['mfa_token'])
            if self.locked_out(answer, 'second_factor'):
                return  # his sign-in stops at the second step for the hour
        assert answer.status == 200, ('the owner cannot sign in', answer.body)
        landed = answer.json['data']['id']
        # The account his mailbox proved, not whichever has his address now (a thief's
        # new sign-up with it, say): the address left it only if it left every account.
        assert anew or self.proved in (None, landed), (
            'the owner recovered another account than the one he proved',
            self.proved,
            landed,
        )
        self.prove(landed, anew)
        self.owner_user_id = landed
        self.owner_mfa = answer.json['data']['mfa_enabled']
        self.foreign_mfa = False
        TALLY[('recovered', self.capability, self.owner_mfa)] += 1
        TALLY[('owner recoveries',)] += 1

    def address_mail_spent(self):
        """Has the owner's address had its 5 mails of this hour (SPEC 3.4)?"""
        row = self.db.execute(
            'SELECT max(hits) FROM rate_limit_counters WHERE bucket = %s'
            " AND window_start + interval '1 hour' > now()",
            ('mail|to=' + self.account_email,),
        ).fetchone()
        return row[0] is not None and row[0] > 5

    def address_taken(self):
        """Does an account have the owner's address as its e-mail?"""
        row = self.db.execute(
            'SELECT 1 FROM users WHERE email = %s', (self.account_email,)
        ).fetchone()
        return row is not None

    def reset_mail_suppressed(self):
        """Was the owner's reset request answered without a mail (SPEC 3.4's bound of
        5 mails per address and hour)?"""
        row = self.db.execute(
            'SELECT status FROM mail_outbox WHERE to_address = %s'
            ' ORDER BY id DESC LIMIT 1',
            (self.account_email,),
        ).fetchone()
        return row is not None and row[0] == 'suppressed'

    def locked_out(self, answer, kind):
        """A 429 of the owner's spent guessing budget: the documented price of
        SPEC 3.4's per-user budgets (docs/security.md), not a finding."""
        if answer.status != 429:
            return False
        budget = guessing.BUDGETS[kind]
        # The wrong guesses' budget, and for passwords the cap on every check, right or
        # wrong (the owner's own sign-ins and changes spend it too).
        spent = {
            f'{kind}|user={self.owner_user_id}': budget.limit,
            f'{kind}_checks|user={self.owner_user_id}': budget.cap,
        }
        rows = self.db.execute(
            'SELECT bucket, max(hits) FROM rate_limit_counters'
            ' WHERE bucket = ANY(%s) AND expires_at > now() GROUP BY bucket',
            ([bucket for bucket, limit in spent.items() if limit],),
        ).fetchall()
        which = [bucket for bucket, hits in rows if hits >= spent[bucket]]
        assert which, ('a 429 with budget left', kind, rows)
        spent_kind = which[0].split('|')[0]
        TALLY[
            ('owner locked out by the guessing budget', spent_kind, self.capability)
        ] += 1
        return True

    def owner_second_step(self, mfa_token):
        owner = self.owner
        assert self.owner_mfa, 'after the recovery a second factor the owner never set'
        body = {'mfa_token': mfa_token}
        code = self.totp(owner, self.owner_user_id)
        if code is not None:
            body['otp_code'] = code
        else:
            assert owner.backup_codes, 'the owner has no factor left'
            body['backup_code'] = owner.backup_codes.pop(0)
        answer = self.call('POST', '/auth/sign_in', body)
        if answer.status == 200:
            self.got_session(owner, answer)
        return answer

    def teardown(self):
        """Every example ends with the owner's recovery, and the invariant after it."""
        if self.starts_from is None or self.recovered or self.waiting:
            return
        self.owner_recovers(self.final_order)
        self.nothing_the_attacker_holds_acts_as_the_owner()
        self.the_owner_can_sign_in()

    # --- the invariant ----------------------------------------------------------------

    @invariant()
    def nothing_the_attacker_holds_acts_as_the_owner(self):
        self.sync_mail()
        if not self.recovered:
            return
        # At the owner's address, and at whatever address an account he proved has
        # now (a thief may have moved it).
        addresses = {self.account_email} | {
            email
            for (email,) in self.sql(
                'SELECT email FROM users WHERE id = ANY(%s)', sorted(self.owners())
            )
        }
        self.attacker_holds_nothing_of(self.owners(), addresses)

    def attacker_holds_nothing_of(self, users, addresses):
        """No session, API token, personal access token or sso_auth_token the attacker
        holds acts as any of ``users``, and no password of his signs in at any of
        ``addresses``."""
        attacker = self.attacker
        probes = [('session', s['headers']) for s in attacker.sessions]
        probes += [('api token', {'api_access_token': t}) for t in attacker.api_tokens]
        probes += [
            ('personal token', {'Authorization': f'Bearer {t}'})
            for t in attacker.personal_tokens
        ]
        for what, headers in probes:
            key = (what, tuple(sorted(headers.items())))
            if key in self.dead:
                continue
            answer = self.call('GET', '/api/v1/profile', None, headers)
            if answer.status == 200:
                assert answer.json['id'] not in users, (
                    f'an attacker {what} still acts as the owner after the recovery',
                    answer.json['id'],
                )
            else:
                assert answer.status in (401, 403), answer.body
                self.dead.add(key)
        # Every sso_auth_token he saw is spent, or was voided by the credential change.
        for token, _ in attacker.sso_tokens:
            answer = self.call(
                'POST',
                '/auth/sign_in',
                {'email': self.account_email, 'sso_auth_token': token},
            )
            assert answer.status == 401, (
                'an sso_auth_token the attacker saw signs in as the owner after he'
                ' took it back',
                answer.body,
            )
        attacker.sso_tokens = []
        for address in sorted(addresses):
            for password in attacker.passwords:
                if ('password', address, password) in self.dead:
                    continue
                answer = self.call(
                    'POST', '/auth/sign_in', {'email': address, 'password': password}
                )
                assert answer.status not in (200, 206), (
                    'a password the attacker knows signs in as the owner after the'
                    ' recovery',
                    address,
                )
                self.dead.add(('password', address, password))

    @invariant()
    def the_owner_can_sign_in(self):
        if not self.recovered:
            return
        answer = self.call(
            'POST',
            '/auth/sign_in',
            {'email': self.account_email, 'password': self.owner.passwords[-1]},
        )
        if self.locked_out(answer, 'password'):
            return
        if self.locked is not None and self.locked == self.owner_user_id:
            assert self.is_lockout(answer), answer.body
            return
        if self.owner_mfa:
            assert answer.status == 206, ('the owner cannot sign in', answer.body)
            self.give_back_password_check()
            return
        assert answer.status == 200, ('the owner cannot sign in', answer.body)
        assert answer.json['data']['id'] == self.owner_user_id
        headers = {name: answer.headers[name] for name in TOKEN_HEADERS}
        assert self.call('DELETE', '/auth/sign_out', None, headers).status == 200
        self.give_back_password_check()

    def give_back_password_check(self):
        """This invariant's own right password is the machine looking, not a step: it
        runs after every step, and left counted it would spend the owner's cap of
        password checks (SPEC 3.4) within one example, and every later look would be a
        429 that proves nothing. The cap itself is tests/test_guessing.py's."""
        bucket = {'bucket': f'password_checks|user={self.owner_user_id}'}
        with self.db.transaction():
            self.db.execute(
                'DELETE FROM rate_limit_counters WHERE bucket = %(bucket)s AND hits = 1'
                ' AND expires_at > now()',
                bucket,
            )
            self.db.execute(
                'UPDATE rate_limit_counters SET hits = hits - 1'
                ' WHERE bucket = %(bucket)s AND hits > 1 AND expires_at > now()',
                bucket,
            )


@pytest.fixture(scope='module')
def attack_inbox():
    with smtp_server() as inbox:
        yield inbox


@pytest.fixture(scope='module')
def attack_url(base_env, tmp_path_factory):
    """A gunicorn with a small session cap, so eviction happens."""
    env = {**base_env, **SSO_ENV, 'MAX_USER_SESSIONS': str(MAX_USER_SESSIONS)}
    log_path = tmp_path_factory.mktemp('attack') / 'gunicorn.log'
    with run_gunicorn(env, workers=2, log_path=log_path) as base:
        yield base


def machine_settings(request):
    common = {
        'deadline': None,
        'derandomize': True,
        'database': None,
        'suppress_health_check': list(HealthCheck),
        # Shrinking a run over HTTP can take many minutes: the suite reports the
        # failing sequence as found; the long profile shrinks it.
        'phases': [Phase.explicit, Phase.reuse, Phase.generate],
    }
    if request.config.getoption('hypothesis_profile', None) == 'attack':
        common.pop('phases')
        return settings(settings.get_profile('attack'), **common)
    return settings(**SUITE, **common)


@pytest.fixture(scope='module')
def attack_idp():
    with fake_idp() as provider:
        yield provider


@pytest.fixture
def machine_world(base_env, direct_database_url, attack_url, attack_inbox, attack_idp):
    """The server, the mailboxes, the owner's provider and the database the machine
    works with."""
    AttackMachine.base = attack_url
    AttackMachine.inbox = attack_inbox
    AttackMachine.idp = attack_idp
    AttackMachine.mail_config = config_module.load(
        {**smtp_env(base_env, attack_inbox.port), **SSO_ENV}
    )
    AttackMachine.queries = db.load_queries()
    with (
        psycopg.connect(direct_database_url, autocommit=True) as AttackMachine.db,
        db.connect(
            AttackMachine.mail_config, autocommit=True, row_factory=dict_row
        ) as AttackMachine.mail_db,
    ):
        yield AttackMachine
    AttackMachine.starts_from = None


# --- takeovers the machine has met, replayed before every run ----------------------
# Hypothesis has no @example for state machines, and the suite's bounded run need not
# draw these sequences: each runs the machine's own rules in order, its invariants
# after each step, and the recovery that ends every example.


def replay(capability, *steps):
    machine = AttackMachine()
    machine.starts_from = capability
    machine.start(separate=True, stale=False, order=False)
    for step in steps:
        step(machine)
        machine.nothing_the_attacker_holds_acts_as_the_owner()
        machine.the_owner_can_sign_in()
        machine.suspension_ends_what_the_attacker_holds()
        machine.the_owners_users_exist()
    machine.teardown()


def the_thief_signs_up_with_the_address_he_moved_the_account_from(capability):
    """With a fresh session of the owner's (or the password), the thief moves the
    account to his own address and confirms it, then signs up with the owner's: the
    revert link must still bring the address back to the owner's account, and the
    owner's recovery land on it, not on the thief's new one."""
    replay(
        capability,
        lambda machine: (
            machine.attacker.sessions
            or machine.sign_in_as(machine.attacker, 0, 0, False)
        ),
        lambda machine: machine.change_email_as(machine.attacker, 0, True, True, True),
        lambda machine: machine.attacker_signs_up(email_pick=0),
    )


def the_squatter_enables_mfa_before_the_owner_confirms(capability):
    """A squatter's second factor must not stand before the owner's confirmation."""
    replay(
        capability,
        lambda machine: machine.enable_mfa_as(machine.attacker, 0, True),
        lambda machine: machine.confirm_as(machine.owner, 0, False),
    )


def the_password_holder_voids_the_hours_last_reset_link(capability):
    """F1: the address's 5 mails of the hour spent, the holder of the password voids
    the last reset link with a password change; the owner's reset still gets a link."""
    replay(
        capability,
        lambda machine: machine.sign_in_as(machine.attacker, 0, 0, False),
        AttackMachine.attacker_floods_the_owners_mailbox,
        lambda machine: machine.change_password_as(machine.attacker, 0),
    )


def the_leaked_token_is_used_after_the_reset(capability):
    """A personal access token of the owner's leaked: his reset ends it."""
    replay(capability)


def the_owners_unused_sso_token_leaks_before_his_reset(capability):
    """The owner's single sign-on ends at a token he never uses (he closed the tab),
    and the final redirect's address reaches the attacker: his recovery (a reset, a
    credential change) must void it. From the squatter's start the callback was also
    the owner's first confirmation."""
    replay(
        capability,
        lambda machine: machine.owner_signs_in_with_sso('unused token'),
    )


def the_stolen_session_tries_to_erase_the_owner(capability):
    """A session alone, with a guessed password, with a code he has: never enough to
    erase the owner (SPEC 20, 3.4)."""
    replay(
        capability,
        lambda machine: (
            machine.attacker.sessions
            or machine.sign_in_as(machine.attacker, 0, 0, False)
        ),
        lambda machine: machine.attacker_erases_the_owner(0, False, False),
        lambda machine: machine.attacker_erases_the_owner(0, True, False),
        lambda machine: machine.enable_mfa_as(machine.owner, 0, True),
        lambda machine: machine.attacker_erases_the_owner(0, True, True),
    )


KNOWN_TAKEOVERS = {
    'squatter': (
        the_squatter_enables_mfa_before_the_owner_confirms,
        the_owners_unused_sso_token_leaks_before_his_reset,
    ),
    'stolen_session': (
        the_thief_signs_up_with_the_address_he_moved_the_account_from,
        the_stolen_session_tries_to_erase_the_owner,
    ),
    'password': (
        the_thief_signs_up_with_the_address_he_moved_the_account_from,
        the_stolen_session_tries_to_erase_the_owner,
        the_password_holder_voids_the_hours_last_reset_link,
        the_owners_unused_sso_token_leaks_before_his_reset,
    ),
    'personal_token': (the_leaked_token_is_used_after_the_reset,),
}


@pytest.mark.long(20)
@pytest.mark.parametrize('capability', CAPABILITIES)
def test_the_owner_keeps_the_account_whatever_the_attacker_starts_from(
    request, machine_world, capability
):
    AttackMachine.starts_from = capability
    TALLY.clear()
    started = time.monotonic()
    for known in KNOWN_TAKEOVERS.get(capability, ()):
        known(capability)
    run_state_machine_as_test(AttackMachine, settings=machine_settings(request))
    print(
        f'attack machine: {time.monotonic() - started:.0f} s,'
        f' {TALLY[("owner recoveries",)]} owner recoveries'
    )
    for key, count in sorted(TALLY.items(), key=str):
        print(f'{count:6}', *key)


@pytest.mark.parametrize('stale', [False, True], ids=['fresh', 'stale'])
def test_a_stolen_session_cannot_keep_the_owner_from_a_reset_link(machine_world, stale):
    """F1, as the machine found it: anyone spends the address's 5 mails of the hour
    on reset requests; the holder of a stolen session voids the one live link with
    reset_access_token, a credential change; the owner's reset request was then
    answered 200 and mailed nothing, so the owner had no working link while the thief
    kept the session, for the rest of the hour and again every hour. A stale stolen
    session (no password check for an hour) is refused that credential change (SPEC
    3.4, minting a credential needs recent authentication); a fresh one voids the link,
    and the owner is mailed a working one all the same."""
    machine = AttackMachine()
    machine.starts_from = 'stolen_session'
    machine.start(separate=True, stale=stale, order=False)
    owner, thief = machine.owner, machine.attacker
    address = machine.account_email
    stolen = thief.sessions[-1]['headers']
    for _ in range(5):
        assert machine.call('POST', '/auth/password', {'email': address}).status == 200
    voided = machine.call('POST', '/api/v1/profile/reset_access_token', None, stolen)
    assert voided.status == (403 if stale else 200)
    assert machine.call('POST', '/auth/password', {'email': address}).status == 200
    machine.sync_mail()
    assert machine.call('GET', '/api/v1/profile', None, stolen).status == 200
    working = [
        token
        for _, _, token, _ in machine.links_of(owner, 'reset')
        if machine.use_reset(owner, token, address).status in (200, 206)
    ]
    assert working, 'the owner has no working reset link; the thief has the session'
    # The owner's reset ended the thief's session.
    assert machine.call('GET', '/api/v1/profile', None, stolen).status == 401
