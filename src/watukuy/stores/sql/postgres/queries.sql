-- The statements PostgresStore runs, one per "-- name:" block.
--
-- {pollers}, {items}, {tombstones}, {outbox}, {parked}, {validators} and {log} become the
-- store's
-- quoted, schema-qualified table names; %s are psycopg parameters. Every statement on a key
-- starts its WHERE clause with the key's (poller, partition).
-- Page-sized writes pass one array per column and expand them with unnest(), so a page of
-- any size is one statement per table. Arrays travel in binary (%b): the text array format
-- would make psycopg escape every quote and backslash of every JSON document.

-- name: acquire
-- Create the key (with its empty state) or take its lease when free or expired.
INSERT INTO {pollers} AS t
    (poller, "partition", state, wake_at, lease_owner, lease_epoch, lease_expires_at,
    epoch_counter)
VALUES (%s, %s, %s::json, %s, %s, 1, %s, 1)
ON CONFLICT (poller, "partition") DO UPDATE SET
    lease_owner = EXCLUDED.lease_owner,
    lease_epoch = GREATEST(t.lease_epoch, t.epoch_counter) + 1,
    epoch_counter = GREATEST(t.lease_epoch, t.epoch_counter) + 1,
    lease_expires_at = EXCLUDED.lease_expires_at
WHERE t.lease_owner IS NULL OR t.lease_expires_at IS NULL OR t.lease_expires_at <= %s
RETURNING lease_epoch

-- name: renew
UPDATE {pollers} SET lease_expires_at = %s
WHERE poller = %s AND "partition" = %s AND lease_owner = %s AND lease_epoch = %s

-- name: release
UPDATE {pollers} SET lease_owner = NULL, lease_expires_at = NULL
WHERE poller = %s AND "partition" = %s AND lease_owner = %s AND lease_epoch = %s

-- name: server_time
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint

-- name: get_lease
SELECT lease_owner, lease_epoch, lease_expires_at FROM {pollers}
WHERE poller = %s AND "partition" = %s

-- name: fence
-- The fence of a write that does not read the state: the key's row lock when the lease is
-- still (owner, epoch), else SQLSTATE WK001 (see version 9).
SELECT {fence}(%s, %s, %s, %s)

-- name: fence_state
-- The fence of a state patch whose writer knows the stored state: fence, plus SQLSTATE
-- WK002 when the stored document is not the one given (see version 10).
SELECT {fence_state}(%s, %s, %s, %s, %s)

-- name: lock
-- The fence: every leased write starts with this row lock and compares owner and epoch.
SELECT lease_owner, lease_epoch, state::text FROM {pollers}
WHERE poller = %s AND "partition" = %s
FOR UPDATE

-- name: create
INSERT INTO {pollers} (poller, "partition", state, wake_at) VALUES (%s, %s, %s::json, %s)
ON CONFLICT DO NOTHING

-- name: load_state
SELECT state::text FROM {pollers} WHERE poller = %s AND "partition" = %s

-- name: write_state
-- wake_at is a copy of the document's field, for the due index: always written together.
UPDATE {pollers} SET state = %s::json, wake_at = %s WHERE poller = %s AND "partition" = %s

-- name: due_keys
-- Served by the partial index (poller, wake_at, partition) in index order; LIMIT NULL is
-- no limit.
SELECT "partition", wake_at FROM {pollers}
WHERE poller = %s AND wake_at IS NOT NULL AND wake_at <= %s
ORDER BY wake_at, "partition" LIMIT %s

-- name: list_keys
SELECT poller, "partition" FROM {pollers} ORDER BY poller, "partition"

-- name: list_keys_of
SELECT poller, "partition" FROM {pollers} WHERE poller = %s ORDER BY "partition"

-- name: lock_key
-- Taken first by every write that is not fenced but must not interleave with one.
SELECT 1 FROM {pollers} WHERE poller = %s AND "partition" = %s FOR UPDATE

-- name: keep_epoch
-- delete_key, under the key's row lock: the epoch the next incarnation of the key starts
-- after.
INSERT INTO {epoch_floors} AS f (poller, "partition", epoch)
SELECT poller, "partition", GREATEST(lease_epoch, epoch_counter) FROM {pollers}
WHERE poller = %s AND "partition" = %s
ON CONFLICT (poller, "partition") DO UPDATE SET epoch = GREATEST(f.epoch, EXCLUDED.epoch)

