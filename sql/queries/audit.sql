-- name: insert
INSERT INTO audit_events (event, actor_id, subject_id, account_id, ip_address, user_agent, session_id, details)
VALUES (%(event)s, %(actor_id)s, %(subject_id)s, %(account_id)s, %(ip_address)s, %(user_agent)s,
        %(session_id)s, %(details)s)
RETURNING id;

-- name: for_user
-- The caller's own events, newest first, keyset paged on id (audit_events_subject_idx).
-- Another user's action on the caller (an administrator's) names that user as actor and
-- nothing more: their address, device and session are theirs, not the caller's (SPEC 14).
SELECT audit_events_page(ARRAY(SELECT CASE WHEN a.actor_id IS NULL OR a.actor_id = a.subject_id THEN a
                                           ELSE (a.id, a.created_at, a.event, a.actor_id, a.subject_id,
                                                 a.account_id, NULL, NULL, NULL, a.details)::audit_events
                                       END
                                 FROM audit_events a
                                WHERE a.subject_id = %(user_id)s
                                  AND a.id < %(before)s
                                ORDER BY a.id DESC
                                LIMIT %(limit)s + 1), %(limit)s)::text AS doc;

-- name: for_account
-- What an administrator sees (SPEC 14): events about the account, and the sign-in events of
-- its current members; paged as for_user. A null filter filters nothing.
-- Each half is read newest first through its own index (audit_events_account_idx; per
-- member, audit_events_subject_idx) and cut at the page, so a request reads the account's
-- and its members' rows, never the whole log: as one OR the planner walked the primary key
-- backwards through every user's events to fill the page of an account with few (any
-- sign-up could ask for that again and again). UNION drops an event both halves find.
-- Each half orders by its index's own columns (the equality column first, which changes
-- nothing in the order): by id alone, the planner may walk the primary key backwards and
-- filter, betting that a LIMIT is met soon, which it is not for a user with few events
-- among many (it did so in about one run in four of tests/test_audit_bounds.py).
WITH page AS (
    SELECT id
      FROM ((SELECT a.id
               FROM audit_events a
              WHERE a.account_id = %(account_id)s
                AND a.id < %(before)s
                AND (%(event)s::text IS NULL OR a.event = %(event)s::text)
                AND (%(user_id)s::bigint IS NULL OR a.subject_id = %(user_id)s::bigint
                     OR a.actor_id = %(user_id)s::bigint)
                AND (%(since)s::timestamptz IS NULL OR a.created_at >= %(since)s::timestamptz)
                AND (%(until)s::timestamptz IS NULL OR a.created_at < %(until)s::timestamptz)
              ORDER BY a.account_id DESC, a.id DESC
              LIMIT %(limit)s + 1)
            UNION
            (SELECT m.id
               FROM account_users au
               CROSS JOIN LATERAL (
                     SELECT a.id
                       FROM audit_events a
                      WHERE a.subject_id = au.user_id
                        AND a.event = ANY(%(sign_in_events)s)
                        AND a.id < %(before)s
                        AND (%(event)s::text IS NULL OR a.event = %(event)s::text)
                        AND (%(user_id)s::bigint IS NULL OR a.subject_id = %(user_id)s::bigint
                             OR a.actor_id = %(user_id)s::bigint)
                        AND (%(since)s::timestamptz IS NULL OR a.created_at >= %(since)s::timestamptz)
                        AND (%(until)s::timestamptz IS NULL OR a.created_at < %(until)s::timestamptz)
                      ORDER BY a.subject_id DESC, a.id DESC
                      LIMIT %(limit)s + 1) m
              WHERE au.account_id = %(account_id)s)) ids
     ORDER BY id DESC
     LIMIT %(limit)s + 1
)
SELECT audit_events_page(ARRAY(SELECT a
                                 FROM audit_events a
                                 JOIN page USING (id)
                                ORDER BY a.id DESC), %(limit)s)::text AS doc;

-- name: prune
-- manage.py prune, as the migration role: the service's own role may neither DELETE here
-- nor call the function (migration 0019).
SELECT prune_audit_events(%(retention_days)s) AS deleted;

-- name: insert_sign_in_failure
-- A failed sign-in names the user the address belongs to, if any, in the same statement:
-- known and unknown addresses cost the same (an indexed lookup and one insert).
-- Failures for addresses nobody has, and refusals (rate_limited), are counted per client
-- address (address_key: an IPv6 client by its /64, as the rate limits), hour, reason
-- and subject in one rate_limit_counters row (kept 30 days; the table cleans itself),
-- and only the first of each writes its audit row, so unauthenticated traffic cannot
-- grow the log without bound (SPEC 14). So are a known address's bad sso_auth_tokens
-- (sso_token): anyone can post them and no budget bounds them. A known user's wrong
-- passwords each write one: the guessing budget (SPEC 3.4) bounds them.
WITH subject AS (
    SELECT id FROM users WHERE email = %(email)s
), counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    SELECT 'audit sign_in_failed|ip=' || %(address_key)s || '|reason=' || %(reason)s
               || '|subject=' || coalesce((SELECT id FROM subject)::text, 'none'),
           date_trunc('hour', now()), 1, date_trunc('hour', now()) + interval '30 days'
     WHERE %(reason)s IN ('rate_limited', 'sso_token') OR NOT EXISTS (SELECT 1 FROM subject)
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.hits
)
INSERT INTO audit_events (event, subject_id, ip_address, user_agent, details)
SELECT 'sign_in_failed', (SELECT id FROM subject), %(ip_address)s, %(user_agent)s, %(details)s
 WHERE coalesce((SELECT hits FROM counted), 1) = 1
RETURNING id;
