"""Shared by the modes: the seeded database, gunicorn, wrk and the report."""

import collections
import contextlib
import datetime
import json
import os
import pathlib
import re
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

import psycopg

import db
import tokens

ROOT = pathlib.Path(__file__).resolve().parent.parent
LUA = ROOT / 'bench' / 'bench.lua'
RESULTS = ROOT / 'bench' / 'results'
ADMIN_URL = os.environ.get(
    'TEST_DATABASE_URL', 'postgresql://postgres@127.0.0.1:5432/postgres'
)
PASSWORD = 'bench password 1'
AVATAR_URL_PREFIX = '/avatars/'  # the default the server runs with

# (name in bench.lua, row label, target ratio to /healthz or None when only reported)
ENDPOINTS = [
    ('get_profile', 'GET /api/v1/profile', 0.6),
    ('pat_profile', 'GET /api/v1/profile (personal access token)', 0.6),
    ('get_account', 'GET /api/v1/accounts/{id}', 0.6),
    ('cache_keys', 'GET /api/v1/accounts/{id}/cache_keys', 0.6),
    ('validate_token', 'GET /auth/validate_token', 0.6),
    ('put_profile', 'PUT /api/v1/profile', 0.4),
    ('sign_in', 'POST /auth/sign_in', None),
    ('sso_sign_in', 'POST /auth/sign_in (sso_auth_token)', None),
    ('sign_up', 'POST /api/v1/accounts', None),
]
LABELS = {
    'healthz': 'GET /healthz (baseline)',
    **{name: label for name, label, _ in ENDPOINTS},
}


RSS_LIMIT_MB = 60
# SPEC 17: a personal-access-token request costs at most this much more CPU (gunicorn
# and PostgreSQL, per request) than a token-header request.
PAT_CPU_LIMIT = 0.10
# User i's personal access token, line i (bench.lua reads it for pat_profile): a real
# token has a checksum Lua would have to compute, so they are made here.
PAT_TOKENS = RESULTS / 'pat_tokens.txt'


BCRYPT_ENDPOINTS = {
    'sign_in',
    'sign_up',
}  # no warm-up: bcrypt dominates, nothing to warm


# User i: account i (administrator), e-mail user<i>@bench.test, token bench-token-<i>
# on client client-<i>; bench.lua derives the same values. The token expires last of
# the user's, so sign-ins during the run never push it out (MAX_TOKENS_PER_USER), and
# its last_used_at lies ahead, so the benchmark measures the read path: in service the
# token touch is one UPDATE per token per 10 minutes.
# The long SQL lines keep their noqa: E501 rather than a rewrap, which would change the
# strings sent to PostgreSQL.
SEED = [
    """INSERT INTO accounts (id, name) OVERRIDING SYSTEM VALUE
       SELECT i, 'Bench account ' || i FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",  # noqa: E501
    """INSERT INTO users (id, name, email, encrypted_password, confirmed_at, access_token)
       OVERRIDING SYSTEM VALUE
       SELECT i, 'Bench user ' || i, 'user' || i || '@bench.test', %(hash)s, now(),
              'bench-access-token-' || lpad(i::text, 16, '0')
         FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",  # noqa: E501
    """INSERT INTO account_users (account_id, user_id, role)
       SELECT i, i, 'administrator' FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",  # noqa: E501
    """INSERT INTO user_tokens (user_id, client, token_digest, expires_at, last_used_at)
       SELECT i, 'client-' || i, sha256(convert_to('bench-token-' || i, 'UTF8')),
              now() + interval '10 years', now() + interval '1 day'
         FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",
    # Sign-ups during the run take ids after the seeded ones.
    "SELECT setval(pg_get_serial_sequence('accounts', 'id'), %(last)s)",
    "SELECT setval(pg_get_serial_sequence('users', 'id'), %(last)s)",
]


# --- database -----------------------------------------------------------------------


@contextlib.contextmanager
def database():
    """A new database, migrated; dropped on the way out."""
    name = f'frontdesk_bench_{secrets.token_hex(4)}'
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE {name}')
    try:
        url = psycopg.conninfo.make_conninfo(ADMIN_URL, dbname=name)
        db.migrate(url)
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS {name} WITH (FORCE)')


