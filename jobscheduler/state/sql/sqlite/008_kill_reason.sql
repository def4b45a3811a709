-- jobscheduler state store, schema version 8 (SQLite): the reason a kill request gives the run it
-- stops ("replaced" for an `overlap: replace` slot on another node);
-- NULL: an operator's kill (the run ends FAILED "killed").
ALTER TABLE jobscheduler_kill_requests ADD COLUMN reason TEXT;
