"""The connection pool, the named-query loader and the migration runner."""

import ast
import datetime
import functools
import hashlib
import logging
import pathlib
import re
import select
import types
import weakref

import orjson
import psycopg
from psycopg.rows import dict_row
import psycopg_pool

ROOT = pathlib.Path(__file__).resolve().parent
QUERIES_DIR = ROOT / 'sql' / 'queries'
MIGRATIONS_DIR = ROOT / 'sql' / 'migrations'
# Folders that hold no part of the service; hidden ones (.venv, .git) are skipped too.
NOT_SOURCE = ('tests', 'bench', 'scripts')
# Any fixed number works; it only has to be the same for every deploy of this service.
MIGRATION_LOCK_ID = 7_245_001

log = logging.getLogger('frontdesk')
_NAME_LINE = re.compile(r'^-- name: (\w+)$', re.MULTILINE)


def session_options(config):
    """What every connection the service opens (app, CLI, mail worker) is given.

    DB_PREPARED_STATEMENTS=off (SPEC 16): psycopg prepares a statement on a connection
    once it has run 5 times, and then sends only its name. Behind a transaction-mode
    pooler the next transaction may be on another server session, where that name is
    unknown (or taken), so there nothing is ever prepared.
    """
    return {} if config.prepared_statements else {'prepare_threshold': None}


def connect(config, **kwargs):
    """One connection outside the pool (CLI commands, the mail worker)."""
    return psycopg.connect(config.database_url, **session_options(config), **kwargs)


def create_pool(config):
    """Open one pool per process; call it after gunicorn forks.

    Connections are autocommit so a read is one round trip; responders that need
    several statements to be atomic open ``conn.transaction()`` themselves. Nothing
    relies on session state beyond one transaction (docs/scaling.md has the audit),
    so ``DATABASE_URL`` may point at PgBouncer in transaction mode.
    """
    return psycopg_pool.ConnectionPool(
        config.database_url,
        min_size=1,
        max_size=config.pool_max_size,
        timeout=config.pool_timeout,
        kwargs={'autocommit': True, 'row_factory': dict_row, **session_options(config)},
        name='frontdesk',
        check=check_idle_connection,
        reconnect_failed=_reconnect_failed,
        open=True,
    )


def _reconnect_failed(pool):
    # The pool keeps trying; this line is what an operator's alerting should watch for.
    log.error(
        'database unreachable for %s s (pool %s); still retrying',
        pool.reconnect_timeout,
        pool.name,
    )