def seed(url, first, last, password_hash):
    """Insert users first..last with set-based SQL; return the seconds it took."""
    started = time.monotonic()
    params = {'first': first, 'last': last, 'hash': password_hash}
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            for statement in SEED:
                conn.execute(statement, params)
        # Sets hint bits and the visibility map, as on a table that has lived a while.
        conn.execute('VACUUM (ANALYZE) accounts, users, account_users, user_tokens')
    seconds = time.monotonic() - started
    print(f'seeded users {first:,}..{last:,} in {seconds:.1f} s', flush=True)
    return seconds


def seed_personal_tokens(url, first, last):
    """A personal access token (profile:read, account:read) per user first..last, its
    last use ahead as the sign-in token's is; the tokens go to PAT_TOKENS."""
    made = [tokens.new_personal_token() for _ in range(first, last + 1)]
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor() as cursor:
            cursor.executemany(
                'INSERT INTO personal_access_tokens (user_id, name, token_digest,'
                " scopes, expires_at, last_used_at) VALUES (%s, 'bench', %s,"
                " '{profile:read,account:read}', now() + interval '10 years',"
                " now() + interval '1 day')",
                [
                    (user_id, tokens.digest(token))
                    for user_id, token in zip(range(first, last + 1), made)
                ],
            )
        conn.execute('VACUUM (ANALYZE) personal_access_tokens')
    RESULTS.mkdir(exist_ok=True)
    PAT_TOKENS.write_text(''.join(token + '\n' for token in made))
    return made


# --- the server -----------------------------------------------------------------------

TICKS = os.sysconf('SC_CLK_TCK')


