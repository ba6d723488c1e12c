-- watukuy SQLite schema, version 7: the snapshot table becomes a rowid table. "{prefix}" is
-- replaced by the table prefix.
--
-- Until now items was WITHOUT ROWID, its rows stored in the b-tree of its key. Its rows
-- are large (the payload, a hash, links), and SQLite keeps WITHOUT ROWID for small rows:
-- when a vendor's ids are not in the order they are listed, each page's upserts land on
-- leaves all over that tree, and every commit rewrites most of them. A rowid table appends
-- new rows at its end, and only the unique index on the key, whose entries are small,
-- takes the scattered writes. The index serves every lookup and range scan by identity and
-- the ON CONFLICT (poller, "partition", identity) of the upsert.
--
-- The standard rebuild, in the migration's transaction: a new table, every row copied,
-- the old table dropped, the new one renamed, its index built. The columns are those of
-- versions 1 to 6, with the payload moved last: a payload too large for one page then
-- spills into overflow pages, and the small columns before it are read without them.

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
