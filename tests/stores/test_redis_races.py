"""RedisStore under races, driven step by step on the real server: another client acts
right after a script returns, or the command that follows a script never arrives."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from watukuy.core.errors import ConfigError, StoreError
from watukuy.core.rows import PKey
from watukuy.stores.redis import RedisBudgetStore, RedisStore
from watukuy.testing.store_contract import KEY, T0, TTL

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
