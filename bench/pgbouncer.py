"""--pgbouncer: GET and PUT profile direct and through PgBouncer."""

import collections
import contextlib
import hashlib
import json
import pathlib
import secrets
import statistics
import subprocess
import time
import types

import psycopg

from bench.common import ADMIN_URL
from bench.common import database
from bench.common import errors_cell
from bench.common import free_port
from bench.common import header
from bench.common import LABELS
from bench.common import LUA
from bench.common import PASSWORD
from bench.common import process_cpu
from bench.common import seed
from bench.common import server
from bench.common import settle
import db
from middleware.auth import TokenRow

POOLER_ENDPOINTS = ['get_profile', 'put_profile']


def wrk_instances(servers, args, endpoint, users, duration, bouncer):
    """One wrk per gunicorn instance, at once, sharing ``-c`` between them; the numbers
    summed (latency percentiles: the worse instance's). CPU per request: gunicorn (all
    instances), the database's backends, and PgBouncer's one process."""
    share = max(1, args.connections // len(servers))
    offsets = [srv.log_offset() for srv in servers]
    before = [srv.cpu_seconds() for srv in servers]
    bouncer_before = (
        process_cpu(pathlib.Path(f'/proc/{bouncer.proc.pid}')) if bouncer else 0.0
    )
    procs = [
        subprocess.Popen(
            [
                'wrk',
                f'-t{args.threads}',
                f'-c{share}',
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
                secrets.token_hex(4),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for srv in servers
    ]
    outputs = [proc.communicate() for proc in procs]
    after = [srv.cpu_seconds() for srv in servers]
    bouncer_us = (
        (process_cpu(pathlib.Path(f'/proc/{bouncer.proc.pid}')) - bouncer_before)
        if bouncer
        else 0.0
    )
    numbers = []
    for proc, (stdout, stderr) in zip(procs, outputs):
        line = next(
            (line for line in stdout.splitlines() if line.startswith('BENCH ')), None
        )
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f'wrk failed ({proc.returncode}): {stdout}{stderr}')
        numbers.append(json.loads(line[len('BENCH ') :]))
    settle(servers[0], args.pause)
    requests = sum(n['requests'] for n in numbers)
    bad = collections.Counter()
    for srv, offset in zip(servers, offsets):
        bad.update(
            {
                code.decode(): n
                for code, n in srv.statuses(offset).items()
                if not code.startswith(b'2')
            }
        )
    result = {
        'endpoint': endpoint,
        'requests': requests,
        'rps': sum(n['requests'] / (n['duration_us'] / 1e6) for n in numbers),
        'p50': max(n['p50'] for n in numbers) / 1000,
        'p99': max(n['p99'] for n in numbers) / 1000,
        'non2xx': sum(n['status'] for n in numbers),
        'socket_errors': sum(
            n['connect'] + n['read'] + n['write'] + n['timeout'] for n in numbers
        ),
        'bad_statuses': dict(bad),
        'app_us': sum(a[0] - b[0] for a, b in zip(after, before))
        / max(requests, 1)
        * 1e6,
        # Every instance sees all of the database's backends: count them once.
        'pg_us': (after[0][1] - before[0][1]) / max(requests, 1) * 1e6,
        'bouncer_us': bouncer_us / max(requests, 1) * 1e6,
    }
    print(
        f'  {endpoint:12} {"via pgbouncer" if bouncer else "":13} {result["rps"]:8.1f} '
        f'req/s  p50 {result["p50"]:6.1f} ms  p99 {result["p99"]:7.1f} ms  CPU/req app '
        f'{result["app_us"]:5.0f} + pg {result["pg_us"]:4.0f} + pgbouncer '
        f'{result["bouncer_us"]:4.0f} us  non-2xx {result["non2xx"]}'
        f'  socket errors {result["socket_errors"]}  {bad or ""}',
        flush=True,
    )
    return result


def round_trips(routes, users, iterations=2000, repeats=5):
    """GET profile's one statement (auth.user_for_token, through db.Lookup as the app
    sends it) from one process, no HTTP: client CPU and wall µs per statement on each
    route, best of ``repeats`` x ``iterations``: what one round trip costs, with the
    least noise."""
    queries = db.load_queries()
    results = {}
    for route, (url, options) in routes.items():
        best_cpu = best_wall = float('inf')
        lookup = db.Lookup(
            'user_for_token',
            queries['auth.user_for_token'],
            types.SimpleNamespace(prepared_statements=not options),
            TokenRow,
        )
        with psycopg.connect(url, autocommit=True, **options) as conn:
            for _ in range(repeats):
                digests = [
                    hashlib.sha256(
                        f'bench-token-{secrets.randbelow(users) + 1}'.encode()
                    ).digest()
                    for _ in range(iterations)
                ]
                cpu, wall = time.process_time(), time.perf_counter()
                for digest in digests:
                    lookup.fetchone(conn, digest)
                best_cpu = min(best_cpu, (time.process_time() - cpu) / iterations * 1e6)
                best_wall = min(
                    best_wall, (time.perf_counter() - wall) / iterations * 1e6
                )
        results[route] = (best_cpu, best_wall)
        print(
            f'  round trip {route:18} client CPU {best_cpu:5.0f} us  wall '
            f'{best_wall:5.0f} us',
            flush=True,
        )
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
        routes = {
            route: [
                stack.enter_context(
                    server(
                        target,
                        args,
                        {'WEB_CONCURRENCY': workers, **env},
                        name=f'-{route}-{n}',
                    )
                )
                for n in range(2)
            ]
            for route, target, env in (
                ('direct', url, {}),
                ('direct-unprepared', url, unprepared),
                ('pgbouncer', pooled_url, unprepared),
            )
        }

        def measure(name, route, duration):
            return {
                **wrk_instances(
                    routes[route],
                    args,
                    name,
                    args.users,
                    duration,
                    bouncer if route == 'pgbouncer' else None,
                ),
                'route': route,
            }

        if args.warmup not in ('0', '0s'):
            print(f'warm-up ({args.warmup} each):', flush=True)
            for route in routes:
                for name in POOLER_ENDPOINTS:
                    measure(name, route, args.warmup)
        print('one statement, no HTTP:', flush=True)
        trips = round_trips(
            {
                'direct': (url, {}),
                'direct-unprepared': (url, {'prepare_threshold': None}),
                'pgbouncer': (pooled_url, {'prepare_threshold': None}),
            },
            args.users,
        )
        print('measuring:', flush=True)
        runs = [
            {**measure(name, route, args.duration), 'round': n}
            for n in range(args.rounds)
            for name in POOLER_ENDPOINTS
            for route in routes
        ]
    lines = header(args, f'Direct and through PgBouncer ({args.users:,} users)') + [
        f'2 gunicorn instances of {workers} sync workers per route, wrk split between '
        'them; routes: direct (prepared statements on, the default), '
        'direct-unprepared (DB_PREPARED_STATEMENTS=off), pgbouncer '
        '(PgBouncer 1.18, transaction mode, deploy/pgbouncer.ini; '
        'DB_PREPARED_STATEMENTS=off).',
        '',
        '| endpoint | route | req/s | p50 ms | p99 ms '
        '| CPU µs/req app + pg + pgbouncer | non-2xx / socket errors '
        '| req/s / direct (median of rounds) |',
        '|---|---|---:|---:|---:|---:|---|---:|',
    ]
    costs = []
    for name in POOLER_ENDPOINTS:
        rows = {}
        for route in ('direct', 'direct-unprepared', 'pgbouncer'):
            mine = [
                run for run in runs if run['endpoint'] == name and run['route'] == route
            ]
            row = {
                key: statistics.median(run[key] for run in mine)
                for key in ('rps', 'p50', 'p99', 'app_us', 'pg_us', 'bouncer_us')
            }
            bad = collections.Counter()
            for run in mine:
                bad.update(run['bad_statuses'])
            row.update(
                non2xx=sum(run['non2xx'] for run in mine),
                bad_statuses=dict(bad),
                socket_errors=sum(run['socket_errors'] for run in mine),
            )
            rows[route] = row
        # Each route against direct in the same round (back to back), then the median:
        # other load on the machine moves both sides of a pair alike.
        direct = {
            run['round']: run['rps']
            for run in runs
            if run['endpoint'] == name and run['route'] == 'direct'
        }
        for route, row in rows.items():
            row['ratio'] = statistics.median(
                run['rps'] / direct[run['round']]
                for run in runs
                if run['endpoint'] == name and run['route'] == route
            )
        for route, row in rows.items():
            ratio = row['ratio']
            lines.append(
                f'| {LABELS[name]} | {route} | {row["rps"]:,.0f} | {row["p50"]:.1f} | '
                f'{row["p99"]:.1f} | {row["app_us"]:,.0f} + {row["pg_us"]:,.0f} + '
                f'{row["bouncer_us"]:,.0f} | {errors_cell(row)} | {ratio:.2f} |'
            )
        total = {
            route: row['app_us'] + row['pg_us'] + row['bouncer_us']
            for route, row in rows.items()
        }
        costs.append(
            f'- {LABELS[name]}: pooled / direct req/s '
            f'{rows["pgbouncer"]["ratio"]:.2f}. '
            f'CPU per request, all processes: {total["direct"]:,.0f} µs direct, '
            f'{total["direct-unprepared"]:,.0f} µs direct without prepared statements, '
            f"{total['pgbouncer']:,.0f} µs through PgBouncer; so the pooler's hop "
            f'costs {total["pgbouncer"] - total["direct-unprepared"]:+,.0f} µs '
            f"(PgBouncer's own process {rows['pgbouncer']['bouncer_us']:,.0f}) "
            'and unprepared statements '
            f'{total["direct-unprepared"] - total["direct"]:+,.0f} µs; median latency '
            f'{rows["pgbouncer"]["p50"] - rows["direct"]["p50"]:+.2f} ms pooled '
            'against direct.'
        )
    lines += [
        '',
        *costs,
        '',
        "GET profile's one statement (`auth.user_for_token` with the user JSON) from "
        'one process without HTTP, best of 5 x 2,000:',
        '',
        '| route | client CPU µs | wall µs per statement |',
        '|---|---:|---:|',
    ]
    lines += [
        f'| {route} | {cpu:,.0f} | {wall:,.0f} |'
        for route, (cpu, wall) in trips.items()
    ]
    return lines
