#!/usr/bin/env python3
"""Operator commands: migrate, create-user, touch-cache-key, deliver-mail,
purge-accounts, prune, mailbox, disable-mfa, schema-dump.

Without DATABASE_URL they use scripts/run's embedded database (config.py).
"""

import argparse
import email
import email.policy
import os
import pathlib
import signal
import sys
import threading

import orjson
import psycopg
from psycopg.rows import dict_row

import config as config_module
import db
import errors
import logs
import schema_dump
from services import addresses
from services import deletion
from services import mfa
from services import outbox
from services import passwords
from services import users
import userdoc
from validators import load_validators


def cmd_migrate(config, args):
    # Migrations hold a session-level advisory lock, so they go direct to
    # PostgreSQL (MIGRATE_DATABASE_URL) when DATABASE_URL is a transaction-mode pooler.
    url = config.migrate_database_url or config.database_url
    if args.status:
        return migration_status(url)
    try:
        applied = db.migrate(url)
        if args.app_role:
            db.grant_app_role(url, args.app_role)
    except db.MigrationRefused as ex:
        sys.exit(f'manage.py migrate: {ex}')
    except psycopg.errors.RaiseException as ex:
        sys.exit(f'manage.py migrate: {ex.diag.message_primary}')
    except psycopg.errors.UndefinedObject as ex:
        sys.exit(f'manage.py migrate --app-role: {ex.diag.message_primary}')
    print(
        f'applied {len(applied)} migration(s): {", ".join(applied) or "none pending"}'
    )
    if args.app_role:
        print(
            f'{args.app_role} may read and write the rows of the tables, nothing more'
        )


