"""G5 with real processes: a paused lease holder wakes up fenced off.

Two engine processes share one PostgreSQL store. Process A freezes right before a commit
that carries a new item's event (a blocking sleep, then SIGSTOP) and stays stopped longer
than the lease TTL. Process B takes the key over, commits and delivers that same event.
After SIGCONT, A's commit is refused with ``LeaseLostError`` (or cancelled first, A's lease
keeper seeing the expiry by A's own clock), A fires ``on_lease_lost``, and the event log
holds every event id under exactly one sequence.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from _children.supervisor import Child, Dataset, create_consumer_log, read_deliveries

from watukuy.model import json as wkjson
from watukuy.model.rows import PKey
from watukuy.testing import FakeApi
from watukuy.testing.chaos._checks import convergence, evaluate

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

KEY = PKey("orders")
TTL_S = 2.0


async def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_a_paused_holder_is_fenced_off_after_it_resumes(
    tmp_path: Path, postgres_url: str, pg_schema: str, postgres_store: Any
) -> None:
    store = postgres_store
    api = FakeApi(page_size=20)
    data = Dataset(api, seed=5, initial=5)
    consumer_log = tmp_path / "consumer.db"
    create_consumer_log(consumer_log)
    pause_file = tmp_path / "pause-next-commit"
    server = await api.serve()
    args = [
        "--api",
        server.url,
        "--consumer-log",
        str(consumer_log),
        "--strategy",
        "timestamp",
        "--ttl",
        f"{TTL_S}s",
        "--postgres",
        postgres_url,
        "--schema",
        pg_schema,
        "--pause-file",
        str(pause_file),
        "--pause",
        "1.0",
    ]
    a = await Child.start(tmp_path, "A", args)
    b: Child | None = None
    try:
        await a.wait_for("ready")
        await wait_until(lambda: len(read_deliveries(consumer_log)) >= 5, 15, "A's first events")

        # A fetches the new item, diffs it, and freezes right before committing its event.
        late = data.create()
        pause_file.touch()
        paused = await a.wait_for("paused-before-commit")
        a.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        epoch_a = int(paused.split()[2])

        # B waits out A's lease, takes the key over, and delivers the item A is sitting on.
        b = await Child.start(tmp_path, "B", args)
        await wait_until(
            lambda: any(
                d.subject == late and d.instance == "B" for d in read_deliveries(consumer_log)
            ),
            20,
            f"B to deliver {late}",
        )
        await asyncio.sleep(max(0.0, TTL_S + 0.5 - (time.monotonic() - stopped_at)))
        frozen_for = time.monotonic() - stopped_at
        a.signal(signal.SIGCONT)

        # On waking, A either sends its commit and the fence refuses it, or its lease
        # keeper sees first that the lease expired by A's own clock and cancels the commit
        # in flight; either way nothing of it lands, and A says it lost the lease.
        lost = await a.wait_for("lease-lost")
        assert lost == f"lease-lost epoch {epoch_a}"
        refused = [line for line in a.lines() if line.startswith("refused commit_poll")]
        assert refused in ([], [f"refused commit_poll epoch {epoch_a}"])
        if not refused:
            assert "could not be renewed; stopping delivery" in a.err.read_text()
        epochs_b = [int(line.split()[2]) for line in b.lines() if line.startswith("lease-acquired")]
        assert epochs_b
        assert min(epochs_b) > epoch_a
        assert frozen_for > TTL_S

        # Both keep running as replicas; the next changes still arrive exactly as observed.
        for _ in range(5):
            data.mutate()
        await wait_until(
            lambda: (
                not convergence(
                    read_deliveries(consumer_log),
                    data.final(),
                    data.removed,
                    deletes_observable=True,
                )
            ),
            20,
            "convergence after the take-over",
        )
        assert await a.stop() == 0
        assert await b.stop() == 0
    finally:
        for child in (a, b):
            if child is not None and child.process.returncode is None:
                child.signal(signal.SIGCONT)
                await child.kill()
        await server.close()

    logged = await store.read_log(KEY, limit=10_000)
    sequences: dict[str, set[int]] = defaultdict(set)
    for entry in logged:
        sequences[wkjson.loads(entry.event)["id"]].add(entry.sequence)
    assert {event_id: seqs for event_id, seqs in sequences.items() if len(seqs) > 1} == {}
    assert len({entry.sequence for entry in logged}) == len(logged)
    late_events = [
        wkjson.loads(e.event) for e in logged if wkjson.loads(e.event)["subject"] == late
    ]
    assert [event["type"] for event in late_events][:1] == ["created"]

    deliveries = read_deliveries(consumer_log)
    violations, _unique = evaluate(
        deliveries,
        data.served,
        data.final(),
        data.removed,
        deletes_observable=True,
        retain_payload=False,
    )
    assert violations == []
    assert {d.instance for d in deliveries if d.subject == late and d.type == "created"} == {"B"}
    assert await store.count_pending(KEY) == 0
