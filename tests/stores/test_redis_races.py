"""RedisStore under races, driven step by step on the real server: another client acts
right after a script returns, or the command that follows a script never arrives."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from watukuy.model.errors import ConfigError, StoreError
from watukuy.model.rows import LoggedEvent, ParkedRow, PKey
from watukuy.stores import redis as redis_module
from watukuy.stores.redis import RedisBudgetStore, RedisStore
from watukuy.testing.store_contract import (
    KEY,
    T0,
    TTL,
    batch,
    event_json,
    item_row,
    outbox_row,
    parked_invalid,
    parked_poison,
)

pytestmark = pytest.mark.redis


class _FailingRedis(aioredis.Redis):
    """A client whose connection drops on the commands named in ``fail`` (a crash between
    a script and the command after it, as far as the server can tell)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fail: set[str] = set()
        self.sent: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]).upper())
        if str(args[0]).upper() in self.fail:
            raise RedisConnectionError("connection lost")
        return await super().execute_command(*args, **options)


@pytest.fixture
async def other(redis_client: Any, redis_prefix: str) -> RedisStore:
    """A second store on the same prefix: another process."""
    return RedisStore(redis_client, prefix=redis_prefix)


@pytest.fixture
async def failing(redis_url: str) -> AsyncIterator[_FailingRedis]:
    client = _FailingRedis.from_url(redis_url)
    yield client
    await client.aclose()


async def _states(store: RedisStore, keys: list[PKey]) -> list[PKey]:
    return [key for key in keys if await store.load_state(key) is not None]


@pytest.mark.parametrize("create", ["acquire_lease", "save_state_unfenced"])
async def test_a_delete_right_after_a_creating_script_leaves_no_ghost(
    redis_store: RedisStore,
    other: RedisStore,
    monkeypatch: pytest.MonkeyPatch,
    create: str,
) -> None:
    store = redis_store
    original = store._eval

    async def then_delete(what: str, script: str, keys: list[str], args: Any) -> Any:
        reply = await original(what, script, keys, args)
        if what == create:
            await other.delete_key(KEY)  # lands before anything the store sends next
        return reply

    monkeypatch.setattr(store, "_eval", then_delete)
    if create == "acquire_lease":
        await store.acquire_lease(KEY, "node-a", TTL, T0)
    else:
        await store.save_state_unfenced(KEY, {"paused": True}, T0)
    assert await store.load_state(KEY) is None
    assert await store.list_keys() == []


@pytest.mark.parametrize("create", ["acquire_lease", "save_state_unfenced"])
async def test_a_crash_right_after_a_creating_script_hides_no_key(
    failing: _FailingRedis, redis_prefix: str, create: str
) -> None:
    store = RedisStore(failing, prefix=redis_prefix)
    failing.fail = {"SADD", "ZADD", "ZREM"}
    if create == "acquire_lease":
        assert await store.acquire_lease(KEY, "node-a", TTL, T0) is not None
    else:
        await store.save_state_unfenced(KEY, {"paused": True}, T0)
    failing.fail = set()
    assert await store.list_keys() == [KEY]
    assert await store.due_keys(KEY.poller, T0) == [("", T0)]  # born due, in the same step


async def test_in_a_cluster_the_audit_read_repairs_the_known_keys(
    failing: _FailingRedis, redis_prefix: str
) -> None:
    # A RedisCluster client keeps the known-keys set outside the scripts; a crash between
    # the two leaves it wrong until load_state (the rolling audit) reads that key.
    store = RedisStore(failing, prefix=redis_prefix)
    store._due_in_script = False
    failing.fail = {"SADD"}
    with pytest.raises(StoreError):
        await store.acquire_lease(KEY, "node-a", TTL, T0)
    failing.fail = set()
    assert await store.list_keys() == []  # hidden
    assert await store.load_state(KEY) is not None
    assert await store.list_keys() == [KEY]
    failing.fail = {"SREM"}
    with pytest.raises(StoreError):
        await store.delete_key(KEY)
    failing.fail = set()
    assert await store.list_keys() == [KEY]  # a ghost
    assert await store.load_state(KEY) is None
    assert await store.list_keys() == []
    assert await _states(store, [KEY]) == []


async def test_clear_items_unlinks(failing: _FailingRedis, redis_prefix: str) -> None:
    store = RedisStore(failing, prefix=redis_prefix)
    await store.clear_items(KEY)
    # Rows move to tombstones in scripts (none here); what is left is unlinked, never DEL-ed.
    assert failing.sent == ["ZRANGE", "UNLINK"]


async def test_a_deleted_key_keeps_only_its_epoch_floor(
    redis_store: RedisStore, redis_client: Any, redis_prefix: str
) -> None:
    store = redis_store
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    await store.delete_key(KEY)
    left = sorted(k.decode() for k in await redis_client.keys(f"{redis_prefix}*"))
    assert left == [f"{redis_prefix}{{orders:}}:epoch"]
    assert await redis_client.get(left[0]) == b"1"
    again = await store.acquire_lease(KEY, "node-a", TTL, T0 + 1)
    assert again is not None
    assert again.epoch == 2


