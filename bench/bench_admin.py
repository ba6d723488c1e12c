"""The admin page with 10,000 keys: how long its overview takes to render.

One partitioned poller with 10,000 partitions in a SqliteStore, each key with a stored
state shaped like a real one (a timestamp cursor, a schedule with its last poll; one key in
a hundred with an open circuit and an error, one in fifty paused). Requests go through
``httpx.ASGITransport`` to ``admin_app(engine, auth=...)``, so the figure is the page's own
work (the store reads, the template) without a network. Reported, as medians of
``ROUNDS`` requests after one warm-up:

- the overview's first page (the default view: by key, 50 rows), against the 200 ms target;
- a later page of the default view;
- the overview sorted by lag: the first request builds the snapshot of every key (timed
  once), the next ones sort the snapshot;
- one key's page.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

import watukuy as wk
from watukuy.model.errors import SerializedError
from watukuy.model.rows import CircuitState, PKey, PollSummary, ScheduleState
from watukuy.testing import VirtualClock

KEYS = 10_000
ROUNDS = 9
TARGET_MS = 200.0
T0 = 1_767_225_600_000


def _poller(names: list[str]) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page([])

    return wk.define_poller(
        name="orders",
        fetch=fetch,
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        partitions=lambda: names,
    )


async def _fill(store: wk.SqliteStore, names: list[str], now: int) -> None:
    poller = _poller(names)
    strategy = poller.strategy
    for index, name in enumerate(names):
        cursor = strategy.serialize(
            strategy.from_raw(f"2026-01-01T00:{index % 60:02d}:00Z", field="to")
        )
        schedule = ScheduleState(
            next_due_at=now + 30_000 + index,
            interval_ms=30_000,
            last_poll_at=now - 5_000 - index,
            last_poll=PollSummary(lane="live", started_at=now - 5_000, pages=1, items=20),
        )
        if index % 100 == 7:
            schedule = dataclasses.replace(
                schedule,
                circuit=CircuitState.OPEN,
                consecutive_failures=5,
                circuit_opened_at=now - 60_000,
                last_error=SerializedError(
                    name="HttpError", message="GET /orders responded 503", code="HTTP", status=503
                ),
            )
        await store.save_state_unfenced(
            PKey("orders", name),
            {
                "cursors": {"live": cursor},
                "schedule": schedule,
                "paused": index % 50 == 3,
                "updated_at": now,
                "wake_at": schedule.next_due_at,
            },
            now,
        )


async def _median_ms(request: Callable[[], Awaitable[httpx.Response]]) -> float:
    response = await request()  # warm-up
    assert response.status_code == 200, response.status_code
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        response = await request()
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.status_code
    return statistics.median(times)


async def _run(folder: Path) -> None:
    from watukuy.integrations.admin import admin_app

    names = [f"tenant-{n:05d}" for n in range(KEYS)]
    clock = VirtualClock(start=T0 + 3_600_000)
    store = wk.SqliteStore(str(folder / "admin.db"))
    started = time.perf_counter()
    await store.migrate()
    await _fill(store, names, clock.now())
    print(f"  {KEYS:,} keys written in {time.perf_counter() - started:.1f}s")
    engine = wk.Engine(store=store, pollers=[_poller(names)], clock=clock)
    app = admin_app(engine, auth=lambda request: True, index_ttl="1h")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://admin.bench") as client:
        first = await _median_ms(lambda: client.get("/"))
        later = await _median_ms(lambda: client.get("/", params={"page": "150"}))
        start = time.perf_counter()
        cold = await client.get("/", params={"sort": "lag", "desc": "1"})
        cold_ms = (time.perf_counter() - start) * 1000
        assert cold.status_code == 200
        sorted_ms = await _median_ms(lambda: client.get("/", params={"sort": "lag", "desc": "1"}))
        key_ms = await _median_ms(
            lambda: client.get("/key", params={"poller": "orders", "partition": names[4_321]})
        )
    await store.close()
    verdict = "met" if first <= TARGET_MS else "NOT MET"
    print(
        f"  overview, first page of {KEYS:,} keys: {first:.1f} ms "
        f"(median of {ROUNDS}; target <= {TARGET_MS:.0f} ms: {verdict})"
    )
    print(f"  overview, page 150:                  {later:.1f} ms")
    print(f"  sorted by lag, first request:        {cold_ms:.0f} ms (reads every key once)")
    print(f"  sorted by lag, from the snapshot:    {sorted_ms:.1f} ms")
    print(f"  one key's page:                      {key_ms:.1f} ms")


def main() -> None:
    """Run the scenario and print the figures."""
    with tempfile.TemporaryDirectory(prefix="watukuy-bench-admin-") as folder:
        asyncio.run(_run(Path(folder)))


if __name__ == "__main__":
    main()
