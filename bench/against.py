"""--against REV: the hot endpoints (or those --only names) of this checkout and of
revision REV, in one run.

A --budget run moves by a few per cent with the machine's other load, which hides the
cost of one change. Here two gunicorn servers, this checkout's and REV's, run on one
seeded database and take turns: each round runs /healthz then the endpoint on one, then
on the other, the order swapped every round. Both see the same machine, so a change of a
few per cent shows (GET /api/v1/profile's three rounds have stayed within 2% of each
other). REV is checked out in a temporary git worktree and run with this
checkout's .venv; the two must have the same migrations, since the database is
migrated once. Exits 1 when an endpoint costs more than LIMIT more CPU per request
(gunicorn and PostgreSQL, medians of the rounds) than in REV.
"""

import contextlib
import pathlib
import shutil
import subprocess
import tempfile

from bench.budget import budget_names
from bench.common import database
from bench.common import header
from bench.common import LABELS
from bench.common import ROOT
from bench.common import seed
from bench.common import seed_personal_tokens
from bench.common import server
from bench.common import summarise
from bench.common import verdict
from bench.common import warm_up
from bench.common import wrk

LIMIT = 0.05


@contextlib.contextmanager
def checkout(rev):
    """A temporary worktree of ``rev`` that uses this checkout's .venv."""
    scratch = pathlib.Path(tempfile.mkdtemp(prefix='frontdesk-against-'))
    tree = scratch / 'tree'
    try:
        subprocess.run(
            ['git', 'worktree', 'add', '--quiet', '--detach', str(tree), rev],
            cwd=ROOT,
            check=True,
        )
        (tree / '.venv').symlink_to(ROOT / '.venv')
        yield tree
    finally:
        subprocess.run(
            ['git', 'worktree', 'remove', '--force', str(tree)],
            cwd=ROOT,
            capture_output=True,
        )
        shutil.rmtree(scratch, ignore_errors=True)


def _migrations(root):
    return {
        path.name: path.read_bytes()
        for path in (root / 'sql' / 'migrations').glob('*.sql')
    }


def _turn(srv, args, name, runs):
    """/healthz, then ``name``, on one server; the second run gets its ratios."""
    baseline = wrk(srv, args, 'healthz', args.users, args.duration)
    run = wrk(srv, args, name, args.users, args.duration)
    run['ratio'] = run['rps'] / baseline['rps']
    run['cpu_ratio'] = (run['app_us'] + run['pg_us']) / baseline['app_us']
    run['pg_ratio'] = run['pg_us'] / baseline['app_us']
    runs += [baseline, run]


def run_against(args, password_hash):
    """(report lines, no endpoint more than LIMIT costlier than in ``args.against``)."""
    # Any endpoint --only names (sign-in, say), else the budget's.
    names = args.only.split(',') if args.only else budget_names(args)
    runs = {'base': [], 'this': []}
    with checkout(args.against) as tree:
        if _migrations(tree) != _migrations(ROOT):
            raise SystemExit(
                f'bench: {args.against} has other migrations than this checkout; '
                '--against compares code on one database'
            )
        with database() as url:
            seed(url, 1, args.users, password_hash)
            seed_personal_tokens(url, 1, args.users)
            with (
                server(url, args, name='-base', root=tree) as base,
                server(url, args, name='-this') as this,
            ):
                servers = {'base': base, 'this': this}
                for srv in servers.values():
                    warm_up(srv, args, names, args.users)
                print('measuring:', flush=True)
                for number in range(args.rounds):
                    for name in names:
                        order = (
                            ['base', 'this'] if number % 2 == 0 else ['this', 'base']
                        )
                        for side in order:
                            _turn(servers[side], args, name, runs[side])
    lines = header(args, f'This checkout against {args.against}') + [
        f'/healthz: {summarise(runs["base"], "healthz")["app_us"]:,.0f} µs of gunicorn '
        f'CPU per request in {args.against}, '
        f'{summarise(runs["this"], "healthz")["app_us"]:,.0f} here.',
        '',
        f'| endpoint | {args.against}: CPU µs/req app + pg (× healthz) | '
        'this checkout | CPU per request | non-2xx / socket errors | result |',
        '|---|---:|---:|---:|---|---|',
    ]
    passed = True
    for name in names:
        old, new = summarise(runs['base'], name), summarise(runs['this'], name)
        change = (new['app_us'] + new['pg_us']) / (old['app_us'] + old['pg_us']) - 1
        ok = change <= LIMIT and not new['non2xx'] and not new['socket_errors']
        passed = passed and ok
        lines.append(
            f'| {LABELS[name]} | {old["app_us"]:,.0f} + {old["pg_us"]:,.0f} '
            f'({old["cpu_ratio"]:.2f}) | {new["app_us"]:,.0f} + {new["pg_us"]:,.0f} '
            f'({new["cpu_ratio"]:.2f}) | {change:+.1%} | {new["non2xx"]} / '
            f'{new["socket_errors"]} | {verdict(ok)} |'
        )
    lines += ['', f'Against {args.against}: {"pass" if passed else "**miss**"}']
    return lines, passed
