"""--leak: each worker's memory (RSS and PSS) before and after --leak-requests requests
of the hot endpoints, taken in turn, with every feature on."""

import contextlib
import itertools
import pathlib

from bench.common import database
from bench.common import header
from bench.common import RSS_LIMIT_MB
from bench.common import seed
from bench.common import seed_personal_tokens
from bench.common import server
from bench.common import verdict
from bench.common import warm_up
from bench.common import wrk

RSS_FLAT_MB = 1.0  # "flat": no worker grew by more than this over the leak run
# The mix: what signed-in clients call all day, each a wrk run in turn.
MIX = ['get_profile', 'put_profile', 'get_account', 'validate_token', 'pat_profile']
CHUNK_REQUESTS = 5_000


def memory_mb(pids):
    """{pid: (RSS, PSS) in MB} from /proc/<pid>/smaps_rollup. PSS counts a page shared
    by n processes as 1/n: what each worker really adds."""
    sizes = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = {}
            for line in (
                pathlib.Path(f'/proc/{pid}/smaps_rollup').read_text().splitlines()
            ):
                name, _, rest = line.partition(':')
                if name in ('Rss', 'Pss'):
                    fields[name] = int(rest.split()[0]) / 1024
            sizes[pid] = (fields['Rss'], fields['Pss'])
    return sizes


def run_leak(args, password_hash):
    with database() as url:
        seed(url, 1, args.users, password_hash)
        seed_personal_tokens(url, 1, args.users)
        with server(url, args) as srv:
            runs = warm_up(srv, args, MIX, args.users)
            rate = {run['endpoint']: run['rps'] for run in runs}
            before = memory_mb(srv.workers())
            print(f'{", ".join(MIX)} in turn until {args.leak_requests:,}:', flush=True)
            # wrk cannot stop at a count (a thread stopped from Lua leaves its
            # connections open until -d ends), so each run is sized from the rate.
            runs = []
            for name in itertools.cycle(MIX):
                left = args.leak_requests - sum(run['requests'] for run in runs)
                if left <= 0:
                    break
                seconds = min(left, CHUNK_REQUESTS) / rate.get(name, 1000) + 0.5
                runs.append(
                    wrk(srv, args, name, args.users, f'{max(1, round(seconds))}s')
                )
                rate[name] = runs[-1]['rps']
            after = memory_mb(srv.workers())
    requests = sum(run['requests'] for run in runs)
    non2xx = sum(run['non2xx'] for run in runs)
    socket_errors = sum(run['socket_errors'] for run in runs)
    growth = max(
        after.get(pid, (float('inf'),))[0] - rss for pid, (rss, _) in before.items()
    )
    lines = header(args, f'Worker memory ({args.users:,} users)') + [
        '| worker pid | RSS before MB | RSS after MB | PSS before MB | PSS after MB |',
        '|---:|---:|---:|---:|---:|',
    ]
    for pid, (rss, pss) in sorted(before.items()):
        later = after.get(pid)
        lines.append(
            f'| {pid} | {rss:.1f} | {later[0]:.1f} | {pss:.1f} | {later[1]:.1f} |'
            if later is not None
            else f'| {pid} | {rss:.1f} | gone (restarted) | {pss:.1f} | |'
        )
    largest = max((rss for rss, _ in after.values()), default=0)
    lines += [
        '',
        f'- {requests:,} requests ({", ".join(MIX)} in turn) in {len(runs)} wrk runs; '
        f'non-2xx / socket errors {non2xx} / {socket_errors}.',
        f'- RSS ≤ {RSS_LIMIT_MB} MB: {verdict(largest <= RSS_LIMIT_MB)}; '
        f'flat (no worker grew by more than {RSS_FLAT_MB} MB): '
        f'{verdict(growth <= RSS_FLAT_MB)}',
    ]
    return lines
