"""Avatar upload (multipart profile[avatar]) and DELETE /api/v1/profile/avatar (SPEC
5.5, 8)."""

import io
import os
import struct
import zlib

from PIL import ExifTags
from PIL import Image
import pytest

from services import mail
from tests.support.servers import http

NOT_SUPPORTED = {'message': 'Avatar filetype not supported', 'attributes': ['avatar']}
TOO_BIG = {'message': 'Avatar is too big', 'attributes': ['avatar']}


def encode(image, fmt, **options):
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def picture(size=(64, 48), mode='RGB'):
    image = Image.new(mode, size, 'red' if mode != 'RGBA' else (255, 0, 0, 128))
    image.paste('blue', (0, 0, size[0] // 2, size[1] // 2))
    return image


def jpeg_with_gps():
    exif = Image.Exif()
    exif[ExifTags.Base.Make] = 'Spy Camera'
    exif[ExifTags.Base.GPSInfo] = {
        ExifTags.GPS.GPSLatitudeRef: 'N',
        ExifTags.GPS.GPSLatitude: (51.0, 30.0, 0.0),
        ExifTags.GPS.GPSLongitudeRef: 'W',
        ExifTags.GPS.GPSLongitude: (0.0, 7.0, 0.0),
    }
    return encode(picture(), 'JPEG', exif=exif.tobytes(), comment=b'taken at home')


def chunk(kind, data=b''):
    """A PNG chunk: length, type, data and CRC."""
    return (
        struct.pack('>I', len(data))
        + kind
        + data
        + struct.pack('>I', zlib.crc32(kind + data))
    )


def png_ihdr(width, height):
    return chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))


def png_declaring(width, height):
    """A tiny PNG whose header claims ``width`` x ``height`` pixels."""
    return (
        b'\x89PNG\r\n\x1a\n'
        + png_ihdr(width, height)
        + chunk(b'IDAT', zlib.compress(b'\x00' * 64))
        + chunk(b'IEND')
    )


def upload(testapp, user, data, filename='avatar.png', status=200, fields=()):
    return testapp.put(
        '/api/v1/profile',
        params=list(fields),
        upload_files=[('profile[avatar]', filename, data)],
        headers=user.headers,
        status=status,
    )


def avatar_of(conn, user_id):
    return conn.execute(
        'SELECT avatar FROM users WHERE id = %s', (user_id,)
    ).fetchone()['avatar']


def files_in(directory):
    return set(os.listdir(directory)) if os.path.isdir(directory) else set()


@pytest.mark.parametrize(
    'fmt, data, extension',
    [
        ('PNG', encode(picture(), 'PNG'), 'png'),
        ('PNG', encode(picture(mode='RGBA'), 'PNG'), 'png'),
        ('JPEG', encode(picture(), 'JPEG'), 'jpg'),
        ('GIF', encode(picture().convert('P'), 'GIF'), 'gif'),
        ('WEBP', encode(picture(), 'WEBP'), 'webp'),
    ],
)
def test_an_image_is_stored_under_a_new_name(
    testapp, conn, avatar_dir, make_user, fmt, data, extension
):
    user = make_user()

    answer = upload(testapp, user, data, filename='../../etc/passwd')

    name = avatar_of(conn, user.id)
    assert name.endswith('.' + extension) and '/' not in name and 'passwd' not in name
    assert answer.json['avatar_url'] == '/avatars/' + name
    with Image.open(avatar_dir / name) as stored:
        assert stored.format == fmt
        assert stored.size == (64, 48)
    assert not [entry for entry in files_in(avatar_dir) if entry.startswith('.')]


def test_the_stored_jpeg_has_no_exif_or_gps(testapp, conn, avatar_dir, make_user):
    user = make_user()
    original = jpeg_with_gps()
    with Image.open(io.BytesIO(original)) as sent:
        assert sent.getexif().get_ifd(ExifTags.IFD.GPSInfo)

    upload(testapp, user, original, filename='photo.jpg')

    path = avatar_dir / avatar_of(conn, user.id)
    with Image.open(path) as stored:
        assert stored.format == 'JPEG'
        assert 'exif' not in stored.info and 'comment' not in stored.info
        assert not stored.getexif()
        assert not stored.getexif().get_ifd(ExifTags.IFD.GPSInfo)
    assert (
        b'Spy Camera' not in path.read_bytes()
        and b'taken at home' not in path.read_bytes()
    )


