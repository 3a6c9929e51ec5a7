"""sql/schema.sql: the schema a fresh migrate produces, as the machine's pg_dump
prints it."""

import os
import re
import subprocess

import db
import devdb

SCHEMA_FILE = db.ROOT / 'sql' / 'schema.sql'
HEADER = """\
-- The schema a fresh `manage.py migrate` produces, for reading and reviewing: pg_dump
-- --schema-only --no-owner --no-privileges of the machine's PostgreSQL, without the lines
-- that vary between runs and versions (its comments, SET lines, \\restrict tokens, blank runs).
-- Generated, never edited, and never run: migrations build databases. After adding a
-- migration, regenerate it (a throwaway cluster, migrated from nothing) and commit both:
--     .venv/bin/python manage.py schema-dump
-- tests/test_migrations.py fails while this file and a fresh migrate disagree.
"""  # noqa: E501 (the header of sql/schema.sql, as it is written there)
# pg_dump's own comments start at column 0; no function body of ours has a line that
# does.
_VARYING = re.compile(
    r'^(--( .*)?|SET .*'
    r"|SELECT pg_catalog\.set_config\('search_path'.*"
    r'|\\(un)?restrict\b.*)$'
)


def normalise(dumped):
    kept = '\n'.join(line for line in dumped.splitlines() if not _VARYING.match(line))
    return re.sub(r'\n{3,}', '\n\n', kept).strip() + '\n'


def dump(url):
    """The text sql/schema.sql holds for the database at ``url``."""
    done = subprocess.run(
        [
            os.path.join(devdb.pg_bindir(), 'pg_dump'),
            '--schema-only',
            '--no-owner',
            '--no-privileges',
            f'--dbname={url}',
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f'pg_dump failed: {done.stderr.strip()}')
    return HEADER + '\n' + normalise(done.stdout)


def regenerate():
    """Migrate a throwaway cluster from nothing and write its dump to sql/schema.sql."""
    cluster = devdb.throwaway()
    try:
        db.migrate(cluster.url())
        text = dump(cluster.url())
    finally:
        cluster.destroy()
    SCHEMA_FILE.write_text(text)
    return text
