-- watukuy PostgreSQL schema, version 9: the fence as a function.
--
-- {{schema}} and {{prefix}} are replaced as in version 1.
--
-- <prefix>fence(poller, partition, owner, epoch) locks the key's pollers row when the
-- lease stored there is (owner, epoch) and raises SQLSTATE WK001 otherwise (a key that is
-- gone included). A fenced write that starts with it can send its statements and COMMIT
-- with it, in one round trip: on a lost lease the transaction fails before any write, and
-- the key's row stays locked only while the server runs the transaction, not while the
-- client reads the lock's answer and sends the rest.

CREATE OR REPLACE FUNCTION "{{schema}}"."{{prefix}}fence"(
    key_poller text, key_partition text, lease_owner_of text, lease_epoch_of bigint
) RETURNS void LANGUAGE plpgsql AS $fence$
BEGIN
    PERFORM 1 FROM "{{schema}}"."{{prefix}}pollers"
    WHERE poller = key_poller AND "partition" = key_partition
        AND lease_owner = lease_owner_of AND lease_epoch = lease_epoch_of
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the lease of % is lost', key_poller USING ERRCODE = 'WK001';
    END IF;
END
$fence$;
