"""A holder whose store stops answering gives its key up by its own clock.

The store goes away under a running holder (every call fails, or every call hangs, as
with a frozen server). Renewals fail, the lease runs out, and another engine takes the key
when it expires. The first holder must have stopped delivering (and fetching) before that:
no event of the key is ever in two handlers at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import pytest

import watukuy as wk
from watukuy.model.ports import StateStore
from watukuy.model.rows import PKey
from watukuy.testing import SeededRandom, VirtualClock
from watukuy.testing.faulty import ForwardingStore

T = TypeVar("T")

TTL_MS = 30_000
MARGIN_MS = 5_000
HANDLER_MS = 1_000
ITEMS = 120


class _Switch(ForwardingStore):
    """The first engine's view of the store: working, then gone."""

    def __init__(self, inner: StateStore) -> None:
        super().__init__(inner)
        self.down: Literal["no", "fails", "hangs"] = "no"
        self.frozen = asyncio.Event()  # never set: a hung call waits for good

    def _enter(self, operation: str) -> None:
        if self.down == "fails":
            raise wk.StoreError(f"{operation}: connection refused")

    async def _run(self, call: Awaitable[T]) -> T:
        if self.down == "hangs":
            try:
                await self.frozen.wait()
            finally:  # cancelled: the call never reaches the store
                if asyncio.iscoroutine(call):
                    call.close()
        return await call


@dataclass
class _Deliveries:
    """(holder, subject, start, end) of every handler call, on the virtual clock."""

    clock: VirtualClock
    calls: list[tuple[str, str, int, int | None]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def handler(self, holder: str) -> Any:
        async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
            index = len(self.calls)
            self.calls.append((holder, event.subject, self.clock.now(), None))
            try:
                await self.clock.sleep(HANDLER_MS)
            finally:  # a handler cancelled with its run ends here too
                self.calls[index] = (holder, event.subject, self.calls[index][2], self.clock.now())

        return handle

    def of(self, holder: str) -> list[tuple[str, str, int, int | None]]:
        return [call for call in self.calls if call[0] == holder]


class _LostHook:
    def __init__(self, deliveries: _Deliveries, holder: str) -> None:
        self._deliveries, self._holder = deliveries, holder

    def on_lease_lost(self, details: Any) -> None:
        self._deliveries.lost.append(self._holder)


def _orders() -> wk.PollerDefinition[Any]:
    items = [{"id": f"o{n:03d}", "amount": n} for n in range(ITEMS)]

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=items)

    return wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
    )


def _engine(
    store: StateStore, clock: VirtualClock, holder: str, deliveries: _Deliveries
) -> wk.Engine:
    engine = wk.Engine(
        store=store,
        pollers=[_orders()],
        clock=clock,
        random=SeededRandom(3),
        instance_id=holder,
        lease=wk.LeaseOptions(ttl=f"{TTL_MS}ms", safety_margin=f"{MARGIN_MS}ms"),
        hooks=[_LostHook(deliveries, holder)],
    )
    engine.on("orders", deliveries.handler(holder))
    return engine


@pytest.mark.parametrize("outage", ["fails", "hangs"])
async def test_a_holder_cut_off_from_its_store_stops_before_another_takes_over(
    store: StateStore, outage: Literal["fails", "hangs"], caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    deliveries = _Deliveries(clock)
    view = _Switch(store)
    first = _engine(view, clock, "first", deliveries)
    second = _engine(store, clock, "second", deliveries)

    running = asyncio.create_task(first.tick())
    while len(deliveries.calls) < 10:
        await clock.advance_ms(HANDLER_MS)
    lease = await store.get_lease(PKey("orders"))
    assert lease is not None
    assert lease.owner == "first"
    view.down = outage  # from here on, no renewal of the first holder reaches the store
    cut_at = clock.now()

    # Walk past the lease's expiry in the store, handler by handler.
    while clock.now() < lease.expires_at + TTL_MS:
        await clock.advance_ms(HANDLER_MS)
    stored = await store.get_lease(PKey("orders"))
    assert stored is not None
    assert stored.owner == "first"
    assert stored.expires_at < cut_at + TTL_MS  # nothing renewed it since the cut
    first_calls = deliveries.of("first")
    assert first_calls, "the first holder delivered nothing"
    # The first holder stopped in time: its last handler call ended before the expiry.
    assert max(end or clock.now() for *_, end in first_calls) <= stored.expires_at - MARGIN_MS
    assert running.done()  # ended by its own clock, even with a store call hanging
    await running
    if outage == "hangs":  # with every call hanging, only its own clock can stop it
        assert deliveries.lost == ["first"]
        assert "could not be renewed; stopping delivery and fetching" in caplog.text

    # The second engine takes the key at expiry and delivers the rest, never alongside it.
    taking = asyncio.create_task(second.tick())
    while not taking.done():
        await clock.advance_ms(HANDLER_MS)
    await taking
    second_calls = deliveries.of("second")
    assert second_calls, "the second holder delivered nothing"
    assert min(start for _, _, start, _ in second_calls) >= stored.expires_at
    subjects = {subject for _, subject, _, _ in deliveries.calls}
    assert len(subjects) == ITEMS  # every event delivered, some of them twice (at least once)
    for holder, subject, start, end in first_calls:
        for other in second_calls:
            assert other[1] != subject or other[2] >= (end or start), (holder, subject)
