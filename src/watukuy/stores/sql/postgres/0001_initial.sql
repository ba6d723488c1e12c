-- watukuy PostgreSQL schema, version 1.
--
-- {{schema}} and {{prefix}} are replaced by the store's (validated) schema name and table
-- prefix before this file runs, inside the migration transaction.
--
-- Identities, poller names, partitions and parked ids use the "C" collation so that ORDER BY
-- and keyset pagination follow code-point order, the order Python sorts strings in.
-- JSON documents are `json`, not `jsonb`: `json` keeps the exact text (big integers, key
-- order, number spelling) and accepts the escape \u0000, which `jsonb` rejects.

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}pollers" (
    poller           text COLLATE "C" NOT NULL,
    "partition"      text COLLATE "C" NOT NULL,
    state            json NOT NULL,
    lease_owner      text,
    lease_epoch      bigint NOT NULL DEFAULT 0,
    lease_expires_at bigint,
    epoch_counter    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (poller, "partition")
);

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}items" (
    poller         text COLLATE "C" NOT NULL,
    "partition"    text COLLATE "C" NOT NULL,
    identity       text COLLATE "C" NOT NULL,
    version        text,
    hash           text NOT NULL,
    schema_version bigint NOT NULL,
    payload        json,
    seen_at        bigint NOT NULL,
    PRIMARY KEY (poller, "partition", identity)
);

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}outbox" (
    poller          text COLLATE "C" NOT NULL,
    "partition"     text COLLATE "C" NOT NULL,
    seq             bigint NOT NULL,
    event_id        text COLLATE "C" NOT NULL,
    event           json NOT NULL,
    status          text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at bigint,
    last_error      json,
    created_at      bigint NOT NULL,
    PRIMARY KEY (poller, "partition", event_id)
);

CREATE INDEX IF NOT EXISTS "{{prefix}}outbox_pending_idx"
    ON "{{schema}}"."{{prefix}}outbox" (poller, "partition", status, seq);

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}parked" (
    poller      text COLLATE "C" NOT NULL,
    "partition" text COLLATE "C" NOT NULL,
    id          text COLLATE "C" NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('poison', 'invalid')),
    event       json,
    item        json,
    error       json NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    parked_at   bigint NOT NULL,
    hold_key    text,
    seq         bigint,
    PRIMARY KEY (poller, "partition", id)
);

CREATE INDEX IF NOT EXISTS "{{prefix}}parked_order_idx"
    ON "{{schema}}"."{{prefix}}parked" (poller, "partition", parked_at, id);

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}validators" (
    poller        text COLLATE "C" NOT NULL,
    "partition"   text COLLATE "C" NOT NULL,
    url_hash      text COLLATE "C" NOT NULL,
    etag          text,
    last_modified text,
    stored_at     bigint NOT NULL,
    PRIMARY KEY (poller, "partition", url_hash)
);

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}log" (
    poller      text COLLATE "C" NOT NULL,
    "partition" text COLLATE "C" NOT NULL,
    seq         bigint NOT NULL,
    event       json NOT NULL,
    created_at  bigint NOT NULL,
    PRIMARY KEY (poller, "partition", seq)
);

CREATE INDEX IF NOT EXISTS "{{prefix}}log_time_idx"
    ON "{{schema}}"."{{prefix}}log" (poller, "partition", created_at);
