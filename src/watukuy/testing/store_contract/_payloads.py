"""Store contract tests of copies and of awkward keys and payloads."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from watukuy.model.errors import SerializedError
from watukuy.model.ports import StateStore
from watukuy.model.rows import PKey, Validator

from ._support import (
    _ANY_TEXT,
    _EXAMPLES,
    _FAR,
    _UNICODE,
    _URL,
    KEY,
    KEY_OTHER,
    T0,
    TRICKY_JSON,
    _acquire,
    _collect,
    _full_state,
    _ids,
    _patch_of,
    batch,
    item_row,
    outbox_row,
    parked_invalid,
    parked_poison,
)


class PayloadContract:
    """Values are copied in and out; any key, identity and payload round-trips."""

    # --- copies, not references --------------------------------------------------------

    async def test_state_is_copied_in_and_out(self, store: StateStore) -> None:
        lease = await _acquire(store)
        cursors = {"live": '"c1"'}
        state = _full_state(created_at=T0)
        await store.save_state(KEY, lease, {**_patch_of(state), "cursors": cursors})
        cursors["live"] = '"mutated"'
        cast(dict[str, Any], state.schedule.last_error)["message"] = "mutated"
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert loaded.cursors == {"live": '"c1"'}
        assert loaded.schedule.last_error is not None
        assert loaded.schedule.last_error["message"] == "GET /orders responded 503 \U0001f600"
        cast(dict[str, Any], loaded.cursors)["live"] = '"mutated"'
        cast(dict[str, Any], loaded.schedule.last_error)["message"] = "mutated"
        reloaded = await store.load_state(KEY)
        assert reloaded is not None
        assert reloaded.cursors == {"live": '"c1"'}
        assert reloaded.schedule.last_error is not None
        assert reloaded.schedule.last_error["message"] == "GET /orders responded 503 \U0001f600"

    async def test_rows_are_copied_in_and_out(self, store: StateStore) -> None:
        lease = await _acquire(store)
        error: dict[str, Any] = {"name": "Error", "message": "original"}
        row = outbox_row("e1", 1, last_error=cast(SerializedError, error))
        poison = parked_poison("p1", 0, hold_key="k")
        upserts = [item_row("a")]
        await store.commit_poll(KEY, lease, batch(upserts=upserts, events=[row], parked=[poison]))
        error["message"] = "mutated"
        cast(dict[str, Any], poison.error)["message"] = "mutated"
        upserts.clear()
        pending = await store.load_pending(KEY, 10)
        assert pending[0].last_error == {"name": "Error", "message": "original"}
        cast(dict[str, Any], pending[0].last_error)["message"] = "mutated"
        pending.clear()
        assert (await store.load_pending(KEY, 10))[0].last_error == {
            "name": "Error",
            "message": "original",
        }
        parked = await store.list_parked(KEY)
        assert parked[0].error["message"] == "handler failed for p1"
        cast(dict[str, Any], parked[0].error)["message"] = "mutated"
        assert (await store.list_parked(KEY))[0].error["message"] == "handler failed for p1"
        held = await store.held_keys(KEY)
        held.add("extra")
        assert await store.held_keys(KEY) == {"k"}
        versions = await store.load_versions(KEY, ["a"])
        versions.clear()
        assert await store.load_versions(KEY, ["a"]) == {"a": item_row("a")}
        keys = await store.list_keys()
        keys.append(KEY_OTHER)
        assert await store.list_keys() == [KEY]

    # --- awkward keys and payloads -----------------------------------------------------

    async def test_partitions_and_identities_may_hold_any_character(
        self, store: StateStore
    ) -> None:
        keys = [
            PKey("orders", "tenant:\u03b1|\u03b2/\U0001f600"),
            PKey("orders", "tenant:\u03b1"),
            PKey("orders", "tenant"),
            PKey("orders", "a:b"),
            PKey("orders.a", "b"),
            PKey("orders", "{x}"),
        ]
        identities = ["a:b|c", "\u043a\u043b\u044e\u0447", "\U0001f600/x", "a\\b", "{tag}"]
        for n, key in enumerate(keys):
            lease = await _acquire(store, key, owner=f"node-{n}")
            await store.commit_poll(
                key,
                lease,
                batch(
                    state_patch={"sequence": n},
                    upserts=[item_row(f"{i}#{n}") for i in identities],
                    events=[outbox_row(f"e|{n}", n + 1)],
                ),
            )
        assert await store.list_keys() == sorted(keys)
        for n, key in enumerate(keys):
            wanted = [f"{i}#{n}" for i in identities]
            assert sorted(await store.load_versions(key, [*wanted, "a:b|c"])) == sorted(wanted)
            state = await store.load_state(key)
            assert state is not None
            assert state.sequence == n
            assert _ids(await store.load_pending(key, 10)) == [f"e|{n}"]
            held = await store.get_lease(key)
            assert held is not None
            assert held.owner == f"node-{n}"
            if store.capabilities.streaming:
                assert [i for b in await _collect(store, key, 2) for i in b] == sorted(wanted)
        await store.delete_key(keys[1])
        assert await store.list_keys() == sorted(keys[:1] + keys[2:])
        assert await store.count_items(keys[0]) == len(identities)

    @_UNICODE
    @given(identities=st.lists(_ANY_TEXT, min_size=1, max_size=8, unique=True))
    async def test_any_unicode_identity_round_trips(
        self, store: StateStore, identities: list[str]
    ) -> None:
        key = PKey("unicode-identities", f"example-{next(_EXAMPLES)}")
        lease = await _acquire(store, key)
        # Hashes are hex digests, whatever the identity: only identity and version vary.
        rows = [item_row(i, version=i, hash=f"h{n}", revision=n) for n, i in enumerate(identities)]
        parked = [parked_poison(f"p{n}", n, hold_key=i) for n, i in enumerate(identities)]
        await store.commit_poll(key, lease, batch(upserts=rows, parked=parked))
        assert await store.load_versions(key, identities) == {r.identity: r for r in rows}
        assert await store.count_items(key) == len(identities)
        if store.capabilities.streaming:
            streamed = [i for chunk in await _collect(store, key, 3) for i in chunk]
            assert streamed == sorted(identities)
        assert await store.held_keys(key) == set(identities)
        assert {row.hold_key for row in await store.list_parked(key)} == set(identities)
        # Deleted, they leave tombstones under the same strings; revived, they lose them.
        gone, kept = identities[::2], identities[1::2]
        await store.commit_poll(key, lease, batch(deletes=gone))
        assert sorted(await store.load_versions(key, identities)) == sorted(kept)
        tombstones = await store.load_tombstones(key, identities)
        assert {i: (t.identity, t.version) for i, t in tombstones.items()} == {
            i: (i, i) for i in gone
        }
        await store.commit_poll(key, lease, batch(upserts=rows[::2], revived=gone))
        assert await store.load_tombstones(key, identities) == {}
        await store.delete_key(key)

    @_UNICODE
    @given(partitions=st.lists(_ANY_TEXT, min_size=1, max_size=5, unique=True))
    async def test_any_unicode_partition_key_round_trips(
        self, store: StateStore, partitions: list[str]
    ) -> None:
        poller = f"unicode-partitions-{next(_EXAMPLES)}"
        keys = [PKey(poller, partition) for partition in partitions]
        for n, key in enumerate(keys):
            lease = await _acquire(store, key)
            await store.commit_poll(
                key,
                lease,
                batch(
                    state_patch={"sequence": n, "wake_at": T0 + n},
                    upserts=[item_row(key.partition, hash=f"h{n}")],
                    events=[outbox_row(f"e{n}", n + 1)],
                    parked=[parked_invalid(f"bad-{n}")],
                ),
            )
            await store.set_validator(key, lease, _URL, Validator(None, None, T0))
        assert await store.list_keys(poller) == sorted(keys)
        assert await store.due_keys(poller, _FAR) == [(p, T0 + n) for n, p in enumerate(partitions)]
        for n, key in enumerate(keys):
            state = await store.load_state(key)
            assert state is not None
            assert state.sequence == n
            assert sorted(await store.load_versions(key, [key.partition])) == [key.partition]
            assert _ids(await store.load_pending(key, 10)) == [f"e{n}"]
            assert await store.count_parked(key) == 1
            assert await store.get_validator(key, _URL) == Validator(None, None, T0)
            lease_now = await store.get_lease(key)
            assert lease_now is not None
            await store.release_lease(key, lease_now)
        await store.delete_key(keys[0])
        assert await store.list_keys(poller) == sorted(keys[1:])
        for key in keys[1:]:
            await store.delete_key(key)
        assert await store.list_keys(poller) == []

    async def test_payload_text_round_trips_byte_for_byte(self, store: StateStore) -> None:
        lease = await _acquire(store)
        text = TRICKY_JSON
        await store.commit_poll(
            KEY,
            lease,
            batch(
                state_patch={"cursors": {"live": text}},
                upserts=[item_row("a", payload=text, version=text)],
                events=[outbox_row("e1", 1, event=text)],
                parked=[
                    parked_poison("p1", 2, event=text),
                    parked_invalid("p2", item=text),
                ],
                log=store.capabilities.log,
            ),
        )
        item = (await store.load_versions(KEY, ["a"]))["a"]
        assert (item.payload, item.version) == (text, text)
        assert (await store.load_pending(KEY, 10))[0].event == text
        parked = {row.id: row for row in await store.list_parked(KEY)}
        assert (parked["p1"].event, parked["p2"].item) == (text, text)
        state = await store.load_state(KEY)
        assert state is not None
        assert state.cursors["live"] == text
        if store.capabilities.log:
            assert (await store.read_log(KEY))[0].event == text
        assert await store.retry_parked(KEY, ["p1"]) == 1
        assert [row.event for row in await store.load_pending(KEY, 10)] == [text, text]

    async def test_big_numbers_survive_in_rows(self, store: StateStore) -> None:
        lease = await _acquire(store)
        big = 2**53 + 1
        await store.commit_poll(
            KEY,
            lease,
            batch(
                state_patch={"sequence": big, "updated_at": big},
                upserts=[item_row("a", seen_at=big, schema_version=2**31)],
                events=[outbox_row("e1", big, created_at=big, next_attempt_at=big)],
            ),
        )
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.sequence, state.updated_at) == (big, big)
        item = (await store.load_versions(KEY, ["a"]))["a"]
        assert (item.seen_at, item.schema_version) == (big, 2**31)
        row = (await store.load_pending(KEY, 1))[0]
        assert (row.sequence, row.created_at, row.next_attempt_at) == (big, big, big)
