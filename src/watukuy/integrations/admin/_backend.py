"""What the admin page reads and does: one key's summary, and the operator operations.

The page works on an engine (``admin_app(engine, ...)``) or on a store alone (what
``watukuy ui --store`` passes). The operations are never reimplemented here: with an engine
they are the engine's own methods (through :class:`watukuy.runtime.operator.EngineKeyOperator`),
and without one they are the store-only operations the CLI already performs (any object
with the :class:`AdminOperator` methods); both write through
:class:`watukuy.runtime.key_operations.KeyOperations`. What this module
adds is the reading side, shaped for a page of rows: :meth:`Backend.summary` reads one key
with four store calls (state, lease, pending count, parked count), so a page of 50 rows
costs 200 calls whatever the number of keys.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from watukuy._system import SystemClock
from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError, WatukuyError
from watukuy.model.events import event_from_json
from watukuy.model.late import LateArrivals, late_report
from watukuy.model.ports import Clock, StateStore
from watukuy.model.redact import Redaction
from watukuy.model.rows import (
    LoggedEvent,
    PKey,
    PollerState,
    held_deletes_to_json,
    schedule_to_json,
)
from watukuy.runtime.engine import EngineCore
from watukuy.runtime.key_operations import cursor_report, stored_view
from watukuy.runtime.late_watch import window_ms
from watukuy.runtime.operator import EngineKeyOperator, KeyOperator
from watukuy.scheduler import OVERDUE_GRACE_MS, is_overdue, waiting_ms

__all__ = ["AdminOperator", "Backend", "KeySummary", "LogLine"]

_READ_AHEAD = 10  # keys read at once: 40 store calls in flight, well within a small pool


AdminOperator = KeyOperator
"""The store-only operations the page uses: ``watukuy ui --store URL`` passes the CLI's
store operator, which has them (:class:`watukuy.runtime.operator.KeyOperator`)."""


@dataclass(frozen=True, slots=True)
class KeySummary:
    """One (poller, partition) as a row of the overview.

    Attributes:
        key: The key.
        paused: The key is paused.
        circuit: ``"closed"``, ``"half-open"`` or ``"open"``.
        lag_ms: How far the live cursor trails the clock, when it is a timestamp.
        last_poll_at: When the key was last polled (epoch ms).
        next_due_at: When the key is due next (epoch ms).
        interval_ms: The current polling interval.
        failures: Consecutive fetch failures.
        throttled_until: End of a ``Retry-After`` window (epoch ms).
        rate_limit: What the vendor last announced about its rate limit.
        last_error: The last fetch error (name, code, message), stored redacted.
        outbox: Events waiting for their handler.
        parked: Parked rows (poison events and quarantined items).
        lease_owner: Instance holding the key's lease, when the lease has not expired.
        held_deletes: Deletes held by the mass-delete guard (count), if any.
        backfill: A backfill lane is running.
        budget: The poller's budget name (engine only).
        live_cursor: The live cursor, described for people.
        budget_usage: The budget's policy and use now (``requests``, ``per_ms``,
            ``burst``, ``used``, ``waiting``, as in ``inspect()``), engine only.
        waiting_ms: How long the key has been due with nobody working on it (see
            ``watukuy.scheduler.waiting_ms``; ``None`` when paused or nothing is planned).
        overdue: ``waiting_ms`` is over the grace: no engine is polling this key.
    """

    key: PKey
    paused: bool
    circuit: str
    lag_ms: int | None
    last_poll_at: int | None
    next_due_at: int | None
    interval_ms: int | None
    failures: int
    throttled_until: int | None
    rate_limit: dict[str, Any] | None
    last_error: dict[str, Any] | None
    outbox: int
    parked: int
    lease_owner: str | None
    held_deletes: int | None
    backfill: bool
    budget: str | None
    live_cursor: Any
    budget_usage: dict[str, Any] | None = None
    waiting_ms: int | None = None
    overdue: bool = False

    @property
    def status(self) -> str:
        """The one word that matters most: ``overdue``, ``open``, ``held``, ``parked``,
        ``failing``, ``paused``, ``half-open`` or ``ok``."""
        if self.overdue:
            return "overdue"
        if self.circuit == "open":
            return "open"
        if self.held_deletes:
            return "held"
        if self.parked:
            return "parked"
        if self.failures:
            return "failing"
        if self.paused:
            return "paused"
        if self.circuit == "half-open":
            return "half-open"
        return "ok"

    @property
    def problem(self) -> bool:
        """Something an operator should look at."""
        return self.status not in ("ok", "paused")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One logged event, without its data (item payloads stay out of the page)."""

    sequence: int
    created_at: int
    id: str
    type: str
    subject: str
    lane: str
    time: str


