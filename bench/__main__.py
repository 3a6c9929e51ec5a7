"""Load-test Frontdesk with wrk against a fresh, seeded database (see
docs/performance.md).

Run it through bench/run, which installs what is missing first. Each mode (one module of
this package) creates its own database on TEST_DATABASE_URL's server, starts gunicorn
with gunicorn.conf.py, and drops the database and stops gunicorn on the way out, Ctrl-C
included.
"""

import argparse
import atexit
import os
import pathlib
import signal
import subprocess
import sys
import time

import bcrypt

from bench.against import run_against
from bench.avatars import run_avatars
from bench.budget import run_budget
from bench.common import ENDPOINTS
from bench.common import LABELS
from bench.common import PASSWORD
from bench.common import RESULTS
from bench.endpoints import run_endpoints
from bench.leak import run_leak
from bench.pgbouncer import run_pgbouncer
from bench.scale import run_scale
from bench.tail import run_write_tail
from bench.workers import run_workers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--scale',
        action='store_true',
        help='GET profile with --users and with --large-users users',
    )
    parser.add_argument(
        '--leak',
        action='store_true',
        help='worker RSS before and after --leak-requests requests',
    )
    parser.add_argument(
        '--avatars',
        action='store_true',
        help=(
            'CPU and peak memory of the costliest accepted avatars; /healthz under '
            'upload load'
        ),
    )
    parser.add_argument(
        '--avatar-repeats',
        type=int,
        default=7,
        help='uploads per file in --avatars (default 7)',
    )
    parser.add_argument(
        '--avatar-seconds',
        type=int,
        default=15,
        help='each /healthz probe run in --avatars',
    )
    parser.add_argument(
        '--all', action='store_true', help='endpoints, then --scale, then --leak'
    )
    parser.add_argument(
        '--budget',
        action='store_true',
        help='the hot endpoints against bench/budget.json; exit 1 above it',
    )
    parser.add_argument(
        '--against',
        metavar='REV',
        help=(
            'the --budget endpoints here and in git revision REV, interleaved in one '
            'run; exit 1 when one costs more than 5%% more CPU per request'
        ),
    )
    parser.add_argument(
        '--pgbouncer',
        action='store_true',
        help=(
            'GET and PUT profile direct and through PgBouncer '
            '(2 gunicorn instances each)'
        ),
    )
    parser.add_argument(
        '--write-tail',
        action='store_true',
        help=(
            "PUT profile in chunks with PostgreSQL's WAL, checkpoint, vacuum and wait"
            ' counters for each'
        ),
    )
    parser.add_argument(
        '--worker-models',
        action='store_true',
        help=(
            'GET and PUT profile under each gunicorn worker model of bench/workers.py,'
            ' direct and behind nginx'
        ),
    )
    parser.add_argument(
        '--busy-core',
        action='store_true',
        help='keep one core busy with a second process for the whole run',
    )
    parser.add_argument(
        '--instance-workers',
        type=int,
        default=2,
        help='WEB_CONCURRENCY of each gunicorn instance in --pgbouncer (default 2)',
    )
    parser.add_argument(
        '-d', '--duration', default='10s', help='each measured wrk run (default 10s)'
    )
    parser.add_argument(
        '--warmup',
        default='2s',
        help='one warm-up run per endpoint first (default 2s; 0 for none)',
    )
    parser.add_argument(
        '--rounds',
        type=int,
        default=None,
        help=(
            'repeat the alternating sequence; medians are shown'
            ' (default: 5 with --budget, 3 with --against, else 1)'
        ),
    )
    parser.add_argument('-c', '--connections', type=int, default=16)
    parser.add_argument('-t', '--threads', type=int, default=1)
    parser.add_argument(
        '--timeout',
        default='10s',
        help="wrk's request timeout (bcrypt endpoints queue for seconds)",
    )
    parser.add_argument(
        '--pause', type=float, default=1.0, help='seconds between runs (default 1)'
    )
    parser.add_argument(
        '--users', type=int, default=1000, help='seeded users (default 1000)'
    )
    parser.add_argument(
        '--large-users',
        type=int,
        default=1_000_000,
        help='users in the large --scale stage',
    )
    parser.add_argument('--leak-requests', type=int, default=100_000)
    parser.add_argument(
        '--only',
        help=(
            'comma-separated endpoints (with --budget: budget ones): '
            + ','.join(name for name, _, _ in ENDPOINTS)
        ),
    )
    parser.add_argument(
        '--bcrypt-rounds', type=int, default=int(os.environ.get('BCRYPT_ROUNDS') or 12)
    )
    parser.add_argument(
        '-o', '--output', type=pathlib.Path, default=RESULTS / 'latest.md'
    )
    args = parser.parse_args()
    if args.only and not set(args.only.split(',')) <= set(LABELS) - {'healthz'}:
        parser.error(f'--only takes {",".join(name for name, _, _ in ENDPOINTS)}')
    if args.rounds is None:
        # --budget: 5, for a steadier verdict near a line (PUT's single rounds spread
        # ±12 % in one run, docs/performance-log.md, fourth pass).
        args.rounds = 5 if args.budget else 3 if args.against else 1
    if args.large_users <= args.users:
        parser.error('--large-users must be more than --users')

    # SIGTERM unwinds like Ctrl-C, so gunicorn is stopped and the database dropped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(
        signal.SIGINT, signal.default_int_handler
    )  # even when started with SIGINT ignored
    started = time.monotonic()
    (RESULTS / 'server.log').unlink(
        missing_ok=True
    )  # gunicorn's output, this invocation only
    password_hash = bcrypt.hashpw(
        PASSWORD.encode(), bcrypt.gensalt(args.bcrypt_rounds)
    ).decode()
    lines = []
    within_budget = True
    if args.busy_core:
        # Another program on the host: one CPU-bound process, as a second service or a
        # build would be. The budget's ratios must hold under it too.
        busy = subprocess.Popen([sys.executable, '-c', 'while True: pass'])
        atexit.register(busy.kill)
    if args.budget:
        budget_lines, within_budget = run_budget(args, password_hash)
        lines += budget_lines + ['']
    if args.against:
        against_lines, not_costlier = run_against(args, password_hash)
        lines += against_lines + ['']
        within_budget = within_budget and not_costlier
    if args.avatars:
        lines += run_avatars(args, password_hash) + ['']
    if args.all or not (
        args.scale
        or args.leak
        or args.avatars
        or args.pgbouncer
        or args.worker_models
        or args.write_tail
        or args.budget
        or args.against
    ):
        lines += run_endpoints(args, password_hash) + ['']
    if args.all or args.scale:
        lines += run_scale(args, password_hash) + ['']
    if args.all or args.leak:
        lines += run_leak(args, password_hash) + ['']
    if args.pgbouncer:
        lines += run_pgbouncer(args, password_hash) + ['']
    if args.worker_models:
        lines += run_workers(args, password_hash) + ['']
    if args.write_tail:
        lines += run_write_tail(args, password_hash) + ['']
    text = '\n'.join(lines)
    print('\n' + text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f'written to {args.output} ({time.monotonic() - started:.0f} s)')
    if not within_budget:
        sys.exit('bench: above bench/budget.json or costlier than --against (above)')


if __name__ == '__main__':
    try:
        main()
    except KeyboardInterrupt:
        print('interrupted: gunicorn stopped, database dropped', file=sys.stderr)
        sys.exit(130)
