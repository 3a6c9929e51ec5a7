"""The user JSON, finished from the document PostgreSQL stores (``users.doc``).

The database keeps each user's document up to date on write (migration 0014); the two
parts that depend on the reader are finished here, the one place that renders a user:
``avatar_url`` (the stored file name behind AVATAR_URL_PREFIX) and each account's
``availability_status`` (SPEC 6.2: ``offline`` for an auto-offline member not seen for
five minutes). ``_mfa_required`` and ``_legacy_refused`` (SPEC 17) are for the access
rules, never sent.
"""

import datetime

import orjson

SEEN_WITHIN = datetime.timedelta(minutes=5)


def from_epoch(text):
    """A time the database sent as seconds since the epoch (a db.Lookup float)."""
    return datetime.datetime.fromtimestamp(float(text), datetime.UTC)


def parse(text):
    """The stored document as a dict (the access rules read roles and flags from it)."""
    return orjson.loads(text)


def render(doc, now, avatar_url_prefix):
    """The user JSON text of a parsed stored document as of ``now`` (the database's)."""
    doc.pop('_mfa_required', None)
    doc.pop('_legacy_refused', None)
    avatar = doc['avatar_url']
    doc['avatar_url'] = avatar_url_prefix + avatar if avatar else ''
    recently = None
    for account in doc['accounts']:
        status = account['availability']
        if account['auto_offline']:
            if recently is None:
                recently = (
                    (now - SEEN_WITHIN)
                    .astimezone(datetime.UTC)
                    .isoformat(timespec='milliseconds')
                )
            # Both ISO 8601 in UTC to the millisecond ("...Z" against "+00:00"):
            # compared as text, the first 23 characters order as the times do.
            active_at = account['active_at']
            if active_at is None or active_at[:23] <= recently[:23]:
                status = 'offline'
        account['availability_status'] = status
    return orjson.dumps(doc).decode()


def read(conn, queries, config, user_id):
    """The user JSON text of ``user_id``: its stored document, finished."""
    row = conn.execute(queries['users.document'], {'user_id': user_id}).fetchone()
    return render_text(row['doc'], row['now'], config.avatar_url_prefix)


def render_text(text, now, avatar_url_prefix):
    return render(parse(text), now, avatar_url_prefix)
