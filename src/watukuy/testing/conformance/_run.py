"""One conformance run: a plan executed against a real engine, then the oracle."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import httpx

from watukuy.engine import Engine
from watukuy.model import json as wkjson
from watukuy.model.events import Event, iso_time
from watukuy.model.ports import StateStore
from watukuy.model.rows import CommitBatch, Lease, PKey
from watukuy.runtime.context import HandlerContext
from watukuy.runtime.hooks import ErrorDetails, PollEndDetails, PollStartDetails
from watukuy.runtime.results import LeaseOptions, TickResult
from watukuy.stores.memory import MemoryStore
from watukuy.testing.clock import VirtualClock
from watukuy.testing.fake_api._items import parse_instant
from watukuy.testing.faulty import FaultyStore, ForwardingStore, SimulatedCrash
from watukuy.testing.random import SeededRandom

from ._config import ConformanceConfig
from ._oracle import BackfillOp, ClearOp, Delivery, check, converged
from ._plan import Step, format_plan
from ._pollers import POLLER_NAME, RECONCILE_EVERY_MS, SCHEDULE_MAX_MS, build_poller
from ._report import ConformanceReport
from ._vendor import Feed, Vendor

__all__ = ["ConformanceRun"]

KEY: Final = PKey(POLLER_NAME)
LEASE_TTL_MS: Final = 10_000
QUIET_ADVANCE_MS: Final = max(SCHEDULE_MAX_MS, RECONCILE_EVERY_MS) + 4_000
SETTLE_TICKS: Final = 3
TRACE_KEEP: Final = 400


class _Recorder(ForwardingStore):
    """Notes after which request each event was committed, and which requests' answers
    reached the store (for the ``[phantom]`` check)."""

    def __init__(self, inner: StateStore, run: ConformanceRun) -> None:
        super().__init__(inner)
        self._conformance = run

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Forwarded; records the commit."""
        await super().commit_poll(key, lease, batch)
        at = self._conformance.vendor.next_request - 1
        self._conformance.committed.add(at)
        for row in batch.events:
            self._conformance.commits.setdefault(row.event_id, at)


class _Hooks:
    def __init__(self, run: ConformanceRun) -> None:
        self._run = run

    def on_poll_start(self, details: PollStartDetails) -> None:
        self._run.vendor.cycle_started(details.lane, details.instance_id, details.started_at)

    def on_poll_end(self, details: PollEndDetails) -> None:
        self._run.vendor.cycle_ended(details.summary.truncated)

    def on_error(self, details: ErrorDetails) -> None:
        self._run.vendor.cycle_failed()
        error = details.error
        self._run.log(f"on_error {details.lane} {details.phase}: {error.get('message')}")