@pytest.mark.parametrize(
    'size, fitted', [((2000, 1000), (512, 256)), ((300, 1200), (128, 512))]
)
def test_a_large_image_is_scaled_to_fit_512(
    testapp, conn, avatar_dir, make_user, size, fitted
):
    user = make_user()
    upload(testapp, user, encode(picture(size), 'PNG'))
    with Image.open(avatar_dir / avatar_of(conn, user.id)) as stored:
        assert stored.size == fitted


def test_name_and_avatar_in_one_multipart_request(testapp, conn, make_user):
    user = make_user()
    answer = upload(
        testapp, user, encode(picture(), 'PNG'), fields=[('profile[name]', 'Pictured')]
    )
    assert answer.json['name'] == 'Pictured'
    assert answer.json['avatar_url'].endswith(avatar_of(conn, user.id))


def test_an_empty_file_part_means_no_new_avatar(testapp, conn, make_user):
    # Browsers send an empty part when no file was chosen.
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    name = avatar_of(conn, user.id)
    upload(testapp, user, b'', filename='', fields=[('profile[name]', 'Same Picture')])
    assert avatar_of(conn, user.id) == name


@pytest.mark.parametrize('fields', [[], [('profile[name]', 'Changed')]])
def test_an_empty_file_is_refused_as_a_file_that_is_not_an_image(
    testapp, conn, make_user, fields
):
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    before = avatar_of(conn, user.id)
    answer = upload(testapp, user, b'', filename='empty.png', status=422, fields=fields)
    assert answer.json == NOT_SUPPORTED
    assert avatar_of(conn, user.id) == before
    name = conn.execute('SELECT name FROM users WHERE id = %s', (user.id,)).fetchone()
    assert name['name'] != 'Changed'


TRUNCATED_PNG = encode(picture((200, 200)), 'PNG')[:300]


@pytest.mark.parametrize(
    'data, filename, expected',
    [
        (
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            'a.svg',
            NOT_SUPPORTED,
        ),
        (
            b'<!doctype html><html><script>alert(1)</script></html>',
            'a.html',
            NOT_SUPPORTED,
        ),
        (b'just some text, honestly a PNG', 'a.png', NOT_SUPPORTED),
        (TRUNCATED_PNG, 'a.png', NOT_SUPPORTED),
        (encode(picture(), 'BMP'), 'a.png', NOT_SUPPORTED),
        (encode(picture(), 'TIFF'), 'a.png', NOT_SUPPORTED),
        (png_declaring(20000, 20000), 'bomb.png', TOO_BIG),
        (png_declaring(7000, 7000), 'bomb.png', TOO_BIG),
    ],
)
def test_what_is_not_an_accepted_image_is_refused_and_nothing_is_stored(
    testapp, conn, avatar_dir, make_user, data, filename, expected
):
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    before_name, before_files = avatar_of(conn, user.id), files_in(avatar_dir)

    answer = upload(
        testapp,
        user,
        data,
        filename=filename,
        status=422,
        fields=[('profile[name]', 'Changed')],
    )

    assert answer.json == expected
    assert avatar_of(conn, user.id) == before_name
    assert files_in(avatar_dir) == before_files
    assert (
        conn.execute('SELECT name FROM users WHERE id = %s', (user.id,)).fetchone()[
            'name'
        ]
        != 'Changed'
    )


def test_a_file_over_avatar_max_bytes_is_too_big(
    make_testapp, conn, avatar_dir, make_user
):
    testapp = make_testapp(AVATAR_MAX_BYTES='2048')
    user = make_user()
    noisy = encode(Image.frombytes('L', (100, 100), os.urandom(10000)), 'PNG')
    assert len(noisy) > 2048
    before = files_in(avatar_dir)

    assert upload(testapp, user, noisy, status=422).json == TOO_BIG
    assert avatar_of(conn, user.id) is None
    assert files_in(avatar_dir) == before


def test_a_body_over_the_multipart_limit_is_a_413(make_testapp, conn, make_user):
    testapp = make_testapp(AVATAR_MAX_BYTES='2048')
    user = make_user()
    limit = 2048 + 64 * 1024
    answer = upload(testapp, user, b'x' * (limit + 1), status=413)
    assert answer.json == {
        'message': f'Request body is too large (maximum is {limit} bytes)'
    }
    assert avatar_of(conn, user.id) is None


