-- watukuy SQLite schema, version 6: listing links for proofs of absence. "{prefix}" is
-- replaced by the table prefix.
--
-- A row's link says where the last linked full listing saw it: link_read is the index of
-- the committed page read of its pass that listed it, link_prev and link_next the
-- identities listed just before and after it (NULL when none or not known). The three are
-- NULL together on a row no linked listing has seen yet, which is every row written before
-- this version and every new row until a commit writes its link.

ALTER TABLE "{prefix}items" ADD COLUMN link_read INTEGER;
ALTER TABLE "{prefix}items" ADD COLUMN link_prev TEXT;
ALTER TABLE "{prefix}items" ADD COLUMN link_next TEXT;