def process_cpu(proc):
    """CPU seconds (user + system) of /proc/<pid> ``proc``."""
    fields = (proc / 'stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Server:
    def __init__(self, proc, base, access_log, url):
        self.proc, self.base, self.access_log, self.url = proc, base, access_log, url
        dbname = psycopg.conninfo.conninfo_to_dict(url)['dbname']
        # PostgreSQL backends show it in their title: "postgres: user dbname host(port)
        # state".
        self.dbname = b' ' + dbname.encode() + b' '

    def workers(self):
        """The gunicorn workers: the master's children."""
        pids = []
        for stat in pathlib.Path('/proc').glob('[0-9]*/stat'):
            try:
                fields = stat.read_text().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                pids.append(int(stat.parent.name))
        return sorted(pids)

    def rss_mb(self):
        """{worker pid: VmRSS in MB}."""
        sizes = {}
        for pid in self.workers():
            with contextlib.suppress(OSError):
                for line in (
                    pathlib.Path(f'/proc/{pid}/status').read_text().splitlines()
                ):
                    if line.startswith('VmRSS:'):
                        sizes[pid] = int(line.split()[1]) / 1024
        return sizes

    def reset_peaks(self):
        """Start each worker's VmHWM (peak RSS) afresh (clear_refs 5)."""
        for pid in self.workers():
            with contextlib.suppress(OSError):
                pathlib.Path(f'/proc/{pid}/clear_refs').write_text('5')

    def peak_mb(self):
        """The largest VmHWM (peak RSS since reset_peaks) of any worker, in MiB."""
        peaks = [0.0]
        for pid in self.workers():
            with contextlib.suppress(OSError):
                for line in (
                    pathlib.Path(f'/proc/{pid}/status').read_text().splitlines()
                ):
                    if line.startswith('VmHWM:'):
                        peaks.append(int(line.split()[1]) / 1024)
        return max(peaks)

    def cpu_ns(self):
        """gunicorn's (master + workers) time on a CPU in ns, from
        /proc/<pid>/schedstat: nanosecond resolution, where /proc/<pid>/stat counts
        10 ms ticks."""
        total = 0
        for pid in [self.proc.pid, *self.workers()]:
            with contextlib.suppress(OSError):
                total += int(
                    pathlib.Path(f'/proc/{pid}/schedstat').read_text().split()[0]
                )
        return total

    def cpu_seconds(self):
        """(gunicorn master + workers, this database's PostgreSQL backends) CPU
        seconds."""
        app = pg = 0.0
        workers = set(self.workers()) | {self.proc.pid}
        for proc in pathlib.Path('/proc').glob('[0-9]*'):
            pid = int(proc.name)
            try:
                if pid in workers:
                    app += process_cpu(proc)
                elif (
                    pid != os.getpid()
                    and self.dbname in (proc / 'cmdline').read_bytes()
                ):
                    pg += process_cpu(proc)
            except OSError:
                continue
        return app, pg

    def log_offset(self):
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def statuses(self, offset):
        """Counter of the HTTP statuses logged since ``offset``."""
        with open(self.access_log, 'rb') as log:
            log.seek(offset)
            return collections.Counter(re.findall(rb'status=(\d+)', log.read()))


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.status


@contextlib.contextmanager
def server(url, args, extra_env=None, name='', root=ROOT):
    """gunicorn -c gunicorn.conf.py as in production, with RATE_LIMITS=off;
    ``extra_env`` adds variables, ``name`` tells the access logs of several at once
    apart, ``root`` is the checkout it runs (--against: another revision's)."""
    RESULTS.mkdir(exist_ok=True)
    # The app writes its access lines (status=...) to gunicorn's output: one file per
    # server, so several at once (--pgbouncer) are told apart.
    access_log = server_log = RESULTS / f'server{name}.log'
    server_log.unlink(missing_ok=True)
    port = free_port()
    env = {
        **os.environ,
        'DATABASE_URL': url,
        'RATE_LIMITS': 'off',
        # Every feature that adds work to a request on, so that the numbers are those of
        # the costliest configuration: sessions with an idle timeout, MFA possible.
        'SESSION_IDLE_TIMEOUT_MINUTES': '60',
        'SECRET_KEY': 'YmVuY2ggc2VjcmV0IGtleSwgMzIgYnl0ZXMgbG9uZyE=',
        'BCRYPT_ROUNDS': str(args.bcrypt_rounds),
        'BIND': f'127.0.0.1:{port}',
        **(extra_env or {}),
    }
    with open(server_log, 'ab') as log:
        proc = subprocess.Popen(
            [sys.executable, '-m', 'gunicorn', '-c', 'gunicorn.conf.py'],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f'gunicorn exited with {proc.returncode}; see {server_log}'
                )
            try:
                if get(base + '/healthz', timeout=1) == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield Server(proc, base, access_log, url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=35)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def settle(srv, pause):
    """Wait until requests left queued by the last run (bcrypt ones) have drained."""
    deadline = time.monotonic() + 120
    quick = 0
    while quick < 2 and time.monotonic() < deadline:
        started = time.monotonic()
        with contextlib.suppress(OSError):
            get(srv.base + '/healthz', timeout=10)
        quick = quick + 1 if time.monotonic() - started < 0.05 else 0
        time.sleep(0.05)
    time.sleep(pause)


# --- wrk ------------------------------------------------------------------------------


# sso_sign_in: the one-time tokens one wrk thread may use in a run, made before it.
SSO_TOKENS_PER_THREAD = 40_000


def seed_sso_tokens(url, nonce, threads, users):
    """The sso_auth_tokens of one sso_sign_in run (SPEC 19): bench.lua's thread t sends
    token ``bench-sso-<nonce>-<t>-<n>`` as its n-th request, for user ((n - 1) mod
    users) + 1, as a provider's callback would have left them (account i's provider,
    no second factor). Tokens are single use, so each run gets its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM one_time_tokens WHERE purpose = 'sso'")
        conn.execute(
            """INSERT INTO one_time_tokens (user_id, purpose, email, token_digest,
                                           expires_at, sso_account_id, sso_sub)
               SELECT u, 'sso', 'user' || u || '@bench.test',
                      sha256(convert_to(
                          'bench-sso-' || %(nonce)s || '-' || t || '-' || n, 'UTF8')),
                      now() + interval '1 hour', u, 'bench-sub-' || u
                 FROM generate_series(1, %(threads)s) AS t,
                      generate_series(1, %(per_thread)s) AS n,
                      LATERAL (SELECT ((n - 1) %% %(users)s) + 1 AS u) AS owner""",
            {
                'nonce': nonce,
                'threads': threads,
                'per_thread': SSO_TOKENS_PER_THREAD,
                'users': users,
            },
        )


def wrk(srv, args, endpoint, users, duration):
    """One wrk run; returns its numbers plus the statuses the access log saw."""
    nonce = secrets.token_hex(4)
    if endpoint == 'sso_sign_in':
        seed_sso_tokens(srv.url, nonce, args.threads, users)
    command = [
        'wrk',
        f'-t{args.threads}',
        f'-c{args.connections}',
        f'-d{duration}',
        '--latency',
        f'--timeout={args.timeout}',
        '-s',
        str(LUA),
        srv.base,
        '--',
        endpoint,
        str(users),
        PASSWORD,
        nonce,
        str(PAT_TOKENS),
    ]
    offset = srv.log_offset()
    app_cpu, pg_cpu = srv.cpu_seconds()
    wrk_cpu = _children_cpu()
    done = subprocess.run(command, capture_output=True, text=True)
    wrk_cpu = _children_cpu() - wrk_cpu
    app_cpu, pg_cpu = (
        after - before for after, before in zip(srv.cpu_seconds(), (app_cpu, pg_cpu))
    )
    line = next(
        (line for line in done.stdout.splitlines() if line.startswith('BENCH ')), None
    )
    if srv.proc.poll() is not None:
        raise RuntimeError(
            f'gunicorn exited ({srv.proc.returncode}) during the {endpoint} run; '
            f'see {RESULTS}/server.log'
        )
    if done.returncode != 0 or line is None:
        raise RuntimeError(
            f'wrk failed ({done.returncode}): {done.stdout}{done.stderr}'
        )
    numbers = json.loads(line[len('BENCH ') :])
    settle(srv, args.pause)
    statuses = srv.statuses(offset)
    bad = {
        code.decode(): n
        for code, n in sorted(statuses.items())
        if not code.startswith(b'2')
    }
    socket_errors = (
        numbers['connect'] + numbers['read'] + numbers['write'] + numbers['timeout']
    )
    result = {
        'endpoint': endpoint,
        'requests': numbers['requests'],
        'rps': numbers['requests'] / (numbers['duration_us'] / 1e6),
        'p50': numbers['p50'] / 1000,
        'p99': numbers['p99'] / 1000,
        'non2xx': numbers['status'],
        'socket_errors': socket_errors,
        'bad_statuses': bad,
        # CPU per request, in microseconds: the figure least moved by other load on the
        # machine.
        'app_us': app_cpu / max(numbers['requests'], 1) * 1e6,
        'pg_us': pg_cpu / max(numbers['requests'], 1) * 1e6,
        'wrk_cpu': wrk_cpu / (numbers['duration_us'] / 1e6),
    }
    print(
        f'  {endpoint:12} {result["rps"]:8.1f} req/s  p50 {result["p50"]:6.1f} ms  p99 '
        f'{result["p99"]:7.1f} ms  CPU/req app {result["app_us"]:6.0f} + pg '
        f'{result["pg_us"]:5.0f} us  wrk {result["wrk_cpu"]:4.0%}'
        f'  non-2xx {result["non2xx"]}  socket errors {socket_errors}  {bad or ""}',
        flush=True,
    )
    return result


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def warm_up(srv, args, names, users):
    if args.warmup in ('0', '0s'):
        return []
    print(f'warm-up ({args.warmup} each):', flush=True)
    return [
        wrk(srv, args, name, users, args.warmup)
        for name in names
        if name not in BCRYPT_ENDPOINTS
    ]


def alternate(srv, args, names, users):
    """healthz, e1, healthz, e2, ..., healthz, for each round; each run gets its ratio
    to the mean of the healthz runs either side of it."""
    runs = [wrk(srv, args, 'healthz', users, args.duration)]
    for _ in range(args.rounds):
        for name in names:
            runs.append(wrk(srv, args, name, users, args.duration))
            runs.append(wrk(srv, args, 'healthz', users, args.duration))
    for i in range(1, len(runs), 2):
        runs[i]['ratio'] = runs[i]['rps'] / statistics.mean(
            (runs[i - 1]['rps'], runs[i + 1]['rps'])
        )
        # CPU per request, gunicorn and PostgreSQL, over /healthz's (gunicorn only);
        # and PostgreSQL's part alone over the same, which a slower host moves with
        # /healthz instead of past an absolute line.
        healthz_us = statistics.mean((runs[i - 1]['app_us'], runs[i + 1]['app_us']))
        runs[i]['cpu_ratio'] = (runs[i]['app_us'] + runs[i]['pg_us']) / healthz_us
        runs[i]['pg_ratio'] = runs[i]['pg_us'] / healthz_us
    return runs


def pat_cpu_line(session, personal):
    """SPEC 17: CPU per request (gunicorn + PostgreSQL) of GET profile with a personal
    access token against the same with the token headers."""
    session_us = session['app_us'] + session['pg_us']
    personal_us = personal['app_us'] + personal['pg_us']
    extra = personal_us / session_us - 1
    return (
        f'- Personal access token vs token headers, GET profile: {personal_us:.0f} vs '
        f'{session_us:.0f} us CPU per request (app {personal["app_us"]:.0f} vs '
        f'{session["app_us"]:.0f}, PostgreSQL {personal["pg_us"]:.0f} vs '
        f'{session["pg_us"]:.0f}): {extra:+.1%}; target ≤ +{PAT_CPU_LIMIT:.0%}: '
        f'{verdict(extra <= PAT_CPU_LIMIT)}'
    )


def summarise(runs, name):
    """Medians over the rounds of one endpoint's runs; errors are summed."""
    mine = [run for run in runs if run['endpoint'] == name]
    bad = collections.Counter()
    for run in mine:
        bad.update(run['bad_statuses'])
    row = {
        key: statistics.median(run[key] for run in mine)
        for key in ('rps', 'p50', 'p99', 'app_us', 'pg_us')
    }
    if name != 'healthz':
        row['ratio'] = statistics.median(run['ratio'] for run in mine)
        row['cpu_ratio'] = statistics.median(run['cpu_ratio'] for run in mine)
        row['pg_ratio'] = statistics.median(run['pg_ratio'] for run in mine)
    row.update(
        n=len(mine),
        non2xx=sum(run['non2xx'] for run in mine),
        socket_errors=sum(run['socket_errors'] for run in mine),
        bad_statuses=dict(bad),
    )
    return row


# --- reporting ------------------------------------------------------------------------


def verdict(ok):
    return 'pass' if ok else '**miss**'


def errors_cell(row):
    text = f'{row["non2xx"]} / {row["socket_errors"]}'
    if row['bad_statuses']:
        text += (
            ' ('
            + ', '.join(f'{code}×{n}' for code, n in row['bad_statuses'].items())
            + ')'
        )
    return text


def table(rows):
    """Markdown table of summarised rows: [(name, row, target text, ok or None)]."""
    lines = [
        '| endpoint | req/s | p50 ms | p99 ms | × healthz | CPU µs/req app + pg | '
        'non-2xx / socket errors | target | result |',
        '|---|---:|---:|---:|---:|---:|---|---|---|',
    ]
    for name, row, target, ok in rows:
        ratio = f'{row["ratio"]:.2f}' if 'ratio' in row else '1'
        result = '' if ok is None else verdict(ok)
        lines.append(
            f'| {LABELS[name]} | {row["rps"]:,.0f} | {row["p50"]:.1f} | '
            f'{row["p99"]:.1f} | {ratio} | {row["app_us"]:,.0f} + {row["pg_us"]:,.0f} '
            f'| {errors_cell(row)} | {target} | {result} |'
        )
    return lines


def rss_line(sizes):
    return ', '.join(f'{mb:.1f}' for _, mb in sorted(sizes.items())) + ' MB'


def _cpu_model():
    for line in pathlib.Path('/proc/cpuinfo').read_text().splitlines():
        if line.startswith('model name'):
            return line.partition(':')[2].strip()
    return 'unknown CPU'


def header(args, title):
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    head = subprocess.run(
        ['git', 'rev-parse', '--short', 'HEAD'],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    busy = (
        ', and one kept busy by another process'
        if getattr(args, 'busy_core', False)
        else ''
    )
    return [
        f'## {title}',
        '',
        f'{now}, HEAD {head.stdout.strip() or "?"} (plus any uncommitted changes); '
        f'wrk -t{args.threads} -c{args.connections} -d{args.duration} --latency, '
        f'{args.rounds} round(s); bcrypt cost {args.bcrypt_rounds}; '
        f'{os.cpu_count()} CPUs ({_cpu_model()}) shared by wrk, gunicorn and '
        f'PostgreSQL{busy}; load average {os.getloadavg()[0]:.2f} at the start.',
        '',
    ]