class Backend:
    """The admin page's view of an engine or of a store alone.

    Args:
        source: An engine, or an :class:`AdminOperator` over a store.
        clock: Time for "now" without an engine (default: the system clock).
    """

    def __init__(self, source: EngineCore | AdminOperator, clock: Clock | None = None) -> None:
        if isinstance(source, EngineCore):
            self.engine: EngineCore | None = source
            self.operator: AdminOperator = EngineKeyOperator(source)
            self.clock: Clock = source.clock
            self.redaction = source.redaction
        elif isinstance(source, AdminOperator):
            self.engine = None
            self.operator = source
            self.clock = clock or SystemClock()
            self.redaction = Redaction()
        else:
            raise ConfigError(
                f"expected a watukuy Engine or an AdminOperator, got {type(source).__name__}",
                field="engine",
            )
        self.store: StateStore = self.operator.store

    @property
    def mode(self) -> str:
        """``"engine"`` or ``"store-only"``."""
        return "engine" if self.engine is not None else "store-only"

    @property
    def overdue_grace_ms(self) -> int:
        """How long a key may wait before it is overdue (the engine's grace; the least
        grace for a store alone, whose engines' settings are unknown)."""
        return OVERDUE_GRACE_MS if self.engine is None else self.engine.overdue_grace_ms

    @property
    def instance_id(self) -> str | None:
        """The engine's instance id (``None`` for a store alone)."""
        return None if self.engine is None else self.engine.instance_id

    def pollers(self, keys: Sequence[PKey]) -> list[str]:
        """Poller names to offer in the filter."""
        if self.engine is not None:
            return sorted(self.engine.pollers)
        return sorted({key.poller for key in keys})

    def can_backfill(self, poller: str) -> bool:
        """Whether a backfill can be started (needs the definitions, not a snapshot diff)."""
        if self.engine is None:
            return False
        definition = self.engine.pollers.get(poller)
        return definition is not None and not definition.strategy.full_scan

    async def keys(self) -> list[PKey]:
        """Every key, sorted: the stored ones (of the engine's pollers, with an engine),
        plus the engine's single-partition pollers that have not run yet."""
        stored = await self.store.list_keys()
        if self.engine is None:
            return stored
        known = self.engine.pollers
        keys = [key for key in stored if key.poller in known]
        single = [name for name, poller in known.items() if not poller.partitioned]
        if single:
            present = {key.poller for key in keys}
            for name in single:
                if name not in present:
                    # list_keys is sorted already; keep it so without sorting it again.
                    bisect.insort(keys, PKey(name, ""), key=lambda key: (key.poller, key.partition))
        return keys

    def knows(self, key: PKey) -> bool:
        """Whether an operation on the key can be attempted at all."""
        if self.engine is None:
            return True
        poller = self.engine.pollers.get(key.poller)
        return poller is not None and poller.partitioned == bool(key.partition)

    async def budget_usage(self) -> dict[str, dict[str, Any]]:
        """Every budget's use now, by name (engine only: a store alone knows no budgets)."""
        if self.engine is None:
            return {}
        return {name: dict(usage) for name, usage in (await self.engine.budget_usage()).items()}

    async def summary(
        self, key: PKey, now: int, budgets: dict[str, dict[str, Any]] | None = None
    ) -> KeySummary:
        """One key's row: four store calls (and one per budget, unless ``budgets`` is given)."""
        store = self.store
        # Asked together, so a store with a worker thread or a pool answers them back to
        # back instead of waiting for the event loop between each.
        state, lease, outbox, parked = await asyncio.gather(
            store.load_state(key),
            store.get_lease(key),
            store.count_pending(key),
            store.count_parked(key),
        )
        schedule = state.schedule if state is not None else None
        live, lag_ms = self.live_cursor(key, state, now)
        rate = schedule.rate_limit if schedule is not None else None
        budget = None
        if self.engine is not None:
            definition = self.engine.pollers.get(key.poller)
            budget = definition.budget if definition is not None else None
        if budget is not None and budgets is None:
            budgets = await self.budget_usage()
        waiting = waiting_ms(state, lease, now)
        return KeySummary(
            key=key,
            paused=bool(state and state.paused),
            circuit=schedule.circuit.value if schedule is not None else "closed",
            lag_ms=lag_ms,
            last_poll_at=schedule.last_poll_at if schedule is not None else None,
            next_due_at=schedule.next_due_at if schedule is not None else None,
            interval_ms=schedule.interval_ms if schedule is not None else None,
            failures=schedule.consecutive_failures if schedule is not None else 0,
            throttled_until=schedule.throttled_until if schedule is not None else None,
            rate_limit=None if rate is None else dataclasses.asdict(rate),
            last_error=None
            if schedule is None or schedule.last_error is None
            else self.clean_error(dict(schedule.last_error)),
            outbox=outbox,
            parked=parked,
            lease_owner=lease.owner if lease is not None and lease.expires_at > now else None,
            held_deletes=None
            if state is None or state.held_deletes is None
            else state.held_deletes.count,
            backfill=bool(state and state.backfill is not None),
            budget=budget,
            live_cursor=live,
            budget_usage=None if budget is None or budgets is None else budgets.get(budget),
            waiting_ms=waiting,
            overdue=is_overdue(waiting, self.overdue_grace_ms),
        )

    async def summaries(self, keys: Sequence[PKey], now: int) -> list[KeySummary]:
        """The rows of ``keys``, in order, a few keys at a time."""
        out: list[KeySummary] = []
        budgets = await self.budget_usage()  # once for the page, not once per row
        for start in range(0, len(keys), _READ_AHEAD):
            batch = keys[start : start + _READ_AHEAD]
            out.extend(await asyncio.gather(*(self.summary(key, now, budgets) for key in batch)))
        return out

    def live_cursor(self, key: PKey, state: PollerState | None, now: int) -> tuple[Any, int | None]:
        """The live cursor described for people, and its lag."""
        text = None if state is None else state.cursors.get("live")
        if text is None:
            return None, None
        return self._describe(key, "live", text, now)

    def cursors(self, key: PKey, state: PollerState | None, now: int) -> dict[str, Any]:
        """Every lane's cursor, described as ``inspect()`` describes them."""
        return cursor_report(state, functools.partial(self._describe, key), now)[0]

    def _describe(self, key: PKey, lane: str, text: str, now: int) -> tuple[Any, int | None]:
        definition = None if self.engine is None else self.engine.pollers.get(key.poller)
        if definition is not None and lane != "reconcile":
            strategy = definition.strategy
            try:
                value = strategy.deserialize(text)
                lag = strategy.lag_ms(value, now) if lane == "live" else None
                return strategy.describe(value), lag
            except ConfigError:
                pass
        return stored_view(lane, text, now)

    def schedule(self, state: PollerState | None) -> dict[str, Any]:
        """The key's schedule as ``inspect()`` shows it, errors cleaned again."""
        if state is None:
            return {}
        data = schedule_to_json(state.schedule)
        if data.get("last_error"):
            data["last_error"] = self.clean_error(data["last_error"])
        return data

    def held(self, state: PollerState | None) -> dict[str, Any] | None:
        """The held deletes of a key, JSON-ready."""
        return None if state is None else held_deletes_to_json(state.held_deletes)

    def late(self, key: PKey, state: PollerState | None) -> dict[str, Any]:
        """A key's late arrivals as ``inspect()`` reports them (the lookback window in
        force when the engine knows the poller, else the one stored with the figures)."""
        late = state.late if state is not None else LateArrivals()
        definition = None if self.engine is None else self.engine.pollers.get(key.poller)
        return late_report(late, None if definition is None else window_ms(definition, late))

    def clean_error(self, error: dict[str, Any]) -> dict[str, Any]:
        """A stored error with every string passed through the redaction policy once more
        (stored errors are redacted already; a page is one more place they must not leak)."""
        cleaned = self.redaction.value(error, 1)
        return dict(cleaned) if isinstance(cleaned, dict) else error

    def clean_json(self, text: str | None) -> Any:
        """Stored JSON text (an event, an item), parsed and redacted; ``None`` stays."""
        if text is None:
            return None
        try:
            value = wkjson.loads(text)
        except ValueError:
            return self.redaction.text(text)
        return self.redaction.value(value, 1)

    async def recent_events(
        self, key: PKey, state: PollerState | None, limit: int
    ) -> list[LogLine]:
        """The last ``limit`` logged events of a key, newest first (empty without a log)."""
        if state is None or not self.store.capabilities.log:
            return []
        after = max(0, state.sequence - limit)
        rows: list[LoggedEvent] = await self.store.read_log(key, after_sequence=after, limit=limit)
        lines = []
        for row in rows:
            try:
                event = event_from_json(row.event)
            except (ValueError, KeyError, TypeError, WatukuyError):
                continue
            lines.append(
                LogLine(
                    sequence=row.sequence,
                    created_at=row.created_at,
                    id=event.id,
                    type=event.type,
                    subject=self.redaction.text(event.subject),
                    lane=event.lane,
                    time=event.time,
                )
            )
        lines.reverse()
        return lines
