"""Store contract tests of the item snapshot."""

from __future__ import annotations

import dataclasses

import pytest

from watukuy.diff import MAX_IDENTITY_BYTES
from watukuy.model.errors import ConfigError, StoreError
from watukuy.model.late import Lookback
from watukuy.model.ports import StateStore
from watukuy.model.rows import ItemMark, ListingLink, ListingPass, ListingState, PKey, Tombstone

from ._support import (
    KEY,
    KEY_B,
    KEY_LONG,
    T0,
    _acquire,
    _assert_unsupported,
    _collect,
    _full_state,
    _patch_of,
    _unseen,
    batch,
    item_row,
    longest_identity,
)


class ItemContract:
    """Item versions, revisions and tombstones, and the seen marks of full listings."""

    # --- items -------------------------------------------------------------------------

    async def test_load_versions_returns_the_rows_that_exist(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [
            item_row("a"),
            item_row("b", payload='{"name":"B"}', version=None, schema_version=2, seen_at=T0 + 1),
            item_row("c", payload=None),
        ]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        found = await store.load_versions(KEY, ["a", "b", "c", "missing", "a"])
        assert found == {row.identity: row for row in rows}
        assert await store.load_versions(KEY, []) == {}

    async def test_a_page_of_rows_sharing_their_commit_fields_reads_back_exactly(
        self, store: StateStore
    ) -> None:
        # What a page writes: one schema version and one seen_at, then an upsert of some.
        lease = await _acquire(store)
        rows = [
            item_row("a", payload='{"id":"a"}'),
            item_row("b", version=None, payload=None, revision=4),
            item_row("c", hash="h\u00e9", payload='{"n":"\u00e9"}', revision=2),
        ]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        assert await store.load_versions(KEY, ["a", "b", "c"]) == {r.identity: r for r in rows}
        again = [dataclasses.replace(rows[0], hash="h2", seen_at=T0 + 9, revision=1)]
        await store.commit_poll(KEY, lease, batch(upserts=again))
        assert await store.load_versions(KEY, ["a", "b"]) == {"a": again[0], "b": rows[1]}
        assert await store.load_versions(KEY_B, ["a"]) == {}

    async def test_load_versions_handles_many_identities(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [item_row(f"id-{n:05d}", hash=f"h{n}") for n in range(1_200)]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        wanted = [f"id-{n:05d}" for n in range(0, 2_400, 2)]
        found = await store.load_versions(KEY, wanted)
        assert sorted(found) == [f"id-{n:05d}" for n in range(0, 1_200, 2)]
        assert found["id-00998"].hash == "h998"

    async def test_load_versions_of_sorted_runs_dense_or_sparse(self, store: StateStore) -> None:
        # Pages listed in identity order ask for sorted runs; whatever a store does with
        # them, the answer is exactly the asked rows of this key.
        numbered = [f"id-{n:05d}" for n in range(1_000)]
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row(i, hash=f"h-{i}") for i in numbered])
        )
        other = await _acquire(store, KEY_B)
        await store.commit_poll(KEY_B, other, batch(upserts=[item_row(i) for i in numbered]))
        dense = [f"id-{n:05d}" for n in range(100, 300)] + ["id-00300x"]  # one unknown
        found = await store.load_versions(KEY, dense)
        assert sorted(found) == dense[:-1]
        assert found["id-00150"].hash == "h-id-00150"
        sparse = [f"id-{n:05d}" for n in range(0, 1_000, 10)]
        assert sorted(await store.load_versions(KEY, sparse)) == sparse

        names = [chr(0x4E00 + n) for n in range(70)] + ["Z", "a", "\u00e9", "\uff5a", "\U0001f600"]
        key_u = PKey("orders", "tenant-u")
        await store.commit_poll(
            key_u, await _acquire(store, key_u), batch(upserts=[item_row(i) for i in names])
        )
        asked = sorted([*names, "b", "\u00ff"])  # code point order, two unknown
        assert set(await store.load_versions(key_u, asked)) == set(names)

    async def test_upserts_replace_whole_rows_and_deletes_remove_them(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a", payload='{"v":1}'), item_row("b")])
        )
        replacement = item_row("a", hash="hash-a2", version=None, seen_at=T0 + 5)
        await store.commit_poll(
            KEY,
            lease,
            batch(upserts=[replacement, item_row("c")], deletes=["b", "never-existed"]),
        )
        assert await store.load_versions(KEY, ["a", "b", "c"]) == {
            "a": replacement,
            "c": item_row("c"),
        }
        assert await store.count_items(KEY) == 2

    async def test_stream_identities_walks_the_snapshot_in_batches(self, store: StateStore) -> None:
        lease = await _acquire(store)
        # Inserted in a scrambled order so that insertion order is not identity order.
        identities = [f"id-{(n * 7_919) % 2_500:05d}" for n in range(2_500)]
        await store.commit_poll(KEY, lease, batch(upserts=[item_row(i) for i in identities]))
        if not store.capabilities.streaming:
            await _assert_unsupported(_collect(store, KEY, 1000))
            return
        batches = await _collect(store, KEY, 1000)
        assert [len(b) for b in batches] == [1000, 1000, 500]
        assert [i for b in batches for i in b] == sorted(identities)
        default = [chunk async for chunk in store.stream_identities(KEY)]
        assert default == batches  # the default batch size is 1000
        exact = await _collect(store, KEY, 1250)
        assert [len(b) for b in exact] == [1250, 1250]
        assert await _collect(store, KEY_B, 1000) == []

    async def test_stream_identities_orders_by_code_point(self, store: StateStore) -> None:
        if not store.capabilities.streaming:
            await _assert_unsupported(_collect(store, KEY, 3))
            return
        lease = await _acquire(store)
        identities = ["b", "B", "a", "\u00e9", "\U0001f600", "\uffff", "a:b", "a|b", "a/b", "Z", ""]
        await store.commit_poll(KEY, lease, batch(upserts=[item_row(i) for i in identities]))
        batches = await _collect(store, KEY, 3)
        assert [len(b) for b in batches] == [3, 3, 3, 2]
        assert [i for b in batches for i in b] == sorted(identities)

    @pytest.mark.parametrize("size", [0, -1])
    async def test_stream_identities_rejects_a_batch_size_below_one(
        self, store: StateStore, size: int
    ) -> None:
        if not store.capabilities.streaming:
            await _assert_unsupported(_collect(store, KEY, size))
            return
        with pytest.raises(ConfigError, match=rf"^batch_size: must be at least 1, got {size}$"):
            await _collect(store, KEY, size)

    async def test_count_items_follows_the_snapshot(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        assert await store.count_items(KEY) == 2
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")], deletes=["b"]))
        assert await store.count_items(KEY) == 1
        assert await store.count_items(KEY_B) == 0

    # --- revisions and tombstones -----------------------------------------------------

    async def test_revisions_round_trip(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [item_row("a", revision=3), item_row("b"), item_row("c", revision=2**40)]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        assert await store.load_versions(KEY, ["a", "b", "c"]) == {r.identity: r for r in rows}

    async def test_a_deleted_row_leaves_a_tombstone_in_the_same_commit(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a", revision=2), item_row("b")])
        )
        assert await store.load_tombstones(KEY, ["a", "b"]) == {}
        await store.commit_poll(KEY, lease, batch(deletes=["a", "never"], now=T0 + 5))
        # The row is gone from every view of the snapshot...
        assert await store.load_versions(KEY, ["a"]) == {}
        assert await store.count_items(KEY) == 1
        if store.capabilities.streaming:
            assert await _collect(store, KEY, 10) == [["b"]]
        # ...and its tombstone keeps what the row held; nothing for an unknown identity.
        assert await store.load_tombstones(KEY, ["a", "b", "never"]) == {
            "a": Tombstone("a", "v1", "hash-a", 1, 2, "deleted", T0 + 5)
        }
        assert await store.load_tombstones(KEY_B, ["a"]) == {}
        assert await store.load_tombstones(KEY, []) == {}

    async def test_revived_identities_lose_their_tombstone(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        await store.commit_poll(KEY, lease, batch(deletes=["a", "b"], now=T0 + 1))
        # An upsert alone leaves the tombstone (the store does not guess); `revived` drops it.
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a", revision=2), item_row("b")], revived=["a"])
        )
        assert sorted(await store.load_versions(KEY, ["a", "b"])) == ["a", "b"]
        assert sorted(await store.load_tombstones(KEY, ["a", "b"])) == ["b"]
        # Deleted again: the newer row replaces the old tombstone.
        await store.commit_poll(KEY, lease, batch(deletes=["a", "b"], now=T0 + 7))
        tombstones = await store.load_tombstones(KEY, ["a", "b"])
        assert tombstones["a"] == Tombstone("a", "v1", "hash-a", 1, 2, "deleted", T0 + 7)
        assert tombstones["b"].removed_at == T0 + 7

    async def test_clear_items_leaves_cleared_tombstones(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY,
            lease,
            batch(
                upserts=[
                    item_row("a", revision=1, seen_at=T0 + 3),
                    item_row("b", version=None),
                    item_row("c"),
                ]
            ),
        )
        await store.commit_poll(KEY, lease, batch(deletes=["c"], now=T0 + 4))
        await store.commit_poll(KEY_B, await _acquire(store, KEY_B), batch(upserts=[item_row("a")]))
        await store.clear_items(KEY)
        assert await store.count_items(KEY) == 0
        assert await store.load_tombstones(KEY, ["a", "b", "c"]) == {
            "a": Tombstone("a", "v1", "hash-a", 1, 1, "cleared", T0 + 3),
            "b": Tombstone("b", None, "hash-b", 1, 0, "cleared", T0),
            "c": Tombstone("c", "v1", "hash-c", 1, 0, "deleted", T0 + 4),
        }
        assert await store.load_tombstones(KEY_B, ["a"]) == {}
        assert await store.count_items(KEY_B) == 1

    async def test_prune_tombstones_by_age(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row(n) for n in ("a", "b", "c", "d")])
        )
        for n, identity in enumerate(("a", "b", "c")):
            await store.commit_poll(KEY, lease, batch(deletes=[identity], now=T0 + n))
        lease_b = await _acquire(store, KEY_B)
        await store.commit_poll(KEY_B, lease_b, batch(upserts=[item_row("a")]))
        await store.commit_poll(KEY_B, lease_b, batch(deletes=["a"], now=T0))
        assert await store.prune_tombstones(KEY, T0 + 2) == 2
        assert sorted(await store.load_tombstones(KEY, ["a", "b", "c", "d"])) == ["c"]
        assert await store.prune_tombstones(KEY, T0 + 2) == 0
        assert await store.prune_tombstones(PKey("never-seen"), T0 + 9) == 0
        assert sorted(await store.load_tombstones(KEY_B, ["a"])) == ["a"]

    async def test_delete_key_removes_tombstones(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")]))
        await store.commit_poll(KEY, lease, batch(deletes=["a"]))
        await store.delete_key(KEY)
        assert await store.load_tombstones(KEY, ["a"]) == {}

    async def test_identities_of_the_longest_size_work_under_the_longest_keys(
        self, store: StateStore
    ) -> None:
        # Every store keys snapshot rows and tombstones on identities of up to
        # MAX_IDENTITY_BYTES (the engine quarantines longer ones), under a poller name of
        # 128 characters and a partition key of 256 bytes, whatever the characters.
        key = KEY_LONG
        lease = await _acquire(store, key)
        ids = sorted((longest_identity(seed) for seed in range(3)), key=_code_points)
        assert {len(i.encode()) for i in ids} == {MAX_IDENTITY_BYTES}
        rows = [item_row(i, hash=f"hash-{n}", revision=n) for n, i in enumerate(ids)]
        await store.commit_poll(key, lease, batch(upserts=rows, seen=ids[:1], seen_pass=2))
        assert await store.load_versions(key, ids) == {row.identity: row for row in rows}
        assert await store.count_items(key) == 3
        if store.capabilities.streaming:
            assert await _collect(store, key, 2) == [ids[:2], ids[2:]]
            assert await _unseen(store, key, 2) == ids[1:]
        await store.commit_poll(key, lease, batch(deletes=ids[:1], now=T0 + 1))
        await store.commit_poll(key, lease, batch(upserts=[rows[0]], revived=ids[:1]))
        await store.commit_poll(key, lease, batch(deletes=ids[1:2], now=T0 + 2))
        assert await store.load_tombstones(key, ids) == {
            ids[1]: Tombstone(ids[1], "v1", "hash-1", 1, 1, "deleted", T0 + 2)
        }
        await store.clear_items(key)
        assert sorted(await store.load_tombstones(key, ids), key=_code_points) == ids
        assert await store.count_items(key) == 0

    # --- seen marks (resumable full listings) ---------------------------------------

    async def test_new_rows_start_unseen_and_marks_move_them(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [item_row(i) for i in ("a", "b", "c", "d")]
        await store.commit_poll(KEY, lease, batch(upserts=rows, seen=["a"], seen_pass=3))
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        assert await _unseen(store, KEY, 1) == ["b", "c", "d"]
        assert await _unseen(store, KEY, 3) == ["b", "c", "d"]
        assert await _unseen(store, KEY, 4) == ["a", "b", "c", "d"]
        # Marks without upserts (an unchanged page); an unknown identity creates nothing.
        await store.commit_poll(KEY, lease, batch(seen=["b", "c", "ghost"], seen_pass=5))
        assert await _unseen(store, KEY, 5) == ["a", "d"]
        assert await _unseen(store, KEY, 6) == ["a", "b", "c", "d"]
        assert await store.count_items(KEY) == 4
        assert await store.load_versions(KEY, ["ghost"]) == {}
        assert await _unseen(store, KEY_B, 10) == []

    async def test_an_upsert_keeps_the_mark_and_a_delete_drops_it(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a"), item_row("b")], seen=["a", "b"], seen_pass=4)
        )
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        changed = item_row("a", hash="hash-a2", seen_at=T0 + 9)
        await store.commit_poll(KEY, lease, batch(upserts=[changed]))
        assert await _unseen(store, KEY, 4) == []
        assert (await store.load_versions(KEY, ["a"]))["a"] == changed
        # Deleted, then created again: the new row starts unseen.
        await store.commit_poll(KEY, lease, batch(deletes=["b"]))
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("b")]))
        assert await _unseen(store, KEY, 1) == ["b"]
        # clear_items drops the marks with the rows.
        await store.clear_items(KEY)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")]))
        assert await _unseen(store, KEY, 1) == ["a"]

    async def test_stream_unseen_pages_in_code_point_order(self, store: StateStore) -> None:
        lease = await _acquire(store)
        identities = [f"id-{(n * 7_919) % 2_500:05d}" for n in range(2_500)]
        marked = [i for n, i in enumerate(sorted(identities)) if n % 3 == 0]
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row(i) for i in identities], seen=marked, seen_pass=2)
        )
        expected = sorted(set(identities) - set(marked))
        assert await _unseen(store, KEY, 2, batch_size=250) == expected
        assert await _unseen(store, KEY, 2, batch_size=7) == expected
        assert await _unseen(store, KEY, 3) == sorted(identities)
        odd = ["b", "B", "\u00e9", "\U0001f600", "a|b", ""]
        await store.commit_poll(
            KEY_B, await _acquire(store, KEY_B), batch(upserts=[item_row(i) for i in odd])
        )
        assert await _unseen(store, KEY_B, 1, batch_size=2) == sorted(odd)

    async def test_a_mark_and_a_delete_of_one_identity_in_one_batch(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        await store.commit_poll(KEY, lease, batch(seen=["a", "b"], seen_pass=2, deletes=["b"]))
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        assert await _unseen(store, KEY, 3) == ["a"]
        assert await store.count_items(KEY) == 1

    # --- listing links (proof of absence for deletes) ----------------------------

    async def test_links_are_written_on_existing_rows_and_kept_by_upserts(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        rows = [item_row(i) for i in ("a", "b", "c")]
        await store.commit_poll(
            KEY,
            lease,
            batch(
                upserts=rows,
                seen=["a", "b", "c"],
                seen_pass=4,
                links={
                    "a": ListingLink(0, None, "b"),
                    "b": ListingLink(0, "a", "c"),
                    "c": ListingLink(1, "b", None),
                    "ghost": ListingLink(1, "c", None),
                },
            ),
        )
        marks = await store.load_marks(KEY, ["a", "b", "c", "ghost", "nobody"])
        assert marks == {
            "a": ItemMark(4, ListingLink(0, None, "b")),
            "b": ItemMark(4, ListingLink(0, "a", "c")),
            "c": ItemMark(4, ListingLink(1, "b", None)),
        }
        # An upsert keeps the link and the mark; a link alone changes only the link.
        changed = item_row("b", hash="hash-b2", seen_at=T0 + 5)
        await store.commit_poll(
            KEY, lease, batch(upserts=[changed], links={"c": ListingLink(1, "b", "z")})
        )
        marks = await store.load_marks(KEY, ["b", "c"])
        assert marks == {
            "b": ItemMark(4, ListingLink(0, "a", "c")),
            "c": ItemMark(4, ListingLink(1, "b", "z")),
        }
        # A new row has mark 0 and no link; a deleted one has neither, and comes back bare.
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("d")], deletes=["a"]))
        assert await store.load_marks(KEY, ["a", "d"]) == {"d": ItemMark(0, None)}
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")], revived=["a"]))
        assert await store.load_marks(KEY, ["a"]) == {"a": ItemMark(0, None)}
        # Links of another key are apart; clear_items drops them with the rows.
        assert await store.load_marks(KEY_B, ["b"]) == {}
        await store.clear_items(KEY)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("b")]))
        assert await store.load_marks(KEY, ["b"]) == {"b": ItemMark(0, None)}

    async def test_links_deletes_and_marks_of_one_batch_apply_in_order(
        self, store: StateStore
    ) -> None:
        # Marks, then deletes, then links: a link for a row the batch deletes is skipped,
        # and links hold any identity text, the longest included.
        lease = await _acquire(store)
        odd = longest_identity(7)
        # Hashes are digests: the odd identity's row gets a plain one, as in real commits.
        rows = [item_row(i, hash=f"hash-{n}") for n, i in enumerate(("a", "b", odd))]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        await store.commit_poll(
            KEY,
            lease,
            batch(
                seen=["a", odd],
                seen_pass=9,
                deletes=["b"],
                links={
                    "a": ListingLink(3, "\u00e9|x", odd),
                    "b": ListingLink(3, "a", odd),
                    odd: ListingLink(4, "a", ""),
                },
            ),
        )
        assert await store.load_marks(KEY, ["a", "b", odd]) == {
            "a": ItemMark(9, ListingLink(3, "\u00e9|x", odd)),
            odd: ItemMark(9, ListingLink(4, "a", "")),
        }

    async def test_a_mark_without_a_link_keeps_the_link_and_none_neighbours_are_written(
        self, store: StateStore
    ) -> None:
        # A commit that marks two rows and links one: the other keeps its link whole, and
        # the new link's None neighbours replace the old ones (None is not "keep").
        lease = await _acquire(store)
        old = {"a": ListingLink(0, "z", "b"), "b": ListingLink(0, "a", "c")}
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a"), item_row("b")], links=old)
        )
        new = ListingLink(1, None, "")
        await store.commit_poll(KEY, lease, batch(seen=["a", "b"], seen_pass=2, links={"b": new}))
        assert await store.load_marks(KEY, ["a", "b"]) == {
            "a": ItemMark(2, old["a"]),
            "b": ItemMark(2, new),
        }
        # Marks alone keep every link.
        await store.commit_poll(KEY, lease, batch(seen=["a", "b"], seen_pass=3))
        assert await store.load_marks(KEY, ["a", "b"]) == {
            "a": ItemMark(3, old["a"]),
            "b": ItemMark(3, new),
        }

    async def test_a_bad_link_fails_the_batch_and_writes_nothing(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")]))
        bad = batch(
            upserts=[item_row("b")],
            links={"a": ListingLink("3", None, None)},  # type: ignore[arg-type]
        )
        with pytest.raises((TypeError, ValueError, StoreError)):
            await store.commit_poll(KEY, lease, bad)
        assert await store.load_marks(KEY, ["a", "b"]) == {"a": ItemMark(0, None)}

    async def test_late_arrivals_and_the_lookback_survive_patches(self, store: StateStore) -> None:
        lease = await _acquire(store)
        state = _full_state(created_at=T0)
        await store.commit_poll(KEY, lease, batch(state_patch=_patch_of(state)))
        assert await store.load_state(KEY) == state
        # A page's commit carries the figures; the end of a run, the lookback's memory; an
        # operator's reset_cursor clears the memory without a lease.
        counted = dataclasses.replace(state.late, count=4, following=())
        await store.commit_poll(KEY, lease, batch(state_patch={"late": counted}))
        remembered = dataclasses.replace(state.lookback, started=T0 + 30)
        await store.save_state(KEY, lease, {"lookback": remembered})
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert (loaded.late, loaded.lookback, loaded.listing) == (
            counted,
            remembered,
            state.listing,
        )
        await store.save_state_unfenced(KEY, {"lookback": Lookback()}, T0 + 40)
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert (loaded.late, loaded.lookback) == (counted, Lookback())

    async def test_listing_progress_and_held_deletes_survive_patches(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        state = _full_state(created_at=T0)
        await store.commit_poll(KEY, lease, batch(state_patch=_patch_of(state)))
        assert await store.load_state(KEY) == state
        # An operator's unfenced write of the hold leaves the listing alone, and back.
        assert state.held_deletes is not None
        confirmed = dataclasses.replace(state.held_deletes, confirmed=True)
        await store.save_state_unfenced(KEY, {"held_deletes": confirmed}, T0 + 20)
        progress = ListingState(
            counter=8, lanes={"live": ListingPass(pass_id=8, cursor="null", token="next-9")}
        )
        await store.save_state(KEY, lease, {"listing": progress})
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert (loaded.listing, loaded.held_deletes) == (progress, confirmed)
        await store.save_state_unfenced(KEY, {"held_deletes": None}, T0 + 21)
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert (loaded.listing, loaded.held_deletes) == (progress, None)


def _code_points(text: str) -> list[int]:
    return [ord(char) for char in text]
