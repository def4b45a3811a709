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
-- which is parsed again by every ->>), on its own core. An instant travels as the whole
-- number of microseconds since the epoch (exact; an ISO 8601 text cost this process 6.5 µs
-- a value, the number 1.4 µs, and one instant repeated in a batch, a tick's slot, is
-- converted once), made a timestamptz again by the server.

-- name: claim_rows
-- x: run_id, job, slot, attempt, trigger, node, state, started
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
SELECT x->>0, x->>1, (timestamptz 'epoch' + interval '1 microsecond' * (x->>2)::bigint),
       (x->>3)::integer, x->>4, x->>5, x->>6,
       (timestamptz 'epoch' + interval '1 microsecond' * (x->>7)::bigint)
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
ON CONFLICT DO NOTHING RETURNING run_id;

-- name: finish_rows
-- x: state, ended, exit_code, reason, output_tail, started, run_id
UPDATE jobscheduler_runs AS r
SET state = x->>0, ended = (timestamptz 'epoch' + interval '1 microsecond' * (x->>1)::bigint),
    exit_code = (x->>2)::integer, reason = x->>3, output_tail = x->>4,
    started = COALESCE((timestamptz 'epoch' + interval '1 microsecond' * (x->>5)::bigint),
                       r.started)
FROM jsonb_array_elements(%(rows)s::jsonb) AS x
WHERE r.run_id = x->>6 AND r.state = 'running'
RETURNING r.run_id;

-- name: set_marks_rows
-- The marks' last slots moved forward (the shared query set_marks, its rows in one JSON
-- parameter). x: job, last_slot; in the order of the jobs (rows are locked in one order).
INSERT INTO jobscheduler_marks (job, last_slot, failures, paused_reason)
SELECT x->>0, (timestamptz 'epoch' + interval '1 microsecond' * (x->>1)::bigint), 0, NULL
FROM jsonb_array_elements(%(rows)s::jsonb) WITH ORDINALITY AS t(x, n) ORDER BY n
ON CONFLICT (job) DO UPDATE SET
    last_slot = CASE WHEN jobscheduler_marks.last_slot IS NULL
                          OR excluded.last_slot > jobscheduler_marks.last_slot
                     THEN excluded.last_slot ELSE jobscheduler_marks.last_slot END;

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

-- name: submit_taken
-- A node's own submit taken by it in one statement (`submit_take`, for a job whose run the
-- take claims and no limit counts): the row inserted 'running' on %(node)s with its run
-- %(run_id)s, and that run inserted 'running' (trigger 'submit', no slot, attempt 1,
-- %(started)s), unless a pending row of the node's jobs %(jobs)s (an array; whatever its host
-- pattern) would come first in a take: a priority, with its aging, at least the new row's
-- (an older row of equal priority comes first). Then nothing is inserted and no row comes
-- back: the caller takes in a transaction instead. In autocommit, one round trip.
WITH row AS (
    INSERT INTO jobscheduler_queue (job, args, priority, host, submitted, state, node, taken,
                                    run_id)
    SELECT %(job)s, %(args)s, %(priority)s, %(host)s, {now}, 'running', %(node)s, {now},
           %(run_id)s
    WHERE NOT EXISTS (SELECT 1 FROM jobscheduler_queue
                      WHERE state = 'pending' AND job = ANY(%(jobs)s)
                        AND priority + {waited} / %(aging)s >= %(priority)s)
    RETURNING id, job, args, priority, host, submitted, state, run_id, node, reason, attempt),
run AS (
    INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
    SELECT run_id, job, NULL, attempt, 'submit', node, 'running', %(started)s FROM row)
SELECT id, job, args, priority, host, submitted, state, run_id, node, reason, attempt FROM row;

