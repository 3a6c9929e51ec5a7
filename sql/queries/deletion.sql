-- name: lock_user
-- The person an erasure takes, locked first: no session, token, membership or link of
-- theirs (each a foreign key, FOR KEY SHARE) can be added while the erasure runs, so what
-- erase_user gathers next is all there is.
SELECT id
  FROM users
 WHERE id = %(user_id)s
   FOR UPDATE;

-- name: erase_user
-- The person's row and every row that names them outside the audit trail (which
-- erase_user_trail clears next, in a statement of its own: it checks the row is gone).
-- Their addresses: the current one, the one awaiting confirmation, those their links
-- were mailed to (an old address's revert link), and those their mail went to (an
-- address they asked to move to, the request since voided), unless that address is now
-- another user's or another user's live revert link reserves it (profile.lock_user's
-- taken address: a change to it leaves the same pending state as to a free one, so
-- asking for an address does not make it yours to erase). The users row cascades to
-- sessions (user_tokens), links (one_time_tokens), recovery codes, personal access
-- tokens, address-change requests, memberships and their mail (mail_outbox.user_id,
-- migration 0022: whatever address it went to, such as the confirmation to an address
-- they asked for and no longer hold). Mail of nobody's account (user_id NULL: written
-- before 0022, or a link asked for an address no account had) goes when it was sent to
-- one of the addresses; mail of anyone's that names one of them (an administrator's
-- notice "By: <address>") goes too. Named means as a whole address, not as a substring:
-- a@b.example is not named by aa@b.example nor by a@b.example.org, and is by
-- "<a@b.example>" or "By: a@b.example." (a dot that ends a sentence). Mail to one of
-- the addresses that is someone else's (user_id another account: the address changed
-- hands) is theirs and stays. Neither index serves a body: this reads the outbox once
-- per erasure, as a rare erasure may. Rate-limit
-- counters when their bucket names the id or an address (buckets are '|'-separated
-- key=value parts: password|user=<id>, mail|to=<address>, ...|email=<address>|<period>,
-- audit ...|subject=<id>); sign-in flows of a provider started for an address; and an
-- account's scheduled deletion no longer names them as who asked for it.
WITH person AS (
    SELECT u.id, u.avatar,
           ARRAY(SELECT DISTINCT lower(a.address)
                   FROM unnest(ARRAY[u.email, u.unconfirmed_email]
                               || ARRAY(SELECT t.email
                                          FROM one_time_tokens t
                                         WHERE t.user_id = u.id)
                               || ARRAY(SELECT m.to_address
                                          FROM mail_outbox m
                                         WHERE m.user_id = u.id)) AS a(address)
                  WHERE a.address IS NOT NULL
                    AND NOT EXISTS (SELECT
                                      FROM users other
                                     WHERE other.email = lower(a.address)
                                       AND other.id <> u.id)
                    AND NOT EXISTS (SELECT
                                      FROM one_time_tokens r
                                     WHERE r.email = lower(a.address)
                                       AND r.purpose = 'email_revert'
                                       AND r.expires_at > now()
                                       AND r.user_id <> u.id)
                  ORDER BY 1) AS addresses
      FROM users u
     WHERE u.id = %(user_id)s
), named AS (
    -- A pattern per address: not preceded by what an address may hold before the @,
    -- not followed by a domain's next character (a dot only when a label follows).
    SELECT ARRAY(SELECT '(^|[^a-z0-9._%%+-])'
                        || regexp_replace(a.address, '([.^$*+?()[\]{}|\\])', '\\\1', 'g')
                        || '(?![a-z0-9-]|\.[a-z0-9-])'
                   FROM unnest(p.addresses) AS a(address)) AS patterns
      FROM person p
), needles AS (
    SELECT ARRAY['|user=' || p.id || '|', '|subject=' || p.id || '|']
           || ARRAY(SELECT '|' || k.key || '=' || a.address || '|'
                      FROM unnest(p.addresses) AS a(address),
                           unnest(ARRAY['email', 'to']) AS k(key)) AS parts
      FROM person p
), mails AS (
    DELETE FROM mail_outbox m
     USING person p, named n
     WHERE (m.user_id IS NULL AND lower(m.to_address) = ANY (p.addresses))
        OR EXISTS (SELECT
                     FROM unnest(n.patterns) AS a(pattern)
                    WHERE concat_ws(' ', m.subject, m.text_body, m.html_body) ~* a.pattern)
), counters AS (
    DELETE FROM rate_limit_counters c
     USING needles n
     WHERE EXISTS (SELECT
                     FROM unnest(n.parts) AS part
                    WHERE strpos(c.bucket || '|', part) > 0)
), flows AS (
    DELETE FROM sso_flows f
     USING person p
     WHERE lower(f.email) = ANY (p.addresses)
), requests AS (
    UPDATE accounts
       SET deletion_requested_by = NULL
     WHERE deletion_requested_by = %(user_id)s
       AND deletion_due_at IS NOT NULL  -- accounts_deletion_due_idx: only scheduled ones
), gone AS (
    DELETE FROM users u
     USING person p
     WHERE u.id = p.id
)
SELECT avatar, addresses
  FROM person;

