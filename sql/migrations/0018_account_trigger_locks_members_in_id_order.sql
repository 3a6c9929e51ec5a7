-- A change of an account's name, status, locale, enforce_mfa or restrict_legacy_access_token
-- rewrites the stored document of every member (accounts_refresh_docs, migration 0014), so it
-- locks their user rows, in whatever order the plan meets them: with a users table of any
-- size, the order of the account's membership rows on disk. Two such changes of two accounts
-- that share two members could lock them in opposite orders, each hold a row the other waits
-- for, and PostgreSQL ended one as a deadlock (a 503 to its administrator,
-- tests/test_accounts.py::test_two_account_updates_sharing_members_both_succeed). Now the
-- members' rows are locked in id order first, so the second change waits for the first.
--
-- FOR NO KEY UPDATE: the lock the UPDATE takes anyway (doc is no key), so a new session or
-- token of a member (a foreign key, FOR KEY SHARE) is not held up by it. The account row is
-- locked by the UPDATE that fired the trigger, and a new membership share-locks it first
-- (0014), so the set of members does not change between the two statements.
--
-- The membership trigger (account_users_refresh_doc) updates one user row per membership
-- row (two only when a membership's user_id changes, which no statement does); no
-- statement of the service writes the memberships of several users at once.
CREATE OR REPLACE FUNCTION accounts_refresh_docs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM 1
       FROM users
      WHERE id IN (SELECT user_id FROM account_users WHERE account_id = NEW.id)
      ORDER BY id
        FOR NO KEY UPDATE;
    UPDATE users SET doc = NULL
     WHERE id IN (SELECT user_id FROM account_users WHERE account_id = NEW.id);
    RETURN NULL;
END
$$;
