-- The state store's queries, the same for every engine (see state/sqlqueries.py).
-- Parameters are named, %(name)s; {now}, {greatest}, {waited} and {skip_locked} are the
-- engine's expressions, written in sql/<engine>/queries.sql. The tables: sql/<engine>/NNN_*.sql.

-- name: now
SELECT {now};

-- runs ---------------------------------------------------------------------------------------

-- name: claim
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
VALUES (%(run_id)s, %(job)s, %(slot)s, %(attempt)s, %(trigger)s, %(node)s, %(state)s, %(started)s)
ON CONFLICT DO NOTHING;

-- name: claim_within
-- A claim of a job with a limit (`claim_within`): inserted only while the job has fewer than
-- %(limit)s live runs, whichever node holds them. Run in a transaction that holds the job's
-- lock (PostgreSQL: `lock_jobs`; SQLite: the write lock of BEGIN IMMEDIATE), so that two
-- nodes never both pass the count. A slot waiting for the job (`wait_in_line`), other than
-- this run's own, counts as a live run: it runs first.
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
SELECT %(run_id)s, %(job)s, %(slot)s, %(attempt)s, %(trigger)s, %(node)s, %(state)s, %(started)s
WHERE (SELECT count(*) FROM jobscheduler_runs
       WHERE job = %(job)s AND state = 'running')
    + (SELECT count(*) FROM jobscheduler_waiting AS w
       WHERE w.job = %(job)s AND w.run_id <> %(run_id)s
         AND w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
         AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id))
    < %(limit)s
ON CONFLICT DO NOTHING;

-- name: live_runs
-- Why `claim_within` inserted nothing: the live runs of the job on every node (schema 3's
-- index of a job's runs by state), and whether the run's key or id is taken.
SELECT (SELECT count(*) FROM jobscheduler_runs WHERE job = %(job)s AND state = 'running')
       + (SELECT count(*) FROM jobscheduler_waiting AS w
          WHERE w.job = %(job)s AND w.run_id <> %(run_id)s
            AND w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
            AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)),
       EXISTS (SELECT 1 FROM jobscheduler_runs
               WHERE run_id = %(run_id)s
                  OR (job = %(job)s AND slot = %(slot)s AND attempt = %(attempt)s));

-- name: drop_stale_waiting
-- Before a slot asks to wait for %(job)s (`wait_in_line`): a waiting slot whose run has
-- claimed since, or whose node is no longer up, waits no longer.
DELETE FROM jobscheduler_waiting
WHERE job = %(job)s
  AND (run_id IN (SELECT run_id FROM jobscheduler_runs)
       OR node NOT IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up'));

-- name: wait_in_line
INSERT INTO jobscheduler_waiting (job, slot, run_id, node, since)
VALUES (%(job)s, %(slot)s, %(run_id)s, %(node)s, %(started)s)
ON CONFLICT DO NOTHING;

-- name: waiting_slot
SELECT slot, run_id, node FROM jobscheduler_waiting WHERE job = %(job)s;

-- name: leave_line
DELETE FROM jobscheduler_waiting WHERE job = %(job)s AND run_id = %(run_id)s;

-- name: wait_for_room
-- A rerun waiting for room under its job's limit (`wait_for_room`): shown, never counted.
INSERT INTO jobscheduler_waiting_reruns (run_id, job, slot, attempt, node, since)
VALUES (%(run_id)s, %(job)s, %(slot)s, %(attempt)s, %(node)s, %(started)s)
ON CONFLICT DO NOTHING;

-- name: leave_room_line
DELETE FROM jobscheduler_waiting_reruns WHERE job = %(job)s AND run_id = %(run_id)s;

-- name: waiting_runs
-- The waits in force (`waiting_runs`): the waiting slots and the reruns waiting for room, of
-- nodes still up, whose runs have not claimed; oldest first.
SELECT w.job, w.slot, w.run_id, w.node, w.since, 'schedule', 1
FROM jobscheduler_waiting AS w
WHERE w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
  AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)
UNION ALL
SELECT w.job, w.slot, w.run_id, w.node, w.since, 'rerun', w.attempt
FROM jobscheduler_waiting_reruns AS w
WHERE w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
  AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)
