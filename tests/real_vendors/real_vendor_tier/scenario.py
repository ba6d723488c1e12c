"""Run writers and engines against a vendor together, with kills, and judge the result.

:func:`run_drf` and :func:`run_json` are one run each: start the vendor (or take a
running one), seed it, start one engine process per :class:`EngineSpec`, let the writers
run for ``plan.write_seconds`` while engines are SIGKILLed and restarted at seeded
moments, then leave the vendor idle for ``plan.tail_seconds`` (the last
``plan.tail_seconds - plan.idle_from`` of which measure each poller's requests on an idle
vendor), stop the engines gracefully and hold every journal against the oracle.

:func:`run_wedge` (DRF ``PageNumberPagination``: the last page of a pass vanishes) and
:func:`run_ties` (json-server: a tie group larger than the page, ``tie_break=None``) are
short scripted runs of one engine in ``tick()`` mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .checks import Verdict, drf_key, evaluate, json_key, read_journal
from .oracle import History, drf_history, json_history
from .toml_recipes import FULL_LISTING as TOML_FULL_LISTING
from .vendors import DrfVendor, JsonServer, Served
from .writers import JsonWriters, iso_ms, json_orders, run_drf_writer, seed_drf

CHILD = Path(__file__).with_name("engine_child.py")
ENGINE_PYTHON = os.environ.get("WATUKUY_RV_ENGINE_PYTHON") or sys.executable
LIVE_PATHS = {
    ("drf", "token"): "orders/cursor/",
    ("drf", "snapshot"): "orders/pages/",
    # Its reconcile listing reads the same path with `?ordering=id&page=...`.
    ("drf", "page-reconcile"): "orders/pages/?page=",
    ("drf", "toml-token"): "orders/cursor/",
    ("drf", "toml-snapshot"): "orders/pages/",
    ("drf", "toml-not-found"): "orders/pages/",
}
FULL_LISTING = frozenset({"snapshot", *TOML_FULL_LISTING})
"""Recipes whose live lane reads the whole listing, so every delete must arrive."""


@dataclass(frozen=True)
class EngineSpec:
    """One poller under test: a recipe, the store it keeps its state in, its kills.

    Attributes:
        recipe: A name of :data:`.recipes.RECIPES` or :data:`.toml_recipes.TOML_RECIPES`
            for the vendor.
        store: ``"sqlite"`` or ``"postgres"``.
        kills: SIGKILLs during the writes (each followed by a new process at once).
        knobs: Keyword arguments of the recipe builder (its schedule, reconcile cadence).
        kills_like: Another recipe of the run whose kill moments this one shares (its
            ``kills`` is then ignored): a TOML twin of a docs recipe lives through the same
            scenario, not a harsher or a milder one.
    """

    recipe: str
    store: str = "sqlite"
    kills: int = 0
    knobs: Mapping[str, Any] = field(default_factory=dict)
    kills_like: str | None = None


@dataclass(frozen=True)
class RunPlan:
    """How long and how hard a run writes.

    Attributes:
        write_seconds: How long the writers write.
        tail_seconds: How long the vendor then stays idle before the engines stop.
        idle_from: Seconds into the tail at which the idle request count starts.
        initial: Orders seeded before the engines start.
        writers: DRF writer threads, or json-server clients.
        bulk_at: Seconds into the writes at which a bulk action stamps many orders alike.
        bulk_size: Orders per bulk action (more than a page).
        seed: Seeds the writers and the kill times.
        late_at: Seconds into the writes at which a json-server client sends a write only
            after the ``quickstart`` poller has read past its stamp (json-server only).
        engine_python: The interpreter that runs the engines (another checkout's venv).
    """

    write_seconds: float = 30.0
    tail_seconds: float = 25.0
    idle_from: float = 12.0
    initial: int = 300
    writers: int = 8
    bulk_at: tuple[float, ...] = (6.0, 18.0)
    bulk_size: int = 150
    seed: int = 1
    engine_python: str = ENGINE_PYTHON
    late_at: tuple[float, ...] = (4.0, 10.0)


@dataclass
class RecipeResult:
    """What one recipe did in a run."""

    recipe: str
    store: str
    kills: int
    verdict: Verdict
    requests: int
    idle_requests: int
    idle_live_requests: int
    idle_cycles: int
    idle_seconds: float
    errors: list[dict[str, Any]]
    cycles: int
    not_modified: int = 0

    def figures(self) -> dict[str, Any]:
        """Everything a report prints for this recipe."""
        per_minute = 60 * self.idle_requests / self.idle_seconds if self.idle_seconds else None
        per_cycle = self.idle_live_requests / self.idle_cycles if self.idle_cycles else None
        return {
            "recipe": self.recipe,
            "store": self.store,
            "kills": self.kills,
            **self.verdict.figures(),
            "requests": self.requests,
            "cycles": self.cycles,
            "errors": len(self.errors),
            "answered_304": self.not_modified,
            "idle_requests_per_min": None if per_minute is None else round(per_minute, 1),
            "idle_live_requests_per_cycle": None if per_cycle is None else round(per_cycle, 2),
        }


@dataclass
class RunResult:
    """One run against one vendor."""

    vendor: str
    history: History
    writes: dict[str, int]
    recipes: dict[str, RecipeResult]
    seconds: float

    def lateness(self) -> dict[str, float]:
        """How late writes became visible after their stamp (seconds)."""
        late = sorted(self.history.lateness)
        if not late:
            return {}
        return {
            "p50": round(statistics.median(late), 2),
            "p99": round(late[min(len(late) - 1, int(0.99 * len(late)))], 2),
            "max": round(late[-1], 2),
        }


class EngineProcess:
    """One engine child (see ``engine_child.py``)."""

    def __init__(self, process: asyncio.subprocess.Process, name: str, out: Path) -> None:
        self.process = process
        self.name = name
        self.out = out

    @classmethod
    async def start(
        cls, folder: Path, name: str, args: Sequence[str], *, python: str, stdin: bool = False
    ) -> EngineProcess:
        """Start the child ``name`` with ``args`` under ``python``."""
        out = folder / f"{name}.out"
        with out.open("ab") as stdout:
            process = await asyncio.create_subprocess_exec(
                python,
                str(CHILD),
                "--instance",
                name,
                *args,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=stdout,
            )
        return cls(process, name, out)

    def lines(self) -> list[str]:
        """What it printed so far."""
        return self.out.read_text(errors="replace").splitlines()

    async def wait_for(self, prefix: str, count: int = 1, timeout: float = 60.0) -> list[str]:
        """The first ``count`` lines starting with ``prefix`` (waiting up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [line for line in self.lines() if line.startswith(prefix)]
            if len(found) >= count:
                return found[:count]
            if self.process.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} never printed {prefix!r} x{count} "
                    f"(exit {self.process.returncode}): {self.lines()[-20:]}"
                )
            await asyncio.sleep(0.05)

    async def send(self, line: str) -> None:
        """A line on its stdin (``tick`` mode)."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()

    async def kill(self) -> None:
        """SIGKILL."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()

    async def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a graceful ``stop()``), then the exit status."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            await self.kill()
            return -9


