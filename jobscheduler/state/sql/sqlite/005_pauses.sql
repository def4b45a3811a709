-- jobscheduler state store, schema version 5 (SQLite): pauses as the cluster's state. One row
-- per paused job: who paused it (node), when, a note, and until when (NULL: until resumed;
-- a row whose `until` has passed is not in force). `jobscheduler_pause_version` counts every
-- change of the pauses, so that a node polls one integer to follow them.
CREATE TABLE jobscheduler_pauses (
    job TEXT PRIMARY KEY,
    node TEXT NOT NULL,
    paused_at INTEGER NOT NULL,
    note TEXT,
    until INTEGER
);

CREATE TABLE jobscheduler_pause_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);

INSERT INTO jobscheduler_pause_version (id, version) VALUES (1, 1);

-- The pauses by failures kept in the marks until now become pauses of their own.
INSERT INTO jobscheduler_pauses (job, node, paused_at, note)
SELECT job, '', CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER), paused_reason
FROM jobscheduler_marks WHERE paused_reason IS NOT NULL;

UPDATE jobscheduler_marks SET paused_reason = NULL, failures = 0 WHERE paused_reason IS NOT NULL