def check_idle_connection(conn):
    """Refuse a pooled connection the server has closed, without a round trip.

    An idle connection has nothing to read. After a server restart its socket is
    readable (the termination notice, then EOF), so the pool drops it and hands out
    a fresh one instead of failing the next request. ConnectionPool.check_connection
    would catch more, at the price of a round trip on every checkout.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError('connection is closed')
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        # Closed here: the pool keeps a failed-check connection that still looks open.
        conn.close()
        raise psycopg.OperationalError('connection was closed by the server')


class borrow:  # noqa: N801 - used as a context manager, like pool.connection()
    """``with db.borrow(pool) as conn``: a pooled connection for the request path.

    NOTE: a departure from house style (``pool.connection()``), on the hottest paths
    only (the credential look-up that opens every authenticated request, and the profile
    update). ``pool.connection()`` also enters the connection's own context, whose exit
    commits: with autocommit connections there is nothing to commit, yet it runs
    psycopg's locking and wait machinery on each request, and its generator-based
    context manager costs a frame more; in a worker, where each request finds the CPU
    caches cold, that was 16 µs of CPU per GET /api/v1/profile (docs/performance.md,
    read path). What it leaves out is not needed here: a transaction
    (``conn.transaction()``) commits or rolls back itself, and ``putconn`` rolls back or
    replaces a connection returned in any other state.
    """

    __slots__ = ('_pool', '_conn')

    def __init__(self, pool):
        self._pool = pool
        self._conn = None

    def __enter__(self):
        self._conn = self._pool.getconn()
        return self._conn

    def __exit__(self, *exc_info):
        self._pool.putconn(self._conn)


# {connection: names of the Lookup statements prepared on it}, for every app in the
# process (the tests build several on one pool).
_PREPARED = weakref.WeakKeyDictionary()
_IDLE = psycopg.pq.TransactionStatus.IDLE


class Lookup:
    """One statement on the hottest path, sent through libpq (``psycopg.pq``) directly.

    NOTE: a departure from house style (``conn.execute``), for the token lookup alone:
    psycopg's execute runs some hundreds of lines of Python per call (query
    conversion, its prepared-statement cache, the row maker), and in a worker, where
    each request finds the CPU caches cold after waiting for PostgreSQL, that was the
    largest part of what GET /api/v1/profile costs beyond /healthz
    (docs/performance.md, read path), and of a profile update. Here it is one C call.
    The statement takes ``$n`` parameters: bytes are sent binary, anything else as its
    text. Its columns come back as text, read into ``row``, a NamedTuple declared
    beside the statement: its fields are the columns' names in order, and the type of
    each says how its text is read (READERS). With DB_PREPARED_STATEMENTS=off (a
    transaction-mode pooler) nothing is prepared; else it is prepared once per
    connection, and again if the server forgot it.
    """

    __slots__ = ('_name', '_sql', '_prepare', '_row', '_readers', '_unchecked')

    def __init__(self, name, sql, config, row):
        self._name = f'frontdesk_{name}'.encode()
        self._sql = sql.encode()
        self._prepare = config.prepared_statements
        self._row = row
        self._readers = _readers(row)
        self._unchecked = self._name not in _CHECKED

    def fetchone(self, conn, *params):
        """The first row as a ``row``, or None for no row."""
        pgconn = conn.pgconn
        formats = [int(isinstance(param, bytes)) for param in params]
        params = [
            param if isinstance(param, bytes) else str(param).encode()
            for param in params
        ]
        if not self._prepare or pgconn.transaction_status != _IDLE:
            # Inside a transaction block a statement is not prepared: one prepared in a
            # transaction that then fails is gone with it, unknown to _PREPARED.
            result = _checked(
                conn, pgconn.exec_params(self._sql, params, None, formats)
            )
        else:
            prepared = _PREPARED.setdefault(conn, set())
            if self._name not in prepared:
                _checked(conn, pgconn.prepare(self._name, self._sql))
                prepared.add(self._name)
            try:
                result = _checked(
                    conn, pgconn.exec_prepared(self._name, params, formats)
                )
            except psycopg.errors.InvalidSqlStatementName:
                # The session was reset under us (DISCARD ALL): prepare it again.
                _checked(conn, pgconn.prepare(self._name, self._sql))
                result = _checked(
                    conn, pgconn.exec_prepared(self._name, params, formats)
                )
        if self._unchecked:
            self._check(result)
        if not result.ntuples:
            return None
        value = result.get_value
        return _new_tuple(
            self._row,
            [
                value(0, column) if read is None else read(value(0, column))
                for column, read in self._readers
            ],
        )

    def _check(self, result):
        """Refuse a statement whose columns are not the row's, in its order: a
        reordered SELECT would otherwise read one column as another."""
        names = tuple(result.fname(column).decode() for column in range(result.nfields))
        if names != self._row._fields:
            raise RuntimeError(
                f'{self._name.decode()} returns {names}, '
                f'its row {self._row.__name__} declares {self._row._fields}'
            )
        _CHECKED.add(self._name)
        self._unchecked = False


# How a Lookup reads a column's text, by the type its row declares: as sent (bytes), a
# string, a number, PostgreSQL's boolean ('t' or 'f'), or JSON (list, dict). A column
# that may be NULL says so (``list | None``) and reads it as None; in any other, NULL
# is an error (bytes aside: None as sent).
READERS = {
    bytes: None,
    str: bytes.decode,
    int: int,
    float: float,
    bool: {b't': True, b'f': False}.__getitem__,
    list: orjson.loads,
    dict: orjson.loads,
}
_new_tuple = tuple.__new__
# The statements whose columns were found to be their rows' (Lookup._check), once per
# process: a Lookup made per call (services/profiles.py) checks only its first.
_CHECKED = set()


@functools.cache
def _readers(row):
    """``(column, reader)`` of each field of ``row``, reader None for bytes."""
    return tuple(
        (column, _reader(row, field, row.__annotations__[field]))
        for column, field in enumerate(row._fields)
    )


def _reader(row, field, kind):
    nullable = isinstance(kind, types.UnionType) and type(None) in kind.__args__
    if nullable:
        (kind,) = (arg for arg in kind.__args__ if arg is not type(None))
    if kind not in READERS:
        raise TypeError(f'{row.__name__}.{field}: no reader for {kind!r} in db.READERS')
    read = READERS[kind]
    if not nullable or read is None:
        return read
    return lambda text: None if text is None else read(text)


def _checked(conn, result):
    """``result``, or the exception psycopg's own execute would raise for it."""
    if result.status in (
        psycopg.pq.ExecStatus.TUPLES_OK,
        psycopg.pq.ExecStatus.COMMAND_OK,
    ):
        return result
    if conn.pgconn.status == psycopg.pq.ConnStatus.BAD:
        # Lost mid-statement (a restart, or a pooler whose server went away): the
        # 503 of an unreachable database, and the pool drops the connection.
        raise psycopg.OperationalError(
            f'the connection is lost: {result.error_message.decode(errors="replace")}'
        )
    raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


