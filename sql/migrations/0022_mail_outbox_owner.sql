-- Whose mail a row of the outbox is (SPEC 20): the user it was written to or about, so an
-- erasure and an export find a person's mail by id instead of by address. An address
-- alone does not say it: a confirmation to an address the person asked to move to stays
-- after that request is voided, and an address may later be someone else's.
-- NULL: mail to nobody's account (the notice to INSTANCE_ADMIN_EMAIL, an erased person's
-- farewell, a link asked for an unknown address), and every row written before this
-- migration, which the eraser and the export still match by address.
-- ON DELETE CASCADE: deleting a users row deletes that person's mail with it.
ALTER TABLE mail_outbox
    ADD COLUMN user_id bigint REFERENCES users (id) ON DELETE CASCADE;
-- The cascade's lookup when a user goes, and the export's; rows of nobody are not in it.
CREATE INDEX mail_outbox_user_id_idx ON mail_outbox (user_id)
    WHERE user_id IS NOT NULL;