-- name: erase_user_trail
-- Owner-run (migration 0021): refuses while the users row exists.
SELECT erase_user_trail(%(user_id)s, %(addresses)s::text[]) AS erased;

-- name: lock_account
-- The account a purge deletes (purge_due's claim holds it already); NULL due date: not
-- scheduled, nothing to purge.
SELECT id, deletion_due_at
  FROM accounts
 WHERE id = %(account_id)s
   FOR UPDATE;

-- name: lock_members
-- Before any membership goes: deleting one updates the member's row (its trigger,
-- migration 0014), and an account change locks its members in id order (0018), so the
-- purge takes them in that order too, as a whole, and two purges of accounts that share
-- members wait for each other instead of deadlocking. FOR UPDATE: the purge may delete
-- them. A member erased by a purge that committed while this waited is not returned.
SELECT u.id
  FROM users u
 WHERE u.id IN (SELECT au.user_id FROM account_users au WHERE au.account_id = %(account_id)s)
 ORDER BY u.id
   FOR UPDATE;

-- name: delete_account
-- The account, its memberships (the members' rows are locked: lock_members), the grants
-- of personal access tokens to it (a token limited to it alone is then limited to no
-- account: '{}', never NULL, which would mean every account), the rate-limit counters
-- that name it, and, by cascade, its single sign-on settings (provider, domains, flows,
-- logout tokens) and the sign-in links of its provider. Then the one row that stays
-- (SPEC 20): no name, no address. The reason is the one the schedule wrote into
-- custom_attributes; a schedule with none, or an unknown one, is a manual deletion when
-- someone asked for it, else the last member's erasure.
WITH memberships AS (
    DELETE FROM account_users
     WHERE account_id = %(account_id)s
), grants AS (
    UPDATE personal_access_tokens
       SET account_ids = array_remove(account_ids, %(account_id)s::bigint)
     WHERE %(account_id)s::bigint = ANY (account_ids)
), counters AS (
    DELETE FROM rate_limit_counters
     WHERE strpos(bucket || '|', '|account=' || %(account_id)s::bigint || '|') > 0
), gone AS (
    DELETE FROM accounts
     WHERE id = %(account_id)s
    RETURNING id, deletion_requested_at, deletion_requested_by,
              custom_attributes ->> 'marked_for_deletion_reason' AS reason
)
INSERT INTO account_deletions (account_id, scheduled_at, scheduled_by, reason)
SELECT id, deletion_requested_at, deletion_requested_by,
       CASE
           WHEN reason IN ('manual_deletion', 'last_member_erased') THEN reason
           WHEN deletion_requested_by IS NULL THEN 'last_member_erased'
           ELSE 'manual_deletion'
       END
  FROM gone
RETURNING account_id, deleted_at, scheduled_at, reason;

-- name: erase_account_trail
-- Owner-run (migration 0021): refuses until the account is gone and its row written.
SELECT erase_account_trail(%(account_id)s) AS erased;

-- name: former_members
-- Of the members locked by lock_members, those now in no account: a fresh statement,
-- after the lock, so a membership another purge deleted and committed meanwhile counts,
-- and one it has not committed cannot (its member's row is what it waits for).
SELECT u.id
  FROM users u
 WHERE u.id = ANY (%(user_ids)s::bigint[])
   AND NOT EXISTS (SELECT FROM account_users au WHERE au.user_id = u.id)
 ORDER BY u.id;

-- name: claim_due
-- One account whose date has passed, locked for its purge's transaction; one a purge
-- running at the same time holds is skipped, not waited for (accounts_deletion_due_idx).
-- now: the transaction's time, which the compliance row's deleted_at will be. refused:
-- the accounts this run could not purge, not tried again until the next run.
SELECT id, now() AS now
  FROM accounts
 WHERE deletion_due_at <= now()
   AND id <> ALL (%(refused)s::bigint[])
 ORDER BY deletion_due_at, id
 LIMIT 1
   FOR UPDATE SKIP LOCKED;
