"""Waiting for a process the tests start (gunicorn, nginx, PgBouncer, the OpenID
Connect provider) to be ready.

A start is bounded by the work the process does, not by the clock. Each of them is
ready after a fraction of a CPU-second to a few; on a host whose cores are busy (two
passes of three workers, each with its gunicorn, Chromium and Node) the same start can
take tens of seconds of wall time, and a wall-clock bound there fails a test that
nothing is wrong with. So a start fails when the process exits, or when it (with its
children) has spent ``cpu_budget`` CPU-seconds without being ready: it is then busy
doing something else. The wall bound only catches a process that sleeps forever on
something (a lock, a socket), and is long on purpose.
"""

import os
import pathlib
import socket
import time

_TICKS = os.sysconf('SC_CLK_TCK')


def cpu_seconds(pid):
    """The CPU time (user and system) ``pid`` and its living descendants have used."""
    ticks = 0
    pending = [pid]
    while pending:
        proc = pathlib.Path('/proc', str(pending.pop()))
        try:
            # After the command's ")", utime and stime are the 12th and 13th fields.
            fields = (proc / 'stat').read_text().rpartition(')')[2].split()
            ticks += int(fields[11]) + int(fields[12])
            for task in (proc / 'task').iterdir():
                pending += (task / 'children').read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone in between: what it used no longer counts, nor matters
    return ticks / _TICKS


def wait_ready(proc, ready, what, cpu_budget=30.0, wall_budget=600.0):
    """Call ``ready()`` until it returns something true, and return that. Raise when
    ``proc`` exits first, spends ``cpu_budget`` CPU-seconds first, or after
    ``wall_budget`` seconds (see the module)."""
    started = time.monotonic()
    while True:
        found = ready()
        if found:
            return found
        if proc.poll() is not None:
            raise RuntimeError(
                f'{what} exited with {proc.returncode} before it was ready'
            )
        used = cpu_seconds(proc.pid)
        if used > cpu_budget:
            raise TimeoutError(f'{what} used {used:.1f} CPU-seconds and was not ready')
        if time.monotonic() - started > wall_budget:
            raise TimeoutError(f'{what} was not ready after {wall_budget} s')
        time.sleep(0.05)


def listening(port):
    """True once something accepts connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        return True
    except OSError:
        return False
