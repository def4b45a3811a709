-- jobscheduler state store, schema version 2 (PostgreSQL): each running run's process group
-- (its leader's pid and that process's start time), so a node restarted under its old name
-- can stop the process groups its lost runs left behind.
ALTER TABLE jobscheduler_runs ADD COLUMN pid integer;
ALTER TABLE jobscheduler_runs ADD COLUMN pid_started double precision
