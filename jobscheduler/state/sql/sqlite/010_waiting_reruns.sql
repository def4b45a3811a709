-- jobscheduler state store (SQLite): the reruns after a node loss (`on_node_loss: rerun`) that
-- wait, in a worker of `node`, for room under their job's limit (one row a rerun, `run_id` its
-- run's id once it claims; `attempt` the rerun's). Shown as waiting (`waiting_runs`), never
-- counted by a claim; a row of a node no longer up is not in force.
CREATE TABLE jobscheduler_waiting_reruns (
    run_id TEXT PRIMARY KEY,
    job TEXT NOT NULL,
    slot INTEGER,
    attempt INTEGER NOT NULL,
    node TEXT NOT NULL,
    since INTEGER NOT NULL
);
CREATE INDEX jobscheduler_waiting_reruns_node ON jobscheduler_waiting_reruns (node);
