-- The service lower-cases addresses in Python; under a database locale whose lower() maps
-- some non-ASCII letter differently, the old checks could refuse a valid row (a 500).
-- With the C collation lower() touches only A-Z, which Python's lower() never leaves.
ALTER TABLE users DROP CONSTRAINT users_email_check;
ALTER TABLE users ADD CONSTRAINT users_email_check
    CHECK (email = lower(btrim(email) COLLATE "C") AND char_length(email) BETWEEN 3 AND 255);
ALTER TABLE users DROP CONSTRAINT users_unconfirmed_email_check;
ALTER TABLE users ADD CONSTRAINT users_unconfirmed_email_check
    CHECK (unconfirmed_email = lower(btrim(unconfirmed_email) COLLATE "C"));
