"""RedisStore on a real server: the contract suite plus what only Redis can show."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from watukuy.model.errors import ConfigError, StoreError
from watukuy.model.ports import StateStore
from watukuy.model.rows import ItemMark, Lease, ListingLink, PKey, StatePatch, Validator
from watukuy.stores.redis import RedisStore
from watukuy.testing.store_contract import (
    KEY,
    T0,
    TTL,
    StoreContract,
    batch,
    item_row,
    outbox_row,
    parked_invalid,
    parked_poison,
)

pytestmark = pytest.mark.redis

_NO_RETRY = Retry(NoBackoff(), 0)


class TestRedisStoreContract(StoreContract):
    @pytest.fixture
    async def store(self, redis_store: RedisStore) -> StateStore:
        return redis_store


class TestRedisStoreContractDecodingResponses(StoreContract):
    """The same contract on a client that decodes responses to ``str``."""

    @pytest.fixture
    async def store(self, redis_url: str, redis_prefix: str) -> AsyncIterator[StateStore]:
        store = RedisStore.from_url(redis_url, prefix=redis_prefix, decode_responses=True)
        await store.migrate()
        yield store
        await store.close()


class TestRedisStoreContractWithTheDueIndexOutsideScripts(StoreContract):
    """The same contract with the due index kept the way a Redis Cluster client keeps it:
    by a command after each script (the switch is private; no cluster is needed here)."""

    @pytest.fixture
    async def store(self, redis_client: Any, redis_prefix: str) -> AsyncIterator[StateStore]:
        store = RedisStore(redis_client, prefix=redis_prefix)
        store._due_in_script = False
        await store.migrate()
        yield store
        await store.close()


class _CountingRedis(aioredis.Redis):
    """Records the name of every command the store sends (injected, not patched)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]).upper())
        return await super().execute_command(*args, **options)


# --- construction and lifecycle ---------------------------------------------------------


async def test_from_url_does_no_io_and_close_needs_no_connection() -> None:
    store = RedisStore.from_url("redis://127.0.0.1:1/0")
    assert repr(store) == "RedisStore(prefix='watukuy:')"
    await store.close()


def test_a_prefix_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match=r"^prefix: expected a string, got 7$"):
        RedisStore(aioredis.Redis(), prefix=7)  # type: ignore[arg-type]


def test_without_redis_the_class_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['redis'] = None; sys.modules['redis.asyncio'] = None\n"
        "from watukuy.stores.redis import RedisStore\n"
        "try:\n"
        "    RedisStore(object())\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "RedisStore needs redis-py: pip install 'watukuy[redis]'"


async def test_an_injected_client_is_never_closed(redis_client: Any, redis_prefix: str) -> None:
    store = RedisStore(redis_client, prefix=redis_prefix)
    await store.save_state_unfenced(KEY, {"paused": True}, T0)
    await store.close()
    assert await redis_client.ping() is True
    assert await store.list_keys() == [KEY]


async def test_a_client_from_url_is_closed_by_the_store(
    redis_url: str, redis_prefix: str, redis_client: Any
) -> None:
    name = f"wk-own-{redis_prefix.strip(':').replace(':', '-')}"
    store = RedisStore.from_url(redis_url, prefix=redis_prefix, client_name=name)
    await store.save_state_unfenced(KEY, {}, T0)

    async def connected() -> int:
        return sum(c.get("name") == name for c in await redis_client.client_list())

    assert await connected() == 1
    await store.close()
    assert await connected() == 0


async def test_an_unreachable_server_is_a_store_error() -> None:
    store = RedisStore.from_url("redis://127.0.0.1:1/0", retry=_NO_RETRY)
    try:
        with pytest.raises(StoreError, match=r"^load_state: ") as info:
            await store.load_state(KEY)
        assert isinstance(info.value.__cause__, RedisConnectionError)
        with pytest.raises(StoreError, match=r"^commit_poll: "):
            await store.commit_poll(KEY, Lease("node-a", 1, T0 + TTL), batch())
    finally:
        await store.close()


# --- layout -------------------------------------------------------------------------------


