"""PostgresStore under races, driven step by step on the real server: one call is held
inside its transaction (an injected wait) while another runs on a second connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from watukuy.model.errors import LeaseLostError, StoreError
from watukuy.model.rows import Lease, PKey
from watukuy.stores.postgres import PostgresStore
from watukuy.testing.store_contract import (
    KEY,
    T0,
    TTL,
    batch,
    item_row,
    outbox_row,
    parked_poison,
)

pytestmark = pytest.mark.postgres

_TABLES = ("pollers", "items", "outbox", "parked", "validators", "log")


async def _query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(sql, params or None)
        return await cur.fetchall() if cur.description is not None else []


async def _rows(url: str, schema: str, key: PKey) -> dict[str, int]:
    counts: dict[str, int] = {}
    for table in _TABLES:
        sql = f'SELECT count(*) FROM "{schema}"."watukuy_{table}" WHERE poller = %s'
        counts[table] = (await _query(url, sql, key.poller))[0][0]
    return counts


async def _until_waiting_on_a_lock(url: str, schema: str) -> None:
    """Return once a backend running a statement on this schema waits for a row lock."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND position(%s in query) > 0"
    )
    for _ in range(2000):
        if (await _query(url, sql, f'"{schema}"'))[0][0] > 0:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the second call never waited for the row lock")


def _held(
    original: Callable[..., Awaitable[None]], entered: asyncio.Event, gate: asyncio.Event
) -> Callable[..., Awaitable[None]]:
    """``original``, then a wait for ``gate``: the transaction around it stays open."""

    async def held(*args: Any) -> None:
        await original(*args)
        entered.set()
        await gate.wait()

    return held