def load_queries(directory=QUERIES_DIR):
    """Return ``{'<file stem>.<name>': sql}`` for every ``-- name:`` block."""
    queries = {}
    for path in sorted(directory.glob('*.sql')):
        text = path.read_text()
        chunks = _NAME_LINE.split(text)
        if chunks[0].strip():
            raise ValueError(f'{path.name}: text before the first "-- name:" line')
        for name, body in zip(chunks[1::2], chunks[2::2]):
            key = f'{path.stem}.{name}'
            if key in queries:
                raise ValueError(f'duplicate query name {key}')
            queries[key] = body.strip()
    return queries


def source_files(root=ROOT):
    """The service's own .py files: the top level and its packages, not NOT_SOURCE."""
    folders = sorted(
        {
            path.parent
            for path in root.glob('*/*.py')
            if path.parent.name not in NOT_SOURCE
            and not path.parent.name.startswith('.')
        }
    )
    return sorted(root.glob('*.py')) + [
        path for folder in folders for path in sorted(folder.rglob('*.py'))
    ]


@functools.cache
def query_lookups(root=ROOT):
    """Every ``queries[...]`` of the source: ``(key, 'file:line')``, key None when not a
    literal.

    A lookup is a subscript of a name ending in ``queries`` (``self._queries``) or of
    ``load_queries()``. Names are string literals (house style), so each can be checked.
    """
    found = []
    for path in source_files(root):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Load)
                and _is_queries(node.value)
            ):
                key = node.slice.value if isinstance(node.slice, ast.Constant) else None
                found.append(
                    (
                        key if isinstance(key, str) else None,
                        f'{path.relative_to(root)}:{node.lineno}',
                    )
                )
    return tuple(found)


def _is_queries(node):
    if isinstance(node, ast.Call):
        return _name(node.func) == 'load_queries'
    return _name(node).endswith('queries')


def _name(node):
    return (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ''
    )


def migration_files(directory=MIGRATIONS_DIR):
    return sorted(directory.glob('[0-9][0-9][0-9][0-9]_*.sql'))