-- name: raise_epoch
-- After acquire, in the same transaction: a key created again after delete_key continues
-- from the epoch floor. A separate statement, so it sees a delete that acquire waited for.
UPDATE {pollers} AS p SET lease_epoch = f.epoch + 1, epoch_counter = f.epoch + 1
FROM {epoch_floors} AS f
WHERE p.poller = %s AND p."partition" = %s AND f.poller = p.poller
    AND f."partition" = p."partition" AND p.lease_owner = %s AND p.lease_epoch <= f.epoch
RETURNING p.lease_epoch

-- name: delete_items_of
DELETE FROM {items} WHERE poller = %s AND "partition" = %s

-- name: delete_outbox_of
DELETE FROM {outbox} WHERE poller = %s AND "partition" = %s

-- name: delete_parked_of
DELETE FROM {parked} WHERE poller = %s AND "partition" = %s

-- name: delete_validators_of
DELETE FROM {validators} WHERE poller = %s AND "partition" = %s

-- name: delete_log_of
DELETE FROM {log} WHERE poller = %s AND "partition" = %s

-- name: delete_tombstones_of
DELETE FROM {tombstones} WHERE poller = %s AND "partition" = %s

-- name: delete_poller
DELETE FROM {pollers} WHERE poller = %s AND "partition" = %s

-- name: clear_items
-- Every row leaves a 'cleared' tombstone, aged from its seen_at, in the same statement.
WITH gone AS (
    DELETE FROM {items} WHERE poller = %s AND "partition" = %s
    RETURNING poller, "partition", identity, version, hash, schema_version, revision, seen_at
)
INSERT INTO {tombstones} AS t
    (poller, "partition", identity, version, hash, schema_version, revision, reason,
    removed_at)
SELECT poller, "partition", identity, version, hash, schema_version, revision, 'cleared',
    seen_at
FROM gone
ON CONFLICT (poller, "partition", identity) DO UPDATE SET
    version = EXCLUDED.version,
    hash = EXCLUDED.hash,
    schema_version = EXCLUDED.schema_version,
    revision = EXCLUDED.revision,
    reason = EXCLUDED.reason,
    removed_at = EXCLUDED.removed_at

-- name: load_versions
-- load_versions, mark_items and delete_items take one primary-key probe per listed
-- identity, whatever the table statistics say: "identity = ANY(list)" leaves the plan to
-- estimates, and on a table without statistics yet (a fresh store, before autovacuum) the
-- planner scans every row of the key and filters, so a first sync turns quadratic (80 s
-- instead of 6 for 100,000 items). A LATERAL subquery with OFFSET 0 cannot be flattened
-- into a join, so it runs as one probe per identity. (items has no other index a probe
-- could wander into; the tombstones and the outbox have, so they keep "= ANY".)
SELECT f.identity, f.version, f.hash, f.schema_version, f.payload::text, f.seen_at, f.revision
FROM (SELECT %s::text AS poller, %s::text AS part) AS k
CROSS JOIN unnest(%b::text[]) AS w(identity)
CROSS JOIN LATERAL (
    SELECT * FROM {items} AS x
    WHERE x.poller = k.poller AND x."partition" = k.part AND x.identity = w.identity
    OFFSET 0
) AS f

-- name: load_tombstones
SELECT identity, version, hash, schema_version, revision, reason, removed_at FROM {tombstones}
WHERE poller = %s AND "partition" = %s AND identity = ANY(%b::text[])

-- name: prune_tombstones
DELETE FROM {tombstones} WHERE poller = %s AND "partition" = %s AND removed_at < %s

-- name: revive
DELETE FROM {tombstones}
WHERE poller = %s AND "partition" = %s AND identity = ANY(%b::text[])

-- name: stream_first
SELECT identity FROM {items} WHERE poller = %s AND "partition" = %s
ORDER BY identity LIMIT %s

-- name: stream_next
SELECT identity FROM {items} WHERE poller = %s AND "partition" = %s AND identity > %s
ORDER BY identity LIMIT %s

-- name: unseen_first
SELECT identity FROM {items} WHERE poller = %s AND "partition" = %s AND seen_pass < %s
ORDER BY identity LIMIT %s

-- name: unseen_next
SELECT identity FROM {items}
WHERE poller = %s AND "partition" = %s AND seen_pass < %s AND identity > %s
ORDER BY identity LIMIT %s

-- name: mark_items
-- The upsert above keeps seen_pass; only these marks move it. The rows are found by the
-- probes of load_versions and written by ctid: every writer of a key's rows holds the
-- key's row lock (the lease fence), so no row moves between the probe and the write.
UPDATE {items} AS i SET seen_pass = hit.pass
FROM (
    SELECT k.pass, f.row_id
    FROM (SELECT %s::text AS poller, %s::text AS part, %s::bigint AS pass) AS k
    CROSS JOIN unnest(%b::text[]) AS w(identity)
    CROSS JOIN LATERAL (
        SELECT x.ctid AS row_id FROM {items} AS x
        WHERE x.poller = k.poller AND x."partition" = k.part AND x.identity = w.identity
        OFFSET 0
    ) AS f
) AS hit
WHERE i.ctid = hit.row_id

