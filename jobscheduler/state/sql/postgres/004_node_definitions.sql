-- jobscheduler state store, schema version 4 (PostgreSQL): what each node defines and its
-- lease. The digest of its job definitions and their names (a JSON array), so every node and
-- `status` can tell nodes whose files differ; its lease in seconds, so `status` can tell a
-- lost node (its lease expired, not yet taken over) from a live one.
ALTER TABLE jobscheduler_nodes ADD COLUMN lease_seconds double precision;
ALTER TABLE jobscheduler_nodes ADD COLUMN definitions_digest text;
ALTER TABLE jobscheduler_nodes ADD COLUMN defined_jobs text
