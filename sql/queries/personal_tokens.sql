-- name: create
-- SPEC 17. Called with the user row locked (users.lock_for_token), so that two requests
-- cannot both take the last of the max_live places. The user's expired tokens go first.
-- Nothing is inserted for an unconfirmed user (an address nobody has proven is nobody's
-- yet, SPEC 3.4), nor when the user already has max_live live tokens (too_many) or names
-- an account they are not an active member of (not_member: a suspended member is refused
-- as a stranger, SPEC 18); doc is then null.
WITH pruned AS (
    DELETE FROM personal_access_tokens
     WHERE user_id = %(user_id)s
       AND expires_at <= now()
), unconfirmed AS (
    SELECT confirmed_at IS NULL AS yes
      FROM users
     WHERE id = %(user_id)s
), live AS (
    SELECT count(*) AS n
      FROM personal_access_tokens
     WHERE user_id = %(user_id)s
       AND expires_at > now()
), strangers AS (
    SELECT count(*) AS n
      FROM unnest(%(account_ids)s::bigint[]) AS named(account_id)
     WHERE NOT EXISTS (SELECT 1
                         FROM account_users au
                        WHERE au.user_id = %(user_id)s
                          AND au.account_id = named.account_id
                          AND au.status = 'active')
), inserted AS (
    INSERT INTO personal_access_tokens (user_id, name, token_digest, scopes, account_ids, expires_at)
    SELECT %(user_id)s, %(name)s, %(token_digest)s, %(scopes)s::text[], %(account_ids)s::bigint[],
           now() + make_interval(days => %(expires_in_days)s)
     WHERE NOT (SELECT yes FROM unconfirmed)
       AND (SELECT n FROM live) < %(max_live)s
       AND (SELECT n FROM strangers) = 0
    RETURNING id, personal_access_token_json(personal_access_tokens)::text AS doc
)
SELECT (SELECT yes FROM unconfirmed) AS unconfirmed,
       (SELECT n FROM live) >= %(max_live)s AS too_many,
       (SELECT n FROM strangers) > 0 AS not_member,
       (SELECT id FROM inserted) AS id,
       (SELECT doc FROM inserted) AS doc;

-- name: list_for_user
-- The caller's live tokens, newest first (SPEC 17: no secrets).
SELECT COALESCE(json_agg(personal_access_token_json(p) ORDER BY p.id DESC), '[]')::text AS doc
  FROM personal_access_tokens p
 WHERE p.user_id = %(user_id)s
   AND p.expires_at > now();

-- name: revoke
-- One token of the user; no row: none of theirs has that id.
DELETE FROM personal_access_tokens
 WHERE id = %(token_id)s
   AND user_id = %(user_id)s
RETURNING id, name;

-- name: list_for_account
-- The live tokens of the account's members that can reach it, for its administrators. Of
-- account_ids they see only whether the token is restricted (then to this account among
-- others) or not: the member's other accounts are not theirs to know. A suspended
-- member's tokens reach it no more (SPEC 17, 18), so they are not listed until the
-- reactivation; revoke_for_account still takes them, so that a token does not come back
-- with it.
SELECT COALESCE(json_agg(personal_access_token_json(p)::jsonb
                         || jsonb_build_object(
                                'user_id', p.user_id,
                                'account_ids', CASE WHEN p.account_ids IS NOT NULL
                                                    THEN jsonb_build_array(au.account_id) END)
                         ORDER BY p.id DESC), '[]')::text AS doc
  FROM account_users au
  JOIN personal_access_tokens p ON p.user_id = au.user_id
 WHERE au.account_id = %(account_id)s
   AND au.status = 'active'
   AND p.expires_at > now()
   AND (p.account_ids IS NULL OR au.account_id = ANY (p.account_ids));

-- name: revoke_for_account
-- An administrator revokes a member's token that can reach their account; no row: there
-- is no such token.
DELETE FROM personal_access_tokens p
 USING account_users au, users u
 WHERE p.id = %(token_id)s
   AND au.account_id = %(account_id)s
   AND au.user_id = p.user_id
   AND (p.account_ids IS NULL OR au.account_id = ANY (p.account_ids))
   AND u.id = p.user_id
RETURNING p.id, p.name, p.user_id, u.email, u.name AS user_name;
