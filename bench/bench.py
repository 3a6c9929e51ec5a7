"""Load-test Frontdesk with wrk against a fresh, seeded database (see docs/performance.md).

Run it through bench/run, which installs what is missing first. Each mode creates its own
database on TEST_DATABASE_URL's server, starts gunicorn with gunicorn.conf.py, and drops
the database and stops gunicorn on the way out, Ctrl-C included.
"""

import argparse
import collections
import contextlib
import datetime
import hashlib
import json
import os
import pathlib
import re
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

import bcrypt
import psycopg

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import config  # noqa: E402
import db  # noqa: E402

LUA = ROOT / 'bench' / 'bench.lua'
RESULTS = ROOT / 'bench' / 'results'
ADMIN_URL = os.environ.get('TEST_DATABASE_URL', 'postgresql://postgres@127.0.0.1:5432/postgres')
PASSWORD = 'bench password 1'
AVATAR_URL_PREFIX = '/avatars/'  # the default the server runs with

# (name in bench.lua, row label, target ratio to /healthz or None when only reported)
ENDPOINTS = [
    ('get_profile', 'GET /api/v1/profile', 0.6),
    ('get_account', 'GET /api/v1/accounts/{id}', 0.6),
    ('cache_keys', 'GET /api/v1/accounts/{id}/cache_keys', 0.6),
    ('put_profile', 'PUT /api/v1/profile', 0.4),
    ('sign_in', 'POST /auth/sign_in', None),
    ('sign_up', 'POST /api/v1/accounts', None),
]
LABELS = {'healthz': 'GET /healthz (baseline)', **{name: label for name, label, _ in ENDPOINTS}}
GET_P99_MS = 15
SCALE_TARGET = 0.9
RSS_LIMIT_MB = 60
RSS_FLAT_MB = 1.0  # "flat": no worker grew by more than this over the leak run
BCRYPT_ENDPOINTS = {'sign_in', 'sign_up'}  # no warm-up: bcrypt dominates, nothing to warm

