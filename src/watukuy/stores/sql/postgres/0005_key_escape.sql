-- watukuy PostgreSQL schema, version 5: key columns hold any string.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- `text` cannot hold U+0000, so from this version the store writes partitions, identities,
-- versions and held ordering keys through a reversible escape: U+0001 becomes
-- U+0001 U+0002 and U+0000 becomes U+0001 U+0001 (a prefix-free code that keeps
-- code-point order). Values without either character are stored as they are, so this
-- migration only rewrites the rare values written before it that contain U+0001.
--
-- The keys of a table may change, and two old values can map to each other's old form, so
-- the affected rows move out to a temporary table and back instead of being updated in
-- place (an in-place UPDATE could collide with a row it has not rewritten yet).

CREATE TEMPORARY TABLE "watukuy_escape_pollers" (LIKE "{{schema}}"."{{prefix}}pollers") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}pollers" WHERE strpos("partition", chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_pollers" SELECT * FROM moved;
UPDATE "watukuy_escape_pollers" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}pollers" SELECT * FROM "watukuy_escape_pollers";

CREATE TEMPORARY TABLE "watukuy_escape_items" (LIKE "{{schema}}"."{{prefix}}items") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}items" WHERE strpos("partition", chr(1)) > 0 OR strpos(identity, chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_items" SELECT * FROM moved;
UPDATE "watukuy_escape_items" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2)),
    identity = replace(identity, chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}items" SELECT * FROM "watukuy_escape_items";

CREATE TEMPORARY TABLE "watukuy_escape_outbox" (LIKE "{{schema}}"."{{prefix}}outbox") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}outbox" WHERE strpos("partition", chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_outbox" SELECT * FROM moved;
UPDATE "watukuy_escape_outbox" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}outbox" SELECT * FROM "watukuy_escape_outbox";

CREATE TEMPORARY TABLE "watukuy_escape_parked" (LIKE "{{schema}}"."{{prefix}}parked") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}parked" WHERE strpos("partition", chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_parked" SELECT * FROM moved;
UPDATE "watukuy_escape_parked" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}parked" SELECT * FROM "watukuy_escape_parked";

CREATE TEMPORARY TABLE "watukuy_escape_validators" (LIKE "{{schema}}"."{{prefix}}validators") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}validators" WHERE strpos("partition", chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_validators" SELECT * FROM moved;
UPDATE "watukuy_escape_validators" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}validators" SELECT * FROM "watukuy_escape_validators";

CREATE TEMPORARY TABLE "watukuy_escape_log" (LIKE "{{schema}}"."{{prefix}}log") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}log" WHERE strpos("partition", chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_log" SELECT * FROM moved;
UPDATE "watukuy_escape_log" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}log" SELECT * FROM "watukuy_escape_log";

CREATE TEMPORARY TABLE "watukuy_escape_epoch_floors" (LIKE "{{schema}}"."{{prefix}}epoch_floors") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}epoch_floors" WHERE strpos("partition", chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_epoch_floors" SELECT * FROM moved;
UPDATE "watukuy_escape_epoch_floors" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}epoch_floors" SELECT * FROM "watukuy_escape_epoch_floors";

CREATE TEMPORARY TABLE "watukuy_escape_tombstones" (LIKE "{{schema}}"."{{prefix}}tombstones") ON COMMIT DROP;
WITH moved AS (
    DELETE FROM "{{schema}}"."{{prefix}}tombstones" WHERE strpos("partition", chr(1)) > 0 OR strpos(identity, chr(1)) > 0 RETURNING *
)
INSERT INTO "watukuy_escape_tombstones" SELECT * FROM moved;
UPDATE "watukuy_escape_tombstones" SET
    "partition" = replace("partition", chr(1), chr(1) || chr(2)),
    identity = replace(identity, chr(1), chr(1) || chr(2));
INSERT INTO "{{schema}}"."{{prefix}}tombstones" SELECT * FROM "watukuy_escape_tombstones";

UPDATE "{{schema}}"."{{prefix}}items" SET version = replace(version, chr(1), chr(1) || chr(2))
WHERE strpos(version, chr(1)) > 0;

UPDATE "{{schema}}"."{{prefix}}tombstones" SET version = replace(version, chr(1), chr(1) || chr(2))
WHERE strpos(version, chr(1)) > 0;

UPDATE "{{schema}}"."{{prefix}}parked" SET hold_key = replace(hold_key, chr(1), chr(1) || chr(2))
WHERE strpos(hold_key, chr(1)) > 0;
