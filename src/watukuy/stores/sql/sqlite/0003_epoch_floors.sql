-- watukuy SQLite schema, version 3: epoch floors. "{prefix}" is replaced by the table prefix.
--
-- delete_key removes a key's pollers row, and with it the lease epoch. The last epoch of a
-- deleted key is kept here, and a key created again continues from it: a lease issued
-- before the delete can never match one issued after it. One small row per deleted key.

CREATE TABLE IF NOT EXISTS "{prefix}epoch_floors" (
  poller TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  PRIMARY KEY (poller, "partition")
) WITHOUT ROWID;