@dataclass
class _Poller:
    spec: EngineSpec
    args: list[str]
    journal: Path
    processes: list[EngineProcess] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    idle: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))
    """(all, live-lane) requests at the start and at the end of the idle window."""


@contextlib.asynccontextmanager
async def _engine_stores(
    folder: Path, specs: Sequence[EngineSpec], dsn: str | None
) -> AsyncIterator[dict[str, list[str]]]:
    """Store arguments per recipe; PostgreSQL schemas of their own, dropped afterwards."""
    schemas: list[str] = []
    stores: dict[str, list[str]] = {}
    for spec in specs:
        if spec.store == "postgres":
            if dsn is None:
                raise ValueError("a postgres engine store needs the PostgreSQL URL")
            schema = f"rv_engine_{uuid.uuid4().hex[:8]}_{spec.recipe.replace('-', '_')}"
            schemas.append(schema)
            stores[spec.recipe] = ["--postgres", dsn, "--schema", schema]
        else:
            stores[spec.recipe] = ["--sqlite", str(folder / f"{spec.recipe}-engine.db")]
    try:
        yield stores
    finally:
        if schemas and dsn is not None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _run_engines(
    vendor_name: str,
    vendor: Served,
    folder: Path,
    specs: Sequence[EngineSpec],
    plan: RunPlan,
    dsn: str | None,
    write: Callable[[], Any],
) -> tuple[dict[str, _Poller], dict[str, Any], float, float]:
    """Start the engines, write (with kills), idle; the pollers and the timings."""
    rng = random.Random(plan.seed)
    async with _engine_stores(folder, specs, dsn) as stores:
        pollers: dict[str, _Poller] = {}
        for spec in specs:
            journal = folder / f"{spec.recipe}-journal.db"
            args = [
                "--vendor",
                vendor_name,
                "--recipe",
                spec.recipe,
                "--base-url",
                vendor.client_url(spec.recipe),
                "--journal",
                str(journal),
                "--knobs",
                json.dumps(dict(spec.knobs)),
                *stores[spec.recipe],
            ]
            pollers[spec.recipe] = _Poller(spec, args, journal)

        async def launch(poller: _Poller) -> EngineProcess:
            name = f"{poller.spec.recipe}-{len(poller.processes) + 1}"
            child = await EngineProcess.start(folder, name, poller.args, python=plan.engine_python)
            poller.processes.append(child)
            await child.wait_for("ready")
            return child

        await asyncio.gather(*(launch(poller) for poller in pollers.values()))

        async def killer(poller: _Poller, moments: list[float], started: float) -> None:
            for moment in moments:
                await asyncio.sleep(max(0.0, started + moment - time.monotonic()))
                victim = poller.processes[-1]
                await victim.kill()
                poller.killed.append(victim.name)
                await launch(poller)

        moments = {
            name: sorted(
                rng.uniform(2.0, max(3.0, plan.write_seconds - 2.0))
                for _ in range(poller.spec.kills)
            )
            for name, poller in pollers.items()
            if poller.spec.kills_like is None
        }
        for name, poller in pollers.items():
            if poller.spec.kills_like is not None:
                moments[name] = moments[poller.spec.kills_like]
        started = time.monotonic()
        killers = [
            asyncio.create_task(killer(poller, moments[name], started))
            for name, poller in pollers.items()
        ]
        writes = await write()
        await asyncio.gather(*killers)
        await asyncio.sleep(plan.idle_from)
        idle_start = time.time()
        before = {name: _requests(vendor, vendor_name, name) for name in pollers}
        await asyncio.sleep(plan.tail_seconds - plan.idle_from)
        idle_end = time.time()
        after = {name: _requests(vendor, vendor_name, name) for name in pollers}
        await asyncio.gather(*(poller.processes[-1].stop() for poller in pollers.values()))
        for name, poller in pollers.items():
            poller.idle = (before[name], after[name])
        return pollers, writes, idle_start, idle_end


