-- name: lock_accounts
-- DELETE /api/v1/profile (SPEC 20): the accounts of the caller's memberships, locked in id
-- order before the memberships and the user row (the order of services/memberships.py), so
-- that two administrators of one account erasing themselves at once queue here and the
-- second sees the first one gone (blocking_accounts). NO KEY UPDATE, as
-- memberships.lock_account: a suspension takes the same lock first.
SELECT a.id
  FROM accounts a
 WHERE a.id IN (SELECT account_id FROM account_users WHERE user_id = %(user_id)s)
 ORDER BY a.id
   FOR NO KEY UPDATE;

-- name: lock_memberships
-- The caller's memberships, after their accounts and before the user row.
SELECT id
  FROM account_users
 WHERE user_id = %(user_id)s
 ORDER BY account_id
   FOR UPDATE;

-- name: blocking_accounts
-- The accounts whose last active administrator the caller is while others belong to them
-- (the 422 of SPEC 20). A statement of its own after the locks above: it sees every
-- erasure, suspension or role change that committed while they waited.
SELECT au.account_id
  FROM account_users au
 WHERE au.user_id = %(user_id)s
   AND au.role = 'administrator'
   AND au.status = 'active'
   AND NOT EXISTS (SELECT 1
                     FROM account_users o
                    WHERE o.account_id = au.account_id
                      AND o.user_id <> au.user_id
                      AND o.role = 'administrator'
                      AND o.status = 'active')
   AND EXISTS (SELECT 1
                 FROM account_users o
                WHERE o.account_id = au.account_id
                  AND o.user_id <> au.user_id)
 ORDER BY au.account_id;

-- name: end_memberships
-- Every membership of the caller ends; each account it was in, and whether it is now
-- without a member.
DELETE FROM account_users au
 WHERE au.user_id = %(user_id)s
RETURNING au.account_id,
          NOT EXISTS (SELECT 1
                        FROM account_users o
                       WHERE o.account_id = au.account_id
                         AND o.user_id <> au.user_id) AS emptied;
