"""--avatars: the costliest accepted avatars; /healthz under uploads."""

import collections
import contextlib
import os
import secrets
import statistics
import time
import urllib.error
import urllib.request

from bench.common import database
from bench.common import get
from bench.common import header
from bench.common import seed
from bench.common import server
from bench.common import verdict
import config

AVATAR_CPU_MS = 150
AVATAR_PEAK_MIB = 100
AVATAR_HEALTHZ_P99_MS = 20
AVATAR_CLIENTS = 6
# The security review's file: 0.8-1.5 s of CPU and about 450 MiB per upload before.
REVIEW_PNG = 'the review PNG, 40 MP'


def _png(width, height, depth=8, interlace=0, noise=False):
    """An RGBA PNG whose every row is Paeth-filtered: the most work per pixel PNG asks
    of a decoder. Written by hand, since Pillow writes neither 16-bit RGBA nor Adam7."""
    import struct
    import zlib

    def chunk(kind, data):
        return (
            struct.pack('>I', len(data))
            + kind
            + data
            + struct.pack('>I', zlib.crc32(kind + data))
        )

    per_pixel = 8 if depth == 16 else 4
    rows = []
    passes = (
        [
            (0, 0, 8, 8),
            (4, 0, 8, 8),
            (0, 4, 4, 8),
            (2, 0, 4, 4),
            (0, 2, 2, 4),
            (1, 0, 2, 2),
            (0, 1, 1, 2),
        ]
        if interlace
        else [(0, 0, 1, 1)]
    )
    for x0, y0, dx, dy in passes:
        pass_width, pass_height = (
            (width - x0 + dx - 1) // dx,
            (height - y0 + dy - 1) // dy,
        )
        for _ in range(pass_height if pass_width else 0):
            line = (
                os.urandom(pass_width * per_pixel)
                if noise
                else bytes(range(7, 256, 7)) * (pass_width * per_pixel // 36 + 1)
            )
            rows.append(b'\x04' + line[: pass_width * per_pixel])
    header = struct.pack('>IIBBBBB', width, height, depth, 6, 0, 0, interlace)
    return (
        b'\x89PNG\r\n\x1a\n'
        + chunk(b'IHDR', header)
        + chunk(b'IDAT', zlib.compress(b''.join(rows), 6))
        + chunk(b'IEND', b'')
    )


def _pillow(image, fmt, **options):
    import io

    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def avatar_files():
    """(name, bytes, accepted) for the costliest images the limits accept, and the
    review's 40 MP PNG, which is refused now."""
    import math

    from PIL import Image

    from services import avatars

    def side(work):  # the largest square within the decoding budget
        return math.isqrt(avatars.MAX_DECODE_WORK // work)

    def noise(mode, size):
        bands = {'RGB': 3, 'L': 1}[mode]
        return Image.frombytes(mode, (size, size), os.urandom(size * size * bands))

    def fitting(make, candidates):
        """The first of ``candidates`` (costliest first) whose file fits
        AVATAR_MAX_BYTES."""
        for candidate in candidates:
            data = make(candidate)
            if len(data) <= avatars_max_bytes:
                return data
        raise RuntimeError('no candidate fits AVATAR_MAX_BYTES')

    avatars_max_bytes = config.Config(database_url='').avatar_max_bytes
    rgba, rgb = side(4), side(3)
    files = [
        ('PNG RGBA, Paeth', _png(rgba, rgba)),
        ('PNG RGBA, Paeth, noise', _png(rgba, rgba, noise=True)),
        ('PNG RGBA, Adam7', _png(side(8), side(8), interlace=1)),
        ('PNG 16-bit RGBA', _png(side(12), side(12), depth=16)),
        ('PNG 16-bit RGBA, Adam7', _png(side(24), side(24), depth=16, interlace=1)),
        ('PNG RGB, noise', _pillow(noise('RGB', rgb), 'PNG')),
        ('WebP, noise', _pillow(noise('RGB', side(8)), 'WEBP', quality=90)),
        (
            'GIF, noise',
            fitting(
                lambda size: _pillow(noise('L', size).convert('P'), 'GIF'),
                range(side(1), 0, -100),
            ),
        ),
        (
            'JPEG progressive, noise',
            fitting(
                lambda quality: _pillow(
                    noise('RGB', side(3)), 'JPEG', quality=quality, progressive=True
                ),
                range(95, 0, -5),
            ),
        ),
        # 16 MP, the ceiling for every format, at the highest quality that fits.
        (
            'JPEG 16 MP, noise',
            fitting(
                lambda quality: _pillow(noise('RGB', 4000), 'JPEG', quality=quality),
                range(95, 0, -5),
            ),
        ),
        (
            'JPEG 16 MP, 4:4:4, noise',
            fitting(
                lambda quality: _pillow(
                    noise('RGB', 4000), 'JPEG', quality=quality, subsampling=0
                ),
                range(95, 0, -5),
            ),
        ),
    ]
    found = [(name, data, True) for name, data in files]
    review = _pillow(Image.new('RGB', (7000, 5700), 'white'), 'PNG', compress_level=9)
    found.append((f'{REVIEW_PNG}, {len(review) // 1024} KiB (refused)', review, False))
    return found


def _multipart(data):
    boundary = 'bench-boundary-' + secrets.token_hex(8)
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="profile[avatar]"; '
            'filename="a"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        + data
        + f'\r\n--{boundary}--\r\n'.encode()
    )
    return body, f'multipart/form-data; boundary={boundary}'


def upload(srv, user, data):
    body, content_type = _multipart(data)
    headers = {
        'access-token': f'bench-token-{user}',
        'client': f'client-{user}',
        'uid': f'user{user}@bench.test',
        'Content-Type': content_type,
    }
    request = urllib.request.Request(
        srv.base + '/api/v1/profile', data=body, headers=headers, method='PUT'
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as ex:
        return ex.code


def _upload_loop(base, user, data, stop, results):
    """One upload client (a process of its own, so the probe never waits for a GIL)."""
    srv = collections.namedtuple('Target', 'base')(base)
    statuses = collections.Counter()
    while not stop.is_set():
        statuses[upload(srv, user, data)] += 1
    results.put(dict(statuses))


def healthz_under_uploads(srv, data, seconds, count=AVATAR_CLIENTS):
    """/healthz latencies (ms), one probe every 20 ms, while ``count`` clients loop
    on ``data``."""
    import multiprocessing

    context = multiprocessing.get_context('fork')
    stop, results = context.Event(), context.Queue()
    clients = [
        context.Process(target=_upload_loop, args=(srv.base, user, data, stop, results))
        for user in range(1, count + 1)
    ]
    for client in clients:
        client.start()
    latencies = []
    time.sleep(1.0)  # every client mid-upload
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        get(srv.base + '/healthz', timeout=30)
        latencies.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, 0.02 - (time.monotonic() - started)))
    stop.set()
    statuses = collections.Counter()
    for _ in clients:
        statuses.update(results.get(timeout=120))
    for client in clients:
        client.join()
    return latencies, statuses


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_avatars(args, password_hash):
    files = avatar_files()
    rows = []
    with database() as url, contextlib.ExitStack() as stack:
        import tempfile

        avatar_dir = stack.enter_context(
            tempfile.TemporaryDirectory(prefix='frontdesk-bench-avatars-')
        )
        seed(url, 1, max(args.users, AVATAR_CLIENTS), password_hash)
        srv = stack.enter_context(server(url, args, {'AVATAR_DIR': avatar_dir}))
        small = _pillow(
            __import__('PIL.Image').Image.new('RGB', (600, 600), 'red'), 'PNG'
        )
        for _ in range(
            6
        ):  # every worker past its first upload (imports, Pillow's plugins)
            upload(srv, 1, small)
        print(
            f'{"file":45} {"KiB":>8} {"status":>6} {"CPU ms":>7} {"peak MiB":>8}',
            flush=True,
        )
        for name, data, _ in files:
            srv.reset_peaks()
            statuses = collections.Counter()
            costs = []
            for _ in range(args.avatar_repeats):
                before = srv.cpu_ns()
                statuses[upload(srv, 1, data)] += 1
                costs.append((srv.cpu_ns() - before) / 1e6)
            cpu_ms = statistics.median(costs)
            row = {
                'name': name,
                'kib': len(data) / 1024,
                'statuses': dict(statuses),
                'cpu_ms': cpu_ms,
                'cpu_max_ms': max(costs),
                'peak_mib': srv.peak_mb(),
                'data': data,
            }
            rows.append(row)
            print(
                f'{name:45} {row["kib"]:8.0f} {str(dict(statuses)):>6} {cpu_ms:7.1f} '
                f'{row["peak_mib"]:8.1f}',
                flush=True,
            )
        accepted = [row for row in rows if row['statuses'].get(200)]
        worst_cpu = max(accepted, key=lambda row: row['cpu_ms'])
        worst_memory = max(row['peak_mib'] for row in accepted)
        print('/healthz alone:', flush=True)
        alone = healthz_under_uploads(srv, None, args.avatar_seconds, count=0)[0]
        print(
            f'  p50 {statistics.median(alone):.1f} ms, p99 '
            f'{percentile(alone, 0.99):.1f} ms',
            flush=True,
        )
        probes = {}
        for label, data in (
            (REVIEW_PNG, rows[-1]['data']),
            (worst_cpu['name'], worst_cpu['data']),
        ):
            print(
                f'/healthz while {AVATAR_CLIENTS} clients upload {label} in a loop:',
                flush=True,
            )
            latencies, statuses = healthz_under_uploads(srv, data, args.avatar_seconds)
            probes[label] = (latencies, statuses)
            print(
                f'  p50 {statistics.median(latencies):.1f} ms, p99 '
                f'{percentile(latencies, 0.99):.1f} ms, '
                f'{len(latencies)} probes; uploads {dict(statuses)}',
                flush=True,
            )
    load = ', '.join(f'{value:.1f}' for value in os.getloadavg())
    lines = header(args, 'Avatars') + [
        f'Load average at the end: {load} (on {os.cpu_count()} CPUs: CPU time per '
        'request grows with contention, and /healthz waits for the CPU as much as for '
        'a worker).',
        '',
        f'Each file uploaded {args.avatar_repeats} times by one client to an idle '
        "server; CPU is gunicorn's (master and workers, /proc/<pid>/schedstat) per "
        'upload, the whole request included, median and largest of the uploads; peak '
        'is the largest worker VmHWM over those uploads (reset before each file with '
        "clear_refs), the worker's own memory included.",
        '',
        '| file | size KiB | answers | CPU ms per upload (median) | largest '
        '| peak worker MiB |',
        '|---|---:|---|---:|---:|---:|',
    ]
    for row in rows:
        answers = ', '.join(
            f'{code}×{n}' for code, n in sorted(row['statuses'].items())
        )
        lines.append(
            f'| {row["name"]} | {row["kib"]:,.0f} | {answers} | {row["cpu_ms"]:.0f} | '
            f'{row["cpu_max_ms"]:.0f} | {row["peak_mib"]:.0f} |'
        )
    review_p99 = percentile(probes[REVIEW_PNG][0], 0.99)
    lines += [
        '',
        f'- Worst accepted upload: {worst_cpu["name"]}, {worst_cpu["cpu_ms"]:.0f} ms '
        f'of CPU (median); target < {AVATAR_CPU_MS} ms: '
        f'{verdict(worst_cpu["cpu_ms"] < AVATAR_CPU_MS)}',
        f'- Peak worker memory over every accepted file: {worst_memory:.0f} MiB; '
        f'target < {AVATAR_PEAK_MIB} MiB: {verdict(worst_memory < AVATAR_PEAK_MIB)}',
    ]
    lines.append(
        f'- /healthz alone, the same probes with no uploads ({len(alone)} probes): p50 '
        f'{statistics.median(alone):.1f} ms, p99 {percentile(alone, 0.99):.1f} ms: '
        'what the machine gives'
    )
    for label, (latencies, statuses) in probes.items():
        p99 = percentile(latencies, 0.99)
        answers = ', '.join(f'{code}×{n}' for code, n in sorted(statuses.items()))
        lines.append(
            f'- /healthz while {AVATAR_CLIENTS} clients upload {label} in a loop '
            f'({args.avatar_seconds} s, {len(latencies)} probes, uploads answered '
            f'{answers}): p50 {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms'
            + (
                f'; target < {AVATAR_HEALTHZ_P99_MS} ms: '
                f'{verdict(p99 < AVATAR_HEALTHZ_P99_MS)}'
                if p99 is review_p99
                else ''
            )
        )
    return lines