ORDER BY 5, 1, 3;

-- name: waiting_runs_of_job
SELECT w.job, w.slot, w.run_id, w.node, w.since, 'schedule', 1
FROM jobscheduler_waiting AS w
WHERE w.job = %(job)s
  AND w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
  AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)
UNION ALL
SELECT w.job, w.slot, w.run_id, w.node, w.since, 'rerun', w.attempt
FROM jobscheduler_waiting_reruns AS w
WHERE w.job = %(job)s
  AND w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
  AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)
ORDER BY 5, 1, 3;

-- name: abandon_waiting
-- In `take_over`: the slots and reruns that waited on node %(node)s and never claimed are
-- recorded `abandoned`, certainly never started (%(unstarted)s: "node lost: NODE").
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started, ended,
                               reason, output_tail)
SELECT w.run_id, w.job, w.slot, 1, 'schedule', w.node, 'abandoned', w.since,
       {greatest}({now}, w.since), %(unstarted)s, ''
FROM jobscheduler_waiting AS w
WHERE w.node = %(node)s
  AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)
UNION ALL
SELECT w.run_id, w.job, w.slot, w.attempt, 'rerun', w.node, 'abandoned', w.since,
       {greatest}({now}, w.since), %(unstarted)s, ''
FROM jobscheduler_waiting_reruns AS w
WHERE w.node = %(node)s
  AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id)
ON CONFLICT DO NOTHING
RETURNING run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
          output_tail, last_slot;

-- name: drop_node_waiting
DELETE FROM jobscheduler_waiting WHERE node = %(node)s;

-- name: drop_node_waiting_reruns
DELETE FROM jobscheduler_waiting_reruns WHERE node = %(node)s;

-- name: finish
UPDATE jobscheduler_runs
SET state = %(state)s, ended = %(ended)s, exit_code = %(exit_code)s, reason = %(reason)s,
    output_tail = %(output_tail)s, started = COALESCE(%(started)s, started)
WHERE run_id = %(run_id)s AND state = 'running';

-- name: release
DELETE FROM jobscheduler_runs WHERE run_id = %(run_id)s AND state = 'running';

-- name: record
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started, ended,
                               exit_code, reason, output_tail, last_slot)
VALUES (%(run_id)s, %(job)s, %(slot)s, %(attempt)s, %(trigger)s, %(node)s, %(state)s,
        %(started)s, %(ended)s, %(exit_code)s, %(reason)s, %(output_tail)s, %(last_slot)s)
ON CONFLICT DO NOTHING;

-- name: abandon
-- A run certainly not started (a slot claimed ahead, not due yet, no process recorded) says
-- so; of any other the outcome is unknown: it may have run, its finish lost with its node.
UPDATE jobscheduler_runs
SET state = 'abandoned', ended = {greatest}({now}, started),
    reason = CASE WHEN pid IS NULL AND slot IS NOT NULL AND slot > {now}
                  THEN %(unstarted)s ELSE %(reason)s END
WHERE node = %(node)s AND state = 'running'
RETURNING run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
          output_tail, last_slot;

