-- watukuy SQLite schema, version 7: the snapshot and its tombstones become rowid tables.
-- "{prefix}" is replaced by the table prefix.
--
-- Until now items and tombstones were WITHOUT ROWID, their rows stored in the b-tree of
-- their key. Their rows are not small (a hash, links, the payload), and SQLite keeps
-- WITHOUT ROWID for small rows: when a vendor's ids are not in the order it lists them,
-- each page's upserts (or deletes, which write tombstones) land on leaves all over that
-- tree, and every commit rewrites most of it. A rowid table appends new rows at its end,
-- and only the unique index on the key, whose entries are small, takes the scattered
-- writes. The index serves every lookup and range scan by identity, the ON CONFLICT
-- (poller, "partition", identity) of the upsert and the OR REPLACE of a tombstone.
--
-- The standard rebuild, in the migration's transaction: a new table, every row copied,
-- the old table dropped, the new one renamed, its indexes built. The columns are those of
-- versions 1 to 6, with the items' payload moved last: a payload too large for one page
-- then spills into overflow pages, and the small columns before it are read without them.

CREATE TABLE "{prefix}items_rebuilt" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  identity TEXT NOT NULL,
  version TEXT,
  hash TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  seen_at INTEGER NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  seen_pass INTEGER NOT NULL DEFAULT 0,
  link_read INTEGER,
  link_prev TEXT,
  link_next TEXT,
  payload TEXT
);

INSERT INTO "{prefix}items_rebuilt" (poller, "partition", identity, version, hash,
  schema_version, seen_at, revision, seen_pass, link_read, link_prev, link_next, payload)
SELECT poller, "partition", identity, version, hash, schema_version, seen_at, revision,
  seen_pass, link_read, link_prev, link_next, payload
FROM "{prefix}items";

DROP TABLE "{prefix}items";

ALTER TABLE "{prefix}items_rebuilt" RENAME TO "{prefix}items";

CREATE UNIQUE INDEX "{prefix}items_key_idx" ON "{prefix}items" (poller, "partition", identity);

CREATE TABLE "{prefix}tombstones_rebuilt" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  identity TEXT NOT NULL,
  version TEXT,
  hash TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  revision INTEGER NOT NULL,
  reason TEXT NOT NULL CHECK (reason IN ('deleted', 'cleared')),
  removed_at INTEGER NOT NULL
);

INSERT INTO "{prefix}tombstones_rebuilt" (poller, "partition", identity, version, hash,
  schema_version, revision, reason, removed_at)
SELECT poller, "partition", identity, version, hash, schema_version, revision, reason,
  removed_at
FROM "{prefix}tombstones";

DROP TABLE "{prefix}tombstones";

ALTER TABLE "{prefix}tombstones_rebuilt" RENAME TO "{prefix}tombstones";

CREATE UNIQUE INDEX "{prefix}tombstones_key_idx" ON "{prefix}tombstones" (poller, "partition", identity);

CREATE INDEX "{prefix}tombstones_age_idx" ON "{prefix}tombstones" (poller, "partition", removed_at);
