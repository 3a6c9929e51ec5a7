-- name: lock_user
-- Held until the profile update commits, so the current-password check and the name of
-- the avatar being replaced still hold when the new values are written. email_taken
-- looks at other users' current addresses, not pending ones, as the unique constraint does,
-- and at addresses another user's live revert link reserves (SPEC 3.4: a revert always
-- succeeds within its 7 days); taken_by_id and taken_by_name are whose that address is
-- (its current owner, else the first reserver): the notice to it is their mail.
SELECT u.name, u.email, u.unconfirmed_email, u.encrypted_password, u.avatar,
       u.confirmed_at IS NOT NULL AS confirmed,
       taken.id IS NOT NULL AS email_taken,
       taken.id AS taken_by_id,
       taken.name AS taken_by_name
  FROM users u
  LEFT JOIN LATERAL (
      SELECT owner.id, owner.name
        FROM (SELECT other.id, other.name, 0 AS rank, 0::bigint AS reservation
                FROM users other
               WHERE other.email = %(email)s
                 AND other.id <> u.id
              UNION ALL
              SELECT reserver.id, reserver.name, 1, r.id
                FROM one_time_tokens r
                JOIN users reserver ON reserver.id = r.user_id
               WHERE r.email = %(email)s
                 AND r.purpose = 'email_revert'
                 AND r.expires_at > now()
                 AND r.user_id <> u.id) AS owner
       ORDER BY owner.rank, owner.reservation
       LIMIT 1) AS taken ON true
 WHERE u.id = %(user_id)s
   FOR UPDATE OF u;

-- name: update
-- Only the keys present in the patch change. ui_settings is merged by top-level key here,
-- in the statement that writes it, so concurrent updates of different keys all survive;
-- a key sent as null is removed. phone_number lives in custom_attributes beside keys set
-- elsewhere, which are kept. Sets unconfirmed_email, never email: that waits for the
-- confirmation link.
UPDATE users u
   SET name = CASE WHEN p ? 'name' THEN p->>'name' ELSE u.name END,
       display_name = CASE WHEN p ? 'display_name' THEN p->>'display_name' ELSE u.display_name END,
       unconfirmed_email = CASE WHEN p ? 'unconfirmed_email' THEN p->>'unconfirmed_email'
                                ELSE u.unconfirmed_email END,
       message_signature = CASE WHEN p ? 'message_signature' THEN p->>'message_signature'
                                ELSE u.message_signature END,
       custom_attributes = CASE WHEN NOT p ? 'phone_number' THEN u.custom_attributes
                                WHEN jsonb_typeof(p->'phone_number') = 'null'
                                THEN u.custom_attributes - 'phone_number'
                                ELSE u.custom_attributes || jsonb_build_object('phone_number', p->'phone_number')
                           END,
       ui_settings = CASE WHEN jsonb_typeof(p->'ui_settings') = 'object'
                          THEN (u.ui_settings || (p->'ui_settings'))
                               - ARRAY(SELECT key
                                         FROM jsonb_each(p->'ui_settings')
                                        WHERE jsonb_typeof(value) = 'null')
                          ELSE u.ui_settings END,
       avatar = CASE WHEN p ? 'avatar' THEN p->>'avatar' ELSE u.avatar END,
       updated_at = now()
  FROM (SELECT $2::jsonb AS p) AS patch
 WHERE u.id = $1
-- Run through db.Lookup into services/profiles.py's UpdatedRow: the time as seconds
-- since the epoch.
RETURNING u.doc, extract(epoch FROM now()) AS now;

-- name: recent_email_changes
-- The e-mail changes of the last 24 hours (SPEC 3.3: at most 5), and when the oldest of the
-- newest five leaves the window. Read with the user row locked (lock_user).
SELECT count(*) AS n,
       ceil(extract(epoch FROM min(created_at) + interval '24 hours' - now()))::integer AS retry_after
  FROM (SELECT created_at
          FROM email_change_requests
         WHERE user_id = %(user_id)s
           AND created_at > now() - interval '24 hours'
         ORDER BY created_at DESC
         LIMIT 5) AS recent;

-- name: record_email_change
-- Rows past the window are of no use; each new one clears the user's old ones.
WITH expired AS (
    DELETE FROM email_change_requests
     WHERE user_id = %(user_id)s
       AND created_at <= now() - interval '24 hours'
)
INSERT INTO email_change_requests (user_id)
VALUES (%(user_id)s)
RETURNING id;

-- name: clear_avatar
UPDATE users
   SET avatar = NULL,
       updated_at = now()
 WHERE id = %(user_id)s
RETURNING id;

-- name: set_availability
-- No row back means the caller is not a member of that account (or, since the access
-- rules looked, no longer an active one: SPEC 18; memberships.own_status tells which). Locks the membership row, then (its
-- trigger, migration 0014, when the value changes) the user row: the lock order of
-- services/memberships.py.
UPDATE account_users
   SET availability = %(value)s,
       updated_at = now()
 WHERE user_id = %(user_id)s
   AND account_id = %(account_id)s
   AND status = 'active'
RETURNING id;

-- name: set_auto_offline
-- No row back means the caller is not a member of that account (or, since the access
-- rules looked, no longer an active one: SPEC 18; memberships.own_status tells which). Locks the membership row, then (its
-- trigger, migration 0014, when the value changes) the user row: the lock order of
-- services/memberships.py.
UPDATE account_users
   SET auto_offline = %(value)s,
       updated_at = now()
 WHERE user_id = %(user_id)s
   AND account_id = %(account_id)s
   AND status = 'active'
RETURNING id;
