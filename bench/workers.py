"""--workers: GET and PUT profile under each gunicorn worker model, direct and behind
nginx (deploy/nginx.conf, as tests/test_nginx.py runs it), in one run.

Every candidate's gunicorn and its nginx run at once on one seeded database; the runs
alternate candidate by candidate and round by round, so slow phases of the host fall on
all of them. Per run: req/s, p50/p99, CPU per request of gunicorn and of PostgreSQL, and
of nginx when it is in front.
"""

import contextlib
import pathlib
import statistics
import tempfile

from bench.common import database
from bench.common import header
from bench.common import LABELS
from bench.common import process_cpu
from bench.common import seed
from bench.common import server
from bench.common import warm_up
from bench.common import wrk

# name: the environment that makes it (gunicorn.conf.py reads WEB_CONCURRENCY;
# GUNICORN_CMD_ARGS is applied over the file; a thread checks out a connection of its
# own, so the pool may grow to the thread count).
CANDIDATES = {
    'sync, 3 workers': {'WEB_CONCURRENCY': '3'},
    # Connection: close after each response, as sync: connections spread over the
    # workers as they accept, and a thread waiting on the commit's flush leaves the
    # others of its worker to run.
    'gthread, 3 workers x 2 threads, no keep-alive': {
        'WEB_CONCURRENCY': '3',
        'GUNICORN_CMD_ARGS': '--worker-class gthread --threads 2 --keep-alive 0',
        'DB_POOL_MAX_SIZE': '2',
    },
    'gthread, 3 workers x 4 threads, no keep-alive': {
        'WEB_CONCURRENCY': '3',
        'GUNICORN_CMD_ARGS': '--worker-class gthread --threads 4 --keep-alive 0',
        'DB_POOL_MAX_SIZE': '4',
    },
    # Keep-alive: a connection stays with the worker that accepted it.
    'gthread, 3 workers x 4 threads': {
        'WEB_CONCURRENCY': '3',
        'GUNICORN_CMD_ARGS': '--worker-class gthread --threads 4',
        'DB_POOL_MAX_SIZE': '4',
    },
}
NAMES = ['healthz', 'get_profile', 'put_profile']


class Behind:
    """A Server seen through nginx: wrk goes to nginx's address."""

    def __init__(self, srv, base, nginx_pid):
        self._srv, self.base, self.nginx_pid = srv, base, nginx_pid

    def __getattr__(self, name):
        return getattr(self._srv, name)

    def nginx_cpu(self):
        """CPU seconds of nginx's master and workers."""
        total = 0.0
        for proc in pathlib.Path('/proc').glob('[0-9]*'):
            with contextlib.suppress(OSError):
                fields = (proc / 'stat').read_text().rsplit(')', 1)[1].split()
                if int(proc.name) == self.nginx_pid or int(fields[1]) == self.nginx_pid:
                    total += process_cpu(proc)
        return total


def measure(target, args, name):
    before = target.nginx_cpu() if isinstance(target, Behind) else 0.0
    run = wrk(target, args, name, args.users, args.duration)
    spent = target.nginx_cpu() - before if isinstance(target, Behind) else 0.0
    run['nginx_us'] = spent / max(run['requests'], 1) * 1e6
    return run


def run_workers(args, password_hash):
    from tests.nginx_server import run_nginx

    results = {}
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(database())
        seed(url, 1, args.users, password_hash)
        workdir = stack.enter_context(tempfile.TemporaryDirectory())
        targets = {}
        for index, (candidate, env) in enumerate(CANDIDATES.items()):
            srv = stack.enter_context(server(url, args, env, name=f'-workers{index}'))
            base, _ = stack.enter_context(
                run_nginx(workdir, srv.base.removeprefix('http://'), workdir)
            )
            targets[candidate, 'direct'] = srv
            targets[candidate, 'nginx'] = Behind(srv, base, _nginx_pid(workdir, base))
        for key, target in targets.items():
            print(f'{key[0]}, {key[1]}:', flush=True)
            warm_up(target, args, NAMES[1:], args.users)
        for round_ in range(args.rounds):
            print(f'round {round_ + 1}:', flush=True)
            keys = list(targets) if round_ % 2 == 0 else list(reversed(targets))
            for key in keys:
                print(f'{key[0]}, {key[1]}:', flush=True)
                for name in NAMES:
                    run = measure(targets[key], args, name)
                    results.setdefault((*key, name), []).append(run)
    return report(args, results)


def _nginx_pid(workdir, base):
    port = base.rsplit(':', 1)[1]
    for conf in pathlib.Path(workdir).glob('nginx-*/frontdesk.conf'):
        if f'listen 127.0.0.1:{port};' in conf.read_text():
            return int((conf.parent / 'nginx.pid').read_text())
    raise RuntimeError(f'no nginx listening on {base}')


def report(args, results):
    lines = header(args, 'Worker models, direct and behind nginx') + [
        '| worker model | path | endpoint | req/s | p50 ms | p99 ms | '
        'CPU µs/req gunicorn + pg + nginx | non-2xx / socket errors |',
        '|---|---|---|---:|---:|---:|---:|---|',
    ]
    for (candidate, path, name), runs in results.items():
        med = {
            key: statistics.median(run[key] for run in runs)
            for key in ('rps', 'p50', 'p99', 'app_us', 'pg_us', 'nginx_us')
        }
        errors = (
            sum(run['non2xx'] for run in runs),
            sum(run['socket_errors'] for run in runs),
        )
        lines.append(
            f'| {candidate} | {path} | {LABELS[name]} | {med["rps"]:,.0f} | '
            f'{med["p50"]:.1f} | {med["p99"]:.1f} | {med["app_us"]:,.0f} + '
            f'{med["pg_us"]:,.0f} + {med["nginx_us"]:,.0f} | '
            f'{errors[0]} / {errors[1]} |'
        )
    return lines
