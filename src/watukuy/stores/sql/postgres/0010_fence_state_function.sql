-- watukuy PostgreSQL schema, version 10: the fence of a state patch as a function.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- <prefix>fence_state(poller, partition, owner, epoch, state) is <prefix>fence (version 9)
-- for a write that patches the state: it also raises SQLSTATE WK002 when the stored state
-- document is not, character for character, the one the caller last wrote (an operator
-- paused the key meanwhile, say). A commit that knows the stored state sends its writes,
-- the new state and COMMIT together, in one round trip; on WK002 it reads the state under
-- the row lock and writes again.

CREATE OR REPLACE FUNCTION "{{schema}}"."{{prefix}}fence_state"(
    key_poller text, key_partition text, lease_owner_of text, lease_epoch_of bigint,
    known_state text
) RETURNS void LANGUAGE plpgsql AS $fence$
DECLARE
    stored text;
BEGIN
    SELECT state::text INTO stored FROM "{{schema}}"."{{prefix}}pollers"
    WHERE poller = key_poller AND "partition" = key_partition
        AND lease_owner = lease_owner_of AND lease_epoch = lease_epoch_of
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the lease of % is lost', key_poller USING ERRCODE = 'WK001';
    END IF;
    IF stored IS DISTINCT FROM known_state THEN
        RAISE EXCEPTION 'the state of % moved', key_poller USING ERRCODE = 'WK002';
    END IF;
END
$fence$;
