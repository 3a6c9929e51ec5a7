"""--write-tail: where PUT profile's slow requests go, from PostgreSQL's own counters.

PUT runs in short chunks against one server. Around each chunk the run reads
pg_stat_wal (records, full-page images, bytes, flushes and their time:
track_wal_io_timing is turned on for the benchmark's database), pg_stat_bgwriter
(checkpoints) and the users table's vacuum counters; during it a thread samples what the
database's backends wait on (pg_stat_activity, every 10 ms). Before chosen chunks a
CHECKPOINT is forced, so the chunks after one can be set beside those without.
log_lock_waits is on with a 50 ms deadlock_timeout: a lock wait that long shows in
PostgreSQL's log. Needs a superuser on TEST_DATABASE_URL (the benchmark's default).
"""

import collections
import statistics
import threading

import psycopg

from bench.common import database
from bench.common import header
from bench.common import seed
from bench.common import server
from bench.common import warm_up
from bench.common import wrk

CHECKPOINT_BEFORE = {3, 7}  # chunks (from 0) that start right after a CHECKPOINT
WAL = 'SELECT wal_records, wal_fpi, wal_bytes, wal_sync, wal_sync_time FROM pg_stat_wal'
CHECKPOINTS = 'SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter'
VACUUMS = (
    'SELECT autovacuum_count + autoanalyze_count, n_tup_upd, n_tup_hot_upd '
    "FROM pg_stat_user_tables WHERE relname = 'users'"
)
WAITS = (
    "SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU') "
    'FROM pg_stat_activity WHERE datname = current_database() '
    "AND backend_type = 'client backend' AND state = 'active' "
    'AND pid <> pg_backend_pid()'
)


class Sampler(threading.Thread):
    """What the active backends of the database wait on, every 10 ms."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.counts, self.running = url, collections.Counter(), True

    def run(self):
        with psycopg.connect(self.url, autocommit=True) as conn:
            while self.running:
                for (event,) in conn.execute(WAITS):
                    self.counts[event] += 1
                conn.execute('SELECT pg_sleep(0.01)')

    def take(self):
        counts, self.counts = self.counts, collections.Counter()
        return counts


def counters(conn):
    return (
        conn.execute(WAL).fetchone()
        + conn.execute(CHECKPOINTS).fetchone()
        + conn.execute(VACUUMS).fetchone()
    )


def run_write_tail(args, password_hash):
    chunks = []
    with database() as url:
        seed(url, 1, args.users, password_hash)
        with psycopg.connect(url, autocommit=True) as conn:
            name = conn.info.dbname
            for setting in (
                'track_wal_io_timing = on',
                'log_lock_waits = on',
                "deadlock_timeout = '50ms'",
            ):
                conn.execute(f'ALTER DATABASE {name} SET {setting}')
        with server(url, args) as srv, psycopg.connect(url, autocommit=True) as conn:
            warm_up(srv, args, ['put_profile'], args.users)
            sampler = Sampler(url)
            sampler.start()
            for index in range(max(args.rounds, 10)):
                if index in CHECKPOINT_BEFORE:
                    conn.execute('CHECKPOINT')
                before = counters(conn)
                sampler.take()
                run = wrk(srv, args, 'put_profile', args.users, args.duration)
                after = counters(conn)
                delta = [b - a for a, b in zip(before, after)]
                chunks.append((index, run, delta, sampler.take()))
            sampler.running = False
            sampler.join()
    return report(args, chunks)


def report(args, chunks):
    lines = header(args, 'The write tail: PUT profile in chunks') + [
        '| chunk | after CHECKPOINT | req/s | p50 ms | p99 ms | WAL B/req | FPI/req | '
        'flushes/req | ms per flush | checkpoints ended | autovacuum users | HOT % | '
        'backends waiting (share of samples) |',
        '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ]
    waits = collections.Counter()
    for index, run, delta, counts in chunks:
        records, fpi, wal_bytes, syncs, sync_ms, checkpoints, vacuums, upd, hot = delta
        requests = max(run['requests'], 1)
        total = sum(counts.values()) or 1
        waits.update(counts)
        top = ', '.join(
            f'{event} {n / total:.0%}' for event, n in counts.most_common(4)
        )
        lines.append(
            f'| {index + 1} | {"yes" if index in CHECKPOINT_BEFORE else ""} | '
            f'{run["rps"]:,.0f} | {run["p50"]:.1f} | {run["p99"]:.1f} | '
            f'{float(wal_bytes) / requests:,.0f} | {fpi / requests:.2f} | '
            f'{syncs / requests:.2f} | {sync_ms / max(syncs, 1):.2f} | {checkpoints} | '
            f'{vacuums} | {hot / max(upd, 1):.0%} | {top} |'
        )
    after = [run['p99'] for index, run, _, _ in chunks if index in CHECKPOINT_BEFORE]
    others = [
        run['p99'] for index, run, _, _ in chunks if index not in CHECKPOINT_BEFORE
    ]
    total = sum(waits.values()) or 1
    lines += [
        '',
        f'- p99 of the chunks right after a CHECKPOINT: median '
        f'{statistics.median(after):.1f} ms; of the others: median '
        f'{statistics.median(others):.1f} ms.',
        '- Backends of the database, all chunks: '
        + ', '.join(f'{event} {n / total:.1%}' for event, n in waits.most_common(8)),
    ]
    return lines
