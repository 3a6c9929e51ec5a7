-- name: take
-- Count one password or second-factor check against the user's budget (SPEC 3.4) before it
-- is made: one statement, so concurrent checks queue on the counter's row and no more
-- than the budget can ever be made in a window, whatever the interleaving. A check that
-- passes gives its count back (give_back). Same fixed windows and table as rate_limits.hit.
WITH window_of AS (
    SELECT to_timestamp(floor(extract(epoch FROM now()) / %(period)s) * %(period)s) AS window_start
)
INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
SELECT %(bucket)s, window_start, 1, window_start + make_interval(secs => %(period)s)
  FROM window_of
ON CONFLICT (bucket, window_start) DO UPDATE
   SET hits = c.hits + 1
RETURNING c.hits, ceil(extract(epoch FROM c.expires_at - now()))::integer AS retry_after;

-- name: give_back
-- A check that passed (or was never made) does not spend the budget. A count of 1 goes
-- with its row (hits > 0 is the table's rule); either half finds the row, never both.
WITH this AS (
    SELECT %(bucket)s::text AS bucket,
           to_timestamp(floor(extract(epoch FROM now()) / %(period)s) * %(period)s) AS window_start
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
-- same statement: against the user's budget, or, for an address nobody has, against one
-- of its own, so that known and unknown addresses cost the same and are refused alike.
WITH found AS (
    SELECT id, name, email, encrypted_password, confirmed_at
      FROM users
     WHERE email = %(email)s
), window_of AS (
    SELECT to_timestamp(floor(extract(epoch FROM now()) / %(period)s) * %(period)s) AS window_start
), counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    SELECT coalesce('password|user=' || (SELECT id FROM found), 'password|email=' || %(email)s),
           window_start, 1, window_start + make_interval(secs => %(period)s)
      FROM window_of
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.hits, ceil(extract(epoch FROM c.expires_at - now()))::integer AS retry_after
)
SELECT f.id, f.name, f.email, f.encrypted_password, f.confirmed_at, counted.hits, counted.retry_after
  FROM counted
  LEFT JOIN found f ON true;
