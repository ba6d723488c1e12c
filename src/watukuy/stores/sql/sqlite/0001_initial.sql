-- watukuy SQLite schema, version 1. "{prefix}" is replaced by the store's table prefix.
-- Times are integer epoch milliseconds; JSON columns hold text exactly as written.

-- One row per (poller, partition): the state document and the lease.
CREATE TABLE IF NOT EXISTS "{prefix}pollers" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  state TEXT NOT NULL,
  lease_owner TEXT,
  lease_epoch INTEGER NOT NULL DEFAULT 0,
  lease_expires_at INTEGER,
  PRIMARY KEY (poller, "partition")
) WITHOUT ROWID;

-- The snapshot: one row per identity seen.
CREATE TABLE IF NOT EXISTS "{prefix}items" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  identity TEXT NOT NULL,
  version TEXT,
  hash TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  payload TEXT,
  seen_at INTEGER NOT NULL,
  PRIMARY KEY (poller, "partition", identity)
) WITHOUT ROWID;

-- Committed events waiting for their handler; acknowledged rows are deleted.
CREATE TABLE IF NOT EXISTS "{prefix}outbox" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  event_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  last_error TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (poller, "partition", event_id)
);

CREATE INDEX IF NOT EXISTS "{prefix}outbox_seq_idx" ON "{prefix}outbox" (poller, "partition", seq);

-- Poison events and quarantined invalid items.
CREATE TABLE IF NOT EXISTS "{prefix}parked" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('poison', 'invalid')),
  event TEXT,
  item TEXT,
  error TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  parked_at INTEGER NOT NULL,
  hold_key TEXT,
  seq INTEGER,
  PRIMARY KEY (poller, "partition", id)
);

CREATE INDEX IF NOT EXISTS "{prefix}parked_order_idx" ON "{prefix}parked" (poller, "partition", parked_at, id);

-- HTTP validators (ETag / Last-Modified) per URL hash.
CREATE TABLE IF NOT EXISTS "{prefix}validators" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  url_hash TEXT NOT NULL,
  etag TEXT,
  last_modified TEXT,
  stored_at INTEGER NOT NULL,
  PRIMARY KEY (poller, "partition", url_hash)
) WITHOUT ROWID;

-- The replay log.
CREATE TABLE IF NOT EXISTS "{prefix}log" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (poller, "partition", seq)
);

CREATE INDEX IF NOT EXISTS "{prefix}log_time_idx" ON "{prefix}log" (poller, "partition", created_at);
