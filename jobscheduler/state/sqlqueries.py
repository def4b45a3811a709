"""The SQL of the state store's queries, written once for every engine.

``?`` is a parameter; ``{now}`` the store's clock (SQLite: microseconds from julianday('now'),
PostgreSQL: clock_timestamp()); ``{greatest}`` the larger of two values; ``{waited}`` the
seconds a queue row has waited; ``{skip_locked}`` PostgreSQL's ``FOR UPDATE SKIP LOCKED``
(SQLite needs none: its writes run in ``BEGIN IMMEDIATE`` transactions, one at a time). A
length of time (a lease, a hold) is a parameter the dialect writes (microseconds, or an
interval). The tables are in ``sql/<engine>/NNN_*.sql``.
"""

from __future__ import annotations

__all__ = ["NODE_COLUMNS", "QUEUE_COLUMNS", "RUN_COLUMNS", "Q"]

RUN_COLUMNS = (
    "run_id, job, slot, attempt, trigger, node, state, started, ended, exit_code, reason, "
    "output_tail, last_slot"
)
NODE_COLUMNS = "name, host, pid, process_started, started, heartbeat, max_workers, state"
QUEUE_COLUMNS = "id, job, args, priority, host, submitted, state, run_id, node"
ALERT_COLUMNS = "id, server, message, recipients, attempts, next_attempt, created, last_error"