async def test_every_key_of_a_partition_shares_one_hash_slot(
    redis_store: RedisStore, redis_client: Any, redis_prefix: str
) -> None:
    awkward = [PKey("orders", "a:{b}|c/\u00e9\U0001f600"), PKey("orders:x", "{"), PKey("o", "")]
    for key in awkward:
        lease = await redis_store.acquire_lease(key, "node-a", TTL, T0)
        assert lease is not None
        await redis_store.commit_poll(
            key,
            lease,
            batch(
                state_patch={"wake_at": T0},
                upserts=[item_row("a")],
                seen=["a"],
                seen_pass=1,
                links={"a": ListingLink(0, None, "b")},
                events=[outbox_row("e1", 1, attempts=1, last_error={"message": "x"})],
                parked=[parked_poison("p1", 0, hold_key="h"), parked_invalid("p2")],
                log=True,
            ),
        )
        await redis_store.set_validator(key, lease, "u", Validator('"e"', None, T0))
    names = sorted(
        [name.decode() async for name in redis_client.scan_iter(match=f"{redis_prefix}*")]
    )
    per_tag: dict[str, set[int]] = {}
    for name in names:
        if name == f"{redis_prefix}keys":
            continue
        tag = name[name.index("{") + 1 : name.index("}")]
        assert "{" not in tag
        per_tag.setdefault(tag, set()).add(key_slot(name.encode()))
    assert sorted(per_tag) == [
        "o",  # the due index of poller "o"
        "o:",
        "orders",
        "orders%3Ax",
        "orders%3Ax:%7B",
        "orders:a%3A%7Bb%7D%7Cc%2F%C3%A9%F0%9F%98%80",
    ]
    assert all(len(slots) == 1 for slots in per_tag.values())
    # The known-keys set, 19 keys per partition (seen marks and links included), and one
    # due index per poller.
    assert len(names) == 1 + 3 * 19 + 3
    assert f"{redis_prefix}{{orders%3Ax}}:due" in names
    assert await redis_store.list_keys() == sorted(awkward)


async def test_payloads_are_kept_as_the_exact_text(
    redis_store: RedisStore, redis_client: Any, redis_prefix: str
) -> None:
    lease = await redis_store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    text = '{"b": 1.50, "a": 123456789012345678901234567890, "s": "\u00e9\\u0000"}'
    await redis_store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 7, event=text)]))
    raw = await redis_client.hget(f"{redis_prefix}{{orders:}}:rows", "e1")
    assert raw == f"7:{T0 + 7}:{text}".encode()


