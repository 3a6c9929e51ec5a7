"""What an erasure (SPEC 20: a purge's, or DELETE /api/v1/profile's) must leave: nothing
that names the person, anywhere the service stores something.

``traces`` looks through every table the catalogue lists in schema public (each row as
its JSON text) for the person's addresses and name, through every column that refers
to users (the catalogue's foreign keys to users(id), and the columns that hold a user's
id without one) for their id, and through AVATAR_DIR for their avatar file and for file
names that carry the id, an address or the name. Make the addresses and the name
unique (uuid), so that what it finds can only be theirs.
"""

import dataclasses
import os
import re

from psycopg import sql

# Columns that hold a user's id without a foreign key to users(id): the audit trail
# outlives the rows it is about, and an account's schedule and compliance row outlive
# the person who asked. Read from the catalogue wherever these names occur.
USER_ID_COLUMNS = (
    'user_id',
    'actor_id',
    'subject_id',
    'scheduled_by',
    'deletion_requested_by',
)


@dataclasses.dataclass
class Person:
    id: int
    addresses: tuple  # every address they had: current, unconfirmed, earlier
    name: str
    avatar: str | None = None  # the file name their avatar had, if any


def tables(conn):
    """Every ordinary or partitioned table of schema public."""
    return [
        row['name']
        for row in conn.execute(
            'SELECT c.relname AS name FROM pg_class c'
            ' JOIN pg_namespace n ON n.oid = c.relnamespace'
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
            ' ORDER BY 1'
        )
    ]


def user_columns(conn):
    """``(table, column)`` of every column that refers to a user: foreign keys to
    users(id), users.id itself, and the USER_ID_COLUMNS wherever they occur."""
    return [
        (row['table_name'], row['column_name'])
        for row in conn.execute(
            'SELECT c.conrelid::regclass::text AS table_name, a.attname AS column_name'
            '  FROM pg_constraint c'
            '  JOIN pg_attribute a'
            '    ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)'
            " WHERE c.contype = 'f' AND c.confrelid = 'public.users'::regclass"
            " UNION SELECT 'users', 'id'"
            ' UNION SELECT table_name, column_name FROM information_schema.columns'
            "  WHERE table_schema = 'public' AND column_name = ANY (%s)"
            ' ORDER BY 1, 2',
            (list(USER_ID_COLUMNS),),
        )
    ]


def traces(conn, person, avatar_dir):
    """What still names ``person``: a list of readable findings, empty when none.

    ``conn``: the owner's connection (dict rows), which may read every table.
    """
    found = []
    needles = [address.lower() for address in person.addresses] + [person.name.lower()]
    for table in tables(conn):
        for needle in needles:
            for row in conn.execute(
                sql.SQL(
                    'SELECT row_to_json(t)::text AS row FROM {} t'
                    ' WHERE strpos(lower(row_to_json(t)::text), %s) > 0'
                ).format(sql.Identifier(table)),
                (needle,),
            ):
                found.append(f'{table} names {needle!r}: {row["row"][:300]}')
    for table, column in user_columns(conn):
        count = conn.execute(
            sql.SQL('SELECT count(*) AS n FROM {} WHERE {} = %s').format(
                sql.Identifier(table), sql.Identifier(column)
            ),
            (person.id,),
        ).fetchone()['n']
        if count:
            found.append(f'{table}.{column} = {person.id} in {count} row(s)')
    names = os.listdir(avatar_dir) if os.path.isdir(avatar_dir) else []
    for name in names:
        if person.avatar is not None and name == person.avatar:
            found.append(f'{avatar_dir}/{name}: their avatar file')
        elif str(person.id) in re.split(r'[._-]', name) or any(
            needle in name.lower() for needle in needles
        ):
            found.append(f'{avatar_dir}/{name}: a file name that names them')
    return found
