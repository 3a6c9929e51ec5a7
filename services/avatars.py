"""Avatar images (SPEC 8): identify by content, refuse bombs, re-encode, keep on disk."""

import io
import logging
import os
import secrets
import tempfile
import warnings

from PIL import Image
from PIL import ImageOps

import errors

MAX_PIXELS = 40_000_000
MAX_SIDE = 512
# Pillow warns above this many pixels and refuses above twice as many; prepare() turns
# the warning into a refusal too, and checks the header's size itself before decoding.
Image.MAX_IMAGE_PIXELS = MAX_PIXELS
# Only these decoders are tried. With an explicit list Pillow does not load its plugins
# by itself, hence init().
_FORMATS = ('JPEG', 'PNG', 'GIF', 'WEBP')
Image.init()
# Pillow's format -> what we save it as. MPO is how Pillow names many phones' JPEGs.
_SAVE_AS = {'JPEG': 'JPEG', 'MPO': 'JPEG', 'PNG': 'PNG', 'GIF': 'GIF', 'WEBP': 'WEBP'}
_EXTENSIONS = {'JPEG': 'jpg', 'PNG': 'png', 'GIF': 'gif', 'WEBP': 'webp'}
_SAVE_OPTIONS = {'JPEG': {'quality': 85}, 'WEBP': {'quality': 85}, 'PNG': {}, 'GIF': {}}

NOT_SUPPORTED = 'Avatar filetype not supported'
TOO_BIG = 'Avatar is too big'
log = logging.getLogger('frontdesk')


def refusal(message):
    return errors.Unprocessable.field('avatar', message)


class _TooBig(Exception):
    pass


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
    with warnings.catch_warnings():
        warnings.simplefilter('error', Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=_FORMATS) as probe:
                probe.verify()
            with Image.open(io.BytesIO(data), formats=_FORMATS) as image:
                # The size comes from the header; nothing has been decoded yet.
                if image.width * image.height > MAX_PIXELS:
                    raise _TooBig()
                fmt = _SAVE_AS[image.format]
                return _reencode(image, fmt), _EXTENSIONS[fmt]
        except (_TooBig, Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise refusal(TOO_BIG) from None
        except Exception as ex:  # noqa: BLE001 - whatever Pillow cannot decode is refused
            log.info('avatar refused: %s', type(ex).__name__)
            raise refusal(NOT_SUPPORTED) from None


def _reencode(image, fmt):
    image.seek(0)
    if fmt == 'JPEG':
        # Lets libjpeg decode a large photo at 1/2..1/8 scale instead of in full.
        image.draft('RGB', (MAX_SIDE, MAX_SIDE))
    # Apply the EXIF orientation while it is still known; the EXIF itself is dropped.
    image = ImageOps.exif_transpose(image)
    transparent = image.mode in ('RGBA', 'LA', 'PA', 'RGBa', 'La') or 'transparency' in image.info
    image = image.convert('RGBA' if transparent and fmt != 'JPEG' else 'RGB')
    image.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
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
