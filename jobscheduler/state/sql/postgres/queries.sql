-- PostgreSQL's part of the state store's queries (the shared ones: sql/queries.sql).

-- fragment: now
clock_timestamp()

-- fragment: greatest
GREATEST

-- fragment: waited
-- Seconds a queue row has waited.
extract(epoch from ({now} - submitted))

-- fragment: skip_locked
FOR UPDATE SKIP LOCKED

-- A batch of claims, finishes, settles or submits is one statement whose rows come as one
-- JSON parameter, %(rows)s, an array of arrays (their fields in the order each query reads
-- them): psycopg caches a statement's parsing only up to 50 parameters, and dumping scalars
-- or arrays costs 9-11 µs of this process's CPU per row, the JSON text 3 µs (measured with
-- 64-row claims); the server parses it (jsonb: once a row, 20 % less of its time than json,
-- which is parsed again by every ->>), on its own core.

-- name: claim_rows
-- x: run_id, job, slot, attempt, trigger, node, state, started
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
SELECT x->>0, x->>1, (x->>2)::timestamptz, (x->>3)::integer, x->>4, x->>5, x->>6,
       (x->>7)::timestamptz
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
ON CONFLICT DO NOTHING RETURNING run_id;

-- name: finish_rows
-- x: state, ended, exit_code, reason, output_tail, started, run_id
UPDATE jobscheduler_runs AS r
SET state = x->>0, ended = (x->>1)::timestamptz, exit_code = (x->>2)::integer, reason = x->>3,
    output_tail = x->>4, started = COALESCE((x->>5)::timestamptz, r.started)
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
WHERE r.run_id = x->>6 AND r.state = 'running'
RETURNING r.run_id;

-- name: settle_rows
-- x: state, run_id, queue id
UPDATE jobscheduler_queue AS q SET state = x->>0, run_id = x->>1
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
WHERE q.id = (x->>2)::bigint AND q.state = 'running';

-- name: submit_rows
-- x: job, args, priority, host. Ids come from the identity in the order rows are inserted
-- (the ordinality): sorted, they are the rows' in order. The listening nodes are notified in
-- the same statement (one notification a transaction: repeated ones are folded).
WITH rows AS (
    INSERT INTO jobscheduler_queue (job, args, priority, host, submitted)
    SELECT x->>0, x->>1, (x->>2)::integer, x->>3, clock_timestamp()
    FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS t(x, n) ORDER BY n
    RETURNING id)
SELECT id, pg_notify('jobscheduler', 'queue') FROM rows ORDER BY id;

-- name: submit_notify
-- One row's submit, and the listening nodes notified, in one statement (a NOTIFY of its own
-- would be a second commit in autocommit).
WITH row AS (
    INSERT INTO jobscheduler_queue (job, args, priority, host, submitted)
    VALUES (%(job)s, %(args)s, %(priority)s, %(host)s, clock_timestamp()) RETURNING id)
SELECT id, pg_notify('jobscheduler', 'queue') FROM row;

-- name: lock_jobs
-- The locks of the jobs of the claims under a limit in a transaction (`claim_within`), held
-- until it ends: taken before they count their jobs' live runs, so the count of one node
-- and the insert of another never interleave. x: job, slot, attempt of a claim. A claim whose
-- key is taken already needs no lock (it can only be refused: another node has the slot),
-- so the nodes claiming a slot after its owner did never wait for the owner's locks. The
-- jobs are locked in one order (sorted; the sort is below the projection that calls the
-- function): two transactions never wait on each other in a cycle. A statement of its own:
-- in READ COMMITTED a statement sees what was committed before it began, and the count must
-- begin once the locks are held.
SELECT count(pg_advisory_xact_lock(hashtext(j)))
FROM (SELECT DISTINCT x->>0 AS j FROM jsonb_array_elements(%(rows)s::jsonb) AS x
      WHERE NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r
                        WHERE r.job = x->>0 AND r.slot = (x->>1)::timestamptz
                          AND r.attempt = (x->>2)::integer)
      ORDER BY 1) AS s;

-- name: claim_within_rows
-- Claims under a limit, one per job (a statement's count does not see its own inserts).
-- x: run_id, job, slot, attempt, trigger, node, state, started, limit
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
SELECT x->>0, x->>1, (x->>2)::timestamptz, (x->>3)::integer, x->>4, x->>5, x->>6,
       (x->>7)::timestamptz
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
WHERE (SELECT count(*) FROM jobscheduler_runs AS r
       WHERE r.job = x->>1 AND r.state = 'running') < (x->>8)::integer
ON CONFLICT DO NOTHING RETURNING run_id;

-- name: skip_rows
-- The skipped records of claims under a limit that found their job busy (a key taken
-- refuses its row). x: run_id, job, slot, attempt, trigger, node, started, reason
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started, ended,
                               reason, output_tail)
SELECT x->>0, x->>1, (x->>2)::timestamptz, (x->>3)::integer, x->>4, x->>5, 'skipped',
       (x->>6)::timestamptz, (x->>6)::timestamptz, x->>7, ''
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
ON CONFLICT DO NOTHING RETURNING run_id;
-- name: lock_take_jobs
-- A take's locks of its jobs with a limit, the ones `lock_jobs` takes (sorted, below the
-- projection), before it counts their live runs: a take and another node's claim under the
-- limit never interleave. %(jobs)s: a JSON array of names.
SELECT count(pg_advisory_xact_lock(hashtext(j)))
FROM (SELECT DISTINCT j FROM jsonb_array_elements_text(%(jobs)s::jsonb) AS j ORDER BY 1) AS s;

-- name: lock_failures
-- The job's count of failures, its row locked to the end of the transaction: two nodes
-- counting at once count one after the other, the second reading what the first wrote.
SELECT failures FROM jobscheduler_marks WHERE job = %(job)s FOR UPDATE;
