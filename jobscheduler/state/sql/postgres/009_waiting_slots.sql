-- jobscheduler state store, schema version 9 (PostgreSQL): the slot of an `overlap: queue` or
-- `replace` job that waits for the job to be idle on every node, one per job across the
-- cluster (`run_id` its run's id once it claims; `node` the node whose worker waits; a row of
-- a node no longer up is not in force). Slots that find one waiting are recorded skipped.
CREATE TABLE jobscheduler_waiting (
    job TEXT PRIMARY KEY,
    slot timestamptz,
    run_id TEXT NOT NULL,
    node TEXT NOT NULL,
    since timestamptz NOT NULL
);