Q: dict[str, str] = {
    "now": "SELECT {now}",
    # -- runs
    "claim": (
        "INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, "
        "started) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    ),
    "finish": (
        "UPDATE jobscheduler_runs SET state = ?, ended = ?, exit_code = ?, reason = ?, "
        "output_tail = ?, started = COALESCE(?, started) WHERE run_id = ? AND state = 'running'"
    ),
    # The console (schema 3): one run by id; a running run's output so far.
    "run": f"SELECT {RUN_COLUMNS} FROM jobscheduler_runs WHERE run_id = ?",
    "set_output": (
        "UPDATE jobscheduler_runs SET output_tail = ? WHERE run_id = ? AND state = 'running'"
    ),
    "release": "DELETE FROM jobscheduler_runs WHERE run_id = ? AND state = 'running'",
    "record": (
        f"INSERT INTO jobscheduler_runs ({RUN_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    ),
    "abandon": (
        "UPDATE jobscheduler_runs SET state = 'abandoned', ended = {greatest}({now}, started), "
        f"reason = ? WHERE node = ? AND state = 'running' RETURNING {RUN_COLUMNS}"
    ),
    # -- nodes
    "join": (
        f"INSERT INTO jobscheduler_nodes ({NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, {{now}}, ?, 'up') "
        "ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
        "process_started = excluded.process_started, started = excluded.started, "
        "heartbeat = excluded.heartbeat, max_workers = excluded.max_workers, state = 'up' "
        "WHERE NOT (jobscheduler_nodes.state = 'up' "
        "AND jobscheduler_nodes.heartbeat >= {now} - ?) RETURNING name"
    ),
    "node": f"SELECT {NODE_COLUMNS} FROM jobscheduler_nodes WHERE name = ?",
    "heartbeat": (
        "UPDATE jobscheduler_nodes SET heartbeat = {now} "
        "WHERE name = ? AND state = 'up' AND heartbeat >= {now} - ?"
    ),
    # The heartbeat, and what the node looks at after it, in one statement (see `Beat`):
    # other nodes expired, other live nodes of its host, whether an alert is due.
    # Parameters: name, lease, name, lease, name.
    "beat": (
        "UPDATE jobscheduler_nodes SET heartbeat = {now} "
        "WHERE name = ? AND state = 'up' AND heartbeat >= {now} - ? RETURNING "
        "(SELECT count(*) FROM jobscheduler_nodes AS o WHERE o.state = 'up' AND o.name <> ? "
        "AND o.heartbeat < {now} - ?), "
        "(SELECT count(*) FROM jobscheduler_nodes AS o WHERE o.state = 'up' AND o.name <> ? "
        "AND o.host = jobscheduler_nodes.host), "
        "EXISTS (SELECT 1 FROM jobscheduler_outbox WHERE next_attempt <= {now})"
    ),
    "leave": "UPDATE jobscheduler_nodes SET state = 'left' WHERE name = ? AND state = 'up'",
    "nodes": f"SELECT {NODE_COLUMNS} FROM jobscheduler_nodes ORDER BY name",
    "expired_nodes": (
        f"SELECT {NODE_COLUMNS} FROM jobscheduler_nodes "
        "WHERE state = 'up' AND heartbeat < {now} - ? ORDER BY name"
    ),
    "node_dead": "UPDATE jobscheduler_nodes SET state = 'dead' WHERE name = ?",
    # -- marks
    "mark": "SELECT job, last_slot, failures, paused_reason FROM jobscheduler_marks WHERE job = ?",
    "marks": "SELECT job, last_slot, failures, paused_reason FROM jobscheduler_marks",
    # Parameters: job, last_slot, failures, paused_reason, then whether to set failures and
    # paused_reason (0/1). last_slot only moves forward; NULL leaves it.
    "set_mark": (
        "INSERT INTO jobscheduler_marks (job, last_slot, failures, paused_reason) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (job) DO UPDATE SET "
        "last_slot = CASE WHEN excluded.last_slot IS NOT NULL AND "
        "(jobscheduler_marks.last_slot IS NULL OR excluded.last_slot > "
        "jobscheduler_marks.last_slot) THEN excluded.last_slot "
        "ELSE jobscheduler_marks.last_slot END, "
        "failures = CASE WHEN ? = 1 THEN excluded.failures "
        "ELSE jobscheduler_marks.failures END, "
        "paused_reason = CASE WHEN ? = 1 THEN excluded.paused_reason "
        "ELSE jobscheduler_marks.paused_reason END "
        "RETURNING job, last_slot, failures, paused_reason"
    ),
    # {rows}: one "(?, ?, 0, NULL)" per job (job, last_slot); last_slot only moves forward.
    "set_marks": (
        "INSERT INTO jobscheduler_marks (job, last_slot, failures, paused_reason) "
        "VALUES {rows} ON CONFLICT (job) DO UPDATE SET "
        "last_slot = CASE WHEN jobscheduler_marks.last_slot IS NULL OR excluded.last_slot > "
        "jobscheduler_marks.last_slot THEN excluded.last_slot "
        "ELSE jobscheduler_marks.last_slot END"
    ),
    # -- queue
    "submit": (
        "INSERT INTO jobscheduler_queue (job, args, priority, host, submitted) "
        "VALUES (?, ?, ?, ?, {now}) RETURNING id"
    ),
    # A node's poll (`look`): the (job, host) pairs of pending rows (at most ? of them: the
    # rest counts as something to take), and a row 'k' if it has an open kill request.
    "look": (
        "SELECT 'q', job, host FROM (SELECT DISTINCT job, host FROM jobscheduler_queue "
        "WHERE state = 'pending' LIMIT ?) AS p UNION ALL SELECT 'k', NULL, NULL WHERE EXISTS "
        "(SELECT 1 FROM jobscheduler_kill_requests WHERE node = ? AND done = 0)"
    ),
    "any_pending": "SELECT 1 FROM jobscheduler_queue WHERE state = 'pending' LIMIT 1",
    # Then filtered by host in Python, and the chosen rows marked taken.
    "take_candidates": (
        "SELECT id, job, host FROM jobscheduler_queue WHERE state = 'pending' AND {jobs} "
        "ORDER BY priority + {waited} / ? DESC, submitted, id LIMIT ? {skip_locked}"
    ),
    # {ids}: the chosen rows' placeholders; one statement for the whole take (a round trip
    # per row was most of a take's time on PostgreSQL).
    "take_rows": (
        "UPDATE jobscheduler_queue SET state = 'running', node = ?, taken = {now} "
        f"WHERE id IN ({{ids}}) AND state = 'pending' RETURNING {QUEUE_COLUMNS}"
    ),
    "settle": (
        "UPDATE jobscheduler_queue SET state = ?, run_id = ? WHERE id = ? AND state = 'running'"
    ),
    "queue_fail_node": (
        "UPDATE jobscheduler_queue SET state = 'failed' WHERE node = ? AND state = 'running'"
    ),
    # -- outbox
    "hold_alert": (
        "INSERT INTO jobscheduler_outbox (server, message, recipients, attempts, next_attempt, "
        "created, last_error) VALUES (?, ?, ?, ?, COALESCE(?, {now}), {now}, ?) RETURNING id"
    ),
    "due_alerts": (
        f"SELECT {ALERT_COLUMNS} FROM jobscheduler_outbox WHERE next_attempt <= {{now}} "
        "ORDER BY next_attempt, id LIMIT ? {skip_locked}"
    ),
    "any_due": "SELECT 1 FROM jobscheduler_outbox WHERE next_attempt <= {now} LIMIT 1",
    "hold_for": "UPDATE jobscheduler_outbox SET next_attempt = {now} + ? WHERE id = ?",
    "alert_sent": "DELETE FROM jobscheduler_outbox WHERE id = ?",
    "alert_failed": (
        "UPDATE jobscheduler_outbox SET attempts = attempts + 1, next_attempt = ?, "
        "last_error = ? WHERE id = ?"
    ),
    # -- kill requests
    "request_kill": (
        "INSERT INTO jobscheduler_kill_requests (run_id, node, requested) "
        "SELECT run_id, node, {now} FROM jobscheduler_runs WHERE state = 'running' AND {which} "
        "ORDER BY seq"
    ),
    "kill_requests": (
        "SELECT id, run_id FROM jobscheduler_kill_requests WHERE node = ? AND done = 0 ORDER BY id"
    ),
    "kill_done": "UPDATE jobscheduler_kill_requests SET done = 1 WHERE id = ?",
    # -- retention
    "prune_runs": (
        "DELETE FROM jobscheduler_runs WHERE state <> 'running' AND (started < ? OR seq IN "
        "(SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY job "
        "ORDER BY started DESC, seq DESC) AS n FROM jobscheduler_runs "
        "WHERE state <> 'running') AS ranked WHERE n > ?))"
    ),
    "prune_queue": (
        "DELETE FROM jobscheduler_queue WHERE state IN ('succeeded', 'failed', 'not_started') "
        "AND submitted < ?"
    ),
    "prune_kills": "DELETE FROM jobscheduler_kill_requests WHERE done = 1",
    "prune_nodes": "DELETE FROM jobscheduler_nodes WHERE state <> 'up' AND heartbeat < ?",
    # -- run processes (schema 2)
    "set_process": (
        "UPDATE jobscheduler_runs SET pid = ?, pid_started = ? "
        "WHERE run_id = ? AND state = 'running'"
    ),
    "processes": (
        "SELECT run_id, pid, pid_started FROM jobscheduler_runs "
        "WHERE node = ? AND state = 'running' AND pid IS NOT NULL ORDER BY seq"
    ),
}
