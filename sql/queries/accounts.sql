-- name: insert
INSERT INTO accounts (name, locale)
VALUES (%(name)s, %(locale)s)
RETURNING id;

-- name: document
-- Run through db.Lookup into resources/accounts.py's DocumentRow (GET
-- /api/v1/accounts/{id}, a hot endpoint): $1 is the account id.
SELECT account_json(a)::text AS doc
  FROM accounts a
 WHERE a.id = $1;

-- name: update
-- Only the keys present in the patch change. timezone, industry and company_size live in
-- custom_attributes beside keys set elsewhere, which are kept; onboarding moves on from
-- account_update to invite_team and is otherwise left alone. auto_resolve_duration goes
-- through numeric: JSON Schema counts 30.0 as an integer, and '30.0'::integer is an error.
WITH patch AS (
    SELECT %(patch)s::jsonb AS p
), extra AS (
    SELECT COALESCE(jsonb_object_agg(key, value), '{}'::jsonb) AS attrs
      FROM patch, jsonb_each(p)
     WHERE key IN ('timezone', 'industry', 'company_size')
)
UPDATE accounts a
   SET name = CASE WHEN p ? 'name' THEN p->>'name' ELSE a.name END,
       locale = CASE WHEN p ? 'locale' THEN p->>'locale' ELSE a.locale END,
       domain = CASE WHEN p ? 'domain' THEN p->>'domain' ELSE a.domain END,
       support_email = CASE WHEN p ? 'support_email' THEN p->>'support_email' ELSE a.support_email END,
       auto_resolve_duration = CASE WHEN p ? 'auto_resolve_duration'
                                    THEN (p->>'auto_resolve_duration')::numeric::integer
                                    ELSE a.auto_resolve_duration END,
       enforce_mfa = CASE WHEN p ? 'enforce_mfa' THEN (p->>'enforce_mfa')::boolean ELSE a.enforce_mfa END,
       restrict_legacy_access_token = CASE WHEN p ? 'restrict_legacy_access_token'
                                           THEN (p->>'restrict_legacy_access_token')::boolean
                                           ELSE a.restrict_legacy_access_token END,
       custom_attributes = CASE WHEN a.custom_attributes->>'onboarding_step' = 'account_update'
                                THEN jsonb_set(a.custom_attributes || extra.attrs, '{onboarding_step}', '"invite_team"')
                                ELSE a.custom_attributes || extra.attrs END,
       updated_at = now()
  FROM patch, extra
 WHERE a.id = %(account_id)s
RETURNING account_json(a)::text AS doc;

-- name: cache_keys
SELECT json_build_object('cache_keys', json_build_object(
           'label', label_cache_key, 'inbox', inbox_cache_key, 'team', team_cache_key))::text AS doc
  FROM accounts
 WHERE id = %(account_id)s;

-- name: touch_cache_key
UPDATE accounts
   SET label_cache_key = CASE WHEN %(key)s = 'label' THEN extract(epoch FROM now())::bigint::text ELSE label_cache_key END,
       inbox_cache_key = CASE WHEN %(key)s = 'inbox' THEN extract(epoch FROM now())::bigint::text ELSE inbox_cache_key END,
       team_cache_key = CASE WHEN %(key)s = 'team' THEN extract(epoch FROM now())::bigint::text ELSE team_cache_key END,
       updated_at = now()
 WHERE id = %(account_id)s
RETURNING json_build_object('label', label_cache_key, 'inbox', inbox_cache_key, 'team', team_cache_key)::text AS doc;

-- name: schedule_deletion
-- SPEC 20: the account goes at deletion_due_at, now plus the grace days, cut to the second
-- so that the columns the purge reads and the custom_attributes keys the reference
-- dashboard shows (marked_for_deletion_at as Ruby's Time#iso8601 writes it) name the same
-- instant. An account already scheduled keeps its date and requester: no row.
WITH due AS (
    SELECT date_trunc('second', now() + make_interval(days => %(grace_days)s)) AS at
)
UPDATE accounts a
   SET deletion_due_at = due.at,
       deletion_requested_at = now(),
       deletion_requested_by = %(requested_by)s,
       custom_attributes = a.custom_attributes || jsonb_build_object(
           'marked_for_deletion_at', to_char(due.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           'marked_for_deletion_reason', %(reason)s::text),
       updated_at = now()
  FROM due
 WHERE a.id = %(account_id)s
   AND a.deletion_due_at IS NULL
RETURNING a.custom_attributes->>'marked_for_deletion_at' AS deletion_due_at;

-- name: cancel_deletion
-- The schedule's three columns and both keys go together. Keys without the columns (a
-- copy of another system's data) go too: the dashboard would show them as a schedule.
-- Answers the date that was set; nothing scheduled: no row. The account row is already
-- locked (memberships.hold_as_administrator), so what old reads is what is updated.
WITH old AS (
    SELECT id, custom_attributes->>'marked_for_deletion_at' AS deletion_due_at
      FROM accounts
     WHERE id = %(account_id)s
       AND (deletion_due_at IS NOT NULL
            OR custom_attributes ?| ARRAY['marked_for_deletion_at', 'marked_for_deletion_reason'])
)
UPDATE accounts a
   SET deletion_due_at = NULL,
       deletion_requested_at = NULL,
       deletion_requested_by = NULL,
       custom_attributes = a.custom_attributes - 'marked_for_deletion_at'
                                               - 'marked_for_deletion_reason',
       updated_at = now()
  FROM old
 WHERE a.id = old.id
RETURNING old.deletion_due_at;