def checksum(path):
    """The sha256 (hex) of a migration file's bytes, as schema_migrations records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class MigrationRefused(Exception):
    """An applied migration's file changed or is gone; the message is one line naming
    it."""


def _shown(path):
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def utc_time(stamp):
    return stamp.astimezone(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')


def recorded_migrations(conn):
    """``{version: (applied_at, checksum or None)}`` of schema_migrations, empty before
    the first run.

    to_jsonb reads the checksum whether or not a database migrated before checksums
    were kept has the column yet, so ``manage.py migrate --status`` never has to change
    anything.
    """
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
        return {}
    rows = conn.execute(
        "SELECT version, applied_at, to_jsonb(m) ->> 'checksum'"
        ' FROM schema_migrations m'
    )
    return {version: (applied_at, digest) for version, applied_at, digest in rows}


def migration_states(recorded, directory=MIGRATIONS_DIR):
    """Each migration, recorded or on disk, as ``(version, applied_at, state)`` in
    order.

    States: ``applied`` (the file is the one applied), ``unchecked`` (applied before
    checksums were kept), ``pending``, and the three that stop a migrate: ``changed``,
    ``missing`` (recorded, no file) and ``out of order`` (pending, yet older than an
    applied one, so old and new databases would run it in different places).
    """
    files = {path.stem: path for path in migration_files(directory)}
    newest_applied = max(recorded, default='')
    states = []
    for version in sorted(files.keys() | recorded.keys()):
        applied_at, recorded_sum = recorded.get(version, (None, None))
        if version not in files:
            state = 'missing'
        elif version not in recorded:
            state = 'out of order' if version < newest_applied else 'pending'
        elif recorded_sum is None:
            state = 'unchecked'
        else:
            state = 'applied' if recorded_sum == checksum(files[version]) else 'changed'
        states.append((version, applied_at, state))
    return states


def refusal(recorded, states, directory=MIGRATIONS_DIR):
    """The one line that says why ``states`` stop a migrate, or None.

    A missing file is named first: a renamed migration also leaves its new name pending
    before the old one, and the rename is what happened.
    """
    found = {
        state: (version, applied_at) for version, applied_at, state in reversed(states)
    }
    if 'missing' in found:
        version, applied_at = found['missing']
        return (
            f'{_shown(directory / f"{version}.sql")} was applied '
            f'({utc_time(applied_at)}) but the file is '
            'missing; a migration on main is never renamed or removed: restore it'
        )
    if 'changed' in found:
        path = directory / f'{found["changed"][0]}.sql'
        return (
            f'{_shown(path)} was changed after it was applied (checksum '
            f'{recorded[path.stem][1]} applied, {checksum(path)} now); a migration on '
            'main never changes: write a new one'
        )
    if 'out of order' in found:
        path = directory / f'{found["out of order"][0]}.sql'
        return (
            f'{_shown(path)} is pending but sorts before '
            f'{max(recorded)}, which is applied; a new migration takes the next number '
            'after every migration on main: renumber it'
        )
    return None


def migrate(conninfo, directory=MIGRATIONS_DIR, target=None):
    """Apply every migration not yet recorded (up to ``target``, a version); return
    those applied.

    First every applied migration is checked against its file (sha256, recorded when it
    was applied): a changed, missing or out-of-order one stops the run with
    MigrationRefused before anything is written. Rows from before checksums were kept
    get the current file's checksum here, once.

    The advisory lock makes two concurrent runs take turns: the second finds everything
    applied and does nothing. It is a session-level lock, so ``conninfo`` must reach
    PostgreSQL itself (MIGRATE_DATABASE_URL), not a transaction-mode pooler, which would
    run the next statement in another server session: each transaction checks that it
    runs in the session holding the lock, and stops the run otherwise. Each file is its
    own transaction, so a failing one leaves the ones before it applied.
    """
    files = migration_files(directory)
    if target is not None and target not in {path.stem for path in files}:
        raise ValueError(f'no migration {target} in {_shown(directory)}')
    applied_now = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        holder = conn.execute(
            'SELECT pg_backend_pid() FROM pg_advisory_lock(%s)', (MIGRATION_LOCK_ID,)
        ).fetchone()[0]
        try:
            with conn.transaction():
                _check_session(conn, holder)
                pending = _check_applied(conn, directory)
            for path in files:
                if path.stem not in pending or (
                    target is not None and path.stem > target
                ):
                    continue
                source = path.read_bytes()
                with conn.transaction():
                    _check_session(conn, holder)
                    conn.execute(source.decode())
                    conn.execute(
                        'INSERT INTO schema_migrations (version, checksum)'
                        ' VALUES (%s, %s)',
                        (path.stem, hashlib.sha256(source).hexdigest()),
                    )
                applied_now.append(path.stem)
        finally:
            conn.execute('SELECT pg_advisory_unlock(%s)', (MIGRATION_LOCK_ID,))
    return applied_now


def grant_app_role(conninfo, role):
    """Give ``role``, the application's (DATABASE_URL's), the rows of the service's
    tables and nothing more (SPEC 3.4, migration 0019); ``conninfo`` is the migration
    role's. Idempotent."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(load_queries()['roles.grant_app_role'], {'role': role})


def _check_session(conn, holder):
    """Stop unless this transaction runs in the server session that holds the lock."""
    if conn.execute('SELECT pg_backend_pid()').fetchone()[0] != holder:
        raise RuntimeError(
            'migrate: the connection changed server sessions between statements (a '
            'transaction-mode pooler?), so the migration lock does not hold; set '
            'MIGRATE_DATABASE_URL to PostgreSQL itself. The pooler may keep the lock '
            'until it closes that server connection.'
        )


def _check_applied(conn, directory):
    """Set up the bookkeeping, refuse a changed past, fill in missing checksums;
    return the pending versions."""
    conn.execute(
        'CREATE TABLE IF NOT EXISTS schema_migrations ('
        ' version text PRIMARY KEY,'
        ' applied_at timestamptz NOT NULL DEFAULT now(),'
        ' checksum text)'
    )
    # Databases migrated before checksums were kept have none; see docs/operations.md.
    conn.execute('ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text')
    recorded = recorded_migrations(conn)
    states = migration_states(recorded, directory)
    reason = refusal(recorded, states, directory)
    if reason:
        raise MigrationRefused(reason)
    for version, _, state in states:
        if state == 'unchecked':
            conn.execute(
                'UPDATE schema_migrations SET checksum = %s WHERE version = %s'
                ' AND checksum IS NULL',
                (checksum(directory / f'{version}.sql'), version),
            )
    return {version for version, _, state in states if state == 'pending'}