# User i: account i (administrator), e-mail user<i>@bench.test, token bench-token-<i>
# on client client-<i>; bench.lua derives the same values. The token expires last of
# the user's, so sign-ins during the run never push it out (MAX_TOKENS_PER_USER), and
# its last_used_at lies ahead, so the benchmark measures the read path: in service the
# token touch is one UPDATE per token per 10 minutes.
SEED = [
    """INSERT INTO accounts (id, name) OVERRIDING SYSTEM VALUE
       SELECT i, 'Bench account ' || i FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",
    """INSERT INTO users (id, name, email, encrypted_password, confirmed_at, access_token)
       OVERRIDING SYSTEM VALUE
       SELECT i, 'Bench user ' || i, 'user' || i || '@bench.test', %(hash)s, now(),
              'bench-access-token-' || lpad(i::text, 16, '0')
         FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",
    """INSERT INTO account_users (account_id, user_id, role)
       SELECT i, i, 'administrator' FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i""",
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


# --- the server -----------------------------------------------------------------------

TICKS = os.sysconf('SC_CLK_TCK')


def _cpu(proc):
    """CPU seconds (user + system) of /proc/<pid> ``proc``."""
    fields = (proc / 'stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Server:
    def __init__(self, proc, base, access_log, dbname):
        self.proc, self.base, self.access_log = proc, base, access_log
        # PostgreSQL backends show it in their title: "postgres: user dbname host(port) state".
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
                for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
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
                for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
                    if line.startswith('VmHWM:'):
                        peaks.append(int(line.split()[1]) / 1024)
        return max(peaks)

    def cpu_ns(self):
        """gunicorn's (master + workers) time on a CPU in ns, from /proc/<pid>/schedstat:
        nanosecond resolution, where /proc/<pid>/stat counts 10 ms ticks."""
        total = 0
        for pid in [self.proc.pid, *self.workers()]:
            with contextlib.suppress(OSError):
                total += int(pathlib.Path(f'/proc/{pid}/schedstat').read_text().split()[0])
        return total

    def cpu_seconds(self):
        """(gunicorn master + workers, this database's PostgreSQL backends) CPU seconds."""
        app = pg = 0.0
        workers = set(self.workers()) | {self.proc.pid}
        for proc in pathlib.Path('/proc').glob('[0-9]*'):
            pid = int(proc.name)
            try:
                if pid in workers:
                    app += _cpu(proc)
                elif pid != os.getpid() and self.dbname in (proc / 'cmdline').read_bytes():
                    pg += _cpu(proc)
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
def server(url, args, extra_env=None, name=''):
    """gunicorn -c gunicorn.conf.py as in production, with RATE_LIMITS=off; ``extra_env``
    adds variables, ``name`` tells the access logs of several at once apart."""
    RESULTS.mkdir(exist_ok=True)
    # The app writes its access lines (status=...) to gunicorn's output: one file per
    # server, so several at once (--pgbouncer) are told apart.
    access_log = server_log = RESULTS / f'server{name}.log'
    server_log.unlink(missing_ok=True)
    port = free_port()
    env = {**os.environ, 'DATABASE_URL': url, 'RATE_LIMITS': 'off', 'BCRYPT_ROUNDS': str(args.bcrypt_rounds),
           'BIND': f'127.0.0.1:{port}', **(extra_env or {})}
    with open(server_log, 'ab') as log:
        proc = subprocess.Popen(
            [sys.executable, '-m', 'gunicorn', '-c', 'gunicorn.conf.py'],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f'gunicorn exited with {proc.returncode}; see {server_log}')
            try:
                if get(base + '/healthz', timeout=1) == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield Server(proc, base, access_log, psycopg.conninfo.conninfo_to_dict(url)['dbname'])
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

def wrk(srv, args, endpoint, users, duration):
    """One wrk run; returns its numbers plus the statuses the access log saw."""
    command = ['wrk', f'-t{args.threads}', f'-c{args.connections}', f'-d{duration}', '--latency',
               f'--timeout={args.timeout}', '-s', str(LUA), srv.base,
               '--', endpoint, str(users), PASSWORD, secrets.token_hex(4)]
    offset = srv.log_offset()
    app_cpu, pg_cpu = srv.cpu_seconds()
    wrk_cpu = _children_cpu()
    done = subprocess.run(command, capture_output=True, text=True)
    wrk_cpu = _children_cpu() - wrk_cpu
    app_cpu, pg_cpu = (after - before for after, before in zip(srv.cpu_seconds(), (app_cpu, pg_cpu)))
    line = next((line for line in done.stdout.splitlines() if line.startswith('BENCH ')), None)
    if srv.proc.poll() is not None:
        raise RuntimeError(f'gunicorn exited ({srv.proc.returncode}) during the {endpoint} run; '
                           f'see {RESULTS}/server.log')
    if done.returncode != 0 or line is None:
        raise RuntimeError(f'wrk failed ({done.returncode}): {done.stdout}{done.stderr}')
    numbers = json.loads(line[len('BENCH '):])
    settle(srv, args.pause)
    statuses = srv.statuses(offset)
    bad = {code.decode(): n for code, n in sorted(statuses.items()) if not code.startswith(b'2')}
    socket_errors = numbers['connect'] + numbers['read'] + numbers['write'] + numbers['timeout']
    result = {
        'endpoint': endpoint,
        'requests': numbers['requests'],
        'rps': numbers['requests'] / (numbers['duration_us'] / 1e6),
        'p50': numbers['p50'] / 1000,
        'p99': numbers['p99'] / 1000,
        'non2xx': numbers['status'],
        'socket_errors': socket_errors,
        'bad_statuses': bad,
        # CPU per request, in microseconds: the figure least moved by other load on the machine.
        'app_us': app_cpu / max(numbers['requests'], 1) * 1e6,
        'pg_us': pg_cpu / max(numbers['requests'], 1) * 1e6,
        'wrk_cpu': wrk_cpu / (numbers['duration_us'] / 1e6),
    }
    print(f"  {endpoint:12} {result['rps']:8.1f} req/s  p50 {result['p50']:6.1f} ms  p99 {result['p99']:7.1f} ms"
          f"  CPU/req app {result['app_us']:6.0f} + pg {result['pg_us']:5.0f} us  wrk {result['wrk_cpu']:4.0%}"
          f"  non-2xx {result['non2xx']}  socket errors {socket_errors}  {bad or ''}", flush=True)
    return result


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def warm_up(srv, args, names, users):
    if args.warmup in ('0', '0s'):
        return []
    print(f'warm-up ({args.warmup} each):', flush=True)
    return [wrk(srv, args, name, users, args.warmup) for name in names if name not in BCRYPT_ENDPOINTS]


def alternate(srv, args, names, users):
    """healthz, e1, healthz, e2, ..., healthz, for each round; each run gets its ratio
    to the mean of the healthz runs either side of it."""
    runs = [wrk(srv, args, 'healthz', users, args.duration)]
    for _ in range(args.rounds):
        for name in names:
            runs.append(wrk(srv, args, name, users, args.duration))
            runs.append(wrk(srv, args, 'healthz', users, args.duration))
    for i in range(1, len(runs), 2):
        runs[i]['ratio'] = runs[i]['rps'] / statistics.mean((runs[i - 1]['rps'], runs[i + 1]['rps']))
    return runs


def summarise(runs, name):
    """Medians over the rounds of one endpoint's runs; errors are summed."""
    mine = [run for run in runs if run['endpoint'] == name]
    bad = collections.Counter()
    for run in mine:
        bad.update(run['bad_statuses'])
    row = {key: statistics.median(run[key] for run in mine) for key in ('rps', 'p50', 'p99', 'app_us', 'pg_us')}
    if name != 'healthz':
        row['ratio'] = statistics.median(run['ratio'] for run in mine)
    row.update(n=len(mine), non2xx=sum(run['non2xx'] for run in mine),
               socket_errors=sum(run['socket_errors'] for run in mine), bad_statuses=dict(bad))
    return row


# --- reporting ------------------------------------------------------------------------

def verdict(ok):
    return 'pass' if ok else '**miss**'


def errors_cell(row):
    text = f"{row['non2xx']} / {row['socket_errors']}"
    if row['bad_statuses']:
        text += ' (' + ', '.join(f'{code}×{n}' for code, n in row['bad_statuses'].items()) + ')'
    return text


def table(rows):
    """Markdown table of summarised rows: [(name, row, target text, ok or None)]."""
    lines = ['| endpoint | req/s | p50 ms | p99 ms | × healthz | CPU µs/req app + pg | non-2xx / socket errors '
             '| target | result |',
             '|---|---:|---:|---:|---:|---:|---|---|---|']
    for name, row, target, ok in rows:
        ratio = f"{row['ratio']:.2f}" if 'ratio' in row else '1'
        result = '' if ok is None else verdict(ok)
        lines.append(f"| {LABELS[name]} | {row['rps']:,.0f} | {row['p50']:.1f} | {row['p99']:.1f} | {ratio} "
                     f"| {row['app_us']:,.0f} + {row['pg_us']:,.0f} | {errors_cell(row)} | {target} | {result} |")
    return lines


def rss_line(sizes):
    return ', '.join(f'{mb:.1f}' for _, mb in sorted(sizes.items())) + ' MB'


def probe(srv, name):
    """One request like wrk's, as user 1: what does a failing endpoint answer?"""
    headers = {'access-token': 'bench-token-1', 'client': 'client-1', 'uid': 'user1@bench.test',
               'Content-Type': 'application/json'}
    method, path, body = {
        'healthz': ('GET', '/healthz', None),
        'get_profile': ('GET', '/api/v1/profile', None),
        'put_profile': ('PUT', '/api/v1/profile', {'profile': {'ui_settings': {'k': 1}}}),
        'get_account': ('GET', '/api/v1/accounts/1', None),
        'cache_keys': ('GET', '/api/v1/accounts/1/cache_keys', None),
        'sign_in': ('POST', '/auth/sign_in', {'email': 'user1@bench.test', 'password': PASSWORD}),
        'sign_up': ('POST', '/api/v1/accounts', {
            'account_name': 'Probe', 'email': f'probe-{secrets.token_hex(4)}@bench.test',
            'user_full_name': 'Probe', 'password': PASSWORD}),
    }[name]
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(srv.base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return f'{answer.status} {answer.read(200).decode(errors="replace")}'
    except urllib.error.HTTPError as ex:
        return f'{ex.code} {ex.read(200).decode(errors="replace")}'


def header(args, title):
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True)
    return [f'## {title}', '',
            f'{now}, HEAD {head.stdout.strip() or "?"} (plus any uncommitted changes); '
            f'wrk -t{args.threads} -c{args.connections} -d{args.duration} --latency, '
            f'{args.rounds} round(s); bcrypt cost {args.bcrypt_rounds}; '
            f'{os.cpu_count()} CPUs shared by wrk, gunicorn and PostgreSQL.', '']


# --- the three modes --------------------------------------------------------------------

def run_endpoints(args, password_hash):
    names = args.only.split(',') if args.only else [name for name, _, _ in ENDPOINTS]
    targets = {name: target for name, _, target in ENDPOINTS}
    with database() as url:
        seed(url, 1, args.users, password_hash)
        with server(url, args) as srv:
            warm_up(srv, args, names, args.users)
            rss_before = srv.rss_mb()
            print('measuring:', flush=True)
            runs = alternate(srv, args, names, args.users)
            rss_after = srv.rss_mb()
            served = sum(run['requests'] for run in runs)
            probes = {name: probe(srv, name) for name in ['healthz', *names]
                      if any(run['endpoint'] == name and (run['non2xx'] or run['socket_errors']) for run in runs)}
    rows = []
    baseline = summarise(runs, 'healthz')
    rows.append(('healthz', baseline, 'no errors', not baseline['non2xx'] and not baseline['socket_errors']))
    for name in names:
        row = summarise(runs, name)
        clean = not row['non2xx'] and not row['socket_errors']
        if targets[name] is None:
            rows.append((name, row, 'no errors (rate reported)', clean))
            continue
        ok = row['ratio'] >= targets[name] and clean
        target = f'≥ {targets[name]}× healthz'
        if name.startswith('get_') or name == 'cache_keys':
            ok = ok and row['p99'] <= GET_P99_MS
            target += f', p99 ≤ {GET_P99_MS} ms'
        rows.append((name, row, target, ok))
    worst = max(rss_after.values())
    lines = header(args, f'Endpoints ({args.users:,} users)') + table(rows) + [
        '',
        f'- Workers ({len(rss_after)}): RSS {rss_line(rss_before)} after warm-up, {rss_line(rss_after)} after '
        f'{served:,} more requests; target ≤ {RSS_LIMIT_MB} MB: {verdict(worst <= RSS_LIMIT_MB)}',
        f'- Sign-in and sign-up hash with bcrypt cost {args.bcrypt_rounds} (BCRYPT_ROUNDS).',
    ]
    for name, answer in probes.items():
        lines.append(f'- {LABELS[name]} failed; one request as user 1 answers: `{answer}`')
    return lines


def run_scale(args, password_hash):
    stages = []
    with database() as url:
        for users in (args.users, args.large_users):
            seeded = seed(url, stages[-1]['users'] + 1 if stages else 1, users, password_hash)
            with server(url, args) as srv:
                warm_up(srv, args, ['get_profile'], users)
                print(f'measuring with {users:,} users:', flush=True)
                runs = alternate(srv, args, ['get_profile'], users)
            with psycopg.connect(url) as conn:
                size = conn.execute('SELECT pg_size_pretty(pg_database_size(current_database()))').fetchone()[0]
            stages.append({'users': users, 'seeded': seeded, 'size': size, 'healthz': summarise(runs, 'healthz'),
                           'profile': summarise(runs, 'get_profile')})
        explain = explain_hot_queries(url, args.large_users)
    small, large = stages
    speed = large['profile']['rps'] / small['profile']['rps']
    normalised = large['profile']['ratio'] / small['profile']['ratio']
    lines = header(args, 'Scale: GET /api/v1/profile') + [
        '| users in the database | database size | seeding s | healthz req/s | GET profile req/s | p50 ms | p99 ms '
        '| × healthz | CPU µs/req app + pg | non-2xx / socket errors |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|']
    for stage in stages:
        row = stage['profile']
        lines.append(f"| {stage['users']:,} | {stage['size']} | {stage['seeded']:.1f} | {stage['healthz']['rps']:,.0f} "
                     f"| {row['rps']:,.0f} | {row['p50']:.1f} | {row['p99']:.1f} | {row['ratio']:.2f} "
                     f"| {row['app_us']:,.0f} + {row['pg_us']:,.0f} | {errors_cell(row)} |")
    seq_scans = [text for text in explain if 'Seq Scan' in text]
    lines += [
        '',
        f'- {large["users"]:,} / {small["users"]:,} users: GET profile req/s ratio {speed:.2f}, '
        f'× healthz ratio {normalised:.2f}; target ≥ {SCALE_TARGET}: {verdict(speed >= SCALE_TARGET)}',
        f'- Hot queries at {large["users"]:,} users: '
        + ('every lookup uses an index' if not seq_scans else f'**{len(seq_scans)} plan(s) with a Seq Scan**'),
        '',
        '```',
        *explain,
        '```',
    ]
    return lines


def explain_hot_queries(url, users):
    """EXPLAIN (ANALYZE, BUFFERS) of the auth lookup and of user_json(), plus the plans
    of the statements inside user_json() (plpgsql), which EXPLAIN does not show:
    auto_explain with log_nested_statements sends those to this session as LOG messages.
    Each query runs once first, so the plans are those of a warm session, as in a worker."""
    queries = db.load_queries()
    i = secrets.randbelow(users) + 1
    auth = {'digest': hashlib.sha256(f'bench-token-{i}'.encode()).digest(), 'avatar_url_prefix': AVATAR_URL_PREFIX,
            'with_doc': True}
    texts = []
    with psycopg.connect(url, autocommit=True) as conn:
        for sql, params, title in ((queries['auth.user_for_token'], auth, f'auth.user_for_token, token of user {i}'),
                                   ('SELECT user_json(%(id)s, %(prefix)s)', {'id': i, 'prefix': AVATAR_URL_PREFIX},
                                    f'SELECT user_json({i}, ...)')):
            for _ in range(10):  # past plpgsql's first custom plans, as in a busy worker
                conn.execute(sql, params).fetchall()
            plan = conn.execute('EXPLAIN (ANALYZE, BUFFERS) ' + sql, params).fetchall()
            texts.append(f'-- {title}:\n' + '\n'.join(row[0] for row in plan))
        logged = []
        conn.add_notice_handler(lambda diag: logged.append(diag.message_primary))
        for setting in ("LOAD 'auto_explain'", 'SET auto_explain.log_min_duration = 0',
                        'SET auto_explain.log_analyze = on', 'SET auto_explain.log_buffers = on',
                        'SET auto_explain.log_nested_statements = on', 'SET client_min_messages = log'):
            conn.execute(setting)
        conn.execute('SELECT user_json(%s, %s)', (i, AVATAR_URL_PREFIX)).fetchone()
        conn.execute('SET client_min_messages = notice')
    for text in logged[:-1]:  # the last one is the top-level SELECT, shown above
        # Without its query text: the statement is the function's body.
        text = re.sub(r'Query Text: (?:.*\n)*?(?=\S+  \(cost)', '', text)
        texts.append(f'-- inside user_json({i}, ...), from auto_explain:\n{text}')
    for text in texts:
        print(text, '\n', flush=True)
    return texts


def run_leak(args, password_hash):
    with database() as url:
        seed(url, 1, args.users, password_hash)
        with server(url, args) as srv:
            runs = warm_up(srv, args, ['get_profile'], args.users)
            rate = runs[-1]['rps'] if runs else 1000
            before = srv.rss_mb()
            print(f'GET profile until {args.leak_requests:,} responses:', flush=True)
            # wrk cannot stop at a count (a thread stopped from Lua leaves its connections
            # open until -d ends), so run it in chunks sized from the rate so far.
            runs = []
            while sum(run['requests'] for run in runs) < args.leak_requests:
                left = args.leak_requests - sum(run['requests'] for run in runs)
                rate = runs[-1]['rps'] if runs else rate
                runs.append(wrk(srv, args, 'get_profile', args.users, f'{max(1, min(60, round(left / rate + 0.5)))}s'))
            after = srv.rss_mb()
    requests = sum(run['requests'] for run in runs)
    seconds = sum(run['requests'] / run['rps'] for run in runs)
    non2xx = sum(run['non2xx'] for run in runs)
    socket_errors = sum(run['socket_errors'] for run in runs)
    growth = max(after.get(pid, float('inf')) - mb for pid, mb in before.items())
    lines = header(args, f'Leak check ({args.users:,} users)') + [
        '| worker pid | RSS before MB | RSS after MB | change MB |', '|---:|---:|---:|---:|']
    for pid, mb in sorted(before.items()):
        later = after.get(pid)
        lines.append(f'| {pid} | {mb:.1f} | {later:.1f} | {later - mb:+.1f} |' if later is not None
                     else f'| {pid} | {mb:.1f} | gone (restarted) | |')
    lines += [
        '',
        f'- {requests:,} GET /api/v1/profile requests in {len(runs)} wrk run(s), {requests / seconds:,.0f} req/s; '
        f'non-2xx / socket errors {non2xx} / {socket_errors}.',
        f'- RSS ≤ {RSS_LIMIT_MB} MB: {verdict(max(after.values(), default=0) <= RSS_LIMIT_MB)}; '
        f'flat (no worker grew by more than {RSS_FLAT_MB} MB): {verdict(growth <= RSS_FLAT_MB)}',
    ]
    return lines


# --- avatars ----------------------------------------------------------------------------

AVATAR_CPU_MS = 150
AVATAR_PEAK_MIB = 100
AVATAR_HEALTHZ_P99_MS = 20
AVATAR_CLIENTS = 6
# The security review's file: 0.8-1.5 s of CPU and about 450 MiB per upload before.
REVIEW_PNG = 'the review PNG, 40 MP'


def _png(width, height, depth=8, interlace=0, noise=False):
    """An RGBA PNG whose every row is Paeth-filtered: the most work per pixel PNG asks
    of a decoder. Written by hand, since Pillow writes neither 16-bit RGBA nor Adam7."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))

    per_pixel = 8 if depth == 16 else 4
    rows = []
    passes = ([(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
              if interlace else [(0, 0, 1, 1)])
    for x0, y0, dx, dy in passes:
        pass_width, pass_height = (width - x0 + dx - 1) // dx, (height - y0 + dy - 1) // dy
        for _ in range(pass_height if pass_width else 0):
            line = os.urandom(pass_width * per_pixel) if noise else bytes(range(7, 256, 7)) * (
                pass_width * per_pixel // 36 + 1)
            rows.append(b'\x04' + line[:pass_width * per_pixel])
    header = struct.pack('>IIBBBBB', width, height, depth, 6, 0, 0, interlace)
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IDAT', zlib.compress(b''.join(rows), 6))
            + chunk(b'IEND', b''))


def _pillow(image, fmt, **options):
    import io

    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def avatar_files():
    """(name, bytes, accepted) for the costliest images the limits accept, and the
    review's 40 MP PNG, which is refused now."""
    import math

    from PIL import Image

    from services import avatars

    def side(work):  # the largest square within the decoding budget
        return math.isqrt(avatars.MAX_DECODE_WORK // work)

    def noise(mode, size):
        bands = {'RGB': 3, 'L': 1}[mode]
        return Image.frombytes(mode, (size, size), os.urandom(size * size * bands))

    def fitting(make, candidates):
        """The first of ``candidates`` (costliest first) whose file fits AVATAR_MAX_BYTES."""
        for candidate in candidates:
            data = make(candidate)
            if len(data) <= avatars_max_bytes:
                return data
        raise RuntimeError('no candidate fits AVATAR_MAX_BYTES')

    avatars_max_bytes = config.Config(database_url='').avatar_max_bytes
    rgba, rgb = side(4), side(3)
    files = [
        ('PNG RGBA, Paeth', _png(rgba, rgba)),
        ('PNG RGBA, Paeth, noise', _png(rgba, rgba, noise=True)),
        ('PNG RGBA, Adam7', _png(side(8), side(8), interlace=1)),
        ('PNG 16-bit RGBA', _png(side(12), side(12), depth=16)),
        ('PNG 16-bit RGBA, Adam7', _png(side(24), side(24), depth=16, interlace=1)),
        ('PNG RGB, noise', _pillow(noise('RGB', rgb), 'PNG')),
        ('WebP, noise', _pillow(noise('RGB', side(8)), 'WEBP', quality=90)),
        ('GIF, noise', fitting(lambda size: _pillow(noise('L', size).convert('P'), 'GIF'),
                               range(side(1), 0, -100))),
        ('JPEG progressive, noise', fitting(lambda quality: _pillow(noise('RGB', side(3)), 'JPEG', quality=quality,
                                                                    progressive=True), range(95, 0, -5))),
        # 16 MP, the ceiling for every format, at the highest quality that fits.
        ('JPEG 16 MP, noise', fitting(lambda quality: _pillow(noise('RGB', 4000), 'JPEG', quality=quality),
                                      range(95, 0, -5))),
        ('JPEG 16 MP, 4:4:4, noise', fitting(lambda quality: _pillow(noise('RGB', 4000), 'JPEG', quality=quality,
                                                                     subsampling=0), range(95, 0, -5))),
    ]
    found = [(name, data, True) for name, data in files]
    review = _pillow(Image.new('RGB', (7000, 5700), 'white'), 'PNG', compress_level=9)
    found.append((f'{REVIEW_PNG}, {len(review) // 1024} KiB (refused)', review, False))
    return found


def _multipart(data):
    boundary = 'bench-boundary-' + secrets.token_hex(8)
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="profile[avatar]"; filename="a"\r\n'
            'Content-Type: application/octet-stream\r\n\r\n').encode() + data + f'\r\n--{boundary}--\r\n'.encode()
    return body, f'multipart/form-data; boundary={boundary}'


def upload(srv, user, data):
    body, content_type = _multipart(data)
    headers = {'access-token': f'bench-token-{user}', 'client': f'client-{user}', 'uid': f'user{user}@bench.test',
               'Content-Type': content_type}
    request = urllib.request.Request(srv.base + '/api/v1/profile', data=body, headers=headers, method='PUT')
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as ex:
        return ex.code


def _upload_loop(base, user, data, stop, results):
    """One upload client (a process of its own, so the probe never waits for a GIL)."""
    srv = collections.namedtuple('Target', 'base')(base)
    statuses = collections.Counter()
    while not stop.is_set():
        statuses[upload(srv, user, data)] += 1
    results.put(dict(statuses))


def healthz_under_uploads(srv, data, seconds, count=AVATAR_CLIENTS):
    """/healthz latencies (ms), one probe every 20 ms, while ``count`` clients loop on ``data``."""
    import multiprocessing

    context = multiprocessing.get_context('fork')
    stop, results = context.Event(), context.Queue()
    clients = [context.Process(target=_upload_loop, args=(srv.base, user, data, stop, results))
               for user in range(1, count + 1)]
    for client in clients:
        client.start()
    latencies = []
    time.sleep(1.0)  # every client mid-upload
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        get(srv.base + '/healthz', timeout=30)
        latencies.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, 0.02 - (time.monotonic() - started)))
    stop.set()
    statuses = collections.Counter()
    for _ in clients:
        statuses.update(results.get(timeout=120))
    for client in clients:
        client.join()
    return latencies, statuses


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_avatars(args, password_hash):
    files = avatar_files()
    rows = []
    with database() as url, contextlib.ExitStack() as stack:
        import tempfile

        avatar_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix='frontdesk-bench-avatars-'))
        seed(url, 1, max(args.users, AVATAR_CLIENTS), password_hash)
        srv = stack.enter_context(server(url, args, {'AVATAR_DIR': avatar_dir}))
        small = _pillow(__import__('PIL.Image').Image.new('RGB', (600, 600), 'red'), 'PNG')
        for _ in range(6):  # every worker past its first upload (imports, Pillow's plugins)
            upload(srv, 1, small)
        print(f'{"file":45} {"KiB":>8} {"status":>6} {"CPU ms":>7} {"peak MiB":>8}', flush=True)
        for name, data, _ in files:
            srv.reset_peaks()
            statuses = collections.Counter()
            costs = []
            for _ in range(args.avatar_repeats):
                before = srv.cpu_ns()
                statuses[upload(srv, 1, data)] += 1
                costs.append((srv.cpu_ns() - before) / 1e6)
            cpu_ms = statistics.median(costs)
            row = {'name': name, 'kib': len(data) / 1024, 'statuses': dict(statuses), 'cpu_ms': cpu_ms,
                   'cpu_max_ms': max(costs), 'peak_mib': srv.peak_mb(), 'data': data}
            rows.append(row)
            print(f"{name:45} {row['kib']:8.0f} {str(dict(statuses)):>6} {cpu_ms:7.1f} {row['peak_mib']:8.1f}",
                  flush=True)
        accepted = [row for row in rows if row['statuses'].get(200)]
        worst_cpu = max(accepted, key=lambda row: row['cpu_ms'])
        worst_memory = max(row['peak_mib'] for row in accepted)
        print('/healthz alone:', flush=True)
        alone = healthz_under_uploads(srv, None, args.avatar_seconds, count=0)[0]
        print(f'  p50 {statistics.median(alone):.1f} ms, p99 {percentile(alone, 0.99):.1f} ms', flush=True)
        probes = {}
        for label, data in ((REVIEW_PNG, rows[-1]['data']), (worst_cpu['name'], worst_cpu['data'])):
            print(f'/healthz while {AVATAR_CLIENTS} clients upload {label} in a loop:', flush=True)
            latencies, statuses = healthz_under_uploads(srv, data, args.avatar_seconds)
            probes[label] = (latencies, statuses)
            print(f'  p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms, '
                  f'{len(latencies)} probes; uploads {dict(statuses)}', flush=True)
    load = ', '.join(f'{value:.1f}' for value in os.getloadavg())
    lines = header(args, 'Avatars') + [
        f'Load average at the end: {load} (on {os.cpu_count()} CPUs: CPU time per request grows with '
        'contention, and /healthz waits for the CPU as much as for a worker).', '',
        f'Each file uploaded {args.avatar_repeats} times by one client to an idle server; CPU is gunicorn\'s '
        '(master and workers, /proc/<pid>/schedstat) per upload, the whole request included, median and '
        'largest of the uploads; peak is the largest '
        'worker VmHWM over those uploads (reset before each file with clear_refs), the worker\'s own '
        'memory included.', '',
        '| file | size KiB | answers | CPU ms per upload (median) | largest | peak worker MiB |',
        '|---|---:|---|---:|---:|---:|']
    for row in rows:
        answers = ', '.join(f'{code}×{n}' for code, n in sorted(row['statuses'].items()))
        lines.append(f"| {row['name']} | {row['kib']:,.0f} | {answers} | {row['cpu_ms']:.0f} | {row['cpu_max_ms']:.0f} "
                     f"| {row['peak_mib']:.0f} |")
    review_p99 = percentile(probes[REVIEW_PNG][0], 0.99)
    lines += [
        '',
        f"- Worst accepted upload: {worst_cpu['name']}, {worst_cpu['cpu_ms']:.0f} ms of CPU (median); target < "
        f"{AVATAR_CPU_MS} ms: {verdict(worst_cpu['cpu_ms'] < AVATAR_CPU_MS)}",
        f'- Peak worker memory over every accepted file: {worst_memory:.0f} MiB; target < {AVATAR_PEAK_MIB} MiB: '
        f'{verdict(worst_memory < AVATAR_PEAK_MIB)}',
    ]
    lines.append(f'- /healthz alone, the same probes with no uploads ({len(alone)} probes): p50 '
                 f'{statistics.median(alone):.1f} ms, p99 {percentile(alone, 0.99):.1f} ms: what the machine gives')
    for label, (latencies, statuses) in probes.items():
        p99 = percentile(latencies, 0.99)
        answers = ', '.join(f'{code}×{n}' for code, n in sorted(statuses.items()))
        lines.append(f'- /healthz while {AVATAR_CLIENTS} clients upload {label} in a loop ({args.avatar_seconds} s, '
                     f'{len(latencies)} probes, uploads answered {answers}): p50 {statistics.median(latencies):.1f} ms, '
                     f'p99 {p99:.1f} ms' + (f'; target < {AVATAR_HEALTHZ_P99_MS} ms: '
                                            f'{verdict(p99 < AVATAR_HEALTHZ_P99_MS)}' if p99 is review_p99 else ''))
    return lines


