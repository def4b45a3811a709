-- jobscheduler state store, schema version 3 (PostgreSQL): the operator's console. A job's
-- runs by state, newest first: its page's success rate and durations, and `warn_after: auto`
-- (the durations of its last succeeded runs), read without walking its whole history.
CREATE INDEX jobscheduler_runs_job_state ON jobscheduler_runs (job, state, started)