def _requests(vendor: Served, vendor_name: str, recipe: str) -> tuple[int, int]:
    live = LIVE_PATHS.get((vendor_name, recipe), "")
    return vendor.requests(recipe), vendor.requests(recipe, live)


def _judge(
    vendor_name: str,
    history: History,
    pollers: Mapping[str, _Poller],
    idle: tuple[float, float],
    end: float,
    vendor: Served,
) -> dict[str, RecipeResult]:
    results: dict[str, RecipeResult] = {}
    for name, poller in pollers.items():
        deliveries, polls, errors = read_journal(poller.journal)
        verdict = evaluate(
            history,
            deliveries,
            key_of=drf_key if vendor_name == "drf" else json_key,
            end=end,
            deletes_observable=poller.spec.recipe in FULL_LISTING,
            killed=poller.killed,
        )
        before, after = poller.idle
        idle_cycles = sum(
            1 for poll in polls if poll["lane"] == "live" and idle[0] <= poll["started"] < idle[1]
        )
        results[name] = RecipeResult(
            recipe=name,
            store=poller.spec.store,
            kills=len(poller.killed),
            verdict=verdict,
            requests=vendor.requests(name),
            idle_requests=after[0] - before[0],
            idle_live_requests=after[1] - before[1],
            idle_cycles=idle_cycles,
            idle_seconds=idle[1] - idle[0],
            errors=errors,
            cycles=sum(1 for poll in polls if poll["lane"] == "live"),
            not_modified=vendor.answered(name, 304),
        )
    return results


