-- jobscheduler state store, schema version 1 (SQLite).
-- Instants are INTEGER microseconds since 1970-01-01 UTC; the store's clock is SQLite's
-- julianday('now'). Every table is named jobscheduler_* so it may share a database.

CREATE TABLE jobscheduler_schema (
    version INTEGER PRIMARY KEY,
    applied INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER))
);

-- One row per run. A run of a slot is unique by (job, slot, attempt); a run outside the
-- schedule has a NULL slot (NULLs never collide) and is unique by its run_id.
CREATE TABLE jobscheduler_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,      -- the order written (ties of history)
    run_id TEXT NOT NULL UNIQUE,
    job TEXT NOT NULL,
    slot INTEGER,
    attempt INTEGER NOT NULL DEFAULT 1,
    trigger TEXT NOT NULL,
    node TEXT NOT NULL,
    state TEXT NOT NULL,                        -- running, succeeded, failed, not_started, ...
    started INTEGER NOT NULL,
    ended INTEGER,
    exit_code INTEGER,
    reason TEXT,
    output_tail TEXT NOT NULL DEFAULT '',
    last_slot INTEGER,                          -- a missed range's last slot
    UNIQUE (job, slot, attempt)
);
CREATE INDEX jobscheduler_runs_started ON jobscheduler_runs (started, seq);
CREATE INDEX jobscheduler_runs_job ON jobscheduler_runs (job, started, seq);
CREATE INDEX jobscheduler_runs_running ON jobscheduler_runs (node) WHERE state = 'running';

CREATE TABLE jobscheduler_nodes (
    name TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    process_started REAL NOT NULL,              -- the pid's OS start time (epoch seconds)
    started INTEGER NOT NULL,
    heartbeat INTEGER NOT NULL,                 -- on the store's clock
    max_workers INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'up'            -- up, left, dead
);

CREATE TABLE jobscheduler_marks (
    job TEXT PRIMARY KEY,
    last_slot INTEGER,
    failures INTEGER NOT NULL DEFAULT 0,
    paused_reason TEXT
);

-- Runs asked for on demand. Another program may queue one with
--   INSERT INTO jobscheduler_queue (job, args, priority) VALUES ('report', '{"day": "mon"}', 5)
CREATE TABLE jobscheduler_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    args TEXT,                                  -- a JSON object, or NULL
    priority INTEGER NOT NULL DEFAULT 0,
    host TEXT,                                  -- fnmatch pattern of the nodes allowed
    submitted INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
    state TEXT NOT NULL DEFAULT 'pending',      -- pending, running, succeeded, failed, not_started
    run_id TEXT,
    node TEXT,
    taken INTEGER
);
CREATE INDEX jobscheduler_queue_pending ON jobscheduler_queue (job) WHERE state = 'pending';
CREATE INDEX jobscheduler_queue_state ON jobscheduler_queue (state, id);

CREATE TABLE jobscheduler_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    server TEXT NOT NULL,
    message BLOB NOT NULL,                      -- RFC 5322
    recipients TEXT NOT NULL,                   -- a JSON list
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt INTEGER NOT NULL,
    created INTEGER NOT NULL,
    last_error TEXT
);
CREATE INDEX jobscheduler_outbox_due ON jobscheduler_outbox (next_attempt, id);

CREATE TABLE jobscheduler_kill_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    node TEXT NOT NULL,
    requested INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobscheduler_kill_requests_open ON jobscheduler_kill_requests (node) WHERE done = 0;