@pytest.mark.parametrize("prefix", ["wk{", "wk}", "{tenant}:", "a{b}c"])
def test_a_prefix_with_a_brace_is_a_config_error(redis_client: Any, prefix: str) -> None:
    with pytest.raises(ConfigError, match="prefix: must not contain"):
        RedisStore(redis_client, prefix=prefix)
    with pytest.raises(ConfigError, match="prefix: must not contain"):
        RedisBudgetStore(redis_client, prefix=prefix)


# --- read_log: bounded work whatever the size of the log ----------------------------------


async def _fill_log(store: RedisStore, times: list[int]) -> list[LoggedEvent]:
    """One logged event per time, sequences 1, 2, ... in commit order."""
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    written: list[LoggedEvent] = []
    for sequence, at in enumerate(times, start=1):
        event = event_json(f"e{sequence}", sequence)
        page = batch(now=at, events=[outbox_row(f"e{sequence}", sequence)], log=True)
        await store.commit_poll(KEY, lease, page)
        written.append(LoggedEvent(sequence, page.events[0].event, at))
        assert page.events[0].event == event
    return written


def _expected(
    log: list[LoggedEvent], after: int | None, low: int | None, high: int | None, limit: int
) -> list[LoggedEvent]:
    return [
        e
        for e in log
        if (after is None or e.sequence > after)
        and (low is None or e.created_at >= low)
        and (high is None or e.created_at <= high)
    ][:limit]


@pytest.mark.parametrize(("window_max", "scan_max"), [(10_000, 5_000), (3, 4), (0, 1)])
async def test_read_log_pages_exactly_on_every_path(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch, window_max: int, scan_max: int
) -> None:
    # Times that go back and forth (a clock stepped back between commits): the window path
    # must sort by sequence, and the sequence walk must filter every entry.
    monkeypatch.setattr(redis_module, "_WINDOW_MAX", window_max)
    monkeypatch.setattr(redis_module, "_SCAN_MAX", scan_max)
    times = [T0 + (n * 7919) % 23 for n in range(40)]
    log = await _fill_log(redis_store, times)
    for low, high in [(None, None), (T0 + 5, None), (None, T0 + 9), (T0 + 4, T0 + 12)]:
        for limit in (1, 3, 1000):
            for after in (None, 0, 7, 39, 40):
                got = await redis_store.read_log(
                    KEY, after_sequence=after, from_time=low, to_time=high, limit=limit
                )
                assert got == _expected(log, after, low, high, limit), (low, high, limit, after)
            # Paging by after_sequence visits the whole window once, in order.
            pages: list[LoggedEvent] = []
            after = None
            while page := await redis_store.read_log(
                KEY, after_sequence=after, from_time=low, to_time=high, limit=limit
            ):
                pages += page
                after = page[-1].sequence
            assert pages == _expected(log, None, low, high, 10_000)


