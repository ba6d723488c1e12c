"""One seeded chaos run: a real engine, a fake API, a faulty store, and a virtual clock."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import httpx

from watukuy.engine import Engine
from watukuy.model.events import Event
from watukuy.model.ports import StateStore
from watukuy.model.rows import CommitBatch, Lease, PKey
from watukuy.runtime.context import HandlerContext
from watukuy.runtime.hooks import ErrorDetails, LeaseLostDetails, ParkedDetails, RetryDetails
from watukuy.runtime.results import LeaseOptions, TickResult
from watukuy.stores.memory import MemoryStore
from watukuy.testing.clock import VirtualClock
from watukuy.testing.fake_api import FakeApi
from watukuy.testing.faulty import (
    KILL_POINTS,
    FaultyStore,
    ForwardingStore,
    KillPoint,
    LeaseAudit,
    SimulatedCrash,
)
from watukuy.testing.random import SeededRandom

from ._checks import (
    Acked,
    Delivery,
    Ended,
    TimelineEntry,
    convergence,
    evaluate,
    held_removals,
    redeliveries,
    short,
    undelivered,
)
from ._pollers import (
    PAGE_SIZE,
    POLLER_NAME,
    RECONCILE_EVERY_MS,
    SCHEDULE_MIN_MS,
    build_poller,
)
from ._report import ChaosOptions, ChaosReport, Mutation

__all__ = ["ChaosRun"]

KEY: Final = PKey(POLLER_NAME)
LEASE_TTL_MS: Final = 10_000
DISPATCH_BATCH_SIZE: Final = 20
TRACE_KEEP: Final = 300
MIN_QUIESCENCE_TICKS: Final = 5
SETTLE_TICKS: Final = 2


class _Witness(ForwardingStore):
    """Sits under every process's faulty store and writes down what the store accepted:
    the events of each commit and each ack. A kill that fires before a call reaches the
    store leaves no trace here; one that fires after it, does."""

    def __init__(self, inner: StateStore, run: ChaosRun) -> None:
        super().__init__(inner)
        self._chaos = run

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        await super().commit_poll(key, lease, batch)
        for row in batch.events:
            self._chaos.committed[row.event_id] = (row.sequence, row.event)

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        await super().ack_events(key, lease, event_ids)
        self._chaos.timeline.append(Acked(tuple(event_ids)))


class _TraceHooks:
    """Engine hooks that write the interesting moments into the trace."""

    def __init__(self, run: ChaosRun) -> None:
        self._run = run

    def on_lease_lost(self, details: LeaseLostDetails) -> None:
        self._run.log(f"hook on_lease_lost {details.instance_id} epoch {details.epoch}")
        self._run.timeline.append(Ended(details.instance_id))

    def on_parked(self, details: ParkedDetails) -> None:
        row = details.row
        self._run.log(f"hook on_parked {row.kind} {short(row.id)}: {row.error.get('message')}")

    def on_retry(self, details: RetryDetails) -> None:
        event = details.event
        self._run.log(
            f"hook on_retry {event.type} {event.subject} seq {event.sequence} "
            f"attempt {details.attempt}, next in {details.delay_ms}ms"
        )

    def on_error(self, details: ErrorDetails) -> None:
        error = details.error
        self._run.log(
            f"hook on_error {details.lane} {details.phase}: {error.get('name')}: "
            f"{error.get('message')}"
        )


class ChaosRun:
    """Drives one simulation; see :func:`watukuy.testing.chaos.run_chaos`."""

    def __init__(
        self, options: ChaosOptions, store: StateStore | None = None, echo: bool = False
    ) -> None:
        self.options = options
        self.echo = echo
        self.clock = VirtualClock()
        self.started_at = self.clock.now()
        root = SeededRandom(options.seed)
        self.kill_rng = root.fork()
        self.mutation_rng = root.fork()
        self.clock_rng = root.fork()
        self.engine_rng = root.fork()
        self.restart_rng = root.fork()
        self.api = FakeApi(self.clock, page_size=PAGE_SIZE)
        self.http = httpx.AsyncClient(transport=self.api.transport())
        self.inner: StateStore = store if store is not None else MemoryStore()
        self.witness = _Witness(self.inner, self)
        self.audit = LeaseAudit()
        self.poller = build_poller(
            options.strategy,
            base_url=self.api.base_url,
            now=self.clock.now,
            concurrency=options.concurrency,
            retain_payload=options.retain_payload,
            reconcile=options.reconcile,
        )
        self.served: dict[str, list[dict[str, Any]]] = {}
        self.removed: dict[str, int] = {}
        self.deliveries: list[Delivery] = []
        self.committed: dict[str, tuple[int, str]] = {}
        self.timeline: list[TimelineEntry] = []
        self.violations: list[str] = []
        self.lines: deque[str] = deque(maxlen=TRACE_KEEP)
        self.mutations: dict[Mutation, int] = {"created": 0, "updated": 0, "deleted": 0}
        self.processes: list[FaultyStore] = []
        self.engine: Engine | None = None
        self.faulty: FaultyStore | None = None
        self.restarts = 0
        self.next_item = 0

    # --- trace --------------------------------------------------------------------------

    def log(self, line: str) -> None:
        """Append a line to the trace, stamped with virtual seconds since the start."""
        elapsed = (self.clock.now() - self.started_at) / 1000
        entry = f"+{elapsed:8.1f}s {line}"
        self.lines.append(entry)
        if self.echo:
            print(entry, flush=True)

    # --- the API ------------------------------------------------------------------------

    def _served(self, stored: dict[str, Any]) -> None:
        self.served.setdefault(stored["id"], []).append(stored)

    def _create(self) -> str:
        self.next_item += 1
        identity = f"item-{self.next_item:05d}"
        self._served(self.api.add({"id": identity, "value": self.mutation_rng.int(0, 999)}))
        return identity

    def mutate(self) -> None:
        """Apply 0..max_mutations_per_step seeded creates, updates and deletes."""
        count = self.mutation_rng.int(0, self.options.max_mutations_per_step)
        done: list[str] = []
        for _ in range(count):
            roll = self.mutation_rng.next()
            existing = self.api.all()
            if not existing or roll < 0.4:
                done.append(f"+{self._create()}")
                self.mutations["created"] += 1
            elif roll < 0.8:
                target = self.mutation_rng.pick(existing)
                stored = self.api.update(target["id"], value=target["value"] + 1)
                self._served(stored)
                self.mutations["updated"] += 1
                done.append(f"~{target['id']}(v{stored['version']})")
            else:
                target = self.mutation_rng.pick(existing)
                self.api.remove(target["id"])
                self.removed[target["id"]] = self.clock.now()
                self.mutations["deleted"] += 1
                done.append(f"-{target['id']}")
        if done:
            self.log(f"mutate {' '.join(done)} (api size {self.api.size()})")

    # --- processes ----------------------------------------------------------------------

    def spawn(self) -> Engine:
        """Start a fresh process: a new engine with a new instance id on the same store."""
        instance = f"inst-{len(self.processes) + 1}"
        faulty = FaultyStore(self.witness, owner=instance, audit=self.audit, log=self.log)
        engine = Engine(
            store=faulty,
            pollers=[self.poller],
            clock=self.clock,
            random=self.engine_rng,
            instance_id=instance,
            hooks=_TraceHooks(self),
            lease=LeaseOptions(ttl=f"{LEASE_TTL_MS}ms"),
            http_client=self.http,
            dispatch_batch_size=DISPATCH_BATCH_SIZE,
            auto_migrate=False,
        )
        engine.on(POLLER_NAME, self._handler(faulty, instance))
        self.processes.append(faulty)
        self.faulty, self.engine = faulty, engine
        self.log(f"spawn {instance}")
        return engine

    def _handler(
        self, faulty: FaultyStore, instance: str
    ) -> Callable[[Event[Any], HandlerContext], Awaitable[None]]:
        async def handle(event: Event[Any], ctx: HandlerContext) -> None:
            if faulty.dead:
                raise SimulatedCrash("dead", f"{instance} cannot run handlers")
            what = f"{event.type} {event.subject} seq {event.sequence}"
            if event.attempt == 1 and faulty.take_handler_kill(what):
                raise RuntimeError(f"chaos: the handler fails once on {what}")
            delivery = Delivery(
                id=event.id,
                type=event.type,
                subject=event.subject,
                sequence=event.sequence,
                lane=event.lane,
                data=event.data,
                previous=event.previous,
                attempt=event.attempt,
                instance=instance,
                at=self.clock.now(),
            )
            self.deliveries.append(delivery)
            self.timeline.append(delivery)

        return handle

    async def restart(self, reason: str) -> None:
        """Drop the dead engine (no ``stop()``), let its lease run out, start a new one.

        Half of the restarts come back just before the dead lease expires: the new process
        must then be refused the lease until it does (which the lease audit checks).
        """
        if self.faulty is not None and self.faulty.owner:
            self.timeline.append(Ended(self.faulty.owner))
        self.engine = None
        if self.restart_rng.chance(0.5):
            wait = LEASE_TTL_MS + 1_000
        else:
            wait = self.restart_rng.int(LEASE_TTL_MS // 2, LEASE_TTL_MS - 1)
        self.restarts += 1
        self.log(f"restart #{self.restarts} after {reason}; the new process starts in {wait}ms")
        await self.clock.advance_ms(wait)
        self.spawn()

    # --- ticks --------------------------------------------------------------------------

    async def tick(self, label: str, *, quiet: bool = False) -> int:
        """One ``engine.tick()``; returns how many events the handler completed.

        With ``quiet``, a tick that found nothing due is left out of the trace.
        """
        engine = self.engine or self.spawn()
        before = len(self.deliveries)
        result: TickResult | None = None
        outcome = ""
        try:
            result = await engine.tick()
        except SimulatedCrash as crash:
            cause = self.faulty.killed_by if self.faulty is not None else None
            outcome = f"died at {cause or crash.kill_point}"
        except Exception as error:
            outcome = f"raised {type(error).__name__}"
            self.violations.append(
                f"engine.tick() raised {type(error).__name__}: {error} (tick {label} on "
                f"{engine.instance_id})"
            )
            if self.faulty is not None:
                self.faulty.dead = True  # treat it as a crash: the next step restarts
        await self.clock.flush()
        delivered = len(self.deliveries) - before
        summary = outcome if result is None else self._describe(result, label, engine.instance_id)
        pending = await self.inner.count_pending(KEY)
        if not (quiet and summary == "not-due" and not delivered and not pending):
            self.log(
                f"tick {label} {engine.instance_id}: {summary} delivered={delivered} "
                f"pending={pending}"
            )
        return delivered

    def _describe(self, result: TickResult, label: str, instance: str) -> str:
        parts: list[str] = []
        for cycle in result.polled:
            error = cycle.error
            note = f" error={error.get('name')}" if error else ""
            parts.append(f"{cycle.lane}[items={cycle.items} events={cycle.events}{note}]")
            if error is not None:
                self.violations.append(
                    f"unexpected {cycle.lane} cycle error on {instance} (tick {label}): "
                    f"{error.get('name')}: {error.get('message')}"
                )
        if result.skipped_not_due:
            parts.append("not-due")
        if result.skipped_leased:
            parts.append("leased")
        return " ".join(parts) or "idle"

    async def step(self, index: int) -> None:
        """Restart if dead, maybe arm a kill point, mutate, advance the clock, tick."""
        if self.faulty is not None and self.faulty.dead:
            await self.restart(f"the crash in step {index - 1}")
        faulty = self.faulty
        points = self.options.kill_points
        if faulty is not None and points and self.kill_rng.chance(self.options.kill_probability):
            point: KillPoint = self.kill_rng.pick(points)
            faulty.arm(point)
            self.log(f"arm {point}")
        self.mutate()
        await self.clock.advance_ms(self.clock_rng.int(0, 2 * SCHEDULE_MIN_MS))
        await self.tick(f"#{index}")

    def _converged(self, held: set[str]) -> bool:
        final = {item["id"]: item for item in self.api.all()}
        return not convergence(
            self.deliveries,
            final,
            self.removed,
            deletes_observable=self.options.deletes_observable,
            held=held,
        )

    async def _held(self) -> set[str]:
        """The identities whose delete the engine announced it holds back (the key's
        ``held_deletes``: the rows below its mark)."""
        state = await self.inner.load_state(KEY)
        held = None if state is None else state.held_deletes
        if held is None:
            return set()
        identities: set[str] = set()
        async for batch in self.inner.stream_unseen(KEY, held.below):
            identities.update(batch)
        return identities

    async def quiesce(self) -> int:
        """Stop mutating and killing; tick until every change has been delivered.

        Quiet means: at least ``MIN_QUIESCENCE_TICKS`` ticks, two ticks in a row without a
        delivery, an empty outbox, and the handler's view equal to the API. Then two more
        ticks a full reconcile period apart make sure nothing arrives late. Bounded by
        ``steps`` ticks (what is still wrong then is reported).
        """
        if self.faulty is not None:
            self.faulty.arm(None)
        self.log("quiescence: kills disarmed, mutations stopped")
        limit = max(self.options.steps, MIN_QUIESCENCE_TICKS)
        quiet = ticks = 0
        while ticks < limit:
            ticks += 1
            if self.faulty is not None and self.faulty.dead:
                await self.restart("a crash carried into quiescence")
            await self.clock.advance_ms(self.clock_rng.int(0, 2 * SCHEDULE_MIN_MS))
            quiet = quiet + 1 if await self.tick(f"q{ticks}", quiet=True) == 0 else 0
            if ticks < MIN_QUIESCENCE_TICKS or quiet < 2:
                continue
            if await self.inner.count_pending(KEY) == 0 and self._converged(await self._held()):
                break
        self.log(f"quiescence: {ticks} tick(s)")
        for index in range(SETTLE_TICKS):
            await self.clock.advance_ms(RECONCILE_EVERY_MS + 30_000)
            await self.tick(f"s{index + 1}")
        return ticks

    # --- the whole run ------------------------------------------------------------------

    async def run(self) -> ChaosReport:
        """Seed, step, quiesce, check; returns the report."""
        o = self.options
        try:
            await self.inner.migrate()
            self.log(
                f"start seed={o.seed} strategy={o.strategy} steps={o.steps} "
                f"store={type(self.inner).__name__} kill_points={','.join(o.kill_points)} "
                f"p={o.kill_probability:g} retain={'payload' if o.retain_payload else 'hash'} "
                f"reconcile={'on' if o.reconcile else 'off'}"
            )
            for _ in range(o.initial_items):
                self._create()
            self.spawn()
            for index in range(1, o.steps + 1):
                await self.step(index)
            ticks = await self.quiesce()
            return await self._report(ticks)
        finally:
            await self.http.aclose()

    async def _report(self, ticks: int) -> ChaosReport:
        o = self.options
        pending = await self.inner.count_pending(KEY)
        parked = await self.inner.count_parked(KEY)
        final = {item["id"]: item for item in self.api.all()}
        held = await self._held()
        problems, unique = evaluate(
            self.deliveries,
            self.served,
            final,
            self.removed,
            deletes_observable=o.deletes_observable,
            retain_payload=o.retain_payload,
            held=held,
        )
        announced = held_removals(self.deliveries, self.removed, held)
        self.violations.extend(problems)
        self.violations.extend(undelivered(self.committed, self.deliveries))
        repeated, in_flight = redeliveries(self.timeline)
        self.violations.extend(repeated)
        lost = convergence(
            self.deliveries, final, self.removed, deletes_observable=o.deletes_observable, held=held
        )
        if pending:
            self.violations.append(f"G4: {pending} outbox row(s) still pending after quiescence")
        if parked:
            self.violations.append(
                f"G7: {parked} parked row(s) after quiescence (a handler fails at most once "
                "per event here, so nothing may use up 3 attempts)"
            )
        if not self.deliveries and (o.initial_items or sum(self.mutations.values())):
            self.violations.append("liveness: not a single event was delivered")
        self.violations.extend(self.audit.violations)
        kills = dict.fromkeys(KILL_POINTS, 0)
        for process in self.processes:
            for point, count in process.kills.items():
                kills[point] += count
        for violation in self.violations:
            self.log(f"VIOLATION {violation}")
        self.log(
            f"done: delivered={len(self.deliveries)} unique={unique} restarts={self.restarts} "
            f"violations={len(self.violations)}"
        )
        return ChaosReport(
            seed=o.seed,
            strategy=o.strategy,
            steps=o.steps,
            options=o,
            store=type(self.inner).__name__,
            kills=kills,
            restarts=self.restarts,
            mutations=dict(self.mutations),
            delivered=len(self.deliveries),
            unique_events=unique,
            duplicates=len(self.deliveries) - unique,
            lost=len(lost),
            held=len(announced),
            parked=parked,
            pending=pending,
            quiescence_ticks=ticks,
            in_flight_at_kills=in_flight,
            violations=list(self.violations),
            trace=list(self.lines),
        )