-- name: mark_and_link_items
-- mark_items and CommitBatch.links in one statement, after the deletes (a page of a linked
-- listing marks and links the same rows: one new row version each instead of two). A NULL
-- pass leaves the mark, a NULL read leaves the link. Rows are found by the probes of
-- mark_items, and an identity with no stored row (never stored, or deleted by this commit)
-- finds none.
UPDATE {items} AS i SET
    seen_pass = coalesce(hit.pass, i.seen_pass),
    link_read = coalesce(hit.link_read, i.link_read),
    link_prev = CASE WHEN hit.link_read IS NULL THEN i.link_prev ELSE hit.link_prev END,
    link_next = CASE WHEN hit.link_read IS NULL THEN i.link_next ELSE hit.link_next END
FROM (
    SELECT u.pass, u.link_read, u.link_prev, u.link_next, f.row_id
    FROM (SELECT %s::text AS poller, %s::text AS part) AS k
    CROSS JOIN unnest(%b::text[], %b::bigint[], %b::bigint[], %b::text[], %b::text[])
        AS u(identity, pass, link_read, link_prev, link_next)
    CROSS JOIN LATERAL (
        SELECT x.ctid AS row_id FROM {items} AS x
        WHERE x.poller = k.poller AND x."partition" = k.part AND x.identity = u.identity
        OFFSET 0
    ) AS f
) AS hit
WHERE i.ctid = hit.row_id

-- name: load_marks
-- The probes of load_versions, reading the seen mark and the link only.
SELECT f.identity, f.seen_pass, f.link_read, f.link_prev, f.link_next
FROM (SELECT %s::text AS poller, %s::text AS part) AS k
CROSS JOIN unnest(%b::text[]) AS w(identity)
CROSS JOIN LATERAL (
    SELECT x.identity, x.seen_pass, x.link_read, x.link_prev, x.link_next FROM {items} AS x
    WHERE x.poller = k.poller AND x."partition" = k.part AND x.identity = w.identity
    OFFSET 0
) AS f

-- name: count_items
SELECT count(*) FROM {items} WHERE poller = %s AND "partition" = %s

-- name: upsert_items
INSERT INTO {items}
    (poller, "partition", identity, version, hash, schema_version, payload, seen_at, revision)
SELECT %s, %s, u.identity, u.version, u.hash, u.schema_version, u.payload::json, u.seen_at,
    u.revision
FROM unnest(%b::text[], %b::text[], %b::text[], %b::bigint[], %b::text[], %b::bigint[],
    %b::bigint[])
    AS u(identity, version, hash, schema_version, payload, seen_at, revision)
ON CONFLICT (poller, "partition", identity) DO UPDATE SET
    version = EXCLUDED.version,
    hash = EXCLUDED.hash,
    schema_version = EXCLUDED.schema_version,
    payload = EXCLUDED.payload,
    seen_at = EXCLUDED.seen_at,
    revision = EXCLUDED.revision

-- name: upsert_items_shared
-- upsert_items for rows that share their schema version and seen_at (a page's rows do):
-- those two are bound once instead of as an array each.
INSERT INTO {items}
    (poller, "partition", identity, version, hash, schema_version, payload, seen_at, revision)
SELECT %s, %s, u.identity, u.version, u.hash, %s, u.payload::json, %s, u.revision
FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[])
    AS u(identity, version, hash, payload, revision)
ON CONFLICT (poller, "partition", identity) DO UPDATE SET
    version = EXCLUDED.version,
    hash = EXCLUDED.hash,
    schema_version = EXCLUDED.schema_version,
    payload = EXCLUDED.payload,
    seen_at = EXCLUDED.seen_at,
    revision = EXCLUDED.revision

-- name: insert_items
-- A page's snapshot rows as a plain insert, when they are all new as far as the page can
-- tell (see PostgresStore.commit_poll): ON CONFLICT costs the server a probe of the
-- primary key and a confirmation record per row even when no row conflicts (about 40% of
-- the statement). When one does, the insert fails on the primary key, the commit rolls
-- back, and PostgresStore writes the page again with upsert_items.
INSERT INTO {items}
    (poller, "partition", identity, version, hash, schema_version, payload, seen_at, revision)
SELECT %s, %s, u.identity, u.version, u.hash, u.schema_version, u.payload::json, u.seen_at,
    u.revision