async def run_drf(
    folder: Path,
    dsn: str,
    specs: Sequence[EngineSpec],
    plan: RunPlan,
    *,
    vendor: DrfVendor | None = None,
) -> RunResult:
    """One run against the DRF vendor (started here unless given)."""
    started = time.monotonic()
    running: DrfVendor = (
        vendor
        if vendor is not None
        else await asyncio.to_thread(DrfVendor.start, folder / "vendor", dsn)
    )
    try:
        await asyncio.to_thread(seed_drf, running.dsn, running.schema, plan.initial)

        async def write() -> dict[str, int]:
            return await run_drf_writer(
                running.dsn,
                running.schema,
                seconds=plan.write_seconds,
                threads=plan.writers,
                seed=plan.seed,
                bulk_at=plan.bulk_at,
                bulk_size=plan.bulk_size,
            )

        pollers, writes, idle_start, idle_end = await _run_engines(
            "drf", running, folder, specs, plan, dsn, write
        )
        end = time.time()
        history = await asyncio.to_thread(drf_history, running.dsn, running.schema)
        results = _judge("drf", history, pollers, (idle_start, idle_end), end, running)
    finally:
        if vendor is None:  # started here
            await asyncio.to_thread(running.stop)
    return RunResult("drf", history, writes, results, time.monotonic() - started)


async def run_json(
    folder: Path,
    specs: Sequence[EngineSpec],
    plan: RunPlan,
    *,
    dsn: str | None = None,
) -> RunResult:
    """One run against a json-server started here."""
    started = time.monotonic()
    initial = json_orders(plan.initial, start=time.time() - 3600)
    server = await asyncio.to_thread(JsonServer.start, folder / "vendor", initial)
    server_started = time.time()
    try:
        writers = JsonWriters(server.base_url, initial, plan.seed)

        async def write() -> dict[str, int]:
            # The keyset poller the late writes wait for: the docs' quickstart, or its TOML twin.
            keysets = [
                spec.recipe for spec in specs if spec.recipe in ("quickstart", "toml-keyset")
            ]
            watched = min(keysets, key=("quickstart", "toml-keyset").index, default=None)
            return await writers.run(
                plan.write_seconds,
                clients=plan.writers,
                bulk_at=plan.bulk_at,
                bulk_size=plan.bulk_size,
                late_at=plan.late_at,
                polled=None if watched is None else lambda: server.requests(watched),
            )

        pollers, writes, idle_start, idle_end = await _run_engines(
            "json", server, folder, specs, plan, dsn, write
        )
        end = time.time()
        history = json_history(initial, server_started, writers.log)
        _check_db_file(history, server)
        results = _judge("json", history, pollers, (idle_start, idle_end), end, server)
    finally:
        await asyncio.to_thread(server.stop)
    return RunResult("json", history, writes, results, time.monotonic() - started)


def _check_db_file(history: History, server: JsonServer) -> None:
    """The writers' log must end where json-server's db file ends (the tier's own check)."""
    stored = server.final_state()
    final = {
        identity: state.row for identity, state in history.final().items() if not state.deleted
    }
    if {k: json_key(v) for k, v in stored.items()} != {
        k: json_key(v) for k, v in final.items() if v
    }:
        raise AssertionError("json-server's db file disagrees with the writers' log")