-- name: history
-- Newest first; ties: the later written first. Four forms, so that each has its own plan.
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: history_of_job
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE job = %(job)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: history_since
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE started >= %(since)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: history_of_job_since
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE job = %(job)s AND started >= %(since)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- The same four, of the runs in one state (schema 3 indexes a job's runs by state).

-- name: history_in_state
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE state = %(state)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: history_of_job_in_state
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE job = %(job)s AND state = %(state)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: history_since_in_state
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE started >= %(since)s AND state = %(state)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: history_of_job_since_in_state
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE job = %(job)s AND started >= %(since)s AND state = %(state)s
ORDER BY started DESC, seq DESC LIMIT %(limit)s;

-- name: run
-- One run by its id (the console's run page, `jobscheduler logs`).
SELECT run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason,
       output_tail, last_slot
FROM jobscheduler_runs WHERE run_id = %(run_id)s;

-- name: set_output
-- A running run's output so far (the console's live output), replacing what was written.
UPDATE jobscheduler_runs SET output_tail = %(output_tail)s
WHERE run_id = %(run_id)s AND state = 'running';

-- name: set_process
UPDATE jobscheduler_runs SET pid = %(pid)s, pid_started = %(pid_started)s
WHERE run_id = %(run_id)s AND state = 'running';

-- name: processes
SELECT run_id, pid, pid_started FROM jobscheduler_runs
WHERE node = %(node)s AND state = 'running' AND pid IS NOT NULL ORDER BY seq;

-- nodes --------------------------------------------------------------------------------------

-- name: join
-- Replaces a node of that name only if it is not live; no row returned: the name is taken.
INSERT INTO jobscheduler_nodes (name, host, pid, process_started, started, heartbeat,
                                max_workers, state, lease_seconds, definitions_digest,
                                defined_jobs)
VALUES (%(name)s, %(host)s, %(pid)s, %(process_started)s, %(started)s, {now}, %(max_workers)s,
        'up', %(lease_seconds)s, %(definitions_digest)s, %(defined_jobs)s)
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    process_started = excluded.process_started, started = excluded.started,
    heartbeat = excluded.heartbeat, max_workers = excluded.max_workers, state = 'up',
    lease_seconds = excluded.lease_seconds, definitions_digest = excluded.definitions_digest,
    defined_jobs = excluded.defined_jobs, clock_skew = NULL
WHERE NOT (jobscheduler_nodes.state = 'up' AND jobscheduler_nodes.heartbeat >= {now} - %(lease)s)
RETURNING name;

-- name: node
SELECT name, host, pid, process_started, started, heartbeat, max_workers, state, lease_seconds,
       definitions_digest, defined_jobs, clock_skew
FROM jobscheduler_nodes WHERE name = %(name)s;

-- name: set_definitions
-- A node's definitions changed (a reload, an API change): their digest and job names.
UPDATE jobscheduler_nodes SET definitions_digest = %(definitions_digest)s,
    defined_jobs = %(defined_jobs)s
WHERE name = %(name)s AND state = 'up';

-- name: heartbeat
UPDATE jobscheduler_nodes SET heartbeat = {now}
WHERE name = %(name)s AND state = 'up' AND heartbeat >= {now} - %(lease)s;

-- name: beat
-- The heartbeat, and what the node looks at after it, in one statement (see `Beat`): other
-- nodes expired, other live nodes of its host, whether an alert is due, whether a pending
-- queue row is older than the lease (jobscheduler_queue_state: the pending rows only); the
-- node's clock skew measured at its previous heartbeat, and the database's clock (to measure
-- the next).
UPDATE jobscheduler_nodes SET heartbeat = {now}, clock_skew = %(clock_skew)s
WHERE name = %(name)s AND state = 'up' AND heartbeat >= {now} - %(lease)s
RETURNING
    (SELECT count(*) FROM jobscheduler_nodes AS o
     WHERE o.state = 'up' AND o.name <> %(name)s AND o.heartbeat < {now} - %(lease)s),
    (SELECT count(*) FROM jobscheduler_nodes AS o
     WHERE o.state = 'up' AND o.name <> %(name)s AND o.host = jobscheduler_nodes.host),
    EXISTS (SELECT 1 FROM jobscheduler_outbox WHERE next_attempt <= {now}),
    EXISTS (SELECT 1 FROM jobscheduler_queue
            WHERE state = 'pending' AND submitted < {now} - %(lease)s),
    {now};

-- name: leave
UPDATE jobscheduler_nodes SET state = 'left' WHERE name = %(name)s AND state = 'up';

-- name: nodes
SELECT name, host, pid, process_started, started, heartbeat, max_workers, state, lease_seconds,
       definitions_digest, defined_jobs, clock_skew
FROM jobscheduler_nodes ORDER BY name;

-- name: expired_nodes
SELECT name, host, pid, process_started, started, heartbeat, max_workers, state, lease_seconds,
       definitions_digest, defined_jobs, clock_skew
FROM jobscheduler_nodes WHERE state = 'up' AND heartbeat < {now} - %(lease)s ORDER BY name;

-- name: node_dead
UPDATE jobscheduler_nodes SET state = 'dead' WHERE name = %(name)s;

-- marks --------------------------------------------------------------------------------------

-- name: mark
SELECT job, last_slot, failures, paused_reason FROM jobscheduler_marks WHERE job = %(job)s;

-- name: marks
SELECT job, last_slot, failures, paused_reason FROM jobscheduler_marks;

-- name: set_mark
-- last_slot only moves forward (NULL leaves it); failures and paused_reason are set when
-- set_failures / set_paused_reason is 1.
INSERT INTO jobscheduler_marks (job, last_slot, failures, paused_reason)
VALUES (%(job)s, %(last_slot)s, %(failures)s, %(paused_reason)s)
ON CONFLICT (job) DO UPDATE SET
    last_slot = CASE WHEN excluded.last_slot IS NOT NULL AND
                          (jobscheduler_marks.last_slot IS NULL
                           OR excluded.last_slot > jobscheduler_marks.last_slot)
                     THEN excluded.last_slot ELSE jobscheduler_marks.last_slot END,
    failures = CASE WHEN %(set_failures)s = 1 THEN excluded.failures
                    ELSE jobscheduler_marks.failures END,
    paused_reason = CASE WHEN %(set_paused_reason)s = 1 THEN excluded.paused_reason
                         ELSE jobscheduler_marks.paused_reason END
RETURNING job, last_slot, failures, paused_reason;

-- name: set_marks
-- {rows}: one (%(job_N)s, %(last_slot_N)s, 0, NULL) per job, written in when called.
INSERT INTO jobscheduler_marks (job, last_slot, failures, paused_reason)
VALUES {rows}
ON CONFLICT (job) DO UPDATE SET
    last_slot = CASE WHEN jobscheduler_marks.last_slot IS NULL
                          OR excluded.last_slot > jobscheduler_marks.last_slot
                     THEN excluded.last_slot ELSE jobscheduler_marks.last_slot END;

-- the queue ----------------------------------------------------------------------------------

-- name: submit
INSERT INTO jobscheduler_queue (job, args, priority, host, submitted)
VALUES (%(job)s, %(args)s, %(priority)s, %(host)s, {now}) RETURNING id;

-- name: look
-- A node's poll: the (job, host) pairs of pending rows (at most %(pairs)s of them: the rest
-- counts as something to take), and a row 'k' if it has an open kill request.
SELECT 'q', job, host
FROM (SELECT DISTINCT job, host FROM jobscheduler_queue WHERE state = 'pending'
      LIMIT %(pairs)s) AS p
