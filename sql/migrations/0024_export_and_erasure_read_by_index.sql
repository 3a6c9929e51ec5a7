-- The export (SPEC 20) and the eraser looked up a person's rows of the two largest
-- tables by columns no index covered, so each export read the whole of audit_events and
-- of mail_outbox, and each erasure (of oneself, or of a member by a purge) the whole of
-- audit_events once more than it has to (docs/performance-log.md, 2026-11-27).
-- audit_events by actor: the export's events (subject_id = $1 OR actor_id = $1, a
-- BitmapOr with audit_events_subject_idx) and erase_user_trail's UPDATE ... WHERE
-- actor_id = $1. Rows without an actor (failed sign-ins, erased actors) are left out.
CREATE INDEX audit_events_actor_idx ON audit_events (actor_id)
    WHERE actor_id IS NOT NULL;
-- mail_outbox by address, for the mail of nobody's account only: the export's
-- (m.user_id IS NULL AND m.to_address = u.email), a BitmapOr with
-- mail_outbox_user_id_idx. Not the eraser's lower(to_address): its DELETE also matches
-- every row's subject and bodies against the person's addresses, as erase_user_trail's
-- DELETE matches every audit row's details, and no index serves either.
-- Plain CREATE INDEX, as a migration is one transaction: writes to each table wait
-- while it builds (both together about a second at 1,000,000 and 300,000 rows).
CREATE INDEX mail_outbox_unowned_to_address_idx ON mail_outbox (to_address)
    WHERE user_id IS NULL;