# --- scripted runs ------------------------------------------------------------------------


class TickedEngine:
    """An engine child in ``tick()`` mode: each :meth:`tick` is one triggered ``tick()``."""

    def __init__(self, child: EngineProcess, journal: Path) -> None:
        self.child = child
        self.journal = journal
        self.ticks = 0

    @classmethod
    async def start(
        cls,
        folder: Path,
        vendor: str,
        recipe: str,
        base_url: str,
        *,
        knobs: Mapping[str, Any] | None = None,
        python: str = ENGINE_PYTHON,
    ) -> TickedEngine:
        """Start the child for ``recipe`` with a SQLite store and a journal in ``folder``."""
        journal = folder / f"{recipe}-journal.db"
        child = await EngineProcess.start(
            folder,
            f"{recipe}-1",
            [
                *("--vendor", vendor, "--recipe", recipe, "--base-url", base_url),
                *("--journal", str(journal), "--sqlite", str(folder / f"{recipe}-engine.db")),
                *("--knobs", json.dumps(dict(knobs or {})), "--tick"),
            ],
            python=python,
            stdin=True,
        )
        await child.wait_for("ready")
        return cls(child, journal)

    async def tick(self) -> list[str]:
        """One ``tick()``; the error messages of the cycles it ran."""
        self.ticks += 1
        await self.child.send("tick")
        line = (await self.child.wait_for("ticked", self.ticks))[-1]
        errors: list[str] = json.loads(line.split(" ", 1)[1])
        return errors

    async def close(self) -> None:
        """Stop the child (killed if it does not stop)."""
        if self.child.process.returncode is None:
            with contextlib.suppress(ConnectionError):
                await self.child.send("quit")
            await self.child.stop()


@dataclass
class WedgeResult:
    """The 404-past-the-end run (see :func:`run_wedge`)."""

    errors_before_update: list[list[str]]
    ticks_to_deliver: int | None
    ticks: int
    deleted_events: int
    phantom_deletes: int
    tick_errors: list[list[str]]


async def run_wedge(
    folder: Path,
    dsn: str,
    *,
    recipe: str = "wedge",
    ticks_after_update: int = 8,
    engine_python: str = ENGINE_PYTHON,
) -> WedgeResult:
    """A ``SnapshotDiff`` pass over DRF page numbers whose last page vanishes under it.

    150 orders in pages of 50, two pages a cycle (``max_pages_per_cycle=2``): the first
    ``tick()`` reads pages 1-2, then another client deletes orders 51-150, so page 3 answers
    ``404 {"detail": "Invalid page."}``. Three ticks later order 1 is updated; the run
    counts the ticks until that update is delivered (``None``: never, within
    ``ticks_after_update``). ``recipe``: ``"wedge"``, a fetch that raises on that ``404``
    (the engine's safety net), or ``"wedge-gone"``, the docs' fetch, which returns
    ``Page(gone=True)`` for it.
    """
    import psycopg

    vendor = await asyncio.to_thread(DrfVendor.start, folder / "vendor", dsn, workers=1, threads=2)
    engine: TickedEngine | None = None
    try:
        await asyncio.to_thread(seed_drf, vendor.dsn, vendor.schema, 150)
        engine = await TickedEngine.start(
            folder, "drf", recipe, vendor.client_url(recipe), python=engine_python
        )
        results = [await engine.tick()]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DELETE FROM "{vendor.schema}".orders WHERE id > 50')
        results += [await engine.tick() for _ in range(3)]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                f'UPDATE "{vendor.schema}".orders SET version = version + 1, '
                "status = 'paid', updated_at = clock_timestamp() WHERE id = 1"
            )
        delivered_at: int | None = None
        for n in range(1, ticks_after_update + 1):
            results.append(await engine.tick())
            deliveries, _, _ = read_journal(engine.journal)
            if any(d.subject == "1" and (d.data or {}).get("status") == "paid" for d in deliveries):
                delivered_at = n
                break
        await engine.close()
        deliveries, _, _ = read_journal(engine.journal)
        deleted = [d for d in deliveries if d.type == "deleted"]
        return WedgeResult(
            errors_before_update=results[1:4],
            ticks_to_deliver=delivered_at,
            ticks=engine.ticks,
            deleted_events=len(deleted),
            phantom_deletes=sum(1 for d in deleted if int(d.subject) <= 50),
            tick_errors=results,
        )
    finally:
        if engine is not None:
            await engine.child.kill()
        await asyncio.to_thread(vendor.stop)


