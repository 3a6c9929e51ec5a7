"""Avatar images (SPEC 8): identify by content, refuse bombs, re-encode, keep on
disk."""

import functools
import io
import logging
import os
import secrets
import struct
import tempfile
import types
import warnings

import errors

# Bounds on the work one upload may cost (measured: docs/performance-log.md, "Avatars").
# A baseline JPEG is decoded at 1/2..1/8 scale (Image.draft), so its cost grows with
# the file (about 13 ms a MiB, hence AVATAR_MAX_BYTES' 8 MiB), not the pixels: 16 MP
# takes any phone or most camera photos (4032x3024 is 12.2 MP) and is the ceiling for
# every format. PNG, GIF, WebP and progressive JPEG have no scaled decoding: every
# sample is inflated, unfiltered and stored, so they are held to MAX_DECODE_WORK
# "sample bytes" (pixels x the weights in _decode_work, which follow the measured cost
# per pixel): an 8-bit RGB PNG up to 2.1 MP (a 1920x1080 screenshot), RGBA 1.6 MP,
# a GIF 6.3 MP, a WebP 0.8 MP, a progressive JPEG 2.1 MP. The costliest accepted
# uploads measured 130-200 ms of CPU on a loaded 2-vCPU machine and at most 76 MiB of
# worker memory; 40 MP took about a second and 450 MiB.
MAX_PIXELS = 16_000_000
# A progressive JPEG is decoded scan by scan, each a pass over every block of the
# image, and nothing in libjpeg bounds how many scans a file has: a 6 MP greyscale one
# repeating a 17-byte scan cost a second of CPU per 2,000 scans, minutes for 8 MiB of
# them. Encoders write 10 or so (Pillow 6 to 10, mozjpeg's optimised scripts about 20);
# the count is of SOS markers in the whole file, an EXIF thumbnail's or MPO's second
# image included, so it is generous.
MAX_JPEG_SCANS = 100
# Pillow reads a PNG's chunks one at a time in Python, each costing 1.3 us (an empty
# IDAT) to 5.6 us (a compressed iTXt) of CPU, read again by verify(), so 600,000 empty
# chunks around an 8x8 image (7.2 MB) cost 1.5-2.9 s. The chunks are counted from
# their headers before Pillow sees the file, and the count stops at the limit. Image
# data may be split finely: 8 MiB of the 8 KiB IDATs libpng writes is 1,025 chunks,
# an APNG has an fcTL and an fdAT a frame (2,000 frames: 4,003 chunks), so IDAT, fdAT
# and fcTL count only towards MAX_PNG_CHUNKS (room for 2 KiB IDATs). Every other chunk
# is metadata, which a real file has tens of; its limit keeps the costly kinds to
# 1.4 ms. At both limits the chunks cost at most 7 ms, the count under 1 ms.
MAX_PNG_CHUNKS = 4096
MAX_PNG_METADATA_CHUNKS = 256
MAX_DECODE_WORK = 6 * 1024 * 1024
MAX_SIDE = 512
# thumbnail() first shrinks by the largest whole factor that stays within the box
# (draft for JPEG, else reduce(): an area average, the one pass over the full-size
# pixels), then LANCZOS resamples the rest, by less than 2x. 1.5 or 2 (Pillow's
# default) cost 20 ms more on the worst accepted PNG, for a difference an avatar of
# 512 px does not show.
REDUCING_GAP = 1.0
# Only these decoders are tried.
_FORMATS = ('JPEG', 'PNG', 'GIF', 'WEBP')
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_PNG_IMAGE_CHUNKS = (b'IDAT', b'fdAT', b'fcTL')
# Pillow's format -> what we save it as. MPO is how Pillow names many phones' JPEGs.
_SAVE_AS = {'JPEG': 'JPEG', 'MPO': 'JPEG', 'PNG': 'PNG', 'GIF': 'GIF', 'WEBP': 'WEBP'}
_EXTENSIONS = {'JPEG': 'jpg', 'PNG': 'png', 'GIF': 'gif', 'WEBP': 'webp'}
# The fastest settings: the worst 512x512 output otherwise costs more than the decoding
# (PNG level 6: 180 ms, WebP method 4: 170 ms; level 1 with zlib's Z_RLE strategy (3)
# and method 0: 36 and 100 ms).
_SAVE_OPTIONS = {
    'JPEG': {'quality': 85},
    'WEBP': {'quality': 85, 'method': 0},
    'PNG': {'compress_level': 1, 'compress_type': 3},
    'GIF': {},
}

