-- watukuy SQLite schema, version 4: revisions and tombstones. "{prefix}" is replaced by the
-- table prefix.
--
-- revision counts the events of an identity before its last one (0 after the first
-- created); event ids mix it in from 1 on. Rows written before this version have had at
-- most the events the original ids could tell apart, and 0 keeps their next ids exactly
-- what they would have been, so nothing is back-filled.
--
-- A tombstone is what is left of a snapshot row when its identity is deleted (reason
-- 'deleted') or the snapshot is cleared ('cleared'): the row's last version, hash, schema
-- version and revision, and when it left. It lets a re-created identity continue its
-- revisions. removed_at is indexed for pruning by age.

ALTER TABLE "{prefix}items" ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS "{prefix}tombstones" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  identity TEXT NOT NULL,
  version TEXT,
  hash TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  revision INTEGER NOT NULL,
  reason TEXT NOT NULL CHECK (reason IN ('deleted', 'cleared')),
  removed_at INTEGER NOT NULL,
  PRIMARY KEY (poller, "partition", identity)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS "{prefix}tombstones_age_idx" ON "{prefix}tombstones" (poller, "partition", removed_at);
