-- name: enqueue
-- user_id: whose mail it is (the recipient's account, or whom it is about), which the
-- eraser and the export go by (migration 0022); NULL for mail to nobody's account. A
-- mail that must outlive its person's erasure (a farewell to an erased person's address,
-- written in the erasure's transaction) is nobody's: the users row's ON DELETE CASCADE
-- would delete it before it is sent.
INSERT INTO mail_outbox (kind, user_id, to_address, subject, text_body, html_body)
VALUES (%(kind)s, %(user_id)s, %(to_address)s, %(subject)s, %(text_body)s, %(html_body)s)
RETURNING id;

-- name: claim_due
-- The row stays locked until the worker's transaction ends, after the SMTP exchange, so a
-- second worker skips it rather than sending it again (mail_outbox_pending_idx).
SELECT id, kind, to_address, subject, text_body, html_body, attempts
  FROM mail_outbox
 WHERE status = 'pending'
   AND next_attempt_at <= now()
 ORDER BY next_attempt_at, id
 LIMIT 1
   FOR UPDATE SKIP LOCKED;

-- name: mark_sent
-- The bodies carry one-time links: once delivered they are not kept. clock_timestamp(), as
-- the transaction began before the SMTP exchange.
UPDATE mail_outbox
   SET status = 'sent',
       attempts = attempts + 1,
       message_id = %(message_id)s,
       sent_at = clock_timestamp(),
       text_body = NULL,
       html_body = NULL
 WHERE id = %(id)s
RETURNING id;

-- name: forget
-- A kind the worker keeps nothing of once it is sent or given up (outbox.FORGOTTEN_ONCE_SENT):
-- the last mail to an erased person's address, which nothing may name afterwards (SPEC 20).
DELETE FROM mail_outbox
 WHERE id = %(id)s
RETURNING id;

-- name: record_failure
-- A message that will never be sent drops its bodies too: nobody will use those links.
UPDATE mail_outbox
   SET status = %(status)s,
       attempts = attempts + 1,
       last_error = %(error)s,
       next_attempt_at = clock_timestamp() + %(retry_after)s,
       text_body = CASE WHEN %(status)s = 'failed' THEN NULL ELSE text_body END,
       html_body = CASE WHEN %(status)s = 'failed' THEN NULL ELSE html_body END
 WHERE id = %(id)s
RETURNING id;

-- name: enqueue_bounded
-- A mail with no link to one address (the notice that someone tried to use it) spends
-- that address's hour as enqueue_with_token's mails do (SPEC 3.4): past %(per_hour)s in
-- the hour it is written as 'suppressed' (never claimed, no bodies).
WITH counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    SELECT 'mail|to=' || %(to_address)s, window_start, 1, window_start + interval '1 hour'
      FROM (SELECT to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600) AS window_start) AS this
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.hits
)
INSERT INTO mail_outbox (kind, user_id, to_address, subject, text_body, html_body, status)
SELECT %(kind)s, %(user_id)s::bigint, %(to_address)s, %(subject)s,
       CASE WHEN sent THEN %(text_body)s END,
       CASE WHEN sent THEN %(html_body)s END,
       CASE WHEN sent THEN 'pending' ELSE 'suppressed' END
  FROM (SELECT hits <= %(per_hour)s AS sent FROM counted) AS outcome
RETURNING id;

-- name: enqueue_with_token
-- One statement for a known and an unknown address alike (POST /auth/password and POST
-- /resend_confirmation): with a user, the link's token replaces any earlier one of its
-- purpose and the message is pending; without, the same row is written as 'suppressed'
-- (never claimed, no bodies) and no token. The row is the user's (user_id), suppressed
-- or not; NULL without one.
-- Mail to one address is bounded per address whoever asks (SPEC 3.4): past
-- %(per_hour)s links to it in the hour, the row is suppressed too, and the last link sent
-- stays the one that works. Counted for every address, known or not, at the same cost.
-- Except a reset link when the user has no live one (a credential change voided it,
-- SPEC 3.3): it goes out all the same, so that whoever spent the address's hour and then
-- voided its last link cannot keep the owner from a working link (the attack machine's
-- F1, docs/security.md). Reset links go to the user's own address only, so that is at
-- most one more per voided link. (Confirmations are not excepted: many users may name
-- one address as their new one.)
WITH counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits, expires_at)
    SELECT 'mail|to=' || %(to_address)s, window_start, 1, window_start + interval '1 hour'
      FROM (SELECT to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600) AS window_start) AS this
    ON CONFLICT (bucket, window_start) DO UPDATE
       SET hits = c.hits + 1
    RETURNING c.hits
), sending AS (
    SELECT %(user_id)s::bigint AS user_id
      FROM counted
     WHERE %(user_id)s::bigint IS NOT NULL
       AND (counted.hits <= %(per_hour)s
            OR (%(purpose)s = 'reset_password'
                AND NOT EXISTS (SELECT 1
                                  FROM one_time_tokens live
                                 WHERE live.user_id = %(user_id)s
                                   AND live.purpose = 'reset_password'
                                   AND live.expires_at > now())))
), dropped AS (
    DELETE FROM one_time_tokens
     WHERE user_id = (SELECT user_id FROM sending)
       AND purpose = %(purpose)s
), issued AS (
    INSERT INTO one_time_tokens (user_id, purpose, email, token_digest, expires_at)
    SELECT user_id, %(purpose)s, %(to_address)s, %(token_digest)s, now() + %(lifespan)s
      FROM sending
)
INSERT INTO mail_outbox (kind, user_id, to_address, subject, text_body, html_body, status)
SELECT %(kind)s, %(user_id)s::bigint, %(to_address)s, %(subject)s,
       CASE WHEN sent THEN %(text_body)s END,
       CASE WHEN sent THEN %(html_body)s END,
       CASE WHEN sent THEN 'pending' ELSE 'suppressed' END
  FROM (SELECT EXISTS (SELECT 1 FROM sending) AS sent) AS outcome
RETURNING id;