NOT_SUPPORTED = 'Avatar filetype not supported'
TOO_BIG = 'Avatar is too big'
log = logging.getLogger('frontdesk')


def refusal(message):
    return errors.Unprocessable.field('avatar', message)


class _TooBig(Exception):
    pass


@functools.cache
def _pillow():
    """Pillow, imported and bounded at a worker's first upload: about 3 MB a worker
    that never decodes an avatar does not carry (imported here, against the house rule
    of imports at the top, for that reason; docs/performance.md, "Worker memory")."""
    from PIL import Image
    from PIL import ImageOps
    from PIL import PngImagePlugin

    # Pillow warns above this many pixels and refuses above twice as many; prepare()
    # turns the warning into a refusal too, and checks the header's size itself before
    # decoding.
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    # Compressed PNG text chunks (iTXt, zTXt, iCCP) are inflated while the header is
    # read; the default allows 64 MiB of them. The metadata is dropped anyway.
    PngImagePlugin.MAX_TEXT_MEMORY = 4 * 1024 * 1024
    # With an explicit list of formats Pillow does not load its plugins by itself.
    Image.init()
    return types.SimpleNamespace(Image=Image, ImageOps=ImageOps)


def read_upload(stream, max_bytes):
    """Read an uploaded file, refusing it as soon as it passes ``max_bytes``."""
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise refusal(TOO_BIG)
    return data