def migration_status(url):
    """One line per migration, applied (with when) or pending; reads only, takes no
    lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        recorded = db.recorded_migrations(conn)
    states = db.migration_states(recorded)
    for version, applied_at, state in states:
        print(
            f'{state:<12} {db.utc_time(applied_at) if applied_at else "":<23} {version}'
        )
    reason = db.refusal(recorded, states)
    if reason:
        sys.exit(f'manage.py migrate: {reason}')


def cmd_schema_dump(args):
    """Write sql/schema.sql from a throwaway cluster migrated from nothing."""
    text = schema_dump.regenerate()
    print(
        f'schema-dump: wrote {schema_dump.SCHEMA_FILE.relative_to(db.ROOT)} '
        f'({text.count(chr(10))} lines)'
    )


def cmd_create_user(config, args):
    fields = {
        'email': args.email,
        'name': args.name,
        'password': args.password,
        'confirmed': args.confirmed,
    }
    if args.account_id is not None:
        fields.update(account_id=args.account_id, role=args.role)
    try:
        load_validators()['user_create'].check(fields)
    except errors.Unprocessable as ex:
        sys.exit(f'create-user: {ex.body["message"]}')
    queries = db.load_queries()
    hashed = passwords.hash_password(args.password, config.bcrypt_rounds)
    with db.connect(config, row_factory=dict_row) as conn:
        try:
            user_id = users.create_user(
                conn,
                queries,
                name=args.name.strip(),
                email=addresses.normalise(args.email),
                encrypted_password=hashed,
                confirmed=args.confirmed,
            )
        except users.EmailTaken:
            sys.exit(
                'create-user: Email has already been taken '
                f'({addresses.normalise(args.email)})'
            )
        if args.account_id is not None:
            try:
                conn.execute(
                    queries['memberships.insert'],
                    {
                        'account_id': args.account_id,
                        'user_id': user_id,
                        'role': args.role,
                        'stamp_active': False,
                    },
                )
            except psycopg.errors.ForeignKeyViolation:
                sys.exit(f'create-user: no account with id {args.account_id}')
        doc = userdoc.read(conn, queries, config, user_id)
    sys.stdout.write(
        orjson.dumps(orjson.loads(doc), option=orjson.OPT_INDENT_2).decode() + '\n'
    )


def cmd_touch_cache_key(config, args):
    queries = db.load_queries()
    with db.connect(config, row_factory=dict_row, autocommit=True) as conn:
        row = conn.execute(
            queries['accounts.touch_cache_key'],
            {'account_id': args.account_id, 'key': args.key},
        ).fetchone()
    if row is None:
        sys.exit(f'touch-cache-key: no account with id {args.account_id}')
    print(row['doc'])


def cmd_disable_mfa(config, args):
    """The way back for a user who lost both the authenticator and the recovery
    codes."""
    queries = db.load_queries()
    email = addresses.normalise(args.email)
    with psycopg.connect(
        config.database_url, row_factory=dict_row, autocommit=True
    ) as conn:
        with conn.transaction():
            user = conn.execute(
                queries['confirmations.user_by_email'], {'email': email}
            ).fetchone()
            if user is None:
                sys.exit(f'disable-mfa: no user with e-mail {email}')
            disabled = mfa.disable_by_operator(conn, queries, config, user['id'])
    print(
        orjson.dumps(
            {'email': email, 'mfa_enabled': False, 'was_enabled': disabled}
        ).decode()
    )


def cmd_deliver_mail(config, args):
    logs.configure(config.log_format)
    stop = threading.Event()
    # The message being sent is finished and committed before the worker exits.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    outcomes = outbox.run(config, db.load_queries(), once=args.once, stop=stop)
    print(
        f'deliver-mail: {outcomes["sent"]} sent, {outcomes["pending"]} to retry, '
        f'{outcomes["failed"]} failed'
    )


def cmd_purge_accounts(config, args):
    """Delete every account whose scheduled deletion date has passed (SPEC 20); the
    mail worker does the same every hour."""
    logs.configure(config.log_format)
    with db.connect(config, autocommit=True, row_factory=dict_row) as conn:
        try:
            purged = deletion.purge_due(config, db.load_queries(), conn)
        except psycopg.Error as ex:
            if conn.broken:
                raise  # main(): the database cannot be reached
            # What was purged before stays purged: each account is its own transaction.
            sys.exit(
                'purge-accounts: the database refused the purge; the accounts purged '
                'before it stay purged, run it again: '
                f'{ex.diag.message_primary or type(ex).__name__}'
            )
    print(
        f'purge-accounts: {purged["accounts"]} account(s) purged, '
        f'{purged["people"]} person(s) erased'
    )
    if purged['failed']:
        sys.exit(
            f'purge-accounts: the database refused the purge of {purged["failed"]} '
            'account(s), left whole (the log says which and why); run it again'
        )


def cmd_prune(config, args):
    """Delete audit events older than AUDIT_RETENTION_DAYS.

    Only the migration role may (prune_audit_events, migration 0019): run this with its
    connection, MIGRATE_DATABASE_URL when set (the one migrations use), else
    DATABASE_URL.
    """
    url = config.migrate_database_url or config.database_url
    with psycopg.connect(
        url, row_factory=dict_row, autocommit=True, **db.session_options(config)
    ) as conn:
        try:
            deleted = conn.execute(
                db.load_queries()['audit.prune'],
                {'retention_days': config.audit_retention_days},
            ).fetchone()['deleted']
        except psycopg.errors.InsufficientPrivilege:
            sys.exit(
                'prune: this role may not delete audit events; run it as the owner of '
                'audit_events (the role migrations run as, MIGRATE_DATABASE_URL)'
            )
    print(
        f'prune: {deleted} audit event(s) older than '
        f'{config.audit_retention_days} days deleted'
    )


def cmd_mailbox(args):
    """The latest messages MAIL_DELIVERY=file wrote, newest first, with their links."""
    directory = pathlib.Path(config_module.mail_dir(os.environ))
    shown = 0
    for path in sorted(directory.glob('*.eml'), reverse=True):
        if shown == args.limit:
            break
        with open(path, 'rb') as source:
            message = email.message_from_binary_file(
                source, policy=email.policy.default
            )
        if args.to and message['To'].addresses[0].addr_spec.lower() != args.to.lower():
            continue
        shown += 1
        print(
            f'{message["Date"]}  to {message["To"]}  {message["Subject"]}  '
            f'({path.name})'
        )
        for link in outbox.links(message):
            print(f'    {link}')
    if not shown:
        print(
            f'no messages{" to " + args.to if args.to else ""} in {directory} '
            '(scripts/run without SMTP_HOST writes them there)'
        )


def parser():
    top = argparse.ArgumentParser(prog='manage.py', description=__doc__)
    commands = top.add_subparsers(dest='command', required=True)

    migrate = commands.add_parser(
        'migrate',
        help='apply pending migrations (idempotent); refuses when an applied '
        "migration's file changed or is missing",
    )
    migrate.add_argument(
        '--status',
        action='store_true',
        help='list applied (with the time) and pending migrations; change nothing',
    )
    migrate.add_argument(
        '--app-role',
        metavar='ROLE',
        help="then give ROLE, the service's own (DATABASE_URL's), the rows of the "
        'tables and nothing more (docs/operations.md, "Database roles")',
    )
    migrate.set_defaults(run=cmd_migrate)

    dump = commands.add_parser(
        'schema-dump',
        help='regenerate sql/schema.sql: a throwaway cluster, migrated, '
        "dumped with the machine's pg_dump",
    )
    # Its own cluster: works without a database.
    dump.set_defaults(run=cmd_schema_dump, offline=True)

    create = commands.add_parser(
        'create-user', help='create a user and print it as JSON'
    )
    create.add_argument('--email', required=True)
    create.add_argument('--name', required=True)
    create.add_argument('--password', required=True)
    create.add_argument('--account-id', type=int)
    create.add_argument('--role', choices=('agent', 'administrator'), default='agent')
    create.add_argument('--confirmed', action='store_true')
    create.set_defaults(run=cmd_create_user)

    touch = commands.add_parser(
        'touch-cache-key', help="set an account's cache key to now"
    )
    touch.add_argument('--account-id', type=int, required=True)
    touch.add_argument('key', choices=('label', 'inbox', 'team'))
    touch.set_defaults(run=cmd_touch_cache_key)

    off = commands.add_parser(
        'disable-mfa',
        help="turn a user's MFA off (after checking who asks, out of band); "
        'ends every session and replaces the access token',
    )
    off.add_argument('--email', required=True)
    off.set_defaults(run=cmd_disable_mfa)

    deliver = commands.add_parser(
        'deliver-mail', help='send queued e-mail over SMTP until stopped'
    )
    deliver.add_argument(
        '--once', action='store_true', help='send what is due, then exit'
    )
    deliver.set_defaults(run=cmd_deliver_mail)

    commands.add_parser(
        'purge-accounts',
        help='delete the accounts whose scheduled deletion date has passed, and erase '
        'the members they leave with no account (the mail worker does it hourly)',
    ).set_defaults(run=cmd_purge_accounts)

    commands.add_parser(
        'prune',
        help='delete audit events older than AUDIT_RETENTION_DAYS (run as the owner)',
    ).set_defaults(run=cmd_prune)

    mailbox = commands.add_parser(
        'mailbox', help='list the latest development mails (MAIL_DIR) with their links'
    )
    mailbox.add_argument('--limit', type=int, default=10, help='how many (default 10)')
    mailbox.add_argument('--to', help='only messages to this address')
    # Reads files only: works without a database.
    mailbox.set_defaults(run=cmd_mailbox, offline=True)
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    if getattr(args, 'offline', False):
        return args.run(args)
    config = config_module.load_or_exit()
    try:
        args.run(config, args)
    except psycopg.OperationalError as ex:
        # One line an operator can act on, not a traceback.
        reason = (
            ' '.join(line.strip() for line in str(ex).splitlines() if line.strip())
            or type(ex).__name__
        )
        sys.exit(f'manage.py {args.command}: cannot reach the database: {reason}')


if __name__ == '__main__':
    main()