UNION ALL
SELECT 'k', NULL, NULL WHERE EXISTS (SELECT 1 FROM jobscheduler_kill_requests
                                     WHERE node = %(node)s AND done = 0);

-- name: any_pending
SELECT 1 FROM jobscheduler_queue WHERE state = 'pending' LIMIT 1;

-- name: take_candidates
-- {jobs}: "job IN (%(job_0)s, …)", or "1 = 1" past 500 names (then filtered in Python, like
-- the hosts), written in when called; each row gains a point per %(aging)s seconds waited.
SELECT id, job, host FROM jobscheduler_queue WHERE state = 'pending' AND {jobs}
ORDER BY priority + {waited} / %(aging)s DESC, submitted, id LIMIT %(limit)s {skip_locked};

-- name: take_limited_live
-- A take's count of the jobs with a limit (`take`'s `limits`), per job: its live runs on every
-- node, those of them that are submitted runs, and its rows taken (whose runs may not have
-- started yet). {jobs}: "job IN (%(job_0)s, …)", written in when called.
SELECT job, sum(live), sum(submitted), sum(taken) FROM (
    SELECT job, 1 AS live, CASE WHEN trigger = 'submit' THEN 1 ELSE 0 END AS submitted,
           0 AS taken
    FROM jobscheduler_runs WHERE state = 'running' AND {jobs}
    UNION ALL
    SELECT job, 0, 0, 1 FROM jobscheduler_queue WHERE state = 'running' AND {jobs}
) AS t GROUP BY job;