@pytest.fixture
def private_redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own (its command counters are this test's alone)."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                subprocess.run(["sleep", "0.05"], check=False)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _calls(client: Any, command: str) -> int:
    stats = await client.info("commandstats")
    entry = stats.get(f"cmdstat_{command}")
    return int(entry["calls"]) if entry else 0


async def test_a_time_window_read_costs_the_window_not_the_log(private_redis_url: str) -> None:
    client = aioredis.Redis.from_url(private_redis_url)
    try:
        store = RedisStore(client, prefix="wk:")
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        # 20,000 entries, one per millisecond, written 1,000 per commit.
        for first in range(1, 20_001, 1_000):
            events = [outbox_row(f"e{n}", n) for n in range(first, first + 1_000)]
            await store.commit_poll(KEY, lease, batch(now=T0 + first, events=events, log=True))
        await client.config_resetstat()
        window = await store.read_log(KEY, from_time=T0 + 19_001, to_time=T0 + 19_001)
        assert [e.sequence for e in window] == list(range(19_001, 20_001))
        # One range lookup on the time index and one read of the rows, not a walk of the
        # 19,000 entries before the window.
        assert await _calls(client, "zrangebyscore") == 1
        assert await _calls(client, "hmget") == 1
        assert await _calls(client, "evalsha") == 1
    finally:
        await client.aclose()


async def test_server_time_is_the_redis_clock(redis_store: RedisStore) -> None:
    before = time.time_ns() // 1_000_000
    server = await redis_store.server_time()
    after = time.time_ns() // 1_000_000
    # Same host: the two clocks agree to well within a second.
    assert before - 1_000 <= server <= after + 1_000


# --- list_parked: the rows asked for, never the whole hash --------------------------------


def _parked_rows(count: int) -> list[ParkedRow]:
    """Rows of both kinds whose parked_at repeat and go back and forth (ties by id)."""
    return [
        parked_poison(f"p{n:05}", n, parked_at=T0 + (n * 7919) % 97)
        if n % 3
        else parked_invalid(f"i{n:05}", parked_at=T0 + (n * 7919) % 97)
        for n in range(count)
    ]


def _oldest(rows: list[ParkedRow], kind: str | None, limit: int | None) -> list[ParkedRow]:
    wanted = sorted(
        (row for row in rows if kind is None or row.kind == kind),
        key=lambda row: (row.parked_at, row.id),
    )
    return wanted if limit is None else wanted[:limit]


async def test_list_parked_reads_the_index_not_the_hash(private_redis_url: str) -> None:
    client = aioredis.Redis.from_url(private_redis_url)
    try:
        store = RedisStore(client, prefix="wk:")
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        rows = _parked_rows(3_000)
        for first in range(0, len(rows), 500):
            await store.commit_poll(KEY, lease, batch(parked=rows[first : first + 500]))
        await store.park_event(KEY, lease, dataclasses.replace(rows[0], parked_at=T0 + 500))
        rows[0] = dataclasses.replace(rows[0], parked_at=T0 + 500)
        for kind in (None, "poison", "invalid"):
            await client.config_resetstat()
            got = await store.list_parked(KEY, kind, limit=10)  # type: ignore[arg-type]
            assert got == _oldest(rows, kind, 10)
            # A range of each wanted kind's index and one read of those rows: no HVALS,
            # HGETALL or HSCAN of the 3,000 rows.
            assert await _calls(client, "zrange") == (2 if kind is None else 1)
            assert await _calls(client, "hmget") == (2 if kind is None else 1)
            for whole in ("hvals", "hgetall", "hscan", "zscan"):
                assert await _calls(client, whole) == 0, whole
        assert await store.list_parked(KEY) == _oldest(rows, None, None)
        # Retried and discarded rows leave the indexes with their rows.
        poison = [row.id for row in rows if row.kind == "poison"][:5]
        assert await store.retry_parked(KEY, poison[:2]) == 2
        assert await store.discard_parked(KEY, [poison[2], "i00000"]) == 2
        left = [row for row in rows if row.id not in {*poison[:3], "i00000"}]
        assert await store.list_parked(KEY, limit=50) == _oldest(left, None, 50)
        assert await client.zcard(f"wk:{{{KEY.poller}:}}:parkpoison") + await client.zcard(
            f"wk:{{{KEY.poller}:}}:parkinvalid"
        ) == len(left)
    finally:
        await client.aclose()


# --- the known-keys set in a cluster: the rolling audit drops ghosts ----------------------


async def test_in_a_cluster_due_keys_walks_the_known_keys_and_drops_ghosts(
    failing: _FailingRedis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash between delete_key's script and its SREM leaves an entry without a key. Its
    # partition may be gone from partitions() for good (nobody ever reads its state again),
    # so the audit step of due_keys, which the engine's resync calls for every poller,
    # finds it by walking the set, a few entries per call.
    monkeypatch.setattr(redis_module, "_AUDIT_COUNT", 2, raising=False)
    store = RedisStore(failing, prefix=redis_prefix)
    store._due_in_script = False
    live = [PKey("orders", f"t{n:03}") for n in range(150)]  # beyond a small set's encoding
    for key in live:
        await store.save_state_unfenced(key, {"paused": False}, T0)
    ghosts = [PKey("orders", "gone"), PKey("invoices", "gone")]
    for key in ghosts:
        assert await store.acquire_lease(key, "node-a", TTL, T0) is not None
        failing.fail = {"SREM"}
        with pytest.raises(StoreError):
            await store.delete_key(key)
        failing.fail = set()
    assert await store.list_keys() == sorted([*live, *ghosts])
    failing.sent.clear()
    for _ in range(200):
        await store.due_keys("orders", T0)
        if await store.list_keys() == live:
            break
    assert await store.list_keys() == live
    assert "HGETALL" not in failing.sent  # found by the walk, not by reading the states
    assert await _states(store, live) == live


async def test_on_a_standalone_server_due_keys_leaves_the_known_keys_alone(
    failing: _FailingRedis, redis_prefix: str
) -> None:
    store = RedisStore(failing, prefix=redis_prefix)
    await store.save_state_unfenced(KEY, {"paused": False}, T0)
    failing.sent.clear()
    await store.due_keys(KEY.poller, T0)
    assert failing.sent == ["ZRANGEBYSCORE"]


async def test_delete_key_and_clear_items_unlink_and_never_del(private_redis_url: str) -> None:
    # DEL frees a large hash on the main thread, with every client waiting; UNLINK does it
    # in the background. Counted on a private server, inside the scripts too.
    client = aioredis.Redis.from_url(private_redis_url)
    try:
        store = RedisStore(client, prefix="wk:")
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        items = [item_row(f"i{n}") for n in range(300)]
        events = [outbox_row(f"e{n}", n) for n in range(300)]
        parked = _parked_rows(300)
        page = batch(upserts=items, events=events, parked=parked, log=True)
        await store.commit_poll(KEY, lease, page)
        await client.config_resetstat()
        await store.clear_items(KEY)
        assert await store.count_items(KEY) == 0
        await store.delete_key(KEY)
        assert await store.load_state(KEY) is None
        assert await _calls(client, "del") == 0
        assert await _calls(client, "unlink") >= 2
        assert sorted(k.decode() for k in await client.keys("wk:*")) == ["wk:{orders:}:epoch"]
    finally:
        await client.aclose()
