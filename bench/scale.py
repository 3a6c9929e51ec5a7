"""--scale: GET profile at --users and --large-users users, with EXPLAIN."""

import hashlib
import re
import secrets

import psycopg

from bench.common import alternate
from bench.common import database
from bench.common import errors_cell
from bench.common import header
from bench.common import seed
from bench.common import server
from bench.common import summarise
from bench.common import verdict
from bench.common import warm_up
import db

SCALE_TARGET = 0.9


def run_scale(args, password_hash):
    stages = []
    with database() as url:
        for users in (args.users, args.large_users):
            seeded = seed(
                url, stages[-1]['users'] + 1 if stages else 1, users, password_hash
            )
            with server(url, args) as srv:
                warm_up(srv, args, ['get_profile'], users)
                print(f'measuring with {users:,} users:', flush=True)
                runs = alternate(srv, args, ['get_profile'], users)
            with psycopg.connect(url) as conn:
                size = conn.execute(
                    'SELECT pg_size_pretty(pg_database_size(current_database()))'
                ).fetchone()[0]
            stages.append(
                {
                    'users': users,
                    'seeded': seeded,
                    'size': size,
                    'healthz': summarise(runs, 'healthz'),
                    'profile': summarise(runs, 'get_profile'),
                }
            )
        explain = explain_hot_queries(url, args.large_users)
    small, large = stages
    speed = large['profile']['rps'] / small['profile']['rps']
    normalised = large['profile']['ratio'] / small['profile']['ratio']
    lines = header(args, 'Scale: GET /api/v1/profile') + [
        '| users in the database | database size | seeding s | healthz req/s '
        '| GET profile req/s | p50 ms | p99 ms | × healthz | CPU µs/req app + pg '
        '| non-2xx / socket errors |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ]
    for stage in stages:
        row = stage['profile']
        lines.append(
            f'| {stage["users"]:,} | {stage["size"]} | {stage["seeded"]:.1f} | '
            f'{stage["healthz"]["rps"]:,.0f} | {row["rps"]:,.0f} | {row["p50"]:.1f} | '
            f'{row["p99"]:.1f} | {row["ratio"]:.2f} | {row["app_us"]:,.0f} + '
            f'{row["pg_us"]:,.0f} | {errors_cell(row)} |'
        )
    seq_scans = [text for text in explain if 'Seq Scan' in text]
    lines += [
        '',
        f'- {large["users"]:,} / {small["users"]:,} users: GET profile req/s ratio '
        f'{speed:.2f}, × healthz ratio {normalised:.2f}; target ≥ {SCALE_TARGET}: '
        f'{verdict(speed >= SCALE_TARGET)}',
        f'- Hot queries at {large["users"]:,} users: '
        + (
            'every lookup uses an index'
            if not seq_scans
            else f'**{len(seq_scans)} plan(s) with a Seq Scan**'
        ),
        '',
        '```',
        *explain,
        '```',
    ]
    return lines


def explain_hot_queries(url, users):
    """EXPLAIN (ANALYZE, BUFFERS) of the auth lookup (the whole read: the user
    document is stored, migration 0014), plus the plans of the statements inside
    membership_doc() (plpgsql, run when a membership or account changes), which EXPLAIN
    does not show: auto_explain with log_nested_statements sends those to this session
    as LOG messages. Each query runs first, so the plans are those of a warm session,
    as in a worker."""
    queries = db.load_queries()
    i = secrets.randbelow(users) + 1
    digest = hashlib.sha256(f'bench-token-{i}'.encode()).digest()
    texts = []
    with psycopg.connect(url, autocommit=True) as conn:
        for sql, params, title in (
            (
                # db.Lookup's $1, as psycopg's placeholder
                queries['auth.user_for_token'].replace('= $1', '= %s'),
                (digest,),
                f'auth.user_for_token, token of user {i}',
            ),
            (
                'SELECT membership_doc(%s)',
                (i,),
                f'SELECT membership_doc({i}) (writes only)',
            ),
        ):
            for _ in range(
                10
            ):  # past plpgsql's first custom plans, as in a busy worker
                conn.execute(sql, params).fetchall()
            plan = conn.execute('EXPLAIN (ANALYZE, BUFFERS) ' + sql, params).fetchall()
            texts.append(f'-- {title}:\n' + '\n'.join(row[0] for row in plan))
        logged = []
        conn.add_notice_handler(lambda diag: logged.append(diag.message_primary))
        for setting in (
            "LOAD 'auto_explain'",
            'SET auto_explain.log_min_duration = 0',
            'SET auto_explain.log_analyze = on',
            'SET auto_explain.log_buffers = on',
            'SET auto_explain.log_nested_statements = on',
            'SET client_min_messages = log',
        ):
            conn.execute(setting)
        conn.execute('SELECT membership_doc(%s)', (i,)).fetchone()
        conn.execute('SET client_min_messages = notice')
    for text in logged[:-1]:  # the last one is the top-level SELECT, shown above
        # Without its query text: the statement is the function's body.
        text = re.sub(r'Query Text: (?:.*\n)*?(?=\S+  \(cost)', '', text)
        texts.append(f'-- inside membership_doc({i}), from auto_explain:\n{text}')
    for text in texts:
        print(text, '\n', flush=True)
    return texts