-- name: take_rows
-- {ids}: the chosen rows, %(id_0)s, …: one statement for the whole take (a round trip per
-- row was most of a take's time on PostgreSQL). {cases}: the run each row's take claims
-- (`TakeClaims`), "CASE id WHEN %(id_0)s THEN %(run_0)s … END", or NULL: none.
UPDATE jobscheduler_queue SET state = 'running', node = %(node)s, taken = {now}, run_id = {cases}
WHERE id IN ({ids}) AND state = 'pending'
RETURNING id, job, args, priority, host, submitted, state, run_id, node, reason, attempt;

-- name: refuse_row
-- A row taken whose arguments no run can be given: ended in the take's transaction (its run
-- never claimed).
UPDATE jobscheduler_queue SET state = 'not_started', reason = %(reason)s, run_id = NULL
WHERE id = %(queue_id)s;

-- name: settle
UPDATE jobscheduler_queue SET state = %(state)s, run_id = %(run_id)s
WHERE id = %(queue_id)s AND state = 'running';

-- name: put_back
-- A row taken whose run was not claimed (its job at its limit on some node, or paused): it
-- is pending again, as it was, for the next take.
UPDATE jobscheduler_queue SET state = 'pending', node = NULL, taken = NULL, run_id = NULL
WHERE id = %(queue_id)s AND state = 'running';

-- name: settle_pending
-- A row no node took, settled as it is (its job defined by no live node).
UPDATE jobscheduler_queue SET state = %(state)s, run_id = %(run_id)s
WHERE id = %(queue_id)s AND state = 'pending';

-- name: pending_before
-- Pending rows submitted before %(before)s, oldest first. {jobs}: "job NOT IN (%(job_0)s, …)"
-- (the jobs to leave out), or "1 = 1" past 500 names (then the caller filters), written in
-- when called.
SELECT id, job, args, priority, host, submitted, state, run_id, node, reason, attempt
FROM jobscheduler_queue WHERE state = 'pending' AND submitted < %(before)s AND {jobs}
ORDER BY id LIMIT %(limit)s;

-- name: queue_requeue_node
-- {jobs}: "job IN (%(job_0)s, …)", the dead node's jobs with on_node_loss: rerun (called only
-- with some): their rows go back to the queue, as submitted, for the next free worker.
UPDATE jobscheduler_queue
SET state = 'pending', node = NULL, taken = NULL, run_id = NULL, attempt = attempt + 1
WHERE node = %(node)s AND state = 'running' AND {jobs};

-- name: queue_fail_node
UPDATE jobscheduler_queue SET state = 'failed' WHERE node = %(node)s AND state = 'running';

-- name: queue_rows
SELECT id, job, args, priority, host, submitted, state, run_id, node, reason, attempt
FROM jobscheduler_queue ORDER BY id DESC LIMIT %(limit)s;

-- name: queue_rows_in_state
SELECT id, job, args, priority, host, submitted, state, run_id, node, reason, attempt
FROM jobscheduler_queue WHERE state = %(state)s ORDER BY id DESC LIMIT %(limit)s;

-- name: pending_count
-- The queue's depth, counted up to %(limit)s rows (the partial index of pending rows).
SELECT count(*) FROM (SELECT 1 FROM jobscheduler_queue WHERE state = 'pending'
                      LIMIT %(limit)s) AS pending;

-- the outbox ---------------------------------------------------------------------------------

-- name: hold_alert
INSERT INTO jobscheduler_outbox (server, message, recipients, attempts, next_attempt, created,
                                 last_error)
VALUES (%(server)s, %(message)s, %(recipients)s, %(attempts)s, COALESCE(%(next_attempt)s, {now}),
        {now}, %(last_error)s)
RETURNING id;

-- name: due_alerts
SELECT id, server, message, recipients, attempts, next_attempt, created, last_error
FROM jobscheduler_outbox WHERE next_attempt <= {now}
ORDER BY next_attempt, id LIMIT %(limit)s {skip_locked};

-- name: any_due
SELECT 1 FROM jobscheduler_outbox WHERE next_attempt <= {now} LIMIT 1;

-- name: hold_for
UPDATE jobscheduler_outbox SET next_attempt = {now} + %(hold)s WHERE id = %(alert_id)s;

-- name: alert_sent
DELETE FROM jobscheduler_outbox WHERE id = %(alert_id)s;