FROM unnest(%b::text[], %b::text[], %b::text[], %b::bigint[], %b::text[], %b::bigint[],
    %b::bigint[])
    AS u(identity, version, hash, schema_version, payload, seen_at, revision)

-- name: insert_items_shared
-- insert_items for rows that share their schema version and seen_at (see
-- upsert_items_shared).
INSERT INTO {items}
    (poller, "partition", identity, version, hash, schema_version, payload, seen_at, revision)
SELECT %s, %s, u.identity, u.version, u.hash, %s, u.payload::json, %s, u.revision
FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[])
    AS u(identity, version, hash, payload, revision)

-- name: delete_items
-- Each deleted row leaves a 'deleted' tombstone stamped with the commit time.
WITH gone AS (
    DELETE FROM {items} AS i USING (
        SELECT f.row_id FROM (SELECT %s::text AS poller, %s::text AS part) AS k
        CROSS JOIN unnest(%b::text[]) AS w(identity)
        CROSS JOIN LATERAL (
            SELECT x.ctid AS row_id FROM {items} AS x
            WHERE x.poller = k.poller AND x."partition" = k.part AND x.identity = w.identity
            OFFSET 0
        ) AS f
    ) AS hit
    WHERE i.ctid = hit.row_id
    RETURNING i.poller, i."partition", i.identity, i.version, i.hash, i.schema_version,
        i.revision
)
INSERT INTO {tombstones} AS t
    (poller, "partition", identity, version, hash, schema_version, revision, reason,
    removed_at)
SELECT poller, "partition", identity, version, hash, schema_version, revision, 'deleted', %s
FROM gone
ON CONFLICT (poller, "partition", identity) DO UPDATE SET
    version = EXCLUDED.version,
    hash = EXCLUDED.hash,
    schema_version = EXCLUDED.schema_version,
    revision = EXCLUDED.revision,
    reason = EXCLUDED.reason,
    removed_at = EXCLUDED.removed_at

-- name: upsert_outbox
-- An event id already pending is replaced: new sequence, fresh attempts (the final state
-- of an item that flipped back and forth is then delivered last).
INSERT INTO {outbox} (poller, "partition", event_id, seq, event, attempts, next_attempt_at,
    last_error, created_at)
SELECT %s, %s, u.event_id, u.seq, u.event::json, u.attempts, u.next_attempt_at,
    u.last_error::json, u.created_at
FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::integer[], %b::bigint[], %b::text[],
    %b::bigint[])
    AS u(event_id, seq, event, attempts, next_attempt_at, last_error, created_at)
ON CONFLICT (poller, "partition", event_id) DO UPDATE SET
    seq = EXCLUDED.seq,
    event = EXCLUDED.event,
    status = 'pending',
    attempts = EXCLUDED.attempts,
    next_attempt_at = EXCLUDED.next_attempt_at,
    last_error = EXCLUDED.last_error,
    created_at = EXCLUDED.created_at

-- name: insert_outbox_new
-- A page's new events (see upsert_outbox_new) as a plain insert: an event id is nearly
-- always new, and ON CONFLICT costs the server a probe of the primary key and a
-- confirmation record per row even when no row conflicts. When one does (an item that
-- flipped back while its old event was still pending), the insert fails on the primary
-- key, the commit rolls back, and PostgresStore writes the page again with
-- upsert_outbox_new.
INSERT INTO {outbox} (poller, "partition", event_id, seq, event, attempts, next_attempt_at,
    last_error, created_at)
SELECT %s, %s, u.event_id, u.seq, u.event::json, %s, NULL, NULL, %s
FROM unnest(%b::text[], %b::bigint[], %b::text[]) AS u(event_id, seq, event)

-- name: upsert_outbox_new
-- upsert_outbox for new events sharing their attempts and creation time, with no retry
-- time nor error (a page's events are): those are bound once.
INSERT INTO {outbox} (poller, "partition", event_id, seq, event, attempts, next_attempt_at,
    last_error, created_at)
SELECT %s, %s, u.event_id, u.seq, u.event::json, %s, NULL, NULL, %s
FROM unnest(%b::text[], %b::bigint[], %b::text[]) AS u(event_id, seq, event)
ON CONFLICT (poller, "partition", event_id) DO UPDATE SET
    seq = EXCLUDED.seq,
    event = EXCLUDED.event,
    status = 'pending',
    attempts = EXCLUDED.attempts,
    next_attempt_at = EXCLUDED.next_attempt_at,
    last_error = EXCLUDED.last_error,
    created_at = EXCLUDED.created_at

-- name: upsert_log
INSERT INTO {log} (poller, "partition", seq, event, created_at)
SELECT %s, %s, u.seq, u.event::json, %s
FROM unnest(%b::bigint[], %b::text[]) AS u(seq, event)
ON CONFLICT (poller, "partition", seq) DO UPDATE SET
    event = EXCLUDED.event,
    created_at = EXCLUDED.created_at

-- name: upsert_parked
INSERT INTO {parked} (poller, "partition", id, kind, event, item, error, attempts, parked_at,
    hold_key, seq)
SELECT %s, %s, u.id, u.kind, u.event::json, u.item::json, u.error::json, u.attempts,
    u.parked_at, u.hold_key, u.seq
FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::integer[],
    %b::bigint[], %b::text[], %b::bigint[])
    AS u(id, kind, event, item, error, attempts, parked_at, hold_key, seq)
