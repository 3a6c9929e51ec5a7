-- name: insert
INSERT INTO account_users (account_id, user_id, role, active_at)
VALUES (%(account_id)s, %(user_id)s, %(role)s, CASE WHEN %(stamp_active)s THEN now() END)
RETURNING id;

-- name: stamp_active
-- A suspended membership is not stamped (SPEC 18: never the user's current account); the
-- access rules refuse it first, this holds when a suspension commits in between (no row:
-- own_status tells the 403 of a suspension from a membership that is gone).
-- Locks the membership row, then (its trigger, migration 0014) the user row: the lock order
-- of services/memberships.py.
UPDATE account_users
   SET active_at = now(), updated_at = now()
 WHERE user_id = %(user_id)s
   AND account_id = %(account_id)s
   AND status = 'active'
RETURNING id;

-- name: own_status
-- Asked only when the member's own write of their membership (stamp_active,
-- profile.set_availability, profile.set_auto_offline) found no active row, in a statement of
-- its own after that UPDATE: it sees the suspension that committed while the UPDATE waited
-- for the membership row. 'suspended': the 403 of SPEC 18; no row: not a member (404).
SELECT status
  FROM account_users
 WHERE account_id = %(account_id)s
   AND user_id = %(user_id)s;

-- name: lock_account
-- Serialises the suspensions and reactivations of one account's members (SPEC 18), so that
-- two administrators suspending each other cannot both pass the last-administrator check,
-- and the other administrator actions with them (memberships.hold_as_administrator).
-- NO KEY UPDATE: new memberships (which only share-lock the key) are not held up.
SELECT id
  FROM accounts
 WHERE id = %(account_id)s
   FOR NO KEY UPDATE;

-- name: lock_membership
-- The membership a suspension or reactivation changes, locked after the account row and
-- before the member's user row (services/memberships.py). The member's own writes of it
-- (stamp_active, profile.set_availability, profile.set_auto_offline) take it first and the
-- user row second, in the trigger that keeps users.doc (migration 0014): taking the user row
-- first here would let each hold a row the other waits for, a deadlock PostgreSQL ends by
-- failing one of them. In this order they queue on the membership row. No row: not a member
-- (member_for_change answers that).
SELECT id
  FROM account_users
 WHERE account_id = %(account_id)s
   AND user_id = %(user_id)s
   FOR NO KEY UPDATE;

-- name: still_administrator
-- Whether the user is still an active administrator of the account: asked by an
-- administrator's action after lock_account, in a statement of its own, so it sees a
-- suspension that committed while the lock waited (suspensions take that row first).
SELECT EXISTS (SELECT 1
                 FROM account_users
                WHERE account_id = %(account_id)s
                  AND user_id = %(user_id)s
                  AND role = 'administrator'
                  AND status = 'active') AS administrator;

-- name: member_for_change
-- The member, with the account, the membership and the member's user row locked by earlier
-- statements of this transaction (so this one sees every change that committed while it
-- waited), and how many active administrators the account has besides the member. No
-- row: not a member.
SELECT au.role, au.status, u.name, u.email, a.name AS account_name,
       (SELECT count(*)
          FROM account_users o
         WHERE o.account_id = au.account_id
           AND o.user_id <> au.user_id
           AND o.role = 'administrator'
           AND o.status = 'active') AS other_administrators
  FROM account_users au
  JOIN users u ON u.id = au.user_id
  JOIN accounts a ON a.id = au.account_id
 WHERE au.account_id = %(account_id)s
   AND au.user_id = %(user_id)s;

-- name: set_status
-- No row: the membership already had that status (nothing changes, nothing is announced).
UPDATE account_users
   SET status = %(status)s,
       updated_at = now()
 WHERE account_id = %(account_id)s
   AND user_id = %(user_id)s
   AND status <> %(status)s
RETURNING id;

-- name: agent
-- One member as the agents list shows it (agent_json, migration 0016).
SELECT agent_json(au, u, %(avatar_url_prefix)s)::text AS doc
  FROM account_users au
  JOIN users u ON u.id = au.user_id
 WHERE au.account_id = %(account_id)s
   AND au.user_id = %(user_id)s;

-- name: agents
-- Every member of the account, by name as the reference system orders them (SPEC 18).
SELECT COALESCE(json_agg(agent_json(au, u, %(avatar_url_prefix)s) ORDER BY lower(u.name), u.id),
                '[]')::text AS doc
  FROM account_users au
  JOIN users u ON u.id = au.user_id
 WHERE au.account_id = %(account_id)s;

-- name: administrators_to_tell
-- Who hears of a security change to an account (single sign-on's settings, a
-- break-glass sign-in): every active administrator, with the account's name.
SELECT u.id, u.email, u.name, a.name AS account_name
  FROM account_users au
  JOIN users u ON u.id = au.user_id
  JOIN accounts a ON a.id = au.account_id
 WHERE au.account_id = %(account_id)s
   AND au.role = 'administrator'
   AND au.status = 'active'
 ORDER BY u.id;
