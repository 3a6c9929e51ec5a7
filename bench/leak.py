"""--leak: worker RSS before and after --leak-requests requests."""

from bench.common import database
from bench.common import header
from bench.common import RSS_LIMIT_MB
from bench.common import seed
from bench.common import server
from bench.common import verdict
from bench.common import warm_up
from bench.common import wrk

RSS_FLAT_MB = 1.0  # "flat": no worker grew by more than this over the leak run


def run_leak(args, password_hash):
    with database() as url:
        seed(url, 1, args.users, password_hash)
        with server(url, args) as srv:
            runs = warm_up(srv, args, ['get_profile'], args.users)
            rate = runs[-1]['rps'] if runs else 1000
            before = srv.rss_mb()
            print(f'GET profile until {args.leak_requests:,} responses:', flush=True)
            # wrk cannot stop at a count (a thread stopped from Lua leaves its
            # connections open until -d ends), so run it in chunks sized from the rate
            # so far.
            runs = []
            while sum(run['requests'] for run in runs) < args.leak_requests:
                left = args.leak_requests - sum(run['requests'] for run in runs)
                rate = runs[-1]['rps'] if runs else rate
                runs.append(
                    wrk(
                        srv,
                        args,
                        'get_profile',
                        args.users,
                        f'{max(1, min(60, round(left / rate + 0.5)))}s',
                    )
                )
            after = srv.rss_mb()
    requests = sum(run['requests'] for run in runs)
    seconds = sum(run['requests'] / run['rps'] for run in runs)
    non2xx = sum(run['non2xx'] for run in runs)
    socket_errors = sum(run['socket_errors'] for run in runs)
    growth = max(after.get(pid, float('inf')) - mb for pid, mb in before.items())
    lines = header(args, f'Leak check ({args.users:,} users)') + [
        '| worker pid | RSS before MB | RSS after MB | change MB |',
        '|---:|---:|---:|---:|',
    ]
    for pid, mb in sorted(before.items()):
        later = after.get(pid)
        lines.append(
            f'| {pid} | {mb:.1f} | {later:.1f} | {later - mb:+.1f} |'
            if later is not None
            else f'| {pid} | {mb:.1f} | gone (restarted) | |'
        )
    lines += [
        '',
        f'- {requests:,} GET /api/v1/profile requests in {len(runs)} wrk run(s), '
        f'{requests / seconds:,.0f} req/s; non-2xx / socket errors {non2xx} / '
        f'{socket_errors}.',
        f'- RSS ≤ {RSS_LIMIT_MB} MB: '
        f'{verdict(max(after.values(), default=0) <= RSS_LIMIT_MB)}; '
        f'flat (no worker grew by more than {RSS_FLAT_MB} MB): '
        f'{verdict(growth <= RSS_FLAT_MB)}',
    ]
    return lines