ON CONFLICT (poller, "partition", id) DO UPDATE SET
    kind = EXCLUDED.kind,
    event = EXCLUDED.event,
    item = EXCLUDED.item,
    error = EXCLUDED.error,
    attempts = EXCLUDED.attempts,
    parked_at = EXCLUDED.parked_at,
    hold_key = EXCLUDED.hold_key,
    seq = EXCLUDED.seq

-- name: load_pending
SELECT event_id, seq, event::text, attempts, next_attempt_at, last_error::text, created_at
FROM {outbox}
WHERE poller = %s AND "partition" = %s AND status = 'pending' AND seq > %s
ORDER BY seq, event_id LIMIT %s

-- name: count_pending
SELECT count(*) FROM {outbox} WHERE poller = %s AND "partition" = %s AND status = 'pending'

-- name: ack
-- One primary-key probe per event id, as in load_versions: with "event_id = ANY(list)" the
-- planner, left to estimates on a table without statistics, reads every index entry of
-- the key, those of rows already deleted included (a bitmap scan never marks them dead),
-- and filters, so each ack of a sync cost more than the one before it. (The pending index
-- cannot serve the probe: it is partial, see version 8.) The rows are deleted by ctid;
-- every writer of a key's outbox rows holds the key's row lock, so no row moves between
-- the probe and the delete.
DELETE FROM {outbox} AS o USING (
    SELECT f.row_id FROM (SELECT %s::text AS poller, %s::text AS part) AS k
    CROSS JOIN unnest(%b::text[]) AS w(event_id)
    CROSS JOIN LATERAL (
        SELECT x.ctid AS row_id FROM {outbox} AS x
        WHERE x.poller = k.poller AND x."partition" = k.part AND x.event_id = w.event_id
        OFFSET 0
    ) AS f
) AS hit
WHERE o.ctid = hit.row_id

-- name: record_attempt
UPDATE {outbox}
SET attempts = attempts + 1, last_error = %s::json, next_attempt_at = %s
WHERE poller = %s AND "partition" = %s AND event_id = %s

-- name: list_parked
SELECT id, kind, event::text, item::text, error::text, attempts, parked_at, hold_key, seq
FROM {parked}
WHERE poller = %s AND "partition" = %s AND (%s::text IS NULL OR kind = %s)
ORDER BY parked_at, id LIMIT %s

-- name: count_parked
SELECT count(*) FROM {parked} WHERE poller = %s AND "partition" = %s

-- name: lock_poison
SELECT id, seq, event::text, parked_at FROM {parked}
WHERE poller = %s AND "partition" = %s AND id = ANY(%b::text[])
    AND kind = 'poison' AND event IS NOT NULL
FOR UPDATE

-- name: discard_parked
DELETE FROM {parked} WHERE poller = %s AND "partition" = %s AND id = ANY(%b::text[])

-- name: held_keys
SELECT DISTINCT hold_key FROM {parked}
WHERE poller = %s AND "partition" = %s AND hold_key IS NOT NULL

-- name: get_validator
SELECT etag, last_modified, stored_at FROM {validators}
WHERE poller = %s AND "partition" = %s AND url_hash = %s

-- name: set_validator
INSERT INTO {validators} (poller, "partition", url_hash, etag, last_modified, stored_at)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (poller, "partition", url_hash) DO UPDATE SET
    etag = EXCLUDED.etag,
    last_modified = EXCLUDED.last_modified,
    stored_at = EXCLUDED.stored_at

-- name: read_log
SELECT seq, event::text, created_at FROM {log}
WHERE poller = %s AND "partition" = %s AND seq > %s AND created_at >= %s AND created_at <= %s
ORDER BY seq LIMIT %s

-- name: prune_log
DELETE FROM {log} WHERE poller = %s AND "partition" = %s AND created_at < %s