def test_an_avatar_with_an_invalid_field_stores_nothing(
    testapp, conn, avatar_dir, make_user
):
    user = make_user()
    before = files_in(avatar_dir)
    answer = upload(
        testapp,
        user,
        encode(picture(), 'PNG'),
        status=422,
        fields=[('profile[name]', 'x' * 256)],
    )
    assert answer.json == {
        'message': 'Name is too long (maximum is 255 characters)',
        'attributes': ['name'],
    }
    assert avatar_of(conn, user.id) is None
    assert files_in(avatar_dir) == before


def test_an_avatar_with_a_wrong_current_password_stores_nothing(
    testapp, conn, avatar_dir, make_user
):
    user = make_user()
    before = files_in(avatar_dir)
    answer = upload(
        testapp,
        user,
        encode(picture(), 'PNG'),
        status=422,
        fields=[
            ('profile[current_password]', 'wrong password'),
            ('profile[password]', 'a new password'),
        ],
    )
    assert answer.json == {'message': 'Invalid current password'}
    assert avatar_of(conn, user.id) is None
    assert files_in(avatar_dir) == before


def test_the_new_file_is_removed_when_the_transaction_fails(
    testapp, conn, avatar_dir, make_user, monkeypatch
):
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    before_name, before_files = avatar_of(conn, user.id), files_in(avatar_dir)

    def broken(*args, **kwargs):
        raise RuntimeError('mail queue unavailable')

    monkeypatch.setattr(mail, 'send_confirmation', broken)
    answer = testapp.put(
        '/api/v1/profile',
        params=[('profile[email]', 'moved@example.com')],
        upload_files=[('profile[avatar]', 'new.png', encode(picture(), 'PNG'))],
        headers=user.headers,
        status=500,
        expect_errors=True,
    )

    assert answer.json['message'] == 'Internal server error'
    assert avatar_of(conn, user.id) == before_name
    assert files_in(avatar_dir) == before_files


def test_a_new_avatar_replaces_and_deletes_the_old_file(
    testapp, conn, avatar_dir, make_user
):
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    first = avatar_of(conn, user.id)
    assert (avatar_dir / first).exists()

    upload(testapp, user, encode(picture(), 'JPEG'), filename='b.jpg')

    second = avatar_of(conn, user.id)
    assert second != first and second.endswith('.jpg')
    assert (avatar_dir / second).exists()
    assert not (avatar_dir / first).exists()


def test_delete_removes_the_row_value_and_the_file_and_is_idempotent(
    testapp, conn, avatar_dir, make_user
):
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    name = avatar_of(conn, user.id)

    for _ in range(2):
        answer = testapp.delete('/api/v1/profile/avatar', headers=user.headers)
        assert answer.json['avatar_url'] == ''
        assert answer.json['id'] == user.id
        assert avatar_of(conn, user.id) is None
        assert not (avatar_dir / name).exists()


def test_delete_without_credentials_is_a_401_and_keeps_the_file(
    testapp, conn, avatar_dir, make_user
):
    user = make_user()
    upload(testapp, user, encode(picture(), 'PNG'))
    name = avatar_of(conn, user.id)
    answer = testapp.delete('/api/v1/profile/avatar', status=401)
    assert answer.json == {
        'errors': ['You need to sign in or sign up before continuing.']
    }
    assert (avatar_dir / name).exists()


def test_the_avatar_directory_is_created_when_missing(
    make_testapp, conn, tmp_path, make_user
):
    directory = tmp_path / 'not' / 'yet'
    testapp = make_testapp(
        AVATAR_DIR=str(directory), AVATAR_URL_PREFIX='https://cdn.example.com/a/'
    )
    user = make_user()
    answer = upload(testapp, user, encode(picture(), 'PNG'))
    name = avatar_of(conn, user.id)
    assert answer.json['avatar_url'] == 'https://cdn.example.com/a/' + name
    assert (directory / name).exists()
    assert oct((directory / name).stat().st_mode & 0o777) == oct(0o644)


