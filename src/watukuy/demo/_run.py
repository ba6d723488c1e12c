"""Running the demo: the vendor, the engine, the consumer, and what ties them together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from watukuy._system import SystemClock
from watukuy.cursor.strategy import describe_cursor, listing_caught_up
from watukuy.engine import Engine
from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.model.options import Budget
from watukuy.model.rows import PollerState
from watukuy.runtime.context import HandlerContext
from watukuy.runtime.results import LeaseOptions
from watukuy.stores import SqliteStore

from ._consumer import ConsumerLog
from ._output import DemoOutput
from ._pollers import BUDGET, demo_pollers
from ._world import Journal, VendorWorld

__all__ = ["DemoOptions", "DemoPaths", "run_demo"]

_LEASE_TTL: Final = "5s"
_STATUS_EVERY_MS: Final = 1_000
_STOP_TIMEOUT: Final = "5s"


@dataclass(frozen=True)
class DemoPaths:
    """The files of one demo: the engine's store, the vendor's journal, the consumer's log,
    and the lock that keeps a second demo off them."""

    db: Path
    journal: Path
    consumer_log: Path
    lock: Path

    @classmethod
    def for_db(cls, db: Path, consumer_log: Path | None = None) -> DemoPaths:
        """``watukuy-demo.db`` gives ``watukuy-demo.vendor.jsonl``,
        ``watukuy-demo.consumer.db`` and ``watukuy-demo.lock`` next to it."""
        stem = db.with_suffix("") if db.suffix else db
        return cls(
            db=db,
            journal=stem.with_name(stem.name + ".vendor.jsonl"),
            consumer_log=consumer_log or stem.with_name(stem.name + ".consumer.db"),
            lock=stem.with_name(stem.name + ".lock"),
        )

    def remove_all(self) -> None:
        """Delete every file of the demo (``--reset``)."""
        for path in (self.db, self.consumer_log):
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            self.journal.unlink()


@dataclass(frozen=True)
class DemoOptions:
    """How to run the demo.

    Attributes:
        paths: Where its files live.
        seed: Seed of the vendor's changes (the same seed replays the same story).
        duration_ms: Stop after this long (``None``: until Ctrl-C / SIGTERM).
        mutate_every_ms: Time between two steps of change at the vendor.
        mutations: Stop changing the vendor after this many steps in total, across runs
            (``None``: never).
        port: TCP port of the simulated vendor API (``0``: any free port).
        reset: Delete the demo's files first.
    """

    paths: DemoPaths
    seed: int = 7
    duration_ms: int | None = None
    mutate_every_ms: int = 1_000
    mutations: int | None = None
    port: int = 0
    reset: bool = False


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (POSIX), so two demos never share their files."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no lock, the lease TTL still protects
        yield
        return
    handle = path.open("a")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"another watukuy demo is running on these files (lock {str(path)!r})",
                field="--db",
            ) from None
        yield
    finally:
        handle.close()


class _WarningRelay(logging.Handler):
    """Shows the engine's warnings in the demo's output instead of raw stderr."""

    def __init__(self, output: DemoOutput) -> None:
        super().__init__(logging.WARNING)
        self._output = output

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._output.warning(record.getMessage())
        except Exception:  # a display problem must never reach the engine
            self.handleError(record)


@contextlib.contextmanager
def _relay_warnings(output: DemoOutput) -> Iterator[None]:
    logger = logging.getLogger("watukuy")
    handler = _WarningRelay(output)
    previous = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = previous


def _describe_cursor(state: PollerState | None) -> str:
    text = None if state is None else state.cursors.get("live")
    if state is None or text is None:
        return "(initial)"
    try:
        value = wkjson.loads(text)
    except ValueError:
        return text
    if value is None:
        return "full scan"
    schedule = state.schedule
    caught_up = listing_caught_up(schedule.last_poll, schedule.last_error)
    return describe_cursor(value, caught_up=caught_up)


async def run_demo(options: DemoOptions, output: DemoOutput) -> dict[str, Any]:
    """Run the demo until ``duration`` or SIGINT/SIGTERM; returns the final summary.

    Raises:
        ConfigError: The files belong to a demo with another seed, or are in use.
    """
    paths = options.paths
    paths.db.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(paths.lock):
        if options.reset:
            paths.remove_all()
        with _relay_warnings(output):
            return await _run(options, output)


async def _run(options: DemoOptions, output: DemoOutput) -> dict[str, Any]:
    clock = SystemClock()
    paths = options.paths
    journal = Journal(paths.journal)
    journal.open(options.seed, clock.now())
    world = VendorWorld.replay(options.seed, journal.started_at, journal.steps)
    api = world.api
    api.set_etags(True)
    api.set_rate_limit("ietf", limit=100, window="10s")
    try:
        server = await api.serve("127.0.0.1", options.port)
    except OSError as error:
        journal.close()
        raise ConfigError(
            f"cannot serve the vendor API on 127.0.0.1:{options.port}: {error.strerror or error}",
            field="--port",
        ) from None
    consumer = ConsumerLog(paths.consumer_log)
    store = SqliteStore(paths.db)
    engine = Engine(
        store=store,
        pollers=demo_pollers(server.url),
        budgets={BUDGET: Budget(requests=20, per="1s")},
        lease=LeaseOptions(ttl=_LEASE_TTL),
        clock=clock,
    )
    try:
        await engine.migrate()
        output.started(
            {
                "api": server.url,
                "db": str(paths.db),
                "consumer_log": str(paths.consumer_log),
                "seed": options.seed,
                "instance_id": engine.instance_id,
                "vendor_steps": len(journal.steps),
            }
        )
        pending_ids = await _resume(engine, journal, consumer, output)
        return await _serve(options, engine, world, journal, consumer, output, pending_ids)
    finally:
        journal.close()
        await engine.stop(drain=False)
        await store.close()
        await server.close()
        consumer.close()


async def _resume(
    engine: Engine,
    journal: Journal,
    consumer: ConsumerLog,
    output: DemoOutput,
) -> set[str]:
    """Report what a previous run left behind; returns the ids still pending delivery."""
    store = engine.store
    keys = await store.list_keys()
    pending: set[str] = set()
    if not keys:
        return pending
    now = engine.clock.now()
    described: list[dict[str, Any]] = []
    for key in keys:
        state = await store.load_state(key)
        rows = await store.load_pending(key, 1_000_000)
        pending.update(row.event_id for row in rows)
        lease = await store.get_lease(key)
        live = lease is not None and lease.expires_at > now
        described.append(
            {
                "poller": key.poller,
                "partition": key.partition,
                "cursor": _describe_cursor(state),
                "items": await store.count_items(key),
                "pending": len(rows),
                "lease_owner": lease.owner if live and lease is not None else None,
                "lease_expires_in": f"{(lease.expires_at - now) / 1000:.1f}s"
                if live and lease is not None
                else None,
            }
        )
    output.resumed(
        {
            "keys": described,
            "pending": len(pending),
            "consumer_log_events": consumer.count(),
            "vendor_steps": len(journal.steps),
        }
    )
    return pending


async def _serve(
    options: DemoOptions,
    engine: Engine,
    world: VendorWorld,
    journal: Journal,
    consumer: ConsumerLog,
    output: DemoOutput,
    pending_ids: set[str],
) -> dict[str, Any]:
    clock = engine.clock
    left_pending = len(pending_ids)
    delivered: dict[str, int] = {}
    counts = {"deliveries": 0, "redelivered": 0}

    async def handle(event: Event[Any], ctx: HandlerContext) -> None:
        deliveries = consumer.record(event, clock.now())
        counts["deliveries"] += 1
        if deliveries > 1:
            counts["redelivered"] += 1
        key = f"{event.poller}/{event.partition}" if event.partition else event.poller
        delivered[key] = delivered.get(key, 0) + 1
        resumed = event.id in pending_ids
        output.event(
            {
                "id": event.id,
                "type": event.type,
                "poller": event.poller,
                "partition": event.partition,
                "subject": event.subject,
                "sequence": event.sequence,
                "lane": event.lane,
                "data": event.data,
                "at": clock.now(),
                "deliveries": deliveries,
                "resumed": resumed,
            }
        )
        if resumed:
            pending_ids.discard(event.id)
            if not pending_ids:
                output.drained(left_pending)

    for name in engine.pollers:
        engine.on(name, handle)

    async def mutate() -> None:
        while options.mutations is None or len(journal.steps) < options.mutations:
            await clock.sleep(options.mutate_every_ms)
            at = clock.now()
            journal.append(at)  # write-ahead: the step exists before anyone can see it
            for fault in world.step(at):
                world.api.fail_next(fault.status, retry_after=fault.retry_after, path=fault.path)
                output.fault(fault.describe())

    async def refresh() -> None:
        while True:
            output.status(await engine.inspect(), delivered)
            await clock.sleep(_STATUS_EVERY_MS)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            pass
    await engine.start()
    tasks = [asyncio.create_task(mutate()), asyncio.create_task(refresh())]
    try:
        if options.duration_ms is None:
            await stop.wait()
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), options.duration_ms / 1000)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.stop(drain=True, timeout=_STOP_TIMEOUT)
    report = await engine.inspect()
    return {
        "deliveries": counts["deliveries"],
        "redelivered": counts["redelivered"],
        "consumer_log_events": consumer.count(),
        "vendor_steps": len(journal.steps),
        "per_key": dict(delivered),
        "db": str(options.paths.db),
        "report": report,
    }
