-- jobscheduler state store, schema version 5 (PostgreSQL): pauses as the cluster's state. One
-- row per paused job: who paused it (node), when, a note, and until when (NULL: until
-- resumed; a row whose `until` has passed is not in force). `jobscheduler_pause_version`
-- counts every change of the pauses (nodes on PostgreSQL hear of them by NOTIFY; the count is
-- for nodes that poll).
CREATE TABLE jobscheduler_pauses (
    job text PRIMARY KEY,
    node text NOT NULL,
    paused_at timestamptz NOT NULL,
    note text,
    until timestamptz
);

CREATE TABLE jobscheduler_pause_version (
    id integer PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);

INSERT INTO jobscheduler_pause_version (id, version) VALUES (1, 1);

-- The pauses by failures kept in the marks until now become pauses of their own.
INSERT INTO jobscheduler_pauses (job, node, paused_at, note)
SELECT job, '', clock_timestamp(), paused_reason
FROM jobscheduler_marks WHERE paused_reason IS NOT NULL;

UPDATE jobscheduler_marks SET paused_reason = NULL, failures = 0 WHERE paused_reason IS NOT NULL
