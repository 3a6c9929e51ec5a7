-- name: take
-- Count one password or second-factor check against the user's budget (SPEC 3.4) before it
-- is made: one statement, so concurrent checks queue on the counter's row and no more
-- than the budget can ever be made in a window, whatever the interleaving. buckets: the
-- budget of wrong checks first (a check that passes gives its count back, give_back), then,
-- for a budget with a cap on every check (the password's), the bucket of all checks. Same
-- fixed windows and table as rate_limits.hit; the rows are locked in the order given.
WITH window_of AS (
    SELECT to_timestamp(floor(extract(epoch FROM now()) / %(period)s) * %(period)s) AS window_start
), counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    SELECT b.bucket, window_start, 1, window_start + make_interval(secs => %(period)s)
      FROM window_of, unnest(%(buckets)s::text[]) WITH ORDINALITY AS b(bucket, n)
     ORDER BY b.n
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.bucket, c.hits, c.expires_at
)
SELECT max(hits) FILTER (WHERE bucket = (%(buckets)s::text[])[1]) AS hits,
       max(hits) FILTER (WHERE bucket = (%(buckets)s::text[])[2]) AS checks,
       ceil(extract(epoch FROM max(expires_at) - now()))::integer AS retry_after
  FROM counted;

-- name: give_back
-- A check that passed does not spend the budget of wrong ones; one never made (a refusal
-- before it) spends neither that nor the cap on all checks: buckets names those given back.
-- A count of 1 goes with its row (hits > 0 is the table's rule); either half finds the row,
-- never both.
WITH this AS (
    SELECT b.bucket,
           to_timestamp(floor(extract(epoch FROM now()) / %(period)s) * %(period)s) AS window_start
      FROM unnest(%(buckets)s::text[]) AS b(bucket)
), dropped AS (
    DELETE FROM rate_limit_counters c
     USING this
     WHERE c.bucket = this.bucket AND c.window_start = this.window_start AND c.hits = 1
    RETURNING 0 AS hits
)
UPDATE rate_limit_counters c
   SET hits = c.hits - 1
  FROM this
 WHERE c.bucket = this.bucket AND c.window_start = this.window_start AND c.hits > 1
RETURNING c.hits;

-- name: sign_in
-- The user of a sign-in address, and the password check about to be made counted in the
-- same statement (as take, buckets password| and password_checks|): against the user's
-- budget and cap, or, for an address nobody has, against ones of its own, so that known
-- and unknown addresses cost the same and are refused alike. sso_enforced: the address's
-- domain belongs to a provider that enforces single sign-on (SPEC 19; one primary-key
-- probe of sso_domains, so a domain with no provider costs no more).
WITH found AS (
    SELECT id, name, email, encrypted_password, confirmed_at
      FROM users
     WHERE email = %(email)s
), window_of AS (
    SELECT to_timestamp(floor(extract(epoch FROM now()) / %(period)s) * %(period)s) AS window_start
), counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    SELECT k.kind || coalesce('|user=' || (SELECT id FROM found), '|email=' || %(email)s),
           window_start, 1, window_start + make_interval(secs => %(period)s)
      FROM window_of, unnest(ARRAY['password', 'password_checks']) WITH ORDINALITY AS k(kind, n)
     ORDER BY k.n
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.bucket, c.hits, c.expires_at
), total AS (
    SELECT max(hits) FILTER (WHERE starts_with(bucket, 'password|')) AS hits,
           max(hits) FILTER (WHERE starts_with(bucket, 'password_checks|')) AS checks,
           ceil(extract(epoch FROM max(expires_at) - now()))::integer AS retry_after
      FROM counted
)
SELECT f.id, f.name, f.email, f.encrypted_password, f.confirmed_at,
       total.hits, total.checks, total.retry_after,
       EXISTS (SELECT 1
                 FROM sso_domains d
                 JOIN sso_providers p USING (account_id)
                WHERE d.domain = %(domain)s
                  AND p.enforce) AS sso_enforced
  FROM total
  LEFT JOIN found f ON true;