class ConformanceRun:
    """Executes one plan; see :func:`watukuy.testing.conformance.run_conformance`."""

    def __init__(
        self,
        config: ConformanceConfig,
        plan: list[Step],
        *,
        store: StateStore | None = None,
        seed: int | None = None,
        rounds: int | None = None,
        echo: bool = False,
    ) -> None:
        self.config = config
        self.plan = plan
        self.seed = seed
        self.rounds = rounds
        self.echo = echo
        self.clock = VirtualClock()
        self.started_at = self.clock.now()
        self.feed = Feed(list(plan))
        self.vendor = Vendor(config, self.clock, self.feed, on_kill=self._die, arm=self._arm)
        self.http = httpx.AsyncClient(transport=self.vendor.transport())
        self.inner: StateStore = store if store is not None else MemoryStore()
        self.recorder = _Recorder(self.inner, self)
        self.poller = build_poller(config, start_iso=iso_time(self.started_at + 1))
        self.engine: Engine | None = None
        self.faulty: FaultyStore | None = None
        self.stores: list[FaultyStore] = []
        self.processes = 0
        self.restarts = 0
        self.ticks = 0
        self.kills: dict[str, int] = {}
        self.deliveries: list[Delivery] = []
        self.mirror: list[Delivery] = []  # the second consumer's, with two
        self.commits: dict[str, int] = {}
        self.committed: set[int] = set()
        self.clears: list[ClearOp] = []
        self.backfills: list[BackfillOp] = []
        self.violations: list[str] = []
        self.stats: dict[str, int] = {}
        self.lines: deque[str] = deque(maxlen=TRACE_KEEP)

    # --- trace ----------------------------------------------------------------------------

    def log(self, line: str) -> None:
        """One timeline line, stamped with virtual seconds since the start."""
        entry = f"+{(self.clock.now() - self.started_at) / 1000:7.1f}s #{self.vendor.next_request - 1} {line}"
        self.lines.append(entry)
        if self.echo:
            print(entry, flush=True)

    # --- processes ------------------------------------------------------------------------

    def _spawn(self) -> Engine:
        self.processes += 1
        instance = f"p{self.processes}"
        faulty = FaultyStore(self.recorder, owner=instance, log=self.log)
        engine = Engine(
            store=faulty,
            pollers=[self.poller],
            clock=self.clock,
            random=SeededRandom(self.processes),
            instance_id=instance,
            hooks=_Hooks(self),
            lease=LeaseOptions(ttl=f"{LEASE_TTL_MS}ms"),
            http_client=self.http,
            auto_migrate=False,
        )
        engine.on(POLLER_NAME, self._handler(faulty, instance, self.deliveries))
        if self.config.consumers > 1:
            engine.on(
                POLLER_NAME,
                self._handler(faulty, instance, self.mirror, flaky=True),
                consumer="mirror",
            )
        self.faulty, self.engine = faulty, engine
        self.stores.append(faulty)
        self.log(f"spawn {instance}")
        return engine

    def _handler(
        self,
        faulty: FaultyStore,
        instance: str,
        deliveries: list[Delivery],
        *,
        flaky: bool = False,
    ) -> Callable[[Event[Any], HandlerContext], Awaitable[None]]:
        """A consumer recording into ``deliveries``; a ``flaky`` one also fails the first
        attempt of about a third of the events (by id), which the others never see."""

        async def handle(event: Event[Any], ctx: HandlerContext) -> None:
            if faulty.dead:
                raise SimulatedCrash("dead", f"{instance} cannot run handlers")
            if event.attempt == 1 and faulty.take_handler_kill(f"{event.type} {event.subject}"):
                raise RuntimeError("conformance: the handler fails once")
            if flaky and event.attempt == 1 and int(event.id[:8], 16) % 3 == 0:
                raise RuntimeError(f"conformance: consumer {ctx.consumer} fails once")
            deliveries.append(
                Delivery(
                    id=event.id,
                    type=event.type,
                    subject=event.subject,
                    sequence=event.sequence,
                    lane=event.lane,
                    data=event.data,
                    instance=instance,
                    request=self.vendor.next_request - 1,
                )
            )

        return handle

    def _count(self, where: str) -> None:
        self.kills[where] = self.kills.get(where, 0) + 1

    def _arm(self, point: str) -> None:
        if self.faulty is not None and not self.faulty.dead:
            self.faulty.arm(point)  # type: ignore[arg-type]

    def _die(self, number: int) -> None:
        self._count("request")
        if self.faulty is not None:
            self.faulty.dead = True
        self.vendor.cycle_killed()
        raise SimulatedCrash("dead", f"the process died during request #{number}")

    async def _restart(self, reason: str) -> None:
        self.engine = None
        self.restarts += 1
        self.vendor.cycle_killed()
        self.log(f"restart after {reason}")
        await self.clock.advance_ms(LEASE_TTL_MS + 1_000)
        self._spawn()

    @property
    def _dead(self) -> bool:
        return self.faulty is not None and self.faulty.dead

    # --- ticks and operations ---------------------------------------------------------------

    async def _tick(self, label: str) -> None:
        if self._dead:
            await self._restart("a death")
        engine = self.engine or self._spawn()
        self.ticks += 1
        before = (self.vendor.next_request, len(self.deliveries))
        result: TickResult | None = None
        outcome = ""
        try:
            result = await engine.tick()
        except SimulatedCrash as crash:
            outcome = f"died ({crash})"
            self.vendor.cycle_killed()
        except Exception as error:
            outcome = f"raised {type(error).__name__}"
            self.violations.append(
                f"[engine] tick() raised {type(error).__name__}: {error} (tick {label})"
            )
            if self.faulty is not None:
                self.faulty.dead = True
        await self.clock.flush()
        self.vendor.apply_deferred()
        if not self._dead:
            await self._note_backfill()
        if result is not None:
            outcome = " ".join(
                f"{c.lane}[items={c.items} events={c.events}"
                + (f" error={c.error.get('name')}" if c.error else "")
                + "]"
                for c in result.polled
            ) or ("not-due" if result.skipped_not_due else "idle")
        requests = self.vendor.next_request - before[0]
        delivered = len(self.deliveries) - before[1]
        self.log(f"tick {label}: {outcome} requests={requests} delivered={delivered}")

    async def _note_backfill(self) -> None:
        running = [op for op in self.backfills if op.done_at is None]
        if not running:
            return
        state = await self.inner.load_state(KEY)
        if state is not None and state.backfill is None:
            for op in running:
                op.done_at = self.vendor.next_request - 1

    def _target_ms(self, live: str | None) -> int | None:
        value: Any = None
        if live is not None:
            value = wkjson.loads(live).get("value")
        elif self.config.initial_now:
            value = iso_time(self.started_at + 1)
        micros = parse_instant(value) if value is not None else None
        return None if micros is None else micros // 1000

    async def _op(self, name: str) -> None:
        if self._dead:
            await self._restart("a death")
        engine = self.engine or self._spawn()
        state = await self.inner.load_state(KEY)
        sequence = state.sequence if state is not None else 0
        live = state.cursors.get("live") if state is not None else None
        self.log(f"op {name}")
        try:
            if name == "reset":
                await engine.reset_cursor(POLLER_NAME, None)
            elif name == "reset_clear":
                await engine.reset_cursor(POLLER_NAME, None, clear_snapshot=True)
                self.clears.append(ClearOp(self.vendor.next_request, sequence))
            elif name in ("backfill", "backfill_force"):
                force = name == "backfill_force"
                await engine.backfill(POLLER_NAME, None, force=force)
                for op in self.backfills:
                    if op.done_at is None:
                        op.done_at = -1  # replaced by this one: never completes
                target = self._target_ms(live)
                # Before the live cursor moved, the backfill's target is the beginning
                # itself: there is nothing it must read.
                if self.config.strategy == "timestamp" and target is not None:
                    self.backfills.append(
                        BackfillOp(self.vendor.next_request, sequence, force, target)
                    )
            else:
                raise ValueError(f"unknown operation {name!r}")
        except SimulatedCrash:
            self._count("operation")
        except Exception as error:
            self.violations.append(f"[engine] {name} raised {type(error).__name__}: {error}")

    async def _between(self, step: Step) -> None:
        if step.kind == "tick":
            await self.clock.advance_ms(step.number)
            await self._tick(step.text)
        elif step.kind == "op":
            await self._op(step.name)
        elif step.kind == "kill":
            if self.faulty is not None and not self.faulty.dead:
                self._count("idle")
                self.faulty.dead = True
        elif step.kind != "pass":
            self.vendor.apply(step)

    # --- quiescence -----------------------------------------------------------------------

    def _pages(self) -> int:
        return max(1, math.ceil(len(self.vendor.final()) / self.config.page_size))

    async def _quiesce(self) -> None:
        self.feed.position = len(self.feed.steps)
        self.vendor.pending_fault = None
        if self.faulty is not None:
            self.faulty.arm(None)
        self.log("quiescence: no more changes, faults or kills")
        limit = 12 + 4 * self._pages() * max(1, 3 // max(1, self.config.page_cap))
        quiet = 0
        for index in range(1, limit + 1):
            await self.clock.advance_ms(QUIET_ADVANCE_MS)
            await self._tick(f"q{index}")
            settled = (
                not self._dead
                and await self.inner.count_pending(KEY) == 0
                and all(op.done_at is not None for op in self.backfills)
                and converged(self.config, self.vendor, self.deliveries, self.clears)
                and (
                    self.config.consumers == 1
                    or converged(self.config, self.vendor, self.mirror, self.clears)
                )
            )
            quiet = quiet + 1 if settled and index >= 3 else 0
            if quiet >= 2:
                break
        else:
            tail = self.vendor.requests[-3:]
            shown = "; ".join(f"#{r.number} {r.lane} {r.route} {r.params}" for r in tail)
            self.violations.append(
                f"[stall] no convergence after {limit} quiescent ticks (last requests: {shown})"
            )
            return
        lanes = 2 if self.config.reconcile and not self.config.full_listing else 1
        bound = lanes * (self._pages() + 2)
        for index in range(1, SETTLE_TICKS + 1):
            before = (self.vendor.next_request, len(self.deliveries) + len(self.mirror))
            await self.clock.advance_ms(QUIET_ADVANCE_MS)
            await self._tick(f"s{index}")
            requests = self.vendor.next_request - before[0]
            delivered = len(self.deliveries) + len(self.mirror) - before[1]
            if requests > bound:
                self.violations.append(
                    f"[settle] {requests} requests in one tick of a vendor that holds still "
                    f"(at most {bound} expected)"
                )
            if delivered:
                self.violations.append(
                    f"[settle] {delivered} event(s) delivered by a vendor that holds still"
                )

    def _all_kills(self) -> dict[str, int]:
        kills = dict(self.kills)
        for store in self.stores:
            for point, count in store.kills.items():
                if count:
                    kills[point] = kills.get(point, 0) + count
        return kills

    # --- the whole run --------------------------------------------------------------------

    async def run(self) -> ConformanceReport:
        """Execute the plan, quiesce, check; returns the report."""
        try:
            await self.inner.migrate()
            self.log(f"start {self.config.name} on {type(self.inner).__name__}")
            while (step := self.feed.take()) is not None:
                await self._between(step)
            await self._quiesce()
            problems = check(
                self.config,
                self.vendor,
                self.deliveries,
                self.commits,
                self.clears,
                self.backfills,
                self.stats,
                committed=self.committed,
            )
            if self.config.consumers > 1:
                mirrored = check(
                    self.config,
                    self.vendor,
                    self.mirror,
                    self.commits,
                    self.clears,
                    self.backfills,
                    committed=self.committed,
                )
                problems += [f"{problem} (consumer mirror)" for problem in mirrored]
            self.violations[:0] = problems
        finally:
            await self.http.aclose()
        for violation in self.violations:
            self.log(f"VIOLATION {violation}")
        return ConformanceReport(
            config=self.config.name,
            store=type(self.inner).__name__,
            plan=format_plan(self.plan),
            seed=self.seed,
            steps=len(self.plan),
            rounds=self.rounds,
            ticks=self.ticks,
            requests=len(self.vendor.requests),
            writes=self.vendor.writes,
            deletes=self.vendor.deletes,
            faults=dict(self.vendor.faults),
            kills=self._all_kills(),
            restarts=self.restarts,
            delivered=len(self.deliveries),
            obligations=self.stats.get("obligations", 0),
            unique=len({d.id for d in self.deliveries}),
            violations=list(self.violations),
            trace=list(self.lines),
        )
