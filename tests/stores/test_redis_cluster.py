"""RedisStore on a real Redis Cluster (three private masters started for this module).

Everything the store keeps outside its per-key hash tag (the due index of each poller, the
known-keys set) is written by a command after the script there, so the contract suite runs
here again, and the races of that gap are driven on the cluster itself.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

import watukuy as wk
from watukuy.model.errors import StoreError
from watukuy.model.ports import StateStore
from watukuy.model.rows import PKey
from watukuy.stores import redis as redis_module
from watukuy.stores.redis import RedisStore
from watukuy.testing import SeededRandom, VirtualClock
from watukuy.testing.store_contract import KEY, T0, TTL, StoreContract, batch

pytestmark = pytest.mark.redis

_NODES = 3


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _cluster_ports(count: int) -> list[int]:
    """Ports whose cluster bus port (port + 10000) is free as well."""
    rng = random.Random()
    found: list[int] = []
    for _ in range(500):
        port = rng.randrange(20_000, 30_000)
        if port not in found and _free(port) and _free(port + 10_000):
            found.append(port)
            if len(found) == count:
                return found
    pytest.skip("no free ports for a private cluster")


def _wait_for_port(port: int) -> None:
    give_up = time.monotonic() + 60  # generous: a loaded machine starts servers slowly
    while time.monotonic() < give_up:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on port {port} did not start")


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Three cluster-enabled masters of this module's own, slots split between them."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        pytest.skip("redis-server and redis-cli are not installed")
    ports = _cluster_ports(_NODES)
    directory: Path = tmp_path_factory.mktemp("cluster")
    processes = []
    try:
        for port in ports:
            command = [server, "--port", str(port), "--bind", "127.0.0.1"]
            command += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
            command += ["--save", "", "--appendonly", "no", "--dir", str(directory)]
            processes.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        for port in ports:
            _wait_for_port(port)
        nodes = [f"127.0.0.1:{port}" for port in ports]
        subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for port in ports:
            with redis.Redis(port=port) as node:
                give_up = time.monotonic() + 60
                while node.cluster("info")["cluster_state"] != "ok":
                    if time.monotonic() > give_up:
                        raise RuntimeError("the private cluster did not come up")
                    time.sleep(0.05)
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


@pytest.fixture
async def cluster_client(cluster_url: str) -> AsyncIterator[RedisCluster]:
    client = RedisCluster.from_url(cluster_url)
    yield client
    await client.aclose()


@pytest.fixture
async def cluster_store(cluster_client: RedisCluster) -> RedisStore:
    store = RedisStore(cluster_client, prefix=f"wk-{time.monotonic_ns()}:")
    await store.migrate()
    return store


class TestRedisClusterContract(StoreContract):
    @pytest.fixture
    async def store(self, cluster_store: RedisStore) -> StateStore:
        return cluster_store


def test_a_cluster_client_keeps_the_indexes_outside_the_scripts(
    cluster_store: RedisStore,
) -> None:
    assert cluster_store._due_in_script is False


async def test_a_pause_during_a_run_on_a_cluster_leaves_the_key_out_of_the_due_index(
    cluster_store: RedisStore, cluster_url: str
) -> None:
    # The run's lease was taken before an operator (another process, its own client) paused
    # the key; the run's final writes carry the wake time it computed before that.
    store = cluster_store
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    operator_client = RedisCluster.from_url(cluster_url)
    try:
        operator = RedisStore(operator_client, prefix=store._prefix)
        await operator.save_state_unfenced(KEY, {"paused": True, "wake_at": None}, T0 + 1)
    finally:
        await operator_client.aclose()
    await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": T0 + 60, "sequence": 2}))
    await store.save_state(KEY, lease, {"wake_at": T0 + 70})
    assert await store.due_keys(KEY.poller, T0 + 10**9) == []
    state = await store.load_state(KEY)
    assert state is not None
    assert (state.paused, state.wake_at, state.sequence) == (True, None, 2)


class _DroppingCluster(RedisCluster):
    """A cluster client whose connection drops on the commands named in ``fail``."""

    fail: frozenset[str] = frozenset()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if str(args[0]).upper() in self.fail:
            raise redis.exceptions.ConnectionError("connection lost")
        return await super().execute_command(*args, **kwargs)


async def test_on_a_cluster_the_audit_repairs_the_known_keys_after_crashes(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_module, "_AUDIT_COUNT", 4, raising=False)
    client = _DroppingCluster.from_url(cluster_url)
    try:
        store = RedisStore(client, prefix=f"wk-{time.monotonic_ns()}:")
        live = [PKey("orders", f"t{n:02}") for n in range(40)]
        for key in live:
            assert await store.acquire_lease(key, "node-a", TTL, T0) is not None
        gone = PKey("orders", "gone")
        assert await store.acquire_lease(gone, "node-a", TTL, T0) is not None
        client.fail = frozenset({"SREM"})  # a crash right after delete_key's script
        with pytest.raises(StoreError):
            await store.delete_key(gone)
        hidden = PKey("orders", "hidden")
        client.fail = frozenset({"SADD"})  # a crash right after acquire's script
        with pytest.raises(StoreError):
            await store.acquire_lease(hidden, "node-a", TTL, T0)
        client.fail = frozenset()
        assert gone in await store.list_keys()
        assert hidden not in await store.list_keys()
        # The engine's resync: due_keys for the poller, load_state of a few listed keys.
        for _ in range(100):
            await store.due_keys("orders", T0)
            if gone not in await store.list_keys():
                break
        await store.load_state(hidden)
        assert await store.list_keys() == sorted([*live, hidden])
    finally:
        await client.aclose()


async def test_the_cluster_fixture_is_a_cluster(cluster_url: str) -> None:
    client = aioredis.Redis.from_url(cluster_url)
    try:
        info = await client.execute_command("CLUSTER", "INFO")
        text = info.decode() if isinstance(info, bytes) else str(info)
        assert "cluster_known_nodes:3" in text
    finally:
        await client.aclose()


async def test_the_engines_resync_drops_a_ghost_of_a_partition_it_does_not_list(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An operator's delete_key of a tenant gone from partitions() crashed between its
    # script and its SREM, while a daemon runs. The daemon never reads that key's state
    # (it is not listed), yet its resync (due_keys for every poller) drops the ghost.
    monkeypatch.setattr(redis_module, "_AUDIT_COUNT", 2, raising=False)
    client = _DroppingCluster.from_url(cluster_url)
    store = RedisStore(client, prefix=f"wk-{time.monotonic_ns()}:")
    tenants = [f"t{n}" for n in range(6)]

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[])

    poller = wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        partitions=lambda: tenants,
        schedule=wk.Schedule(min="1h", max="2h", jitter=0),
    )
    clock = VirtualClock()
    engine = wk.Engine(
        store=store,
        pollers=[poller],
        clock=clock,
        random=SeededRandom(3),
        instance_id="daemon",
        resync_every="15s",
    )
    await engine.start()
    try:
        listed = [PKey("orders", tenant) for tenant in tenants]
        # Every tenant runs once (a small random spread between them); bounded by real time,
        # since the engine's store round trips are real.
        give_up = time.monotonic() + 120
        while await store.list_keys() != listed and time.monotonic() < give_up:
            await clock.advance("1s")
        assert await store.list_keys() == listed
        gone = PKey("orders", "gone")
        operator = RedisStore(client, prefix=store._prefix)
        await operator.save_state_unfenced(gone, {"paused": True}, clock.now())
        client.fail = frozenset({"SREM"})
        with pytest.raises(StoreError):
            await operator.delete_key(gone)
        client.fail = frozenset()
        assert gone in await store.list_keys()
        # Each resync audits two keys; how many resyncs 15 s steps of virtual time buy
        # depends on how fast the real round trips go, so the loop is bounded by real
        # time (generously), not by a count of steps a loaded machine may not keep up with.
        give_up = time.monotonic() + 120
        while gone in await store.list_keys() and time.monotonic() < give_up:
            await clock.advance("15s")
        assert await store.list_keys() == listed
    finally:
        stopping = asyncio.create_task(engine.stop())
        while not stopping.done():  # the engine's timers run on the virtual clock
            await clock.advance("1s")
            await asyncio.sleep(0.01)
        await stopping
        await client.aclose()
