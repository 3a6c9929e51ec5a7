"""Two gunicorn instances behind one nginx upstream, on one database.

Everything an instance keeps (tokens, rate-limit counters, the mail outbox) lives in
PostgreSQL, so a second instance must change nothing a client or an operator sees.
"""

import contextlib
import json
import random
import signal
import time
from types import SimpleNamespace

import pytest

from tests.nginx_server import request
from tests.nginx_server import run_nginx
from tests.nginx_server import shared_workdir
from tests.smtp_server import deliver_mail_command
from tests.smtp_server import smtp_server
from tests.support.rate_windows import start_clear_of_a_window_boundary
from tests.support.servers import http
from tests.support.servers import run_gunicorn
from tests.support.users import PASSWORD
from tests.support.users import unique_email

JSON = {'Content-Type': 'application/json'}
# Client addresses of this module's own (all of 127/8 is loopback): the rate-limit
# counters of other tests, which share the database, stay out of the way.
TOKEN_CLIENT, LIMITED_CLIENT, OTHER_CLIENT = (
    f'127.0.0.{n}' for n in random.sample(range(3, 255), 3)
)


@pytest.fixture(scope='module')
def instances(base_env):
    """nginx (``proxy``) in front of two single-worker gunicorns (``direct``,
    ``logs``)."""
    with shared_workdir() as workdir, contextlib.ExitStack() as stack:
        env = {**base_env, 'AVATAR_DIR': str(workdir / 'avatars'), 'RATE_LIMITS': 'on'}
        logs = [workdir / 'gunicorn-0.log', workdir / 'gunicorn-1.log']
        direct = [
            stack.enter_context(run_gunicorn(env, workers=1, log_path=log))
            for log in logs
        ]
        upstreams = [base.removeprefix('http://') for base in direct]
        proxy, _ = stack.enter_context(
            run_nginx(workdir, upstreams, workdir / 'avatars')
        )
        yield SimpleNamespace(proxy=proxy, direct=direct, logs=logs)


def served_by(instances, answer_headers, timeout=5.0):
    """Which instance (0 or 1) logged this request id; logs lag replies a little."""
    request_id = answer_headers['x-request-id']
    deadline = time.monotonic() + timeout
    while True:
        found = [
            n
            for n, log in enumerate(instances.logs)
            if request_id in log.read_text(errors='replace')
        ]
        if found or time.monotonic() > deadline:
            assert len(found) == 1, (request_id, found)
            return found[0]
        time.sleep(0.05)


def sign_in(base, email, password, source):
    body = json.dumps({'email': email, 'password': password}).encode()
    return request('POST', base + '/auth/sign_in', body, headers=JSON, source=source)


def test_a_token_issued_by_one_instance_works_on_the_other_and_through_nginx(
    instances, make_user
):
    user = make_user()
    first, second = instances.direct
    status, headers, _ = sign_in(first, user.email, PASSWORD, TOKEN_CLIENT)
    assert status == 200
    assert served_by(instances, headers) == 0
    token = {name: headers[name] for name in ('access-token', 'client', 'uid')}

    answer = http('GET', second + '/api/v1/profile', headers=token)
    assert (answer.status, answer.json['email']) == (200, user.email)
    assert answer.headers['access-token'] == token['access-token']
    assert served_by(instances, answer.headers) == 1

    # Through nginx the requests go to both, and both accept the token.
    answers = [
        http('GET', instances.proxy + '/api/v1/profile', headers=token)
        for _ in range(4)
    ]
    assert [answer.status for answer in answers] == [200] * 4
    assert {served_by(instances, answer.headers) for answer in answers} == {0, 1}

    # Signed out on one instance, the token is dead on the other.
    assert http('DELETE', second + '/auth/sign_out', headers=token).status == 200
    assert http('GET', first + '/api/v1/profile', headers=token).status == 401


def test_the_sign_in_limit_counts_requests_to_both_instances(instances, make_user):
    user = make_user()
    # Through gunicorn, not make_testapp: start clear of a window boundary here.
    start_clear_of_a_window_boundary(margin=10)
    statuses, servers = [], []
    for _ in range(6):
        status, headers, payload = sign_in(
            instances.proxy, user.email, 'wrong password', LIMITED_CLIENT
        )
        statuses.append(status)
        servers.append(served_by(instances, headers))
    assert statuses == [401] * 5 + [429]
    assert json.loads(payload) == {'message': 'Retry later'}
    assert set(servers[:5]) == {0, 1}
    # The limit is that address's: another client still gets an answer on its password.
    assert (
        sign_in(instances.proxy, user.email, 'wrong password', OTHER_CLIENT)[0] == 401
    )


def test_two_looping_mail_workers_send_each_message_exactly_once(
    conn, queries, base_env
):
    addresses = [unique_email('two-workers') for _ in range(12)]
    ids = [
        conn.execute(
            queries['mail.enqueue'],
            {
                'kind': 'test',
                'user_id': None,
                'to_address': address,
                'subject': 'Test message',
                'text_body': 'Hello',
                'html_body': '<p>Hello</p>',
            },
        ).fetchone()['id']
        for address in addresses
    ]
    with smtp_server() as inbox:
        # Each worker's first message waits in DATA until the other worker is mid-send
        # too: both really deliver, at the same time.
        inbox.hold = 2
        workers = [
            deliver_mail_command(base_env, inbox.port, once=False) for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + 30
            while (
                not all(inbox.to(address) for address in addresses)
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
        outputs = [worker.communicate(timeout=15) for worker in workers]

    for worker, (stdout, stderr) in zip(workers, outputs):
        assert worker.returncode == 0, stderr
        assert 'Traceback' not in stderr
        assert int(stdout.split('deliver-mail: ')[1].split(' sent')[0]) >= 1, stdout
    assert [len(inbox.to(address)) for address in addresses] == [1] * len(addresses)
    statuses = conn.execute(
        'SELECT status, attempts FROM mail_outbox WHERE id = ANY(%s)', (ids,)
    ).fetchall()
    assert statuses == [{'status': 'sent', 'attempts': 1}] * len(ids)
