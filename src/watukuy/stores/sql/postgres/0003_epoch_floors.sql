-- watukuy PostgreSQL schema, version 3: epoch floors.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- delete_key removes a key's pollers row, and with it the lease epoch. The last epoch of a
-- deleted key is kept here, and a key created again continues from it: a lease issued
-- before the delete can never match one issued after it. One small row per deleted key.

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}epoch_floors" (
    poller      text COLLATE "C" NOT NULL,
    "partition" text COLLATE "C" NOT NULL,
    epoch       bigint NOT NULL,
    PRIMARY KEY (poller, "partition")
);
