-- watukuy PostgreSQL schema, version 4: revisions and tombstones.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- revision counts the events of an identity before its last one (0 after the first
-- created); event ids mix it in from 1 on. Rows written before this version get 0, which
-- keeps their next ids exactly what they would have been: nothing is back-filled.
--
-- A tombstone is what is left of a snapshot row when its identity is deleted (reason
-- 'deleted') or the snapshot is cleared ('cleared'): the row's last version, hash, schema
-- version and revision, and when it left. It lets a re-created identity continue its
-- revisions. removed_at is indexed for pruning by age.

ALTER TABLE "{{schema}}"."{{prefix}}items"
    ADD COLUMN IF NOT EXISTS revision bigint NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS "{{schema}}"."{{prefix}}tombstones" (
    poller         text COLLATE "C" NOT NULL,
    "partition"    text COLLATE "C" NOT NULL,
    identity       text COLLATE "C" NOT NULL,
    version        text,
    hash           text NOT NULL,
    schema_version bigint NOT NULL,
    revision       bigint NOT NULL,
    reason         text NOT NULL CHECK (reason IN ('deleted', 'cleared')),
    removed_at     bigint NOT NULL,
    PRIMARY KEY (poller, "partition", identity)
);

CREATE INDEX IF NOT EXISTS "{{prefix}}tombstones_age_idx"
    ON "{{schema}}"."{{prefix}}tombstones" (poller, "partition", removed_at);