async def test_delete_key_waits_for_a_commit_in_flight_and_leaves_nothing(
    postgres_store: PostgresStore,
    postgres_url: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = postgres_store
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    entered, gate = asyncio.Event(), asyncio.Event()
    # The commit holds the key's row lock with its rows written, not yet committed.
    monkeypatch.setattr(store, "_write_state", _held(store._write_state, entered, gate))
    page = batch(
        upserts=[item_row(f"i{n}") for n in range(3)],
        events=[outbox_row(f"e{n}", n) for n in range(1, 4)],
        log=True,
        state_patch={"sequence": 3},
    )
    commit = asyncio.create_task(store.commit_poll(KEY, lease, page))
    await entered.wait()
    delete = asyncio.create_task(store.delete_key(KEY))
    await _until_waiting_on_a_lock(postgres_url, pg_schema)
    gate.set()
    await commit
    await delete
    assert await _rows(postgres_url, pg_schema, KEY) == dict.fromkeys(_TABLES, 0)
    # The next holder starts from nothing: no stale event, no snapshot row.
    fresh = await store.acquire_lease(KEY, "node-a", TTL, T0 + 1)
    assert fresh is not None
    assert fresh.epoch > lease.epoch
    assert await store.load_pending(KEY, 10) == []
    assert await store.count_items(KEY) == 0


async def test_an_acquire_waiting_for_delete_key_continues_after_its_epoch(
    postgres_store: PostgresStore,
    postgres_url: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = postgres_store
    first = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert first is not None
    await store.release_lease(KEY, first)
    second = await store.acquire_lease(KEY, "node-a", TTL, T0 + 1)
    assert second is not None
    await store.release_lease(KEY, second)
    entered, gate = asyncio.Event(), asyncio.Event()
    monkeypatch.setattr(store, "_delete_rows", _held(store._delete_rows, entered, gate))
    delete = asyncio.create_task(store.delete_key(KEY))
    await entered.wait()
    # The acquire meets the row being deleted and waits for it; when the delete commits,
    # it creates the key again, with an epoch after every one issued before.
    acquire = asyncio.create_task(store.acquire_lease(KEY, "node-a", TTL, T0 + 2))
    await _until_waiting_on_a_lock(postgres_url, pg_schema)
    gate.set()
    await delete
    third = await acquire
    assert third is not None
    assert third.epoch > second.epoch
    for stale in (first, second):
        with pytest.raises(LeaseLostError):
            await store.commit_poll(KEY, stale, batch(upserts=[item_row("a")]))
    assert await store.count_items(KEY) == 0


async def test_a_stale_lease_from_before_delete_key_writes_nothing(
    postgres_store: PostgresStore, postgres_url: str, pg_schema: str
) -> None:
    # partitions.remove() and the stuck-lease advice delete a key while a runner of the
    # same engine (same owner) may still hold its Lease(owner, 1).
    store = postgres_store
    stale = await store.acquire_lease(KEY, "engine-1", TTL, T0)
    assert stale == Lease("engine-1", 1, T0 + TTL)
    await store.delete_key(KEY)
    fresh = await store.acquire_lease(KEY, "engine-1", TTL, T0 + 1)
    assert fresh is not None
    assert fresh.epoch == 2
    with pytest.raises(LeaseLostError):
        await store.commit_poll(
            KEY, stale, batch(upserts=[item_row("a"), item_row("b")], events=[outbox_row("e", 1)])
        )
    assert await _rows(postgres_url, pg_schema, KEY) == {**dict.fromkeys(_TABLES, 0), "pollers": 1}


async def test_retry_parked_racing_delete_key_leaves_no_outbox_row(
    postgres_store: PostgresStore,
    postgres_url: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = postgres_store
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    poison = parked_poison("p1", 1)
    await store.commit_poll(KEY, lease, batch(parked=[poison]))
    entered, gate = asyncio.Event(), asyncio.Event()
    original = store._connection

    def connection(what: str) -> Any:
        context = original(what)
        if what != "retry_parked":
            return context

        class Held:
            async def __aenter__(self) -> Any:
                conn = await context.__aenter__()
                real = conn.execute

                async def execute(query: Any, params: Any = None) -> Any:
                    cur = await real(query, params)
                    if "DELETE" in str(query):  # the last statement: parked row gone
                        entered.set()
                        await gate.wait()
                    return cur

                conn.execute = execute
                self.conn, self.real = conn, real
                return conn

            async def __aexit__(self, *exc: Any) -> Any:
                self.conn.execute = self.real
                return await context.__aexit__(*exc)

        return Held()

    monkeypatch.setattr(store, "_connection", connection)
    retry = asyncio.create_task(store.retry_parked(KEY, ["p1"]))
    await entered.wait()
    delete = asyncio.create_task(store.delete_key(KEY))
    await _until_waiting_on_a_lock(postgres_url, pg_schema)
    gate.set()
    assert await retry == 1
    await delete
    assert await _rows(postgres_url, pg_schema, KEY) == dict.fromkeys(_TABLES, 0)


async def test_server_time_is_the_database_clock(postgres_store: PostgresStore) -> None:
    before = time.time_ns() // 1_000_000
    server = await postgres_store.server_time()
    after = time.time_ns() // 1_000_000
    # Same host: the two clocks agree to well within a second.
    assert before - 1_000 <= server <= after + 1_000


async def test_renewals_do_not_queue_behind_commits_in_flight(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Eight keys commit at once and hold their transactions open; the ninth key's renewal
    # still finds a connection of the store's own pool (psycopg_pool's default is 4).
    store = PostgresStore(postgres_url, schema=pg_schema)
    await store.migrate()
    try:
        keys = [PKey("orders", f"p{n}") for n in range(9)]
        leases = []
        for key in keys:
            lease = await store.acquire_lease(key, "node-a", TTL, T0)
            assert lease is not None
            leases.append(lease)
        gate, entered = asyncio.Event(), asyncio.Event()
        held = 0
        original = store._write_state

        async def slow(*args: Any) -> None:
            nonlocal held
            await original(*args)
            held += 1
            if held == 4:  # as many as psycopg_pool's default pool holds
                entered.set()
            await gate.wait()

        monkeypatch.setattr(store, "_write_state", slow)
        commits = [
            asyncio.create_task(store.commit_poll(key, lease, batch(state_patch={"sequence": 1})))
            for key, lease in zip(keys[:8], leases[:8], strict=True)
        ]
        try:
            await entered.wait()
            renewal = asyncio.create_task(store.renew_lease(keys[8], leases[8], TTL, T0 + 1))
            for _ in range(1000):
                if renewal.done():
                    break
                await asyncio.sleep(0.005)
            done = renewal.done()
        finally:
            gate.set()
        await asyncio.gather(*commits)
        assert done, "the renewal waited for a pooled connection behind the commits"
        assert await renewal is True
    finally:
        await store.close()


async def test_a_session_holding_the_keys_row_lock_fails_commits_after_lock_timeout(
    postgres_url: str, pg_schema: str
) -> None:
    # A stuck session (an open transaction that locked the key's row and went quiet) makes
    # the key's commit give up after lock_timeout instead of waiting as long as it stays;
    # statement_timeout and the client's limit are far away, so the lock limit is what acts.
    store = PostgresStore(
        postgres_url,
        schema=pg_schema,
        lock_timeout="200ms",
        statement_timeout="60s",
        timeout="90s",
    )
    await store.migrate()
    try:
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        async with await psycopg.AsyncConnection.connect(postgres_url) as stuck:
            await stuck.execute(
                f'SELECT 1 FROM "{pg_schema}"."watukuy_pollers" WHERE poller = %s FOR UPDATE',
                (KEY.poller,),
            )
            page = batch(state_patch={"sequence": 1})
            with pytest.raises(StoreError) as caught:
                await asyncio.wait_for(store.commit_poll(KEY, lease, page), 60)
            assert isinstance(caught.value.__cause__, psycopg.errors.LockNotAvailable)
            await stuck.rollback()
        await store.commit_poll(KEY, lease, batch(state_patch={"sequence": 2}))
        state = await store.load_state(KEY)
        assert state is not None
        assert state.sequence == 2
    finally:
        await store.close()


async def test_the_stores_own_pool_sets_a_lock_timeout_by_default(
    postgres_store: PostgresStore,
) -> None:
    async with postgres_store.pool.connection() as conn:
        cur = await conn.execute("SHOW lock_timeout")
        assert await cur.fetchone() == ("5s",)


@pytest.mark.parametrize("write", ["commit_state_known", "commit_state_read", "ack"])
@pytest.mark.parametrize("taker", ["commits", "rolls_back"])
async def test_a_fenced_write_waiting_on_a_takeover_follows_its_outcome(
    postgres_store: PostgresStore, postgres_url: str, pg_schema: str, write: str, taker: str
) -> None:
    # Another node takes the lease over in a transaction of its own while this node's write
    # arrives: the write's fence waits on the key's row lock, then reads the row the takeover
    # left. A committed takeover fails the write before it writes anything; one rolled back
    # leaves the lease as it was, and the write goes through.
    store = postgres_store
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    await store.commit_poll(
        KEY,
        lease,
        batch(
            upserts=[item_row("kept")],
            events=[outbox_row("e1", 1)],
            state_patch={"sequence": 1},
        ),
    )
    if write == "commit_state_read":
        store._states.clear()  # the store has to read the state under the row lock
    before = await _rows(postgres_url, pg_schema, KEY)
    pollers = f'"{pg_schema}"."watukuy_pollers"'
    async with await psycopg.AsyncConnection.connect(postgres_url) as other:
        await other.execute(
            f"UPDATE {pollers} SET lease_owner = 'node-b', lease_epoch = lease_epoch + 1 "
            "WHERE poller = %s",
            (KEY.poller,),
        )
        if write == "ack":
            pending = asyncio.create_task(store.ack_events(KEY, lease, ["e1"]))
        else:
            page = batch(
                upserts=[item_row("new")],
                events=[outbox_row("e2", 2)],
                state_patch={"sequence": 2},
            )
            pending = asyncio.create_task(store.commit_poll(KEY, lease, page))
        await _until_waiting_on_a_lock(postgres_url, pg_schema)
        assert not pending.done()
        if taker == "commits":
            await other.commit()
        else:
            await other.rollback()
    if taker == "commits":
        with pytest.raises(LeaseLostError):
            await pending
        assert await _rows(postgres_url, pg_schema, KEY) == before
        stored = await store.get_lease(KEY)
        assert stored is not None
        assert (stored.owner, stored.epoch) == ("node-b", lease.epoch + 1)
        return
    await pending
    after = await _rows(postgres_url, pg_schema, KEY)
    if write == "ack":
        assert after == {**before, "outbox": before["outbox"] - 1}
    else:
        assert after["items"] == before["items"] + 1
        assert after["outbox"] == before["outbox"] + 1
        state = await store.load_state(KEY)
        assert state is not None
        assert state.sequence == 2