-- name: lock_jobs
-- The locks of the jobs of the claims under a limit in a transaction (`claim_within`), held
-- until it ends: taken before they count their jobs' live runs, so the count of one node
-- and the insert of another never interleave. x: job, slot, attempt of a claim, and whether
-- it yields. A claim whose key is taken already needs no lock (it can only be refused:
-- another node has the slot), so the nodes claiming a slot after its owner did never wait
-- for the owner's locks. The jobs are locked in one order (sorted; the sort is below the
-- projection that calls the functions): two transactions never wait on each other in a
-- cycle. A job whose claims all yield is only tried (`pg_try_advisory_xact_lock`): held
-- false, its lock is another transaction's, which is claiming it now; the transaction
-- leaves that job's claims instead of waiting (every other claim of the transaction would
-- wait with it). A statement of its own: in READ COMMITTED a statement sees what was
-- committed before it began, and the count must begin once the locks are held.
SELECT j, CASE WHEN y THEN pg_try_advisory_xact_lock(hashtext(j))
               ELSE pg_advisory_xact_lock(hashtext(j)) IS NOT NULL END AS held
FROM (SELECT x->>0 AS j, bool_and((x->>3)::boolean) AS y
      FROM jsonb_array_elements(%(rows)s::jsonb) AS x
      WHERE NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r
                        WHERE r.job = x->>0
                          AND r.slot = (timestamptz 'epoch'
                                        + interval '1 microsecond' * (x->>1)::bigint)
                          AND r.attempt = (x->>2)::integer)
      GROUP BY 1 ORDER BY 1) AS s;

-- name: within_rows
-- Claims under a limit, one per job, and the skipped records of those that find their job
-- busy, in one statement (one pass over the batch: a node's share of a slot's claims is
-- written at the slot, not ahead). The count of each job's live runs is taken once, over
-- what was committed before the statement (the jobs' locks are held by then, see
-- lock_jobs) and this transaction's earlier writes; a statement's count does not see its own
-- inserts. A slot waiting for the job, other than the claim's own, counts as live (see
-- claim_within). Rows returned: ('c', run_id) inserted running; ('s', run_id) recorded
-- skipped; ('b', run_id, live, taken) a busy claim without a skip reason (nothing written:
-- live runs, and whether the run's key or id is taken). A claim not returned found its key
-- or id taken. x: run_id, job, slot, attempt, trigger, node, state, started, limit, reason
WITH x AS MATERIALIZED (
    SELECT x->>0 AS run_id, x->>1 AS job,
           (timestamptz 'epoch' + interval '1 microsecond' * (x->>2)::bigint) AS slot,
           (x->>3)::integer AS attempt, x->>4 AS trigger, x->>5 AS node, x->>6 AS state,
           (timestamptz 'epoch' + interval '1 microsecond' * (x->>7)::bigint) AS started,
           (x->>8)::integer AS lim, x->>9 AS reason
    FROM jsonb_array_elements(%(rows)s::jsonb) AS x),
c AS MATERIALIZED (
    SELECT x.*,
           (SELECT count(*) FROM jobscheduler_runs AS r
            WHERE r.job = x.job AND r.state = 'running')
         + (SELECT count(*) FROM jobscheduler_waiting AS w
            WHERE w.job = x.job AND w.run_id <> x.run_id
              AND w.node IN (SELECT name FROM jobscheduler_nodes WHERE state = 'up')
              AND NOT EXISTS (SELECT 1 FROM jobscheduler_runs AS r WHERE r.run_id = w.run_id))
           AS live
    FROM x),
claimed AS (
    INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started)
    SELECT run_id, job, slot, attempt, trigger, node, state, started FROM c WHERE live < lim
    ON CONFLICT DO NOTHING RETURNING run_id),
skipped AS (
    INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started,
                                   ended, reason, output_tail)
    SELECT run_id, job, slot, attempt, trigger, node, 'skipped', started, started, reason, ''
    FROM c WHERE live >= lim AND reason IS NOT NULL
    ON CONFLICT DO NOTHING RETURNING run_id)
SELECT 'c', run_id, 0, false FROM claimed
UNION ALL
SELECT 's', run_id, 0, false FROM skipped
UNION ALL
SELECT 'b', c.run_id, c.live,
       EXISTS (SELECT 1 FROM jobscheduler_runs AS r
               WHERE r.run_id = c.run_id
                  OR (r.job = c.job AND r.slot = c.slot AND r.attempt = c.attempt))
FROM c WHERE c.live >= c.lim AND c.reason IS NULL;

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
