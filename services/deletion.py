"""Deleting accounts and people (SPEC 20): the one eraser of a person, and the purge of
accounts whose scheduled deletion date has passed.

``erase_user`` removes a person and everything that names them, inside the caller's
transaction; their avatar file goes after the commit (``remove_files``), so a rolled
back erasure never loses it. ``purge_account`` deletes one account, leaving its
compliance row, and erases every member it leaves with no account. ``purge_due`` runs
the purge of every due account, one transaction each, for ``manage.py purge-accounts``
and the mail worker's hourly run.
"""

import collections
import dataclasses
import logging

import psycopg

from services import avatars
from services import mail

# A purge that PostgreSQL chose as a deadlock's victim (it met another purge, or an
# erasure, at rows both needed) is run again, this many times in a row at most.
DEADLOCK_RETRIES = 3
log = logging.getLogger('frontdesk')


@dataclasses.dataclass(frozen=True)
class Erased:
    """What an erasure leaves to do after its commit: the avatar files to delete."""

    user_id: int
    avatars: tuple = ()


def erase_user(conn, queries, config, user_id):
    """Erase ``user_id``: their row (and by cascade their sessions, tokens, links, MFA
    secrets, address-change requests, memberships and their mail, mail_outbox.user_id),
    the mail of nobody's account sent to their addresses (rows older than that column)
    and anyone's mail naming one as a whole address, the rate-limit counters that name
    them, the sign-in flows of their addresses, who-asked on scheduled deletions, and
    their audit trail (the rows about them; on the rows of what they did to others, who
    did it and from where).

    Mail queued for them after this, such as a farewell to their address once they are
    gone, must be written with user_id NULL: the users row's cascade would delete it
    with them, before it is sent.

    Inside the caller's transaction. Returns an Erased for ``remove_files`` after the
    commit; None when there is no such user (already erased).
    """
    if (
        conn.execute(queries['deletion.lock_user'], {'user_id': user_id}).fetchone()
        is None
    ):
        return None
    person = conn.execute(
        queries['deletion.erase_user'], {'user_id': user_id}
    ).fetchone()
    conn.execute(
        queries['deletion.erase_user_trail'],
        {'user_id': user_id, 'addresses': person['addresses']},
    )
    return Erased(user_id, (person['avatar'],) if person['avatar'] else ())


def remove_files(config, erased):
    """After the commit: delete the avatar files of ``erased`` (an Erased, or a list
    of them); a file already gone is fine."""
    for one in [erased] if isinstance(erased, Erased) else erased:
        for name in one.avatars if one is not None else ():
            avatars.remove(config.avatar_dir, name)


def purge_account(conn, queries, config, account_id):
    """Delete a scheduled account, inside the caller's transaction: its memberships,
    the personal-access-token grants to it, its settings and single sign-on provider,
    its audit rows; write its compliance row; erase every member left with no account
    (a member of another account keeps everything but this membership).

    Returns the list of Erased (empty, and nothing done, when the account is gone or
    not scheduled).
    """
    account = conn.execute(
        queries['deletion.lock_account'], {'account_id': account_id}
    ).fetchone()
    if account is None or account['deletion_due_at'] is None:
        return []
    members = [
        row['id']
        for row in conn.execute(
            queries['deletion.lock_members'], {'account_id': account_id}
        ).fetchall()
    ]
    conn.execute(queries['deletion.delete_account'], {'account_id': account_id})
    conn.execute(queries['deletion.erase_account_trail'], {'account_id': account_id})
    left = conn.execute(
        queries['deletion.former_members'], {'user_ids': members}
    ).fetchall()
    erased = [erase_user(conn, queries, config, row['id']) for row in left]
    return [one for one in erased if one is not None]


def purge_due(config, queries, conn, stop=None):
    """Purge every account whose deletion date has passed, one transaction each
    (``conn``: an autocommit connection), until none is due or ``stop`` is set.

    Each transaction takes one due account that no other purge holds (SKIP LOCKED),
    purges it, queues the mail to INSTANCE_ADMIN_EMAIL, and commits; the avatar files
    of the people it erased go after the commit. Counts ``accounts`` and ``people``,
    and ``failed``: accounts the database refused to purge. Such an account stays
    whole (its transaction rolled back) and is left out for the rest of this run, so
    one account that cannot go (a row a later table holds on to, say) never holds back
    the others; the next run tries it again. An error outside one account's purge (the
    claim itself, a lost connection) is raised.
    """
    purged = collections.Counter(accounts=0, people=0, failed=0)
    refused = []
    deadlocks = 0
    while stop is None or not stop.is_set():
        claimed = None
        try:
            with conn.transaction():
                claimed = conn.execute(
                    queries['deletion.claim_due'], {'refused': refused}
                ).fetchone()
                if claimed is None:
                    break
                erased = purge_account(conn, queries, config, claimed['id'])
                _tell_instance_admin(conn, queries, config, claimed, len(erased))
        except psycopg.errors.DeadlockDetected:
            deadlocks += 1
            if deadlocks > DEADLOCK_RETRIES:
                raise
            log.warning('account purge met a deadlock; running it again')
            continue
        except psycopg.Error as ex:
            if claimed is None or conn.broken:
                raise
            refused.append(claimed['id'])
            purged['failed'] += 1
            log.error(
                'account %s not purged, left whole for the next run (%s: %s)',
                claimed['id'],
                type(ex).__name__,
                ex.diag.message_primary or ex,
            )
            continue
        deadlocks = 0
        remove_files(config, erased)
        purged['accounts'] += 1
        purged['people'] += len(erased)
        log.info('account %s purged, %s person(s) erased', claimed['id'], len(erased))
    return purged


def _tell_instance_admin(conn, queries, config, claimed, people):
    """The account's id and when it went (its transaction's time, the compliance
    row's deleted_at); no name, no address. Nobody's account's mail: user_id NULL
    (mail.account_purged_notice)."""
    if config.instance_admin_email is None:
        return
    conn.execute(
        queries['mail.enqueue'],
        mail.account_purged_notice(
            config.instance_admin_email, claimed['id'], claimed['now'], people
        ),
    )
