"""The default mode: each endpoint against the /healthz baseline."""

import json
import secrets
import urllib.error
import urllib.request

from bench.common import alternate
from bench.common import database
from bench.common import ENDPOINTS
from bench.common import header
from bench.common import LABELS
from bench.common import PASSWORD
from bench.common import pat_cpu_line
from bench.common import PAT_TOKENS
from bench.common import RSS_LIMIT_MB
from bench.common import rss_line
from bench.common import seed
from bench.common import seed_personal_tokens
from bench.common import server
from bench.common import summarise
from bench.common import table
from bench.common import verdict
from bench.common import warm_up

GET_P99_MS = 15


def probe(srv, name):
    """One request like wrk's, as user 1: what does a failing endpoint answer?"""
    headers = {
        'access-token': 'bench-token-1',
        'client': 'client-1',
        'uid': 'user1@bench.test',
        'Content-Type': 'application/json',
    }
    method, path, body = {
        'healthz': ('GET', '/healthz', None),
        'get_profile': ('GET', '/api/v1/profile', None),
        'pat_profile': ('GET', '/api/v1/profile', None),
        'put_profile': (
            'PUT',
            '/api/v1/profile',
            {'profile': {'ui_settings': {'k': 1}}},
        ),
        'get_account': ('GET', '/api/v1/accounts/1', None),
        'cache_keys': ('GET', '/api/v1/accounts/1/cache_keys', None),
        'validate_token': ('GET', '/auth/validate_token', None),
        'sign_in': (
            'POST',
            '/auth/sign_in',
            {'email': 'user1@bench.test', 'password': PASSWORD},
        ),
        'sso_sign_in': (
            'POST',
            '/auth/sign_in',
            {'email': 'user1@bench.test', 'password': '', 'sso_auth_token': 'probe'},
        ),
        'sign_up': (
            'POST',
            '/api/v1/accounts',
            {
                'account_name': 'Probe',
                'email': f'probe-{secrets.token_hex(4)}@bench.test',
                'user_full_name': 'Probe',
                'password': PASSWORD,
            },
        ),
    }[name]
    if name == 'pat_profile':
        headers = {'Authorization': f'Bearer {PAT_TOKENS.read_text().split()[0]}'}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        srv.base + path, data=data, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return f'{answer.status} {answer.read(200).decode(errors="replace")}'
    except urllib.error.HTTPError as ex:
        return f'{ex.code} {ex.read(200).decode(errors="replace")}'


def run_endpoints(args, password_hash):
    names = args.only.split(',') if args.only else [name for name, _, _ in ENDPOINTS]
    targets = {name: target for name, _, target in ENDPOINTS}
    with database() as url:
        seed(url, 1, args.users, password_hash)
        if 'pat_profile' in names:
            seed_personal_tokens(url, 1, args.users)
        with server(url, args) as srv:
            warm_up(srv, args, names, args.users)
            rss_before = srv.rss_mb()
            print('measuring:', flush=True)
            runs = alternate(srv, args, names, args.users)
            rss_after = srv.rss_mb()
            served = sum(run['requests'] for run in runs)
            probes = {
                name: probe(srv, name)
                for name in ['healthz', *names]
                if any(
                    run['endpoint'] == name and (run['non2xx'] or run['socket_errors'])
                    for run in runs
                )
            }
    rows = []
    baseline = summarise(runs, 'healthz')
    rows.append(
        (
            'healthz',
            baseline,
            'no errors',
            not baseline['non2xx'] and not baseline['socket_errors'],
        )
    )
    for name in names:
        row = summarise(runs, name)
        clean = not row['non2xx'] and not row['socket_errors']
        if targets[name] is None:
            rows.append((name, row, 'no errors (rate reported)', clean))
            continue
        ok = row['ratio'] >= targets[name] and clean
        target = f'≥ {targets[name]}× healthz'
        if name.startswith('get_') or name in ('cache_keys', 'validate_token'):
            ok = ok and row['p99'] <= GET_P99_MS
            target += f', p99 ≤ {GET_P99_MS} ms'
        rows.append((name, row, target, ok))
    worst = max(rss_after.values())
    lines = (
        header(args, f'Endpoints ({args.users:,} users)')
        + table(rows)
        + [
            '',
            f'- Workers ({len(rss_after)}): RSS {rss_line(rss_before)} after warm-up, '
            f'{rss_line(rss_after)} after {served:,} more requests; target ≤ '
            f'{RSS_LIMIT_MB} MB: {verdict(worst <= RSS_LIMIT_MB)}',
            f'- Sign-in and sign-up hash with bcrypt cost {args.bcrypt_rounds} '
            '(BCRYPT_ROUNDS).',
        ]
    )
    if {'get_profile', 'pat_profile'} <= set(names):
        lines.append(
            pat_cpu_line(summarise(runs, 'get_profile'), summarise(runs, 'pat_profile'))
        )
    for name, answer in probes.items():
        lines.append(
            f'- {LABELS[name]} failed; one request as user 1 answers: `{answer}`'
        )
    return lines
