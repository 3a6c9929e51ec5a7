-- Unauthenticated traffic cannot grow the audit log without bound (SPEC 14): failed
-- sign-ins for addresses nobody has, and refused (rate-limited) ones, write one audit row
-- per address, hour, reason and subject, and are counted here. audit_events is append-only
-- for the service's role, so the count cannot live in that row. subject_id 0: nobody.
CREATE TABLE sign_in_failure_counts (
    ip_address text        NOT NULL CHECK (char_length(ip_address) <= 64),
    hour       timestamptz NOT NULL,
    reason     text        NOT NULL CHECK (reason ~ '^[a-z_]{1,32}$'),
    subject_id bigint      NOT NULL,
    failures   integer     NOT NULL CHECK (failures > 0),
    PRIMARY KEY (ip_address, hour, reason, subject_id)
);
-- manage.py prune.
CREATE INDEX sign_in_failure_counts_hour_idx ON sign_in_failure_counts (hour);
