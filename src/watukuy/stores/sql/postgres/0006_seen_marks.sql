-- watukuy PostgreSQL schema, version 6: seen marks for resumable full listings.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- seen_pass is the id of the last full-listing pass that listed the identity (0: none
-- yet). A pass writes it on every row it lists, page by page, so a listing cut short
-- resumes where it stopped and its deletes are the rows left below its id. Rows written
-- before this version start at 0, which only means "not seen by any pass yet".

ALTER TABLE "{{schema}}"."{{prefix}}items"
    ADD COLUMN IF NOT EXISTS seen_pass bigint NOT NULL DEFAULT 0;
