"""Migrations never change once on main: pinned checksums, manage.py
migrate's refusal and --status, sql/schema.sql, and an upgrade from the oldest
supported level."""

import contextlib
import difflib
import os
import subprocess
import sys

import psycopg
import pytest
import webtest

import app as app_module
import config as config_module
import db
import schema_dump
from services import deletion
from services import passwords
from tests.support import ROOT
from tests.support.database import new_database
from tests.support.users import PASSWORD
from tests.support.users import unique_email
import tokens

# The sha256 of every migration on main. A migration on main never changes: a fix is a
# new file, and a new file adds its line here (sha256sum sql/migrations/NNNN_*.sql).
# 0007 and 0010 were never on main (0013 was written as 0010 on a branch and took the
# next free number when it merged): a gap stays, as every number is the next after main.
PINNED = {
    '0001_initial.sql': 'bddad73d8054fe643ea3ab2cda5dc80b5b7ea2cecec72dfed32ff3e8956fb627',  # noqa: E501
    '0002_email_checks_independent_of_locale.sql': '848fd1451a2bc7cb8dce7e4c28f62f316837e19e2beffdc1caae16c95baa46f1',  # noqa: E501
    '0003_user_json_of_a_row.sql': '3dec058a058c73f446f4e931fff19abe34aa55176606951d2accc8a57c70990f',  # noqa: E501
    '0004_client_fields.sql': 'eb36e41134e2651452a5091716b505bfe0dc175303caa370233c76b68d5db013',  # noqa: E501
    '0005_credential_lifecycle.sql': '61cf92c6759440c4a1a2fcaf1babd3b489a1ffb1487dbbe375a9bd8f72b96e62',  # noqa: E501
    '0006_ui_settings_cap_and_suppressed_mail.sql': '3707b52c9efc3e78906ff3088e63376644477c4af90a23b1b34575525026b0a5',  # noqa: E501
    '0008_sessions_and_audit.sql': 'bccac67cf655a03ba1c48cf11d6817ac0d3c710a2f51ddc6e7e00b4c7e179166',  # noqa: E501
    '0009_mfa.sql': '68b34839979315b92050d3f38219aa8373f809ac5cbb3353b42143d5c4040e39',
    '0011_revert_link_reservations.sql': 'd76fc0a1d91b542ec013ec1807cc3a411a241f82c989edbc8ed7ab0a13e99c9a',  # noqa: E501
    '0012_session_authenticated_at.sql': 'd419791037d0be7da10f3a3d961cba616c72af1afdb486af7b90a0cac42529d0',  # noqa: E501
    '0013_dashboard_mfa_and_sessions.sql': '4bf4bea450e8ae5bdeef2ccc7bd5c2f6c738a9904af50316b1ae83d073f14531',  # noqa: E501
    '0014_stored_user_document.sql': '1f723102f4724a63a11b67b542983dd18daeb1fe7c06aabe7a4cfb9a548ded18',  # noqa: E501
    '0015_profile_writes_keep_the_memberships_part.sql': '5193259e79cd69a2e227d0e0329e00492cb1a6065561ce0140d6948741bced49',  # noqa: E501
    '0016_suspended_members.sql': '2278d91283ffa760f8dfb94f70df8eb78c695dc47e1ec76223ef6a58a18e127c',  # noqa: E501
    '0017_personal_access_tokens.sql': 'da59668e86520507b6f8fc5fedfb5fa4b5b1ec62df08d27541d339d9f52d6c9c',  # noqa: E501
    '0018_account_trigger_locks_members_in_id_order.sql': 'd3ca5fde71182d9ba45594d556d45bf7299b0057dbeae097c063175d25c1241d',  # noqa: E501
    '0019_app_role_owns_nothing.sql': '12a2ade1ee0b4707eb8465ac806ca6e97fa18361b05c6eee56e3f6504d815b00',  # noqa: E501
    '0020_single_sign_on.sql': 'ecfa4076a077567ce4a85f2b7b4bdae1c692582cad4a28720da57348172e5010',  # noqa: E501
    '0021_account_deletion.sql': '735de70acceafd9d36bad89a4a1d1956eab97b95a702227e64cc6986c47e94e8',  # noqa: E501
    '0022_mail_outbox_owner.sql': '85ccf0d357612a7eed49ca1f0b6acd8dda886f8083d5984a2d9b4b6dec27d40d',  # noqa: E501
    '0023_erase_user_trail_addresses.sql': 'ce4acb1cb5432536ad5412ef03fb33abcea0dcb1dd702e393f9f86e66ad92747',  # noqa: E501
    '0024_export_and_erasure_read_by_index.sql': '2d282a12f77c3560f1b193cad83d9bd073c5b470b35d77de89a12a19d5ac91d3',  # noqa: E501
}
# The oldest level docs/operations.md promises an upgrade from.
OLDEST_SUPPORTED = '0001_initial'
# Every table 0001 creates: the upgrade test fills each one.
TABLES_AT_OLDEST = (
    'accounts',
    'users',
    'account_users',
    'user_tokens',
    'one_time_tokens',
    'mail_outbox',
    'rate_limit_counters',
)


