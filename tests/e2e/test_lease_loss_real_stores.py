"""A holder whose real store freezes under it stops delivering before another takes over.

Each case starts a server of its own (``redis-server``, or ``initdb`` + ``postgres`` in a
temp directory, each on a free port; never the shared ones). Holder A (an engine with a
3 s lease) commits a page of events and delivers them through a slow handler. While A
still has events in hand, the whole server is frozen with ``SIGSTOP`` for longer than the
lease TTL, so no renewal of A can land. Then ``SIGCONT``, and holder B (another engine,
another instance id, the same database) takes the key and delivers the rest.

What must hold: A handled no event after its lease expired by its own clock (the expiry
of its last renewal that came back); A's last handler call ended before B's first began,
so no event was ever in two handlers at once; every committed event was delivered; and A
said it lost the lease (``on_lease_lost`` and the WARNING).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _private_servers import PrivateServer, private_postgres, private_redis

import watukuy as wk
from watukuy.model import json as wkjson
from watukuy.model.ports import StateStore
from watukuy.model.rows import Lease, PKey
from watukuy.testing.faulty import ForwardingStore

pytestmark = [pytest.mark.slow]

KEY = PKey("orders")
# A holder stops its handlers ``safety_margin`` before its lease runs out by its own clock;
# the margin is wide here so that a loaded machine, whose event loop can run late by a
# second or more, still shows the rule and not the machine's scheduling.
TTL_S = 5.0
SAFETY_MARGIN = "2s"
HANDLER_S = 0.1
ITEMS = 80
PASSWORD = "s3cret-lease-loss"


@dataclass
class _Real:
    """A private server and how to open a store on it."""

    server: PrivateServer
    kind: str

    def store(self) -> StateStore:
        if self.kind == "redis":
            from watukuy.stores.redis import RedisStore

            return RedisStore.from_url(
                f"redis://127.0.0.1:{self.server.port}/0?socket_timeout=2&socket_connect_timeout=1"
            )
        from watukuy.stores.postgres import PostgresStore

        return PostgresStore(
            f"postgresql://postgres:{PASSWORD}@127.0.0.1:{self.server.port}/postgres"
            "?connect_timeout=1&statement_timeout=2s&timeout=3s",
            schema="lease_loss",
        )


@pytest.fixture(params=["redis", "postgres"])
def real(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Real]:
    kind: str = request.param
    servers = private_redis(tmp_path) if kind == "redis" else private_postgres(PASSWORD)
    for server in servers:
        yield _Real(server, kind)


def _wall_ms() -> int:
    """The engines' clock (SystemClock): epoch milliseconds."""
    return time.time_ns() // 1_000_000


class _LeaseView(ForwardingStore):
    """Holder A's store, noting every lease A got back: (monotonic time it came back,
    the expiry A then believes in). A renewal sent at ``now`` that comes back true makes
    A's lease run to ``now + ttl`` by its own clock."""

    def __init__(self, inner: StateStore) -> None:
        super().__init__(inner)
        self.expiries: list[tuple[float, int]] = []

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        lease = await super().acquire_lease(key, owner, ttl_ms, now)
        if lease is not None:
            self.expiries.append((time.monotonic(), lease.expires_at))
        return lease

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        renewed = await super().renew_lease(key, lease, ttl_ms, now)
        if renewed:
            self.expiries.append((time.monotonic(), now + ttl_ms))
        return renewed

    def expiry_known_at(self, moment: float) -> int:
        """The latest expiry A knew of at ``moment`` (monotonic)."""
        known = [expiry for came_back, expiry in self.expiries if came_back <= moment]
        assert known, "A held no lease at that moment"
        return max(known)


@dataclass
class _Call:
    holder: str
    event_id: str
    start: float  # monotonic
    end: float = float("inf")  # monotonic; a call still running has not ended
    end_wall: int = 2**62  # the engines' clock, to compare with lease expiries


@dataclass
class _Deliveries:
    calls: list[_Call] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def handler(self, holder: str) -> Any:
        async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
            call = _Call(holder, event.id, time.monotonic())
            self.calls.append(call)
            try:
                await asyncio.sleep(HANDLER_S)
            finally:  # a handler cancelled with its run ends here too
                call.end, call.end_wall = time.monotonic(), _wall_ms()

        return handle

    def of(self, holder: str) -> list[_Call]:
        return [call for call in self.calls if call.holder == holder]


