-- jobscheduler state store, schema version 4 (SQLite): what each node defines and its lease.
-- The digest of its job definitions and their names (a JSON array), so every node and
-- `status` can tell nodes whose files differ; its lease in seconds, so `status` can tell a
-- lost node (its lease expired, not yet taken over) from a live one.
ALTER TABLE jobscheduler_nodes ADD COLUMN lease_seconds REAL;
ALTER TABLE jobscheduler_nodes ADD COLUMN definitions_digest TEXT;
ALTER TABLE jobscheduler_nodes ADD COLUMN defined_jobs TEXT
