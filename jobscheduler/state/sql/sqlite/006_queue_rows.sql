-- jobscheduler state store, schema version 6 (SQLite): the queue's rows say why one ended
-- without a run (`reason`: arguments no run can be given), and how many times a row went
-- back to the queue because its node was lost while it ran (`attempt`, on_node_loss: rerun).
ALTER TABLE jobscheduler_queue ADD COLUMN reason TEXT;
ALTER TABLE jobscheduler_queue ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1