class _LostHook:
    def __init__(self, deliveries: _Deliveries, holder: str) -> None:
        self._deliveries, self._holder = deliveries, holder

    def on_lease_lost(self, details: Any) -> None:
        self._deliveries.lost.append(self._holder)


def _engine(store: StateStore, holder: str, deliveries: _Deliveries) -> wk.Engine:
    items = [{"id": f"o{n:03d}", "amount": n} for n in range(ITEMS)]

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=items)

    poller = wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        log=wk.EventLog(retention="1d"),  # what was committed, to check it all arrived
    )
    engine = wk.Engine(
        store=store,
        pollers=[poller],
        instance_id=holder,
        lease=wk.LeaseOptions(ttl=f"{TTL_S}s", renew_every="1s", safety_margin=SAFETY_MARGIN),
        hooks=[_LostHook(deliveries, holder)],
    )
    engine.on("orders", deliveries.handler(holder))
    return engine


async def _wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_a_holder_on_a_frozen_store_stops_before_another_takes_over(
    real: _Real, caplog: pytest.LogCaptureFixture
) -> None:
    deliveries = _Deliveries()
    view = _LeaseView(real.store())
    b_store: StateStore | None = None
    a = _engine(view, "A", deliveries)
    caplog.set_level(logging.WARNING, logger="watukuy")
    running = asyncio.create_task(a.tick())
    try:
        await _wait_until(lambda: len(deliveries.calls) >= 3, 60, "A's first deliveries")
        real.server.freeze()
        frozen_at = time.monotonic()
        try:
            # Longer than the TTL: whatever renewal was in flight at the freeze was sent
            # before it, so A's lease has expired in the store by the time it wakes.
            await asyncio.sleep(TTL_S + 0.5)
        finally:
            real.server.thaw()

        b_store = real.store()
        b = _engine(b_store, "B", deliveries)
        # B runs passes like a replica until the key is free. A renewal of A sent while
        # the server was frozen may still land when it wakes, and keep the key A gave up
        # for one TTL more: nobody delivers then, B waits it out.
        give_up = time.monotonic() + 90  # generous bounds: they catch a hang, not a slow host
        while not deliveries.of("B") and time.monotonic() < give_up:
            taken = await asyncio.wait_for(b.tick(), 60)
            assert taken.errors == [], taken
            if not deliveries.of("B"):
                await asyncio.sleep(0.2)
        await asyncio.wait({running}, timeout=60)
        a_ended = running.done()
    finally:
        if not running.done():
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        await view.close()

    first, second = deliveries.of("A"), deliveries.of("B")
    assert first, "A delivered nothing"
    # A stopped by its own clock: each of its handler calls ended before the expiry of the
    # last lease A had got back by then.
    for call in first:
        expiry = view.expiry_known_at(call.end)
        assert call.end_wall < expiry, (
            f"A handled {call.event_id} until {call.end_wall}, its lease ran to {expiry}"
        )
    # ... and before B began: no event was ever in two handlers at once.
    assert second, "B never took the key"
    last_a = max(call.end for call in first)
    first_b = min(call.start for call in second)
    assert last_a <= first_b, f"A still delivering {last_a - first_b:.3f} s after B began"
    for mine in first:
        for theirs in second:
            if mine.event_id == theirs.event_id:
                assert mine.end <= theirs.start, mine.event_id

    # The case was a real one: A kept working while its lease was good, into the freeze.
    assert any(call.start > frozen_at for call in first), "A delivered nothing while frozen"
    assert len({call.event_id for call in first}) < ITEMS, "A had no events left in hand"

    # A's pass ended by itself, and A said why.
    assert a_ended, "A's pass was still running after B's"
    await running
    assert "A" in deliveries.lost
    assert "could not be renewed; stopping delivery and fetching" in caplog.text

    # Every committed event was delivered (some twice: at least once, never concurrently).
    assert b_store is not None
    try:
        logged = await b_store.read_log(KEY, limit=10_000)
    finally:
        await b_store.close()
    committed = {wkjson.loads(entry.event)["id"] for entry in logged}
    assert len(committed) == ITEMS
    assert committed <= {call.event_id for call in deliveries.calls}
    print(
        f"{real.kind}: A delivered {len(first)}, B {len(second)}; "
        f"gap between A's last and B's first: {first_b - last_a:.2f} s"
    )
