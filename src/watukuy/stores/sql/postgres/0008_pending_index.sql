-- watukuy PostgreSQL schema, version 8: a partial pending index on the outbox.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- The index load_pending and count_pending read holds (poller, partition, seq) and only
-- pending rows (every row is; status is never anything else), so it answers only
-- statements that name status = 'pending'. The index of version 1 led with the same two
-- columns as the primary key and served any statement on a key's rows: left to
-- estimates on a table without statistics (a fresh store, before autovacuum), the
-- planner chose it for acks by event id, then walked every entry of the key, those of
-- rows already deleted included, and filtered, so each ack of a sync cost more than the
-- one before it.

CREATE INDEX IF NOT EXISTS "{{prefix}}outbox_due_idx"
    ON "{{schema}}"."{{prefix}}outbox" (poller, "partition", seq)
    WHERE status = 'pending';

DROP INDEX IF EXISTS "{{schema}}"."{{prefix}}outbox_pending_idx";