async def test_each_fenced_write_is_one_command(redis_url: str, redis_prefix: str) -> None:
    client = _CountingRedis.from_url(redis_url)
    try:
        store = RedisStore(client, prefix=redis_prefix)
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        writes = {
            "commit_poll": lambda: store.commit_poll(
                KEY,
                lease,
                batch(
                    state_patch={"sequence": 2_000, "wake_at": T0 + 1},
                    upserts=[item_row(f"i{n}") for n in range(2_000)],
                    deletes=["i3"],
                    seen=[f"i{n}" for n in range(2_000)],
                    seen_pass=1,
                    links={f"i{n}": ListingLink(n // 100, None, None) for n in range(2_000)},
                    events=[outbox_row(f"e{n}", n) for n in range(2_000)],
                    parked=[parked_invalid("p1")],
                    log=True,
                ),
            ),
            "save_state": lambda: store.save_state(KEY, lease, {"paused": True, "wake_at": None}),
            "ack_events": lambda: store.ack_events(KEY, lease, ["e1", "e2"]),
            "park_event": lambda: store.park_event(KEY, lease, parked_poison("e3", 3)),
            "record_attempt": lambda: store.record_attempt(KEY, lease, "e4", {}, None),
            "set_validator": lambda: store.set_validator(
                KEY, lease, "u", Validator('"e"', None, T0)
            ),
        }
        for name, write in writes.items():
            client.commands.clear()
            await write()
            assert client.commands == ["EVALSHA"], name
        assert await store.count_items(KEY) == 1_999
        assert await store.count_pending(KEY) == 2_000 - 3
        client.commands.clear()
        await store.save_state_unfenced(KEY, {"wake_at": T0 + 5}, T0)
        assert client.commands == ["EVALSHA"]  # the known-keys set is updated in the script
        assert await store.due_keys("orders", T0 + 5) == [("", T0 + 5)]
    finally:
        await client.aclose()


async def test_links_live_in_their_own_hash_and_leave_with_their_rows(
    redis_url: str, redis_prefix: str
) -> None:
    client = _CountingRedis.from_url(redis_url)
    try:
        store = RedisStore(client, prefix=redis_prefix)
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        links_key = f"{redis_prefix}{{orders:}}:links"
        ids = [f"i{n:04d}" for n in range(2_500)]
        links = {i: ListingLink(n, None if n % 2 else "", ids[0]) for n, i in enumerate(ids)}
        await store.commit_poll(KEY, lease, batch(upserts=[item_row(i) for i in ids], links=links))
        assert await client.hlen(links_key) == len(ids)
        # load_marks reads 1,000 identities per script, and no row.
        client.commands.clear()
        marks = await store.load_marks(KEY, [*ids, "absent"])
        assert client.commands == ["EVALSHA"] * 3
        assert marks == {i: ItemMark(0, links[i]) for i in ids}
        # A delete takes the link with the row; clear_items and delete_key take the hash.
        await store.commit_poll(KEY, lease, batch(deletes=ids[:10]))
        assert await client.hlen(links_key) == len(ids) - 10
        await store.clear_items(KEY)
        assert await client.exists(links_key) == 0
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a")], links={"a": ListingLink(1)})
        )
        assert await client.hget(links_key, "a") == b"[1,null,null]"
        await store.delete_key(KEY)
        assert await client.exists(links_key) == 0
    finally:
        await client.aclose()


async def test_the_due_index_is_a_sorted_set_per_poller(
    redis_store: RedisStore, redis_client: Any, redis_prefix: str
) -> None:
    await redis_store.save_state_unfenced(PKey("orders", "b"), {"wake_at": T0 + 2}, T0)
    await redis_store.save_state_unfenced(PKey("orders", "\u00e9"), {"wake_at": T0 + 1}, T0)
    await redis_store.save_state_unfenced(PKey("orders", "paused"), {"wake_at": None}, T0)
    due = f"{redis_prefix}{{orders}}:due"
    assert await redis_client.zrange(due, 0, -1, withscores=True) == [
        ("\u00e9".encode(), float(T0 + 1)),
        (b"b", float(T0 + 2)),
    ]
    await redis_store.delete_key(PKey("orders", "b"))
    await redis_store.delete_key(PKey("orders", "\u00e9"))
    assert await redis_client.exists(due) == 0  # an empty sorted set leaves no key behind


async def test_outside_scripts_the_due_index_costs_one_command_per_wake_time_change(
    redis_url: str, redis_prefix: str
) -> None:
    client = _CountingRedis.from_url(redis_url)
    try:
        store = RedisStore(client, prefix=redis_prefix)
        store._due_in_script = False  # what a RedisCluster client selects
        due = f"{redis_prefix}{{orders}}:due"
        # Creating a key adds it to the index (born due); taking an existing key's lease
        # leaves the index alone.
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        assert client.commands == ["EVALSHA", "ZADD", "SADD"]  # SADD: the known-keys set
        assert await client.zscore(due, "") == T0
        await store.save_state_unfenced(KEY, {"wake_at": None}, T0)
        client.commands.clear()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0 + TTL)
        assert lease is not None
        assert client.commands == ["EVALSHA", "SADD"]
        assert await client.zscore(due, "") is None
        # The same for administrative writes: a new key is due at its creation time unless
        # the patch says otherwise.
        writes: list[tuple[str, StatePatch, list[str], int | None]] = [
            ("new", {}, ["EVALSHA", "ZADD", "SADD"], T0 + 3),
            ("new", {"sequence": 4}, ["EVALSHA", "SADD"], T0 + 3),
            ("paused", {"wake_at": None}, ["EVALSHA", "ZREM", "SADD"], None),
            ("later", {"wake_at": T0 + 8}, ["EVALSHA", "ZADD", "SADD"], T0 + 8),
        ]
        for partition, patch, commands, score in writes:
            client.commands.clear()
            await store.save_state_unfenced(PKey("orders", partition), patch, T0 + 3)
            assert client.commands == commands, partition
            assert await client.zscore(due, partition) == score, partition
        calls = {
            "moved": (batch(state_patch={"wake_at": T0 + 9}), ["EVALSHA", "ZADD"]),
            "kept": (batch(state_patch={"sequence": 3}), ["EVALSHA"]),
            "dropped": (batch(state_patch={"wake_at": None}), ["EVALSHA", "ZREM"]),
        }
        for name, (page, commands) in calls.items():
            client.commands.clear()
            await store.commit_poll(KEY, lease, page)
            assert client.commands == commands, name
        client.commands.clear()
        await store.delete_key(KEY)
        assert client.commands == ["EVALSHA", "ZREM", "SREM"]
    finally:
        await client.aclose()