def manage(url, *args):
    env = {**os.environ, 'DATABASE_URL': url}
    env.pop('MIGRATE_DATABASE_URL', None)
    return subprocess.run(
        [sys.executable, 'manage.py', *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def recorded(url):
    with psycopg.connect(url) as conn:
        return conn.execute(
            'SELECT version, applied_at, checksum FROM schema_migrations'
            ' ORDER BY version'
        ).fetchall()


def test_no_migration_on_main_changes_and_every_one_is_pinned():
    on_disk = {path.name: db.checksum(path) for path in db.migration_files()}
    changed = [
        f'sql/migrations/{name} changed after it was merged; a migration on main never '
        'changes: put the change in a new migration'
        for name in sorted(on_disk.keys() & PINNED.keys())
        if on_disk[name] != PINNED[name]
    ]
    gone = [
        f'sql/migrations/{name} was removed or renamed; '
        'a migration on main stays as it is'
        for name in sorted(PINNED.keys() - on_disk.keys())
    ]
    unpinned = [
        f"sql/migrations/{name} is not pinned: add '{name}': '{on_disk[name]}' "
        'to PINNED in tests/test_migrations.py'
        for name in sorted(on_disk.keys() - PINNED.keys())
    ]
    assert not changed + gone + unpinned, '\n'.join(changed + gone + unpinned)


@contextlib.contextmanager
def database_at(level, *statements):
    """A database migrated up to ``level`` (None: every migration), then
    ``statements`` run on it."""
    with new_database('frontdesk_migrate', migrate=False) as url:
        db.migrate(url, target=level)
        with psycopg.connect(url) as conn:
            for statement in statements:
                conn.execute(statement)
        yield url


def refused_migrate(url, line):
    """Run manage.py migrate; it must refuse with ``line`` alone and leave the
    bookkeeping as it was."""
    before = recorded(url)
    done = manage(url, 'migrate')
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (
        1,
        '',
        [f'manage.py migrate: {line}'],
    )
    assert recorded(url) == before
    return done


def test_migrate_refuses_a_changed_migration_in_one_line_and_changes_nothing():
    changed = (
        "UPDATE schema_migrations SET checksum = repeat('0', 64)"
        " WHERE version = '0005_credential_lifecycle'"
    )
    # A row from before checksums were kept: a refused run must not fill it in either.
    unchecked = (
        "UPDATE schema_migrations SET checksum = NULL WHERE version = '0001_initial'"
    )
    with database_at('0008_sessions_and_audit', changed, unchecked) as url:
        schema_before = schema_dump.dump(url)

        refused_migrate(
            url,
            'sql/migrations/0005_credential_lifecycle.sql was changed after it was '
            f'applied (checksum {"0" * 64} applied, '
            f'{PINNED["0005_credential_lifecycle.sql"]} now); a migration on main '
            'never changes: write a new one',
        )

        assert schema_dump.dump(url) == schema_before  # 0009 was pending and stays so


def test_migrate_refuses_when_an_applied_migrations_file_is_missing():
    # 0006 was renamed after merge: a database that applied it under its first name.
    first_name = (
        'INSERT INTO schema_migrations (version, applied_at, checksum)'
        " VALUES ('0006_ui_settings_size_limit', '2025-01-02 03:04:05+00',"
        " repeat('a', 64))"
    )
    with database_at('0005_credential_lifecycle', first_name) as url:
        done = refused_migrate(
            url,
            'sql/migrations/0006_ui_settings_size_limit.sql was applied (2025-01-02 '
            '03:04:05 UTC) but the file is missing; a migration on main is never '
            'renamed or removed: restore it',
        )
        status = manage(url, 'migrate', '--status')
        assert status.returncode != 0 and status.stderr == done.stderr
        assert status.stdout.splitlines()[5:] == [
            f'out of order{" " * 25}0006_ui_settings_cap_and_suppressed_mail',
            'missing      2025-01-02 03:04:05 UTC 0006_ui_settings_size_limit',
            *(
                f'pending{" " * 30}{path.stem}'
                for path in db.migration_files()
                if path.stem > '0006_ui_settings_cap_and_suppressed_mail'
            ),
        ]


def test_a_new_migration_numbered_below_an_applied_one_is_refused(tmp_path):
    for path in db.migration_files():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    with new_database('frontdesk_migrate', migrate=False) as url:
        db.migrate(url, directory=tmp_path)
        (tmp_path / '0007_late.sql').write_text(
            '-- Fills the gap 0007 left.\nCREATE TABLE late (id int);\n'
        )
        before = recorded(url)

        with pytest.raises(db.MigrationRefused) as refused:
            db.migrate(url, directory=tmp_path)

        last = db.migration_files()[-1].stem
        assert str(refused.value) == (
            f'{tmp_path}/0007_late.sql is pending but sorts before {last}, which is '
            'applied; a new migration takes the next number after every migration on '
            'main: renumber it'
        )
        assert recorded(url) == before


def test_status_lists_applied_with_their_time_and_pending():
    with new_database('frontdesk_migrate', migrate=False) as url:
        assert manage(url, 'migrate', '--status').stdout.splitlines() == [
            f'pending{" " * 30}{path.stem}' for path in db.migration_files()
        ]
        db.migrate(url, target='0005_credential_lifecycle')
        times = {
            version: db.utc_time(applied_at) for version, applied_at, _ in recorded(url)
        }

        done = manage(url, 'migrate', '--status')

        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f'{"applied" if path.stem in times else "pending":<12} '
            f'{times.get(path.stem, ""):<23} {path.stem}'
            for path in db.migration_files()
        ]
        after = [
            p for p in db.migration_files() if p.stem > '0005_credential_lifecycle'
        ]
        pending = [
            line for line in done.stdout.splitlines() if line.startswith('pending ')
        ]
        assert len(pending) == len(after) > 0


def test_a_database_migrated_before_checksums_gets_them_on_the_next_migrate():
    with database_at(None, 'ALTER TABLE schema_migrations DROP COLUMN checksum') as url:
        status = manage(url, 'migrate', '--status')
        assert status.returncode == 0, status.stderr
        assert [line.split()[0] for line in status.stdout.splitlines()] == [
            'unchecked'
        ] * len(PINNED)

        done = manage(url, 'migrate')

        assert (done.returncode, done.stdout) == (
            0,
            'applied 0 migration(s): none pending\n',
        ), done.stderr
        assert {
            f'{version}.sql': checksum for version, _, checksum in recorded(url)
        } == PINNED


def test_a_fresh_migrate_matches_sql_schema_sql():
    with new_database('frontdesk_schema') as url:
        fresh = schema_dump.dump(url)
    committed = schema_dump.SCHEMA_FILE.read_text()
    diff = ''.join(
        difflib.unified_diff(
            committed.splitlines(True),
            fresh.splitlines(True),
            'sql/schema.sql',
            'a fresh migrate',
            n=1,
        )
    )
    assert fresh == committed, (
        'sql/schema.sql is not what a fresh migrate produces; regenerate it with '
        f'`.venv/bin/python manage.py schema-dump` and commit it:\n{diff[:4000]}'
    )


def fill_oldest_level(conn, email):
    """One row in every table of 0001, through SQL as the first release wrote them."""
    hashed = passwords.hash_password(PASSWORD, 4)
    token = tokens.new_token()
    account_id = conn.execute(
        'INSERT INTO accounts (name, locale, domain)'
        " VALUES ('Old Co', 'de', 'old.example')"
        ' RETURNING id'
    ).fetchone()[0]
    user_id = conn.execute(
        'INSERT INTO users'
        ' (name, email, encrypted_password, confirmed_at, access_token, ui_settings)'
        " VALUES ('Old Admin', %s, %s, now() - interval '400 days', %s,"
        """ '{"theme": "dark"}') RETURNING id""",
        (email, hashed, tokens.new_token()),
    ).fetchone()[0]
    conn.execute(
        'INSERT INTO account_users (account_id, user_id, role, availability)'
        " VALUES (%s, %s, 'administrator', 'busy')",
        (account_id, user_id),
    )
    conn.execute(
        'INSERT INTO user_tokens (user_id, client, token_digest, expires_at)'
        " VALUES (%s, 'old-client', %s, now() + interval '30 days')",
        (user_id, tokens.digest(token)),
    )
    conn.execute(
        'INSERT INTO one_time_tokens'
        ' (user_id, purpose, email, token_digest, expires_at)'
        " VALUES (%s, 'reset_password', %s, %s, now() + interval '1 hour')",
        (user_id, email, tokens.digest(tokens.new_token())),
    )
    conn.execute(
        'INSERT INTO mail_outbox (kind, to_address, subject, text_body)'
        " VALUES ('reset_password', %s, 'Reset', 'a link')",
        (email,),
    )
    conn.execute(
        'INSERT INTO rate_limit_counters (bucket, window_start, hits, expires_at)'
        " VALUES ('sign_in:127.0.0.1', now(), 1, now() + interval '1 hour')"
    )
    return account_id, {'access-token': token, 'client': 'old-client', 'uid': email}


def row_counts(url):
    with psycopg.connect(url) as conn:
        return {
            table: conn.execute(f'SELECT count(*) FROM {table}').fetchone()[0]
            for table in TABLES_AT_OLDEST
        }


def test_an_upgrade_from_the_oldest_supported_level_keeps_every_row_and_serves_them(
    base_env,
):
    email = unique_email('old')
    with database_at(OLDEST_SUPPORTED) as url:
        with psycopg.connect(url) as conn:
            assert {
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                    " AND tablename <> 'schema_migrations'"
                )
            } == set(TABLES_AT_OLDEST)
            account_id, old_session = fill_oldest_level(conn, email)
            # As the first release left it: no checksums were kept then.
            conn.execute('ALTER TABLE schema_migrations DROP COLUMN checksum')
        before = row_counts(url)
        assert set(before.values()) == {1}

        done = manage(url, 'migrate')

        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(
            f'applied {len(db.migration_files()) - 1} migration(s): '
        )
        assert row_counts(url) == before
        assert {
            f'{version}.sql': checksum for version, _, checksum in recorded(url)
        } == PINNED
        config = config_module.load(
            {**base_env, 'DATABASE_URL': url, 'MIGRATE_DATABASE_URL': ''}
        )
        pool = db.create_pool(config)
        try:
            testapp = webtest.TestApp(app_module.create_app(config, pool))
            signed_in = testapp.post_json(
                '/auth/sign_in', {'email': email, 'password': PASSWORD}, status=200
            )
            headers = {
                name: signed_in.headers[name]
                for name in ('access-token', 'client', 'uid')
            }
            profile = testapp.get('/api/v1/profile', headers=headers, status=200).json
            assert (
                profile['email'],
                profile['name'],
                profile['account_id'],
                profile['role'],
            ) == (email, 'Old Admin', account_id, 'administrator')
            assert (
                profile['ui_settings'] == {'theme': 'dark'}
                and profile['mfa_enabled'] is False
            )
            account = testapp.get(
                f'/api/v1/accounts/{account_id}', headers=headers, status=200
            ).json
            assert (account['name'], account['locale'], account['domain']) == (
                'Old Co',
                'de',
                'old.example',
            )
            # The session signed in before the upgrade still works.
            assert (
                testapp.get('/api/v1/profile', headers=old_session, status=200).json[
                    'email'
                ]
                == email
            )
        finally:
            pool.close()
        # Mail queued before the outbox named its owner (0022) names nobody; the
        # eraser still finds it by its address.
        with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
            assert conn.execute('SELECT user_id FROM mail_outbox').fetchall() == [
                {'user_id': None}
            ]
            with conn.transaction():
                deletion.erase_user(conn, db.load_queries(), config, profile['id'])
            assert conn.execute('SELECT count(*) AS n FROM mail_outbox').fetchone() == {
                'n': 0
            }
