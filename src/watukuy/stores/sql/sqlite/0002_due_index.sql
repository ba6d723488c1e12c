-- watukuy SQLite schema, version 2: the due index. "{prefix}" is replaced by the table prefix.
--
-- wake_at mirrors the "wake_at" field of the state document (epoch ms, NULL when the key
-- needs nothing until an operator acts); every write of the state writes both. Rows written
-- before this version have no such field, so NULL is their true value and nothing is
-- back-filled. The partial index holds only keys with a wake time, ordered the way
-- due_keys reads them.

ALTER TABLE "{prefix}pollers" ADD COLUMN wake_at INTEGER;

CREATE INDEX IF NOT EXISTS "{prefix}pollers_due_idx" ON "{prefix}pollers" (poller, wake_at, "partition") WHERE wake_at IS NOT NULL;