# --- issue 14: direct against through PgBouncer ------------------------------------------

POOLER_ENDPOINTS = ['get_profile', 'put_profile']


def wrk_instances(servers, args, endpoint, users, duration, bouncer):
    """One wrk per gunicorn instance, at once, sharing ``-c`` between them; the numbers
    summed (latency percentiles: the worse instance's). CPU per request: gunicorn (all
    instances), the database's backends, and PgBouncer's one process."""
    share = max(1, args.connections // len(servers))
    offsets = [srv.log_offset() for srv in servers]
    before = [srv.cpu_seconds() for srv in servers]
    bouncer_before = _cpu(pathlib.Path(f'/proc/{bouncer.proc.pid}')) if bouncer else 0.0
    procs = [subprocess.Popen(['wrk', f'-t{args.threads}', f'-c{share}', f'-d{duration}', '--latency',
                               f'--timeout={args.timeout}', '-s', str(LUA), srv.base,
                               '--', endpoint, str(users), PASSWORD, secrets.token_hex(4)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for srv in servers]
    outputs = [proc.communicate() for proc in procs]
    after = [srv.cpu_seconds() for srv in servers]
    bouncer_us = (_cpu(pathlib.Path(f'/proc/{bouncer.proc.pid}')) - bouncer_before) if bouncer else 0.0
    numbers = []
    for proc, (stdout, stderr) in zip(procs, outputs):
        line = next((line for line in stdout.splitlines() if line.startswith('BENCH ')), None)
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f'wrk failed ({proc.returncode}): {stdout}{stderr}')
        numbers.append(json.loads(line[len('BENCH '):]))
    settle(servers[0], args.pause)
    requests = sum(n['requests'] for n in numbers)
    bad = collections.Counter()
    for srv, offset in zip(servers, offsets):
        bad.update({code.decode(): n for code, n in srv.statuses(offset).items() if not code.startswith(b'2')})
    result = {
        'endpoint': endpoint,
        'requests': requests,
        'rps': sum(n['requests'] / (n['duration_us'] / 1e6) for n in numbers),
        'p50': max(n['p50'] for n in numbers) / 1000,
        'p99': max(n['p99'] for n in numbers) / 1000,
        'non2xx': sum(n['status'] for n in numbers),
        'socket_errors': sum(n['connect'] + n['read'] + n['write'] + n['timeout'] for n in numbers),
        'bad_statuses': dict(bad),
        'app_us': sum(a[0] - b[0] for a, b in zip(after, before)) / max(requests, 1) * 1e6,
        # Every instance sees all of the database's backends: count them once.
        'pg_us': (after[0][1] - before[0][1]) / max(requests, 1) * 1e6,
        'bouncer_us': bouncer_us / max(requests, 1) * 1e6,
    }
    print(f"  {endpoint:12} {'via pgbouncer' if bouncer else '':13} {result['rps']:8.1f} req/s"
          f"  p50 {result['p50']:6.1f} ms  p99 {result['p99']:7.1f} ms  CPU/req app {result['app_us']:5.0f}"
          f" + pg {result['pg_us']:4.0f} + pgbouncer {result['bouncer_us']:4.0f} us  non-2xx {result['non2xx']}"
          f"  socket errors {result['socket_errors']}  {bad or ''}", flush=True)
    return result


def round_trips(routes, users, iterations=2000, repeats=5):
    """GET profile's one statement (auth.user_for_token with the user JSON) from one
    process, no HTTP: client CPU and wall µs per statement on each route, best of
    ``repeats`` x ``iterations``: what one round trip costs, with the least noise."""
    queries = db.load_queries()
    results = {}
    for route, (url, options) in routes.items():
        best_cpu = best_wall = float('inf')
        with psycopg.connect(url, autocommit=True, **options) as conn:
            for _ in range(repeats):
                params = [{'digest': hashlib.sha256(f'bench-token-{secrets.randbelow(users) + 1}'.encode()).digest(),
                           'avatar_url_prefix': AVATAR_URL_PREFIX, 'with_doc': True} for _ in range(iterations)]
                cpu, wall = time.process_time(), time.perf_counter()
                for param in params:
                    conn.execute(queries['auth.user_for_token'], param).fetchone()
                best_cpu = min(best_cpu, (time.process_time() - cpu) / iterations * 1e6)
                best_wall = min(best_wall, (time.perf_counter() - wall) / iterations * 1e6)
        results[route] = (best_cpu, best_wall)
        print(f'  round trip {route:18} client CPU {best_cpu:5.0f} us  wall {best_wall:5.0f} us', flush=True)
    return results


def run_pgbouncer(args, password_hash):
    """GET and PUT profile from 2 gunicorn instances straight on PostgreSQL, and from 2
    more through one PgBouncer in transaction mode (deploy/pgbouncer.ini, as the tests
    run it), on one seeded database, runs alternating direct and pooled."""
    from tests.pgbouncer import PgBouncer

    workers = str(args.instance_workers)
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(database())
        seed(url, 1, args.users, password_hash)
        bouncer = PgBouncer(ADMIN_URL, free_port()).start()
        stack.callback(bouncer.destroy)
        pooled_url = bouncer.url(psycopg.conninfo.conninfo_to_dict(url)['dbname'])
        # The middle route tells the two costs apart: no prepared statements (PostgreSQL
        # parses and plans every statement), and the pooler's extra hop.
        unprepared = {'DB_PREPARED_STATEMENTS': 'off'}
        routes = {route: [stack.enter_context(server(target, args, {'WEB_CONCURRENCY': workers, **env}, name=f'-{route}-{n}'))
                          for n in range(2)]
                  for route, target, env in (('direct', url, {}), ('direct-unprepared', url, unprepared),
                                             ('pgbouncer', pooled_url, unprepared))}

        def measure(name, route, duration):
            return {**wrk_instances(routes[route], args, name, args.users, duration,
                                    bouncer if route == 'pgbouncer' else None), 'route': route}

        if args.warmup not in ('0', '0s'):
            print(f'warm-up ({args.warmup} each):', flush=True)
            for route in routes:
                for name in POOLER_ENDPOINTS:
                    measure(name, route, args.warmup)
        print('one statement, no HTTP:', flush=True)
        trips = round_trips({'direct': (url, {}), 'direct-unprepared': (url, {'prepare_threshold': None}),
                             'pgbouncer': (pooled_url, {'prepare_threshold': None})}, args.users)
        print('measuring:', flush=True)
        runs = [{**measure(name, route, args.duration), 'round': n}
                for n in range(args.rounds) for name in POOLER_ENDPOINTS for route in routes]
    lines = header(args, f'Direct and through PgBouncer ({args.users:,} users)') + [
        f'2 gunicorn instances of {workers} sync workers per route, wrk split between them; routes: direct '
        '(prepared statements on, the default), direct-unprepared (DB_PREPARED_STATEMENTS=off), pgbouncer '
        '(PgBouncer 1.18, transaction mode, deploy/pgbouncer.ini; DB_PREPARED_STATEMENTS=off).', '',
        '| endpoint | route | req/s | p50 ms | p99 ms | CPU µs/req app + pg + pgbouncer | non-2xx / socket errors '
        '| req/s / direct (median of rounds) |',
        '|---|---|---:|---:|---:|---:|---|---:|']
    costs = []
    for name in POOLER_ENDPOINTS:
        rows = {}
        for route in ('direct', 'direct-unprepared', 'pgbouncer'):
            mine = [run for run in runs if run['endpoint'] == name and run['route'] == route]
            row = {key: statistics.median(run[key] for run in mine)
                   for key in ('rps', 'p50', 'p99', 'app_us', 'pg_us', 'bouncer_us')}
            bad = collections.Counter()
            for run in mine:
                bad.update(run['bad_statuses'])
            row.update(non2xx=sum(run['non2xx'] for run in mine), bad_statuses=dict(bad),
                       socket_errors=sum(run['socket_errors'] for run in mine))
            rows[route] = row
        # Each route against direct in the same round (back to back), then the median:
        # other load on the machine moves both sides of a pair alike.
        direct = {run['round']: run['rps'] for run in runs if run['endpoint'] == name and run['route'] == 'direct'}
        for route, row in rows.items():
            row['ratio'] = statistics.median(run['rps'] / direct[run['round']] for run in runs
                                             if run['endpoint'] == name and run['route'] == route)
        for route, row in rows.items():
            ratio = row['ratio']
            lines.append(f"| {LABELS[name]} | {route} | {row['rps']:,.0f} | {row['p50']:.1f} | {row['p99']:.1f} "
                         f"| {row['app_us']:,.0f} + {row['pg_us']:,.0f} + {row['bouncer_us']:,.0f} "
                         f"| {errors_cell(row)} | {ratio:.2f} |")
        total = {route: row['app_us'] + row['pg_us'] + row['bouncer_us'] for route, row in rows.items()}
        costs.append(f"- {LABELS[name]}: pooled / direct req/s {rows['pgbouncer']['ratio']:.2f}. "
                     f"CPU per request, all processes: {total['direct']:,.0f} µs direct, "
                     f"{total['direct-unprepared']:,.0f} µs direct without prepared statements, "
                     f"{total['pgbouncer']:,.0f} µs through PgBouncer; so the pooler's hop costs "
                     f"{total['pgbouncer'] - total['direct-unprepared']:+,.0f} µs (PgBouncer's own process "
                     f"{rows['pgbouncer']['bouncer_us']:,.0f}) and unprepared statements "
                     f"{total['direct-unprepared'] - total['direct']:+,.0f} µs; median latency "
                     f"{rows['pgbouncer']['p50'] - rows['direct']['p50']:+.2f} ms pooled against direct.")
    lines += ['', *costs, '', 'GET profile\'s one statement (`auth.user_for_token` with the user JSON) from one '
              'process without HTTP, best of 5 x 2,000:', '',
              '| route | client CPU µs | wall µs per statement |', '|---|---:|---:|']
    lines += [f'| {route} | {cpu:,.0f} | {wall:,.0f} |' for route, (cpu, wall) in trips.items()]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--scale', action='store_true', help='GET profile with --users and with --large-users users')
    parser.add_argument('--leak', action='store_true', help='worker RSS before and after --leak-requests requests')
    parser.add_argument('--avatars', action='store_true',
                        help='CPU and peak memory of the costliest accepted avatars; /healthz under upload load')
    parser.add_argument('--avatar-repeats', type=int, default=7, help='uploads per file in --avatars (default 7)')
    parser.add_argument('--avatar-seconds', type=int, default=15, help='each /healthz probe run in --avatars')
    parser.add_argument('--all', action='store_true', help='endpoints, then --scale, then --leak')
    parser.add_argument('--pgbouncer', action='store_true',
                        help='GET and PUT profile direct and through PgBouncer (2 gunicorn instances each)')
    parser.add_argument('--instance-workers', type=int, default=2,
                        help='WEB_CONCURRENCY of each gunicorn instance in --pgbouncer (default 2)')
    parser.add_argument('-d', '--duration', default='10s', help='each measured wrk run (default 10s)')
    parser.add_argument('--warmup', default='2s', help='one warm-up run per endpoint first (default 2s; 0 for none)')
    parser.add_argument('--rounds', type=int, default=1, help='repeat the alternating sequence; medians are shown')
    parser.add_argument('-c', '--connections', type=int, default=16)
    parser.add_argument('-t', '--threads', type=int, default=1)
    parser.add_argument('--timeout', default='10s', help="wrk's request timeout (bcrypt endpoints queue for seconds)")
    parser.add_argument('--pause', type=float, default=1.0, help='seconds between runs (default 1)')
    parser.add_argument('--users', type=int, default=1000, help='seeded users (default 1000)')
    parser.add_argument('--large-users', type=int, default=1_000_000, help='users in the large --scale stage')
    parser.add_argument('--leak-requests', type=int, default=100_000)
    parser.add_argument('--only', help='comma-separated endpoints: ' + ','.join(name for name, _, _ in ENDPOINTS))
    parser.add_argument('--bcrypt-rounds', type=int, default=int(os.environ.get('BCRYPT_ROUNDS') or 12))
    parser.add_argument('-o', '--output', type=pathlib.Path, default=RESULTS / 'latest.md')
    args = parser.parse_args()
    if args.only and not set(args.only.split(',')) <= set(LABELS) - {'healthz'}:
        parser.error(f'--only takes {",".join(name for name, _, _ in ENDPOINTS)}')
    if args.large_users <= args.users:
        parser.error('--large-users must be more than --users')

    # SIGTERM unwinds like Ctrl-C, so gunicorn is stopped and the database dropped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    started = time.monotonic()
    (RESULTS / 'server.log').unlink(missing_ok=True)  # gunicorn's output, this invocation only
    password_hash = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(args.bcrypt_rounds)).decode()
    lines = []
    if args.avatars:
        lines += run_avatars(args, password_hash) + ['']
    if args.all or not (args.scale or args.leak or args.avatars or args.pgbouncer):
        lines += run_endpoints(args, password_hash) + ['']
    if args.all or args.scale:
        lines += run_scale(args, password_hash) + ['']
    if args.all or args.leak:
        lines += run_leak(args, password_hash) + ['']
    if args.pgbouncer:
        lines += run_pgbouncer(args, password_hash) + ['']
    text = '\n'.join(lines)
    print('\n' + text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f'written to {args.output} ({time.monotonic() - started:.0f} s)')


if __name__ == '__main__':
    try:
        main()
    except KeyboardInterrupt:
        print('interrupted: gunicorn stopped, database dropped', file=sys.stderr)
        sys.exit(130)