# --- failures -----------------------------------------------------------------------------


async def test_a_connection_killed_mid_commit_writes_nothing(
    redis_url: str, redis_prefix: str, redis_client: Any
) -> None:
    name = f"wk-kill-{redis_prefix.strip(':').replace(':', '-')}"
    store = RedisStore.from_url(redis_url, prefix=redis_prefix, client_name=name, retry=_NO_RETRY)
    admin = redis_client
    try:
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("before")]))
        doomed = batch(
            state_patch={"sequence": 2, "cursors": {"live": '"c2"'}},
            upserts=[item_row("a"), item_row("b")],
            deletes=["before"],
            events=[outbox_row("e1", 1), outbox_row("e2", 2)],
            parked=[parked_invalid("p1")],
            log=True,
        )
        # Hold every write at the server, send the commit, and kill its connection while
        # the script waits: Redis drops the script unrun, with everything it would write.
        await admin.client_pause(5_000, all=False)
        try:
            commit = asyncio.create_task(store.commit_poll(KEY, lease, doomed))
            victim = None
            give_up = time.monotonic() + 60  # within ms; generous under load
            while time.monotonic() < give_up:
                victim = next((c for c in await admin.client_list() if c.get("name") == name), None)
                if (victim and "b" in victim["flags"]) or commit.done():
                    break
            assert victim is not None
            assert "b" in victim["flags"], "the commit never reached the server"
            assert await admin.client_kill_filter(_id=victim["id"]) == 1
        finally:
            await admin.client_unpause()
        with pytest.raises(StoreError, match=r"^commit_poll: ") as info:
            await commit
        assert isinstance(info.value.__cause__, RedisConnectionError)
        assert await store.load_versions(KEY, ["a", "b", "before"]) == {
            "before": item_row("before")
        }
        assert (await store.count_pending(KEY), await store.count_parked(KEY)) == (0, 0)
        assert await store.read_log(KEY) == []
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.sequence, dict(state.cursors)) == (0, {})
        await store.commit_poll(KEY, lease, doomed)  # a new connection: the same commit passes
        assert await store.count_pending(KEY) == 2
    finally:
        await store.close()


async def test_read_log_skips_entries_outside_the_window_across_many_pages(
    redis_store: RedisStore,
) -> None:
    lease = await redis_store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    for n in range(3):
        rows = [outbox_row(f"e{n}-{i}", n * 1_000 + i) for i in range(1_000)]
        await redis_store.commit_poll(KEY, lease, batch(events=rows, log=True, now=T0 + n))
    late = await redis_store.read_log(KEY, from_time=T0 + 2, limit=5)
    assert [entry.sequence for entry in late] == [2_000, 2_001, 2_002, 2_003, 2_004]
    assert await redis_store.prune_log(KEY, T0 + 2) == 2_000
    assert [e.sequence for e in await redis_store.read_log(KEY, limit=1)] == [2_000]
