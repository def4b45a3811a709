-- SQLite's part of the state store's queries (the shared ones: sql/queries.sql).

-- fragment: now
-- The store's clock: microseconds since the epoch, from SQLite's own julianday('now').
CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)

-- fragment: greatest
MAX

-- fragment: waited
-- Seconds a queue row has waited.
((({now}) - submitted) / 1000000.0)

-- fragment: skip_locked
-- None needed: SQLite's writes run in BEGIN IMMEDIATE transactions, one at a time.
