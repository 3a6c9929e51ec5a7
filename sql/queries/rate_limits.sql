-- name: hit
-- Count one request in each bucket's current fixed window and return the counts. Each hit
-- also deletes a few expired counters, so the table cleans itself without a job.
WITH expired AS (
    DELETE FROM rate_limit_counters
     WHERE (bucket, window_start) IN (
           SELECT bucket, window_start FROM rate_limit_counters
            WHERE expires_at < now()
            LIMIT 20
              FOR UPDATE SKIP LOCKED)
), hits AS (
    SELECT bucket, period,
           to_timestamp(floor(extract(epoch FROM now()) / period) * period) AS window_start
      FROM unnest(%(buckets)s::text[], %(periods)s::integer[]) AS b(bucket, period)
)
INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
SELECT bucket, window_start, 1, window_start + make_interval(secs => period)
  FROM hits
ON CONFLICT (bucket, window_start) DO UPDATE
   SET hits = c.hits + 1
RETURNING c.bucket, c.hits, ceil(extract(epoch FROM c.expires_at - now()))::integer AS retry_after;
