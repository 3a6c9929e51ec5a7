"""--budget: the hot endpoints against bench/budget.json; a miss fails the run.

Each endpoint's CPU per request (gunicorn and this database's PostgreSQL backends) is
divided by /healthz's in the runs either side of it, in the same server: a ratio that
other load on the machine moves much less than req/s. The median over ``--rounds``
(5 unless given) is compared with the budget.
"""

import json

from bench.common import alternate
from bench.common import database
from bench.common import header
from bench.common import LABELS
from bench.common import pat_cpu_line
from bench.common import ROOT
from bench.common import seed
from bench.common import seed_personal_tokens
from bench.common import server
from bench.common import summarise
from bench.common import verdict
from bench.common import warm_up

BUDGET = ROOT / 'bench' / 'budget.json'


def budget_names(args):
    """The endpoints of bench/budget.json, or those of them ``--only`` names (to repeat
    a run on a noisy host: docs/performance-log.md, sixth pass)."""
    names = list(json.loads(BUDGET.read_text())['endpoints'])
    return [name for name in names if not args.only or name in args.only.split(',')]


def run_budget(args, password_hash):
    """(report lines, every endpoint within its budget)."""
    budget = json.loads(BUDGET.read_text())['endpoints']
    names = budget_names(args)
    with database() as url:
        seed(url, 1, args.users, password_hash)
        if 'pat_profile' in names:
            seed_personal_tokens(url, 1, args.users)
        with server(url, args) as srv:
            warm_up(srv, args, names, args.users)
            print('measuring:', flush=True)
            runs = alternate(srv, args, names, args.users)
    baseline = summarise(runs, 'healthz')
    lines = header(args, f'Budget (bench/budget.json, {args.users:,} users)') + [
        f'/healthz: {baseline["app_us"]:,.0f} µs of gunicorn CPU per request.',
        '',
        '| endpoint | CPU µs/req app + pg | CPU × healthz | pg × healthz | budget | '
        'non-2xx / socket errors | result |',
        '|---|---:|---:|---:|---|---|---|',
    ]
    passed = True
    for name in names:
        row = summarise(runs, name)
        limits = budget[name]
        ok = (
            row['cpu_ratio'] <= limits['cpu_ratio']
            and row['pg_ratio'] <= limits.get('pg_ratio', float('inf'))
            and not row['non2xx']
            and not row['socket_errors']
        )
        passed = passed and ok
        wanted = f'≤ {limits["cpu_ratio"]}×'
        if 'pg_ratio' in limits:
            wanted += f', pg ≤ {limits["pg_ratio"]}×'
        lines.append(
            f'| {LABELS[name]} | {row["app_us"]:,.0f} + {row["pg_us"]:,.0f} | '
            f'{row["cpu_ratio"]:.2f} | {row["pg_ratio"]:.2f} | {wanted} | '
            f'{row["non2xx"]} / '
            f'{row["socket_errors"]} | {verdict(ok)} |'
        )
    lines.append('')
    if {'get_profile', 'pat_profile'} <= set(names):
        # SPEC 17, against the token headers in the same run.
        lines.append(
            pat_cpu_line(summarise(runs, 'get_profile'), summarise(runs, 'pat_profile'))
        )
    lines.append(f'Budget: {"pass" if passed else "**miss**"}')
    return lines, passed