def prepare(data):
    """Return ``(image bytes, extension)`` ready to store, or raise the 422 of SPEC 8.

    The output is a new encoding of the first frame, scaled to fit MAX_SIDE, with no
    metadata at all (EXIF, GPS, comments, colour profiles).
    """
    Image = _pillow().Image
    with warnings.catch_warnings():
        warnings.simplefilter('error', Image.DecompressionBombWarning)
        try:
            # Opening a PNG already reads every chunk before the first IDAT.
            if _too_many_png_chunks(data):
                raise _TooBig()
            with Image.open(io.BytesIO(data), formats=_FORMATS) as probe:
                probe.verify()
            with Image.open(io.BytesIO(data), formats=_FORMATS) as image:
                # The size comes from the header; nothing has been decoded yet.
                if _too_costly(image, data):
                    raise _TooBig()
                fmt = _SAVE_AS[image.format]
                return _reencode(image, fmt), _EXTENSIONS[fmt]
        except (_TooBig, Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise refusal(TOO_BIG) from None
        except Exception as ex:  # noqa: BLE001 - whatever Pillow cannot decode is refused
            log.info('avatar refused: %s', type(ex).__name__)
            raise refusal(NOT_SUPPORTED) from None


def _too_costly(image, data):
    """True when decoding this image would cost more than the bounds above allow."""
    pixels = image.width * image.height
    return (
        pixels > MAX_PIXELS
        or pixels * _decode_work(image) > MAX_DECODE_WORK
        # In entropy-coded data 0xFF is always followed by 0x00 or RSTn, so this counts
        # the scans (and at worst a few bytes of metadata that look like one).
        or (
            image.format in ('JPEG', 'MPO') and data.count(b'\xff\xda') > MAX_JPEG_SCANS
        )
    )


def _too_many_png_chunks(data):
    """True when a PNG has more chunks than MAX_PNG_CHUNKS and
    MAX_PNG_METADATA_CHUNKS allow; reads only chunk headers, and no more than the
    limit. What is not a well-formed PNG is left to Pillow."""
    if not data.startswith(_PNG_SIGNATURE):
        return False
    view = memoryview(data)
    offset = len(_PNG_SIGNATURE)
    chunks = metadata = 0
    while offset + 8 <= len(view):
        length, kind = struct.unpack_from('>I4s', view, offset)
        chunks += 1
        if kind not in _PNG_IMAGE_CHUNKS:
            metadata += 1
        if chunks > MAX_PNG_CHUNKS or metadata > MAX_PNG_METADATA_CHUNKS:
            return True
        if kind == b'IEND':  # Pillow reads no further
            break
        offset += 12 + length  # length, type, data, CRC
    return False


def _decode_work(image):
    """Relative decoding cost of one pixel, read from the header: 0 when scaled."""
    if image.format == 'WEBP':
        return 8  # decoded by libwebp, then copied: twice 4 bytes a pixel, and slow
    bands = len(image.getbands())
    if image.format in ('JPEG', 'MPO'):
        # A progressive JPEG keeps every DCT coefficient until the last scan.
        return bands if image.info.get('progressive') else 0
    tile = image.tile[0] if image.tile else None
    # Pillow unpacks 16-bit PNG samples and Adam7 passes pixel by pixel, measured 3x
    # and 2x slower than 8-bit rows.
    deep = (
        3
        if tile is not None and isinstance(tile.args, str) and ';16' in tile.args
        else 1
    )
    return bands * deep * (2 if image.info.get('interlace') else 1)


def _reencode(image, fmt):
    """Shrink first, then orient and convert the small image: no full-size copies."""
    pillow = _pillow()
    image.seek(0)
    transparent = (
        image.mode in ('RGBA', 'LA', 'PA', 'RGBa', 'La') or 'transparency' in image.info
    )
    target = 'RGBA' if transparent and fmt != 'JPEG' else 'RGB'
    if image.mode in ('P', '1'):
        # resize() of these modes is nearest-neighbour only: take it down to twice the
        # box that way (1 byte a pixel), convert, and let LANCZOS do the last step.
        image.thumbnail(
            (2 * MAX_SIDE, 2 * MAX_SIDE),
            pillow.Image.Resampling.NEAREST,
            reducing_gap=None,
        )
        image = image.convert(target)
    elif fmt == 'JPEG':
        # libjpeg decodes at 1/2..1/8 scale, to no less than the box.
        image.draft('RGB', (MAX_SIDE, MAX_SIDE))
    image.thumbnail(
        (MAX_SIDE, MAX_SIDE), pillow.Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP
    )
    # Apply the EXIF orientation while it is still known; the EXIF itself is dropped.
    pillow.ImageOps.exif_transpose(image, in_place=True)
    if image.mode != target:
        image = image.convert(target)
    image.info = {}
    out = io.BytesIO()
    image.save(out, format=fmt, **_SAVE_OPTIONS[fmt])
    return out.getvalue()


def store(directory, data, extension):
    """Write ``data`` under a new random name in ``directory``; return the name.

    Written to a temporary file first, so the name never points at a partial file.
    """
    os.makedirs(directory, exist_ok=True)
    name = f'{secrets.token_urlsafe(18)}.{extension}'
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix='.upload-')
    try:
        with os.fdopen(fd, 'wb') as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp makes the file private; nginx, another user, serves it.
        os.chmod(temp_path, 0o644)
        os.replace(temp_path, os.path.join(directory, name))
    except BaseException:
        _unlink(temp_path)
        raise
    return name


def remove(directory, name):
    """Delete a stored avatar; a missing file is already what we want."""
    if name:
        _unlink(os.path.join(directory, os.path.basename(name)))


def _unlink(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as ex:
        # The database no longer names the file; a leftover wastes space, nothing more.
        log.warning('could not remove %s: %s', path, ex)
