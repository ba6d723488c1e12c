-- watukuy PostgreSQL schema, version 7: listing links for proofs of absence.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- A row's link says where the last linked full listing saw it: link_read is the index of
-- the committed page read of its pass that listed it, link_prev and link_next the
-- identities listed just before and after it (NULL when none or not known; encoded like
-- identity, see version 5). The three are NULL together on a row no linked listing has
-- seen yet, which is every row written before this version and every new row until a
-- commit writes its link. Nullable columns without a default: adding them rewrites nothing.

ALTER TABLE "{{schema}}"."{{prefix}}items"
    ADD COLUMN IF NOT EXISTS link_read bigint,
    ADD COLUMN IF NOT EXISTS link_prev text,
    ADD COLUMN IF NOT EXISTS link_next text;