-- name: alert_failed
UPDATE jobscheduler_outbox
SET attempts = attempts + 1, next_attempt = %(next_attempt)s, last_error = %(last_error)s
WHERE id = %(alert_id)s;

-- kill requests ------------------------------------------------------------------------------

-- name: request_kill
-- The running run %(run_id)s, or every running run of %(job)s (NULL: not asked for), to be
-- stopped with %(reason)s (NULL: an operator's kill, "killed").
INSERT INTO jobscheduler_kill_requests (run_id, node, requested, reason)
SELECT run_id, node, {now}, CAST(%(reason)s AS TEXT) FROM jobscheduler_runs
WHERE state = 'running'
  AND (CAST(%(run_id)s AS TEXT) IS NULL OR run_id = %(run_id)s)
  AND (CAST(%(job)s AS TEXT) IS NULL OR job = %(job)s)
ORDER BY seq;

-- name: kill_requests
SELECT id, run_id, reason FROM jobscheduler_kill_requests
WHERE node = %(node)s AND done = 0 ORDER BY id;

-- name: kill_done
UPDATE jobscheduler_kill_requests SET done = 1 WHERE id = %(request_id)s;

-- retention ----------------------------------------------------------------------------------

-- name: prune_runs
-- Finished runs started before %(before)s, and those beyond the newest %(keep)s of their job.
DELETE FROM jobscheduler_runs
WHERE state <> 'running'
  AND (started < %(before)s OR seq IN (
      SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY job
                                                      ORDER BY started DESC, seq DESC) AS n
                       FROM jobscheduler_runs WHERE state <> 'running') AS ranked
      WHERE n > %(keep)s));

-- name: prune_queue
DELETE FROM jobscheduler_queue
WHERE state IN ('succeeded', 'failed', 'not_started') AND submitted < %(before)s;

-- name: prune_kills
DELETE FROM jobscheduler_kill_requests WHERE done = 1;

-- name: prune_nodes
DELETE FROM jobscheduler_nodes WHERE state <> 'up' AND heartbeat < %(before)s;

-- name: prune_pauses
-- Pauses that ended (their until passed) before the cut-off: in force nowhere, nothing to show.
DELETE FROM jobscheduler_pauses WHERE until IS NOT NULL AND until < %(before)s;

-- pauses -------------------------------------------------------------------------------------

-- name: pauses
SELECT job, node, paused_at, note, until FROM jobscheduler_pauses;

-- name: pause_of
SELECT job, node, paused_at, note, until FROM jobscheduler_pauses WHERE job = %(job)s;

-- name: pause_version
SELECT version FROM jobscheduler_pause_version WHERE id = 1;

-- name: pause
INSERT INTO jobscheduler_pauses (job, node, paused_at, note, until)
VALUES (%(job)s, %(node)s, %(paused_at)s, %(note)s, %(until)s)
ON CONFLICT (job) DO UPDATE SET
    node = excluded.node, paused_at = excluded.paused_at, note = excluded.note,
    until = excluded.until;

-- name: resume
DELETE FROM jobscheduler_pauses WHERE job = %(job)s RETURNING job;

-- name: resume_all
DELETE FROM jobscheduler_pauses RETURNING job;

-- name: reset_failures
UPDATE jobscheduler_marks SET failures = 0 WHERE job = %(job)s AND failures <> 0;

-- name: reset_all_failures
UPDATE jobscheduler_marks SET failures = 0 WHERE failures <> 0;

-- name: bump_pause_version
UPDATE jobscheduler_pause_version SET version = version + 1 WHERE id = 1;

-- name: make_mark
INSERT INTO jobscheduler_marks (job, last_slot, failures, paused_reason)
VALUES (%(job)s, NULL, 0, NULL) ON CONFLICT (job) DO NOTHING;

-- name: failures_of
-- Read inside the write transaction. On SQLite that transaction (BEGIN IMMEDIATE) is the
-- file's one writer, so two nodes counting at once count one after the other; PostgreSQL
-- locks the row instead (its own lock_failures).
SELECT failures FROM jobscheduler_marks WHERE job = %(job)s;

-- name: set_failures
UPDATE jobscheduler_marks SET failures = %(failures)s WHERE job = %(job)s;