@dataclass
class TiesResult:
    """The tie-group run (see :func:`run_ties`)."""

    orders: int
    group: int
    limit: int
    delivered: int
    requests: int
    tick_errors: list[list[str]]


async def run_ties(
    folder: Path,
    *,
    group: int = 60,
    limit: int = 20,
    ticks: int = 6,
    engine_python: str = ENGINE_PYTHON,
) -> TiesResult:
    """json-server holding a group of ``group`` orders with one stamp, polled with
    ``tie_break=None`` and ``_limit=limit`` (smaller than the group): 30 orders before the
    group and 10 after it, ``ticks`` ticks."""
    start = time.time() - 3600
    orders = json_orders(30, start=start)
    tied = json_orders(group, start=start + 60)
    for n, order in enumerate(tied):
        order.update(id=100 + n, updatedAt=tied[0]["updatedAt"])
    later = json_orders(10, start=start + 120)
    for n, order in enumerate(later):
        order["id"] = 1000 + n
    everything = orders + tied + later
    server = await asyncio.to_thread(JsonServer.start, folder / "vendor", everything)
    engine: TickedEngine | None = None
    try:
        engine = await TickedEngine.start(
            folder,
            "json",
            "ties",
            server.client_url("ties"),
            knobs={"ties_limit": limit},
            python=engine_python,
        )
        results = [await engine.tick() for _ in range(ticks)]
        await engine.close()
        deliveries, _, _ = read_journal(engine.journal)
        return TiesResult(
            orders=len(everything),
            group=group,
            limit=limit,
            delivered=len({d.subject for d in deliveries}),
            requests=server.requests("ties"),
            tick_errors=results,
        )
    finally:
        if engine is not None:
            await engine.child.kill()
        await asyncio.to_thread(server.stop)


@dataclass
class NotModifiedResult:
    """The 304 run (see :func:`run_not_modified`)."""

    answered_304: int
    tick_errors: list[list[str]]
    update_delivered: bool


async def run_not_modified(
    folder: Path, *, ticks: int = 6, engine_python: str = ENGINE_PYTHON
) -> NotModifiedResult:
    """json-server on 20 orders that do not change, polled ``ticks`` times by the
    ``quickstart`` recipe, whose fetch reads the body without checking ``not_modified``:
    json-server answers the engine's repeated conditional request with ``304``. Then one
    order is updated, and two more ticks must deliver it."""
    orders = json_orders(20, start=time.time() - 600)
    server = await asyncio.to_thread(JsonServer.start, folder / "vendor", orders)
    engine: TickedEngine | None = None
    try:
        engine = await TickedEngine.start(
            folder, "json", "quickstart", server.client_url("quickstart"), python=engine_python
        )
        results = [await engine.tick() for _ in range(ticks)]
        changed = {**orders[0], "version": orders[0]["version"] + 1, "status": "paid"}
        changed["updatedAt"] = iso_ms(time.time())
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            answer = await http.put(f"/orders/{changed['id']}", json=changed)
            answer.raise_for_status()
        results += [await engine.tick() for _ in range(2)]
        await engine.close()
        deliveries, _, _ = read_journal(engine.journal)
        return NotModifiedResult(
            answered_304=server.answered("quickstart", 304),
            tick_errors=results,
            update_delivered=any(
                d.subject == str(changed["id"]) and (d.data or {}).get("status") == "paid"
                for d in deliveries
            ),
        )
    finally:
        if engine is not None:
            await engine.child.kill()
        await asyncio.to_thread(server.stop)
