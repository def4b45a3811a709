-- jobscheduler state store, schema version 7 (PostgreSQL): each node's clock skew against the
-- database's clock, in seconds (positive: the node's clock is ahead), measured at its
-- heartbeats; NULL when not measured (SQLite: the database's clock is the machine's own).
ALTER TABLE jobscheduler_nodes ADD COLUMN clock_skew double precision;
