-- When a session last checked a password or a second factor (SPEC 3.4, recent
-- authentication): an e-mail change needs it recent, or the current password. A session
-- is opened by such a check (sign-in, its second step) or by a mailbox link, so it starts
-- at the session's creation; existing sessions get theirs.
ALTER TABLE user_tokens ADD COLUMN authenticated_at timestamptz;
UPDATE user_tokens SET authenticated_at = created_at;
ALTER TABLE user_tokens
    ALTER COLUMN authenticated_at SET DEFAULT now(),
    ALTER COLUMN authenticated_at SET NOT NULL;