def test_a_photo_of_several_megabytes_through_real_gunicorn(
    gunicorn_url, conn, avatar_dir, make_user
):
    user = make_user()
    photo = encode(
        Image.frombytes('RGB', (1400, 1400), os.urandom(1400 * 1400 * 3)), 'PNG'
    )
    assert len(photo) > 5 * 1024 * 1024
    boundary = 'frontdesk-test-boundary'
    body = (
        (
            f'--{boundary}\r\n'
            'Content-Disposition: form-data; name="profile[name]"\r\n\r\n'
            'Big Photo\r\n'
            f'--{boundary}\r\n'
            'Content-Disposition: form-data; name="profile[avatar]"; '
            'filename="big.png"\r\n'
            'Content-Type: image/png\r\n\r\n'
        ).encode()
        + photo
        + f'\r\n--{boundary}--\r\n'.encode()
    )

    answer = http(
        'PUT',
        gunicorn_url + '/api/v1/profile',
        data=body,
        headers={
            **user.headers,
            'Content-Type': f'multipart/form-data; boundary={boundary}',
        },
    )

    assert answer.status == 200, answer.body
    assert answer.json['name'] == 'Big Photo'
    with Image.open(avatar_dir / avatar_of(conn, user.id)) as stored:
        assert stored.size == (512, 512)


# Decoding costs bounded before it starts (services/avatars.py,
# docs/performance.md).


def solid(size, mode='RGB'):
    return Image.new(mode, size, 'white' if mode != 'RGBA' else (255, 255, 255, 128))


@pytest.mark.parametrize(
    'data',
    [
        png_declaring(4100, 4000),  # 16.4 MP: over the ceiling for every format
        png_declaring(
            2000, 2000
        ),  # 4 MP of RGB samples: over what a PNG may make us decode
    ],
    ids=['over-16-MP', 'over-the-png-budget'],
)
def test_the_header_size_is_refused_before_any_decoding(testapp, make_user, data):
    # These files hold almost no pixel data: decoding them would fail as truncated.
    # "too big" proves the header's size was judged first.
    assert upload(testapp, make_user(), data, status=422).json == TOO_BIG


# Encoded in the test, not at import: each pytest worker imports the module, and these
# take half a second to encode.
@pytest.mark.parametrize(
    'size, mode, fmt, options',
    [
        ((2100, 2100), 'RGB', 'PNG', {}),
        ((1700, 1700), 'RGBA', 'PNG', {}),
        ((1400, 1400), 'RGB', 'WEBP', {}),
        ((2200, 2200), 'RGB', 'JPEG', {'progressive': True}),
        ((4100, 4000), 'RGB', 'JPEG', {}),
    ],
    ids=[
        'png-4.4MP',
        'png-rgba-2.9MP',
        'webp-2MP',
        'progressive-jpeg-4.8MP',
        'jpeg-16.4MP',
    ],
)
def test_images_costlier_than_the_budget_are_too_big(
    testapp, make_user, size, mode, fmt, options
):
    data = encode(solid(size, mode), fmt, **options)
    assert upload(testapp, make_user(), data, status=422).json == TOO_BIG


def progressive_jpeg_repeating_a_scan(size, times):
    """A greyscale progressive JPEG whose shortest scan comes ``times`` more times."""
    data = encode(solid(size, 'L'), 'JPEG', progressive=True)
    scans = data.split(b'\xff\xda')
    shortest = min(scans[1:-1], key=len)
    return data[:-2] + (b'\xff\xda' + shortest) * times + b'\xff\xd9'


def test_a_progressive_jpeg_with_thousands_of_scans_is_too_big(testapp, make_user):
    # 6.25 MP of grey is within the progressive budget, but each scan is a pass over
    # every block: 5,000 of them (90 KB) cost seconds of a worker's CPU, 8 MiB of them
    # minutes.
    data = progressive_jpeg_repeating_a_scan((2500, 2500), 5000)
    assert len(data) < 200_000
    assert upload(testapp, make_user(), data, status=422).json == TOO_BIG
    # A usual number of scans is still an avatar.
    upload(testapp, make_user(), progressive_jpeg_repeating_a_scan((2500, 2500), 20))


