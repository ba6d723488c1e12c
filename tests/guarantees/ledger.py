"""The guarantee ledger: which tests prove each promise, and the mutants they must kill.

``GUARANTEES`` maps each of G1-G10 (SPEC §1, ``docs/guarantees.md``) and each rule of the
store contract to the tests that stand behind it. ``MUTANTS`` is a curated list of
deliberate bugs, each a search/replace on a fragment of one file; ``make mutants``
(``tests/guarantees/mutants.py``) applies each one to a temporary copy of the tree and runs
only the tests the mutant names, which must fail. A fragment that is no longer in its file
makes the mutant refuse to run ("no longer applies") instead of silently testing nothing:
when you change code a mutant points at, move the mutant with it.

Test names are pytest node ids, fastest (and most likely to fail) first: the run stops at
the first failure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Mutant:
    """One deliberate bug.

    Attributes:
        name: Short, unique, kebab-case.
        guarantee: The ``GUARANTEES`` entry it breaks.
        path: The file it edits, relative to the repository root.
        edits: ``(fragment, replacement)`` pairs; each fragment must occur exactly once.
        tests: The node ids that must kill it, in the order they are tried.
        bug: What the mutant does, in a few words.
    """

    name: str
    guarantee: str
    path: str
    edits: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]
    bug: str


@dataclass(frozen=True, slots=True)
class Guarantee:
    """One promise and the tests that prove it."""

    title: str
    tests: tuple[str, ...]


GI = "tests/integration/test_guarantees.py"
GM = "tests/integration/test_guarantees_measured.py"
CO = "tests/integration/test_consumers.py"
CH = "tests/chaos/test_chaos_seeds.py"
HA = "tests/chaos/test_chaos_harness.py"
MEM = "tests/stores/test_memory.py::TestMemoryStoreContract"
SQL = "tests/stores/test_sqlite.py::TestSqliteFileContract"
PG = "tests/stores/test_postgres.py::TestPostgresStoreContract"
RD = "tests/stores/test_redis.py::TestRedisStoreContract"

GUARANTEES: dict[str, Guarantee] = {
    "G1": Guarantee(
        "at-least-once: every observed change reaches the handler",
        (
            f"{GI}::test_g1_a_fresh_engine_delivers_what_a_crash_left_in_the_outbox",
            f"{HA}::test_a_store_that_drops_committed_rows_fails_every_seed",
            f"{CH}::test_memory",
            "tests/e2e/test_crash_sigkill.py",
        ),
    ),
    "G2": Guarantee(
        "deterministic ids: the same observation has the same id everywhere",
        (
            "tests/unit/diff/test_diff_ids.py",
            f"{GM}::test_g2_first_observations_have_the_spec_ids_whatever_the_clock_says",
            f"{GI}::test_g2_two_worlds_agree_on_every_id",
            f"{GI}::test_g2_replay_and_reset_reproduce_the_original_ids",
        ),
    ),
    "G3": Guarantee(
        "per-key order, also under concurrency, retries and parking",
        (
            f"{GM}::test_g3_a_retry_in_backoff_holds_later_events_of_its_key",
            f"{GI}::test_g3_a_parked_created_holds_the_later_updated_until_retry",
            f"{CH}::test_memory",
        ),
    ),
    "G4": Guarantee(
        "atomic commit: a page is one store transaction",
        (
            f"{SQL}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
            f"{PG}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
            f"{MEM}::test_a_failed_commit_persists_nothing",
            "tests/stores/test_postgres.py::test_a_connection_killed_mid_commit_writes_nothing",
        ),
    ),
    "G5": Guarantee(
        "one active poller per key; a stale holder's writes fail",
        (
            f"{MEM}::test_fenced_writes_reject_stale_leases",
            f"{MEM}::test_a_released_lease_no_longer_passes_the_fence",
            "tests/stores/test_postgres.py::test_two_fenced_writes_on_one_key_serialise_on_its_row",
            f"{GI}::test_g5_an_expired_holder_cannot_write",
            f"{GI}::test_g5_a_second_engine_skips_a_leased_key_and_receives_nothing",
            "tests/e2e/test_fencing_sigstop.py",
        ),
    ),
    "G6": Guarantee(
        "rate budgets are never exceeded",
        (
            "tests/stores/test_budget_bucket.py::test_take_follows_the_script",
            "tests/stores/test_budget_bucket.py::test_never_more_than_requests_in_any_window_and_the_wait_is_exact",
            "tests/integration/test_budgets.py",
            "tests/e2e/test_redis_budget.py",
        ),
    ),
    "G7": Guarantee(
        "failure isolation: poison is parked, other keys flow",
        (
            f"{GI}::test_g7_one_poison_item_is_parked_while_the_others_flow",
            "tests/integration/test_lanes.py",
            CO,
        ),
    ),
    "G8": Guarantee(
        "deterministic under test: injected clock and randomness",
        (
            f"{HA}::test_the_same_seed_gives_the_same_report",
            f"{GI}::test_stop_with_drain_leaves_no_timer_behind",
        ),
    ),
    "G9": Guarantee(
        "crash-safe at every kill point, at most one duplicate per in-flight event",
        (
            f"{HA}::test_a_store_that_delivers_twice_fails_every_seed",
            f"{HA}::test_every_kill_point_fires_and_is_recovered_from",
            f"{CH}::test_memory",
            "tests/e2e/test_crash_sigkill.py",
        ),
    ),
    "G10": Guarantee(
        "bounded memory: pages and batches are staged, not accumulated",
        (
            f"{GM}::test_g10_the_dispatcher_holds_one_batch_of_the_outbox",
            f"{GM}::test_g10_a_full_listing_streams_stored_identities_in_batches",
            f"{GI}::test_g10_subscribe_acks_only_what_the_consumer_pulled",
        ),
    ),
    "redaction": Guarantee(
        "credentials never reach logs, hooks or errors",
        (
            "tests/unit/http/test_redaction_policy.py",
            "tests/unit/http/test_http_redact.py",
            "tests/integration/test_http_engine.py::test_a_credential_header_is_redacted_in_every_log_record",
        ),
    ),
    "truncated listings": Guarantee(
        "a full scan cut short resumes at its next page; deletes only from whole passes",
        (
            "tests/integration/test_full_listings.py::test_a_listing_longer_than_the_page_cap_is_seen_whole",
            "tests/integration/test_lanes.py::test_a_truncated_listing_resumes_and_deletes_only_after_whole_passes",
            "tests/integration/test_full_listings.py::test_another_replica_continues_the_pass_after_a_failed_page",
            "tests/integration/test_full_listings.py::test_a_reconcile_listing_resumes_and_finishes_later",
        ),
    ),
    "trusted deletes": Guarantee(
        "no delete from a listing that shifted, an incomplete listing, or an outage",
        (
            "tests/integration/test_full_listings.py::test_an_item_that_falls_between_two_pages_is_not_deleted",
            "tests/integration/test_full_listings.py::test_with_verify_churn_at_every_page_boundary_deletes_no_live_item",
            "tests/integration/test_full_listings.py::test_without_verify_churn_at_every_page_boundary_deletes_no_live_item",
            "tests/integration/test_full_listings.py::test_an_item_moved_by_an_insert_and_its_delete_is_not_deleted",
            "tests/integration/test_full_listings.py::test_a_pass_cut_short_by_an_empty_page_confirms_nothing",
            "tests/integration/test_full_listings.py::test_a_listing_with_an_invalid_item_deletes_nothing",
            "tests/integration/test_full_listings.py::test_an_empty_answer_is_held_not_deleted",
            "tests/integration/test_full_listings.py::test_deletes_arrive_within_the_bound_while_the_vendor_never_holds_still",
            "tests/integration/test_full_listings.py::test_deletes_under_churn_survive_restarts_without_a_phantom",
            "tests/integration/test_full_listings.py::test_an_item_that_moves_back_is_deleted_only_with_a_fixed_order",
            "tests/integration/test_full_listings.py::test_deletes_that_waited_for_agreement_are_not_one_mass_delete",
            "tests/integration/test_full_listings.py::test_a_delete_no_pass_can_prove_is_held_for_an_operator",
            "tests/integration/test_full_listings.py::test_a_read_that_began_before_the_previous_one_ended_is_not_linked_to_it",
            "tests/integration/test_full_listings.py::test_a_delete_whose_neighbours_straddle_a_page_boundary_waits_for_a_proof",
            f"{MEM}::test_new_rows_start_unseen_and_marks_move_them",
            f"{MEM}::test_an_upsert_keeps_the_mark_and_a_delete_drops_it",
        ),
    ),
    "store: fencing": Guarantee(
        "every leased write is fenced by owner and epoch",
        (
            f"{MEM}::test_fenced_writes_reject_stale_leases",
            f"{SQL}::test_fenced_writes_reject_stale_leases",
            f"{PG}::test_fenced_writes_reject_stale_leases",
            f"{RD}::test_fenced_writes_reject_stale_leases",
        ),
    ),
    "store: one-transaction commit": Guarantee(
        "commit_poll writes everything or nothing",
        (
            f"{MEM}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
            f"{SQL}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
            f"{PG}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
            f"{RD}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
            f"{MEM}::test_a_failed_commit_persists_nothing",
        ),
    ),
    "store: load_pending order": Guarantee(
        "load_pending in sequence order, without filtering by retry time",
        (
            f"{MEM}::test_load_pending_is_in_sequence_order_and_ignores_next_attempt_at",
            f"{SQL}::test_load_pending_is_in_sequence_order_and_ignores_next_attempt_at",
            f"{MEM}::test_load_pending_pages_by_sequence",
        ),
    ),
    "store: leases": Guarantee(
        "acquire, renew and release follow the epoch rules",
        (
            f"{MEM}::test_a_held_lease_cannot_be_taken",
            f"{MEM}::test_an_expired_lease_is_taken_with_the_next_epoch",
            f"{MEM}::test_renew_extends_only_the_current_lease",
            f"{MEM}::test_release_frees_the_key_and_the_epoch_keeps_growing",
        ),
    ),
    "store: unfenced admin writes": Guarantee(
        "administrative writes need no lease and never touch it",
        (
            f"{MEM}::test_unfenced_save_creates_the_key_without_a_lease",
            f"{MEM}::test_unfenced_save_never_touches_the_lease",
        ),
    ),
    "store: copies": Guarantee(
        "copies in and out, never references",
        (f"{MEM}::test_state_is_copied_in_and_out", f"{MEM}::test_rows_are_copied_in_and_out"),
    ),
    "store: due index": Guarantee(
        "due_keys follows every write of wake_at",
        (
            f"{MEM}::test_commit_poll_moves_the_key_in_the_index",
            f"{MEM}::test_save_state_moves_the_key_in_the_index",
            f"{SQL}::test_commit_poll_moves_the_key_in_the_index",
        ),
    ),
    "store: streaming": Guarantee(
        "stream_identities walks the snapshot in code-point order, in batches",
        (
            f"{MEM}::test_stream_identities_walks_the_snapshot_in_batches",
            f"{MEM}::test_stream_identities_orders_by_code_point",
        ),
    ),
    "store: listing links": Guarantee(
        "links land after the marks and deletes on stored rows only; upserts keep them",
        tuple(
            f"{store}::{test}"
            for store in (MEM, SQL, PG, RD)
            for test in (
                "test_links_are_written_on_existing_rows_and_kept_by_upserts",
                "test_links_deletes_and_marks_of_one_batch_apply_in_order",
                "test_a_mark_without_a_link_keeps_the_link_and_none_neighbours_are_written",
                "test_a_bad_link_fails_the_batch_and_writes_nothing",
            )
        ),
    ),
}


def _m(
    name: str,
    guarantee: str,
    path: str,
    edits: list[tuple[str, str]],
    *tests: str,
    bug: str,
) -> Mutant:
    return Mutant(name, guarantee, path, tuple(edits), tests, bug)


LANE = "src/watukuy/runtime/lane.py"
PASS_END = "src/watukuy/runtime/pass_end.py"
PAGE = "src/watukuy/pipeline/page.py"
EVENTS = "src/watukuy/pipeline/events.py"
DELETES = "src/watukuy/pipeline/deletes.py"
PAGE = "src/watukuy/pipeline/page.py"
EVENTS = "src/watukuy/pipeline/events.py"
UD = "tests/unit/pipeline/test_deletes.py"
DISPATCHER = "src/watukuy/runtime/dispatcher.py"
RUNNER = "src/watukuy/runtime/runner.py"
MEMORY = "src/watukuy/stores/memory.py"
SQLITE = "src/watukuy/stores/sqlite.py"
POSTGRES = "src/watukuy/stores/postgres.py"

MUTANTS: tuple[Mutant, ...] = (
    # --- the rows of the review that found claimed-but-unproven guarantees ----------------
    _m(
        "id-includes-poll-time",
        "G2",
        EVENTS,
        [
            (
                "            identity,\n            version,\n            rules.schema_version,\n            type_,\n",
                "            identity,\n            f'{version}@{now}',\n            rules.schema_version,\n            type_,\n",
            )
        ],
        f"{GM}::test_g2_first_observations_have_the_spec_ids_whatever_the_clock_says",
        bug="the event id material includes the commit time",
    ),
    _m(
        "pending-retry-skipped",
        "G3",
        DISPATCHER,
        [
            (
                'result.note_retry(row.next_attempt_at)\n            return "stop-group"',
                'result.note_retry(row.next_attempt_at)\n            return "next"',
            )
        ],
        f"{GM}::test_g3_a_retry_in_backoff_holds_later_events_of_its_key[memory]",
        bug="a retry in backoff no longer holds later events of its key",
    ),
    _m(
        "handoff-overtakes-older-rows",
        "G3",
        DISPATCHER,
        [
            (
                "        if committed and pending == len(committed):\n",
                "        if committed:\n",
            )
        ],
        "tests/integration/test_handoff.py::test_an_older_pending_event_makes_the_dispatcher_read_the_outbox_in_order[memory]",
        bug="a page handed over from memory is delivered before an older event of its key",
    ),
    _m(
        "failed-attempt-frees-the-key",
        "G3",
        DISPATCHER,
        [
            (
                'consumer=_consumer_of(row.event_id),\n        )\n        return "stop-group"',
                'consumer=_consumer_of(row.event_id),\n        )\n        return "next"',
            )
        ],
        f"{GM}::test_g3_a_failed_attempt_holds_the_pending_events_of_its_key[memory]",
        bug="a failed attempt lets the rest of its key through in the same drain",
    ),
    _m(
        "postgres-fence-without-for-update",
        "G5",
        "src/watukuy/stores/sql/postgres/queries.sql",
        [
            (
                'WHERE poller = %s AND "partition" = %s\nFOR UPDATE\n\n-- name: create',
                'WHERE poller = %s AND "partition" = %s\n\n-- name: create',
            )
        ],
        "tests/stores/test_postgres.py::test_two_fenced_writes_on_one_key_serialise_on_its_row",
        bug="the fence reads the key's row without locking it",
    ),
    _m(
        "postgres-fence-function-without-for-update",
        "G5",
        "src/watukuy/stores/sql/postgres/0009_fence_function.sql",
        [
            (
                "        AND lease_owner = lease_owner_of AND lease_epoch = lease_epoch_of\n    FOR UPDATE;",
                "        AND lease_owner = lease_owner_of AND lease_epoch = lease_epoch_of;",
            )
        ],
        "tests/stores/test_postgres_races.py::"
        "test_a_fenced_write_waiting_on_a_takeover_follows_its_outcome[commits-ack]",
        bug="an ack's fence reads the key's row without locking it, and acks under a lease "
        "another node is taking over",
    ),
    _m(
        "postgres-fence-state-function-without-for-update",
        "G5",
        "src/watukuy/stores/sql/postgres/0010_fence_state_function.sql",
        [
            (
                "        AND lease_owner = lease_owner_of AND lease_epoch = lease_epoch_of\n    FOR UPDATE;",
                "        AND lease_owner = lease_owner_of AND lease_epoch = lease_epoch_of;",
            )
        ],
        "tests/stores/test_postgres_races.py::"
        "test_a_fenced_write_waiting_on_a_takeover_follows_its_outcome[commits-commit_state_known]",
        bug="a one-round-trip commit's fence reads the key's row without locking it, and "
        "commits under a lease another node is taking over",
    ),
    _m(
        "postgres-fence-state-trusts-the-known-state",
        "G5",
        "src/watukuy/stores/sql/postgres/0010_fence_state_function.sql",
        [("IF stored IS DISTINCT FROM known_state THEN", "IF false THEN")],
        "tests/stores/test_postgres.py::"
        "test_a_commit_that_knows_the_state_is_one_round_trip_and_sees_an_operator",
        bug="a commit writes over a state an operator changed since the store last wrote it",
    ),
    _m(
        "sqlite-commit-outside-a-transaction",
        "G4",
        SQLITE,
        [
            (
                '        with self._transaction(conn):\n            if patch and "wake_at" not in patch',
                '        if True:\n            if patch and "wake_at" not in patch',
            )
        ],
        f"{SQL}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
        bug="commit_poll runs each statement in its own (autocommit) transaction",
    ),
    _m(
        "postgres-fenced-writes-outside-a-transaction",
        "G4",
        POSTGRES,
        [
            (
                "async with self._connection(what) as conn, _pipeline(conn), conn.transaction():",
                "async with self._connection(what) as conn:",
            )
        ],
        f"{PG}::test_a_commit_refused_after_its_first_write_is_all_or_nothing",
        bug="fenced writes (commit_poll among them) autocommit statement by statement",
    ),
    _m(
        "deliver-twice",
        "G9",
        DISPATCHER,
        [
            (
                "            await consumer.deliver(event, ctx)\n        except DeliveryAbandoned:",
                "            await consumer.deliver(event, ctx)\n            await consumer.deliver(event, ctx)\n        except DeliveryAbandoned:",
            )
        ],
        f"{CH}::test_memory[timestamp-1]",
        bug="every event is handed to the handler twice before its ack",
    ),
    _m(
        "dispatcher-loads-the-whole-outbox",
        "G10",
        DISPATCHER,
        [
            (
                "rows = await self._store.load_pending(self._key, self._batch_size, after)",
                "rows = await self._store.load_pending(self._key, 2**31 - 1, after)",
            )
        ],
        f"{GM}::test_g10_the_dispatcher_holds_one_batch_of_the_outbox[memory]",
        bug="the first batch of a drain is the whole outbox",
    ),
    _m(
        "lane-streams-every-identity-at-once",
        "G10",
        PASS_END,
        [
            (
                "async for candidates in self._store.stream_unseen(self._key, below, _IDENTITY_BATCH)",
                "async for candidates in self._store.stream_unseen(self._key, below, 2**31 - 1)",
            )
        ],
        f"{GM}::test_g10_a_full_listing_streams_stored_identities_in_batches[memory]",
        bug="the end of a full scan reads every stored identity in one batch",
    ),
    _m(
        "memory-drops-1-percent-of-outbox-rows",
        "G1",
        MEMORY,
        [
            (
                "            for event in events:\n                outbox[event.event_id] = event",
                "            for event in events:\n                if event.event_id[-2:] < '03':\n                    continue\n                outbox[event.event_id] = event",
            )
        ],
        f"{CH}::test_memory[timestamp-1]",
        f"{CH}::test_memory[snapshot_diff-2]",
        bug="about 1% of committed outbox rows are silently not stored",
    ),
    # --- one per guarantee ---------------------------------------------------------------
    _m(
        "memory-fence-ignores-the-epoch",
        "store: fencing",
        MEMORY,
        [
            (
                "        if record is None or record.owner != lease.owner or record.epoch != lease.epoch:\n            raise LeaseLostError",
                "        if record is None or record.owner != lease.owner:\n            raise LeaseLostError",
            )
        ],
        f"{MEM}::test_fenced_writes_reject_stale_leases",
        bug="the memory fence compares only the owner (a re-acquired lease of the same owner passes)",
    ),
    _m(
        "sqlite-fence-by-epoch-only",
        "store: fencing",
        SQLITE,
        [
            (
                "        if row is None or row[0] != lease.owner or row[1] != lease.epoch:",
                "        if row is None or row[1] != lease.epoch:",
            )
        ],
        f"{SQL}::test_a_released_lease_no_longer_passes_the_fence",
        f"{SQL}::test_fenced_writes_reject_stale_leases",
        bug="the SQLite fence compares only the epoch (a released lease still writes)",
    ),
    _m(
        "memory-pending-out-of-sequence-order",
        "store: load_pending order",
        MEMORY,
        [
            (
                "                (row.sequence, row.event_id) for row in record.outbox.values()",
                "                (-row.sequence, row.event_id) for row in record.outbox.values()",
            )
        ],
        f"{MEM}::test_load_pending_is_in_sequence_order_and_ignores_next_attempt_at",
        bug="the commit order of the outbox is not the delivery order",
    ),
    _m(
        "sequence-not-advanced-by-a-commit",
        "G3",
        PAGE,
        [
            (
                '        "sequence": events.sequence,\n        "schema_version": rules.schema_version,',
                '        "sequence": state.sequence,\n        "schema_version": rules.schema_version,',
            )
        ],
        f"{GM}::test_g3_a_failed_attempt_holds_the_pending_events_of_its_key[memory]",
        f"{CH}::test_memory[timestamp-1]",
        bug="a page's commit does not move the key's sequence: later pages reuse numbers",
    ),
    _m(
        "no-drain-before-fetch",
        "G1",
        RUNNER,
        [
            (
                "        await deliveries.deliver()\n        if deliveries.halted():",
                "        if deliveries.halted():",
            )
        ],
        f"{GI}::test_g1_a_fresh_engine_delivers_what_a_crash_left_in_the_outbox[memory]",
        bug="a run no longer delivers what the outbox holds before it fetches",
    ),
    _m(
        "ack-before-the-handler",
        "G1",
        DISPATCHER,
        [
            (
                "        try:\n            await consumer.deliver(event, ctx)\n",
                "        await self._store.ack_events(self._key, self._lease(), [row.event_id])\n        try:\n            await consumer.deliver(event, ctx)\n",
            )
        ],
        f"{GI}::test_g7_one_poison_item_is_parked_while_the_others_flow[memory]",
        f"{CH}::test_memory[timestamp-1]",
        bug="an event is acked before its handler ran",
    ),
    _m(
        "key-grouping-by-event-id",
        "G3",
        DISPATCHER,
        [
            (
                "        if self._ordering_key is None:\n            return event.subject",
                "        if self._ordering_key is None:\n            return event.id",
            )
        ],
        f"{GM}::test_g3_a_retry_in_backoff_holds_later_events_of_its_key[memory]",
        f"{GI}::test_g3_a_parked_created_holds_the_later_updated_until_retry[memory]",
        bug="events are grouped by id instead of ordering key",
    ),
    _m(
        "redaction-by-exact-name-only",
        "redaction",
        "src/watukuy/model/redact.py",
        [
            (
                "        elif lowered in self._names or self._parts_re.search(lowered) is not None:\n",
                "        elif lowered in self._names:\n",
            )
        ],
        "tests/unit/http/test_redaction_policy.py",
        "tests/unit/http/test_http_redact.py",
        bug="a credential whose name is not on the exact list (x-tenant-token) is shown",
    ),
    _m(
        "budget-window-one-ms-too-short",
        "G6",
        "src/watukuy/budget/window.py",
        [
            (
                "live = tuple(grants[bisect_right(grants, now - policy.per_ms, key=_grant_time) :])",
                "live = tuple(grants[bisect_right(grants, now - policy.per_ms + 1, key=_grant_time) :])",
            )
        ],
        "tests/stores/test_budget_bucket.py::test_take_follows_the_script",
        "tests/stores/test_budget_bucket.py::test_never_more_than_requests_in_any_window_and_the_wait_is_exact",
        bug="a grant stops counting 1 ms before its window ends",
    ),
    _m(
        "budget-grants-one-too-many",
        "G6",
        "src/watukuy/budget/window.py",
        [("    if total + need <= requests:\n", "    if total + need <= requests + 1:\n")],
        "tests/stores/test_budget_bucket.py::test_take_follows_the_script",
        "tests/integration/test_budgets.py",
        bug="a full window still grants one more request",
    ),
    _m(
        "deletes-from-a-truncated-listing",
        "truncated listings",
        LANE,
        [
            (
                "if progress is not None and (progress.listed or (done and not truncated)):",
                "if progress is not None:",
            )
        ],
        "tests/integration/test_full_listings.py::test_a_listing_longer_than_the_page_cap_is_seen_whole[memory]",
        bug="a listing cut short by max_pages_per_cycle ends its pass (and finds deletes)",
    ),
    _m(
        "deletes-on-the-first-miss",
        "trusted deletes",
        DELETES,
        [
            (
                "clean = (*clean, clean[-1] if repeat else pass_id)[-rules.confirm_passes :]",
                "clean = (*clean, clean[-1] if repeat else pass_id)[-1:]",
            )
        ],
        f"{UD}::test_complete_passes_accumulate_up_to_the_confirming_ones",
        "tests/integration/test_full_listings.py::test_an_item_that_falls_between_two_pages_is_not_deleted[memory]",
        bug="an item one shifted listing missed is deleted at once",
    ),
    _m(
        "deletes-without-agreement",
        "trusted deletes",
        PASS_END,
        [("        why = policy.disagreement(\n", "        why = None and policy.disagreement(\n")],
        "tests/integration/test_full_listings.py::test_without_verify_churn_at_every_page_boundary_deletes_no_live_item[memory-1]",
        bug="two passes that both missed an item delete it though the listing moved under them",
    ),
    _m(
        "proof-from-two-reads",
        "trusted deletes",
        DELETES,
        [
            (
                "(before is not None and before == after)",
                "(before is not None and after is not None)",
            )
        ],
        f"{UD}::test_neighbours_in_two_reads_prove_nothing",
        "tests/integration/test_full_listings.py::test_deletes_arrive_within_the_bound_while_the_vendor_never_holds_still[memory-snapshot-1]",
        bug="evidence from two different page reads counts as a proof of absence",
    ),
    _m(
        "links-across-a-read-that-repeats",
        "trusted deletes",
        PAGE,
        [
            (
                "cross = tail is not None and (not earlier or earlier == [tail] == order[:1])",
                "cross = tail is not None",
            )
        ],
        "tests/integration/test_full_listings.py::test_a_read_that_began_before_the_previous_one_ended_is_not_linked_to_it[memory]",
        bug="a read that began before the previous one ended links its first item after the tail",
    ),
    _m(
        "proof-with-a-changing-order",
        "trusted deletes",
        "src/watukuy/model/options.py",
        [('            and self.order == "fixed"\n', "")],
        "tests/integration/test_full_listings.py::test_an_item_that_moves_back_is_deleted_only_with_a_fixed_order[memory-changing]",
        bug='Deletes(order="changing") still takes proofs, and an item that moved back is deleted',
    ),
    _m(
        "guard-on-deletes-that-waited",
        "trusted deletes",
        PASS_END,
        [
            (
                "return deletable - await self._count_unseen(before)",
                "return deletable - 0",
            )
        ],
        "tests/integration/test_full_listings.py::test_deletes_that_waited_for_agreement_are_not_one_mass_delete[memory]",
        bug="deletes that waited for passes that agree are held as one mass delete",
    ),
    _m(
        "no-repeat-count",
        "trusted deletes",
        DELETES,
        [("    if last_repeats > 0:\n", "    if False:\n")],
        f"{UD}::test_passes_that_disagree[repeats]",
        "tests/integration/test_full_listings.py::test_an_item_moved_by_an_insert_and_its_delete_is_not_deleted[memory]",
        bug="an insert undone a page later moves a live item between pages unnoticed",
    ),
    _m(
        "no-refound-count",
        "trusted deletes",
        DELETES,
        [("    if last_missed > still:\n", "    if False:\n")],
        f"{UD}::test_passes_that_disagree[refound]",
        "tests/integration/test_full_listings.py::test_a_pass_cut_short_by_an_empty_page_confirms_nothing[memory]",
        bug="a pass cut short by an empty 200 confirms the deletes of what it never reached",
    ),
    _m(
        "deletes-from-an-incomplete-listing",
        "trusted deletes",
        DELETES,
        [
            (
                "    if progress.invalid or (progress.not_modified and not repeat):\n",
                "    if progress.not_modified and not repeat:\n",
            )
        ],
        f"{UD}::test_a_pass_with_an_invalid_item_or_a_304_page_is_incomplete",
        "tests/integration/test_full_listings.py::test_a_listing_with_an_invalid_item_deletes_nothing[memory-2]",
        bug="a pass with a quarantined item still finds deletes",
    ),
    _m(
        "no-mass-delete-guard",
        "trusted deletes",
        DELETES,
        [("if not rules.holds(new, snapshot) or", "if True or")],
        f"{UD}::test_the_guard_holds_a_mass_delete",
        "tests/integration/test_full_listings.py::test_an_empty_answer_is_held_not_deleted[memory]",
        bug="an empty answer deletes the whole snapshot",
    ),
    _m(
        "memory-upsert-resets-the-seen-mark",
        "trusted deletes",
        MEMORY,
        [
            (
                "            items[item_row.identity] = item_row\n",
                "            items[item_row.identity] = item_row\n            record.seen.pop(item_row.identity, None)\n",
            )
        ],
        f"{MEM}::test_an_upsert_keeps_the_mark_and_a_delete_drops_it",
        bug="an upsert forgets that a pass saw the row",
    ),
    _m(
        "poison-after-one-more-attempt",
        "G7",
        DISPATCHER,
        [
            (
                "        if attempt >= delivery.retry.attempts:\n",
                "        if attempt > delivery.retry.attempts:\n",
            )
        ],
        f"{GI}::test_g7_one_poison_item_is_parked_while_the_others_flow[memory]",
        bug="an event is parked only after retry.attempts + 1 failures",
    ),
    _m(
        "a-failure-stops-the-whole-worker",
        "G7",
        DISPATCHER,
        [
            (
                '            if outcome == "stop-group":\n                blocked.add(group)\n\n',
                '            if outcome == "stop-group":\n                blocked.add(group)\n                return\n\n',
            )
        ],
        f"{GI}::test_g7_one_poison_item_is_parked_while_the_others_flow[memory]",
        bug="a failing key stops its worker, so the keys queued behind it wait",
    ),
    _m(
        "a-split-keeps-the-shared-row",
        "G7",
        DISPATCHER,
        [
            (
                "        await self._store.ack_events(self._key, lease, [row.event_id for row in shared])\n",
                "",
            )
        ],
        f"{CO}::test_every_consumer_gets_every_event_once[memory]",
        bug="a shared row is split again on every drain, so every consumer gets it again",
    ),
    _m(
        "a-hold-holds-every-consumer",
        "G7",
        DISPATCHER,
        [
            (
                '    group = okey if name is None else f"{okey}@{name}"\n',
                "    group = okey\n",
            )
        ],
        f"{CO}::test_a_hold_holds_only_its_own_consumer[memory]",
        bug="one consumer's parked event holds the ordering key for every consumer",
    ),
    _m(
        "a-consumers-row-goes-to-the-shared-consumer",
        "G7",
        DISPATCHER,
        [
            (
                "    consumer = consumers.shared if name is None else consumers.get(name)\n",
                "    consumer = consumers.shared if name is None else next(iter(consumers.values()))\n",
            )
        ],
        f"{CO}::test_a_consumer_that_parks_never_redelivers_to_the_others[memory]",
        bug="a consumer's own row is handed to the first consumer instead of its own",
    ),
    _m(
        "seeded-random-ignores-its-seed",
        "G8",
        "src/watukuy/testing/random.py",
        [("self._random = _random.Random(seed)", "self._random = _random.Random()")],
        f"{HA}::test_the_same_seed_gives_the_same_report",
        bug="SeededRandom draws from an unseeded generator",
    ),
    _m(
        "sqlite-acquire-takes-a-held-lease",
        "G5",
        SQLITE,
        [
            (
                "            if holder is not None and (expires_at or 0) > now:",
                "            if holder is not None and (expires_at or 0) > now + 10**9:",
            )
        ],
        f"{GI}::test_g5_a_second_engine_skips_a_leased_key_and_receives_nothing[sqlite]",
        bug="a second engine can take a lease that has not expired",
    ),
    _m(
        "memory-acquire-takes-a-held-lease",
        "store: leases",
        MEMORY,
        [
            (
                "        elif record.owner is not None and (record.expires_at or 0) > now:\n            return None",
                "        elif record.owner is not None and (record.expires_at or 0) > now + 10**9:\n            return None",
            )
        ],
        f"{MEM}::test_a_held_lease_cannot_be_taken",
        bug="a lease that has not expired can be taken",
    ),
    _m(
        "memory-takeover-keeps-the-epoch",
        "store: leases",
        MEMORY,
        [
            (
                "        record.owner = owner\n        record.epoch += 1\n",
                "        record.owner = owner\n        record.epoch += 1 if record.epoch == 0 else 0\n",
            )
        ],
        f"{MEM}::test_an_expired_lease_is_taken_with_the_next_epoch",
        bug="a takeover reuses the previous holder's epoch",
    ),
    _m(
        "memory-pending-filtered-by-retry-time",
        "store: load_pending order",
        MEMORY,
        [
            (
                "            if row is not None and row.sequence == sequence:\n                rows.append(row)",
                "            if row is not None and row.sequence == sequence and row.next_attempt_at is None:\n                rows.append(row)",
            )
        ],
        f"{MEM}::test_load_pending_is_in_sequence_order_and_ignores_next_attempt_at",
        bug="load_pending hides rows waiting for a retry",
    ),
    _m(
        "memory-unfenced-save-clears-the-lease",
        "store: unfenced admin writes",
        MEMORY,
        [
            (
                "        self._keys[key] = record\n        record.state = new_state\n",
                "        self._keys[key] = record\n        record.owner = None\n        record.state = new_state\n",
            )
        ],
        f"{MEM}::test_unfenced_save_never_touches_the_lease",
        bug="an administrative write drops the current lease",
    ),
    _m(
        "memory-commit-leaves-the-due-index-behind",
        "store: due index",
        MEMORY,
        [
            (
                "            record.state = new_state\n            self._index(key, new_state)\n        items = record.items",
                "            record.state = new_state\n        items = record.items",
            )
        ],
        f"{MEM}::test_commit_poll_moves_the_key_in_the_index",
        bug="a commit that moves wake_at leaves the key where it was in the due index",
    ),
    _m(
        "memory-identities-unsorted",
        "store: streaming",
        MEMORY,
        [
            (
                "                order = sorted(record.items)\n",
                "                order = list(record.items)\n",
            )
        ],
        f"{MEM}::test_stream_identities_orders_by_code_point",
        f"{MEM}::test_stream_identities_walks_the_snapshot_in_batches",
        bug="stream_identities walks identities in insertion order",
    ),
    _m(
        "updates-missed-when-the-version-is-unchanged",
        "G1",
        "src/watukuy/diff/changes.py",
        [
            (
                "            if row.hash != candidate.hash:\n",
                "            if row.hash != candidate.hash and row.version != candidate.version:\n",
            )
        ],
        "tests/unit/diff/test_diff_changes.py",
        f"{CH}::test_memory[snapshot_diff-1]",
        bug="a content change under the same version text emits nothing",
    ),
    _m(
        "id-separator-not-escaped",
        "G2",
        "src/watukuy/diff/ids.py",
        [(r'str.maketrans({"\\": "\\\\", "|": "\\|"})', r'str.maketrans({"\\": "\\\\"})')],
        "tests/unit/diff/test_diff_ids.py::test_separators_and_backslashes_are_escaped",
        bug="a | inside a part is not escaped",
    ),
    _m(
        "redis-fence-ignores-the-epoch",
        "store: fencing",
        "src/watukuy/stores/lua/_prelude.lua",
        [("\n    and redis.call('HGET', KEYS[1], 'lease_epoch') == ARGV[2]", "")],
        f"{RD}::test_fenced_writes_reject_stale_leases",
        bug="the Redis scripts' fence compares only the owner",
    ),
    _m(
        "sqlite-upsert-drops-the-link",
        "store: listing links",
        SQLITE,
        [
            (
                '"seen_at = excluded.seen_at, revision = excluded.revision"',
                '"seen_at = excluded.seen_at, revision = excluded.revision, link_read = NULL"',
            )
        ],
        f"{SQL}::test_links_are_written_on_existing_rows_and_kept_by_upserts",
        bug="an upsert of a stored row forgets its listing link",
    ),
    _m(
        "postgres-a-mark-overwrites-the-link",
        "store: listing links",
        "src/watukuy/stores/sql/postgres/queries.sql",
        [
            (
                "    link_prev = CASE WHEN hit.link_read IS NULL THEN i.link_prev ELSE hit.link_prev END,\n",
                "    link_prev = hit.link_prev,\n",
            )
        ],
        f"{PG}::test_a_mark_without_a_link_keeps_the_link_and_none_neighbours_are_written",
        bug="a row marked without a link by a commit with links loses its prev neighbour",
    ),
    _m(
        "redis-a-delete-keeps-the-link",
        "store: listing links",
        "src/watukuy/stores/lua/commit.lua",
        [("  bulk('HDEL', KEYS[20], gone)\n", "")],
        f"{RD}::test_links_are_written_on_existing_rows_and_kept_by_upserts",
        bug="a deleted row's link survives it and a re-created row inherits it",
    ),
)