def test_a_png_flooded_with_empty_chunks_is_too_big(
    testapp, conn, avatar_dir, make_user
):
    # Pillow reads chunks one at a time in Python: 600,000 empty ones around an 8x8
    # image cost 2-3 s of CPU, and fit in AVATAR_MAX_BYTES.
    data = (
        b'\x89PNG\r\n\x1a\n'
        + png_ihdr(8, 8)
        + chunk(b'tEXt') * 600_000
        + chunk(b'IDAT', zlib.compress(b'\x00' * 25 * 8))
        + chunk(b'IEND')
    )
    assert len(data) < 8 * 1024 * 1024
    user = make_user()
    before = files_in(avatar_dir)

    assert upload(testapp, user, data, status=422).json == TOO_BIG
    assert avatar_of(conn, user.id) is None
    assert files_in(avatar_dir) == before


def png_in_small_idats(size, idat_bytes):
    """An RGB PNG whose image data is split into IDAT chunks of ``idat_bytes``."""
    width, height = size
    row = bytes(range(256)) * (width * 3 // 256 + 2)
    rows = b''.join(b'\x00' + row[y % 256 : y % 256 + width * 3] for y in range(height))
    compressed = zlib.compress(rows, 0)
    return (
        b'\x89PNG\r\n\x1a\n'
        + png_ihdr(width, height)
        + b''.join(
            chunk(b'IDAT', compressed[i : i + idat_bytes])
            for i in range(0, len(compressed), idat_bytes)
        )
        + chunk(b'IEND')
    )


def animated_png(frames):
    images = [Image.new('RGB', (64, 64), (i % 256, 0, 0)) for i in range(frames)]
    return encode(images[0], 'PNG', save_all=True, append_images=images[1:])


@pytest.mark.parametrize(
    'data, fitted',
    [
        (png_in_small_idats((700, 500), 1024), (512, 366)),  # 1,026 IDAT chunks
        (animated_png(1000), (64, 64)),  # an fcTL and an IDAT or fdAT a frame
    ],
    ids=['png-1026-idats', 'apng-1000-frames'],
)
def test_a_png_split_into_many_image_data_chunks_is_still_an_avatar(
    testapp, conn, avatar_dir, make_user, data, fitted
):
    user = make_user()
    upload(testapp, user, data)
    with Image.open(avatar_dir / avatar_of(conn, user.id)) as stored:
        assert stored.size == fitted


@pytest.mark.parametrize(
    'data, fitted',
    [
        (
            encode(solid((4032, 3024)), 'JPEG', quality=95),
            (512, 384),
        ),  # a 12 MP phone photo
        (encode(solid((1920, 1080)), 'PNG'), (512, 288)),  # a screenshot
        (encode(solid((1250, 1250), 'RGBA'), 'PNG'), (512, 512)),
        (encode(solid((2400, 2400)).convert('P'), 'GIF'), (512, 512)),
        (encode(solid((1600, 1200)), 'JPEG', progressive=True), (512, 384)),
    ],
    ids=['jpeg-12MP', 'png-1080p', 'png-rgba', 'gif-5.8MP', 'progressive-jpeg-1.9MP'],
)
def test_common_large_images_are_still_accepted(
    testapp, conn, avatar_dir, make_user, data, fitted
):
    user = make_user()
    upload(testapp, user, data)
    with Image.open(avatar_dir / avatar_of(conn, user.id)) as stored:
        assert stored.size == fitted


def test_the_exif_orientation_is_applied_to_the_scaled_image(
    testapp, conn, avatar_dir, make_user
):
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6  # stored sideways: turn 90 degrees clockwise
    user = make_user()
    upload(
        testapp,
        user,
        encode(picture((1200, 600)), 'JPEG', exif=exif.tobytes()),
        filename='photo.jpg',
    )
    with Image.open(avatar_dir / avatar_of(conn, user.id)) as stored:
        assert stored.size == (256, 512)
        assert not stored.getexif()
        # The blue quarter was top left; turned clockwise it is top right.
        assert stored.convert('RGB').getpixel((200, 20))[2] > 200


def test_transparency_survives_the_palette_path(testapp, conn, avatar_dir, make_user):
    image = Image.new('P', (1500, 1500), 0)
    image.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    image.paste(1, (0, 0, 750, 1500))
    user = make_user()
    upload(testapp, user, encode(image, 'PNG', transparency=1))
    with Image.open(avatar_dir / avatar_of(conn, user.id)) as stored:
        assert stored.mode == 'RGBA' and stored.size == (512, 512)
        assert stored.getpixel((10, 10))[3] == 0 and stored.getpixel((500, 10)) == (
            255,
            0,
            0,
            255,
        )
