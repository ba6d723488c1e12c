"""Each operation on one key, written once, on a store and a clock.

Three surfaces operate on keys: the engine (``engine.trigger()``, ``engine.parked``,
``engine.deletes``...), the CLI with only ``--store`` and the admin page, in either of its
modes. They all make their writes through :class:`KeyOperations`, and each adds only what
it knows besides the store:

- the engine checks a key against the poller definitions (partition required or refused),
  turns a raw cursor into the stored form with the poller's strategy, migrates the store
  first and wakes or forgets the key in its own loop afterwards;
- the CLI's store-only mode knows the keys from the store, checks a stored-form cursor and
  refuses a key whose state is gone (by overriding :meth:`KeyOperations.stored`);
- the admin page calls one of the two.

Administrative writes are unfenced: they work from any process, including one that does
not hold the key's lease.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from watukuy.cursor.config import read_timestamp_ms
from watukuy.model import json as wkjson
from watukuy.model.late import LateArrivals, Lookback, late_report
from watukuy.model.rows import (
    HeldDeletes,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
    StatePatch,
    empty_poller_state,
    held_deletes_to_json,
    listing_to_json,
    schedule_to_json,
)
from watukuy.scheduler import is_overdue, waiting_ms
from watukuy.scheduler import trigger as trigger_schedule

if TYPE_CHECKING:
    from watukuy.model.ports import Clock, StateStore

__all__ = [
    "CursorView",
    "cursor_report",
    "KeyOperations",
    "PollerInspect",
    "listing_report",
    "reset_cursor_patch",
    "stored_cursor",
    "stored_lag_ms",
    "stored_view",
]

CursorView = Callable[[str, str, int], tuple[Any, int | None]]
"""How a report shows one lane's stored cursor: ``(lane, text, now)`` to the cursor
described for people and, for the live lane, its lag in milliseconds (``None``: unknown)."""


class PollerInspect(TypedDict):
    """One key in :class:`InspectReport` (all plain JSON)."""

    poller: str
    partition: str
    paused: bool
    lease: dict[str, Any] | None
    cursors: dict[str, Any]
    schedule: dict[str, Any]
    last_poll: dict[str, Any] | None
    outbox_pending: int
    parked: int
    items: int
    lag_ms: int | None
    listing: dict[str, Any]
    held_deletes: dict[str, Any] | None
    waiting_ms: NotRequired[int | None]
    """How long the key has been due with nobody working on it (``0``: not due yet, or its
    lease is held; ``None``: paused or nothing planned); see ``watukuy.scheduler.waiting_ms``."""
    overdue: NotRequired[bool]
    """``waiting_ms`` is over the engine's grace (``overdue_grace_ms`` of the report): the
    key should have been polled by now and nobody is on it."""
    queued: NotRequired[bool]
    """This engine holds the key due and waiting to start, for room on its budget or under
    ``max_concurrent_keys`` (a fact of this process; absent from reports read from the store
    alone)."""

    late_arrivals: dict[str, Any]
    """Versions re-reads found behind the live watermark, and live-lane misses a reconcile
    found (see https://watukuy.readthedocs.io/en/latest/cursors/#late-commits-the-default-lookback).
    """
    filtered: NotRequired[int]
    """Events this engine's consumer of the key acknowledged without delivering them,
    because its ``when=`` filter turned them down, since the engine was created (a count of
    this process; absent from reports read from the store alone)."""
    consumers: NotRequired[list[str]]
    """The names of the consumers this engine has for the poller, sorted (a list of this
    process; absent from reports read from the store alone)."""


class KeyOperations:
    """The operations on one key, as writes to a store stamped by a clock.

    Args:
        store: The store operated on.
        clock: Time for ``updated_at`` stamps and due times.
    """

    def __init__(self, store: StateStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    # --- state ------------------------------------------------------------------------------

    async def stored(self, key: PKey) -> PollerState | None:
        """The key's stored state (``None``: never stored). A surface that must not act on
        a key without state overrides this to raise its own error."""
        return await self.store.load_state(key)

    async def state(self, key: PKey) -> PollerState:
        """The key's stored state, or the state of a key that has never run."""
        return await self.stored(key) or empty_poller_state(self.clock.now())

    # --- scheduling -------------------------------------------------------------------------

    async def trigger(self, key: PKey) -> None:
        """Due now, any ``Retry-After`` window dropped; an open circuit gets a half-open
        probe."""
        now = self.clock.now()
        state = await self.state(key)
        schedule = trigger_schedule(state.schedule, now)
        await self.store.save_state_unfenced(
            key, {"schedule": schedule, "updated_at": now, "wake_at": now}, now
        )

    async def pause(self, key: PKey) -> None:
        """Paused (neither polled nor delivered) until resumed."""
        now = self.clock.now()
        await self.store.save_state_unfenced(
            key, {"paused": True, "updated_at": now, "wake_at": None}, now
        )

    async def resume(self, key: PKey) -> None:
        """Un-paused and due now."""
        now = self.clock.now()
        state = await self.state(key)
        schedule = dataclasses.replace(state.schedule, next_due_at=now, drain_blocked=False)
        await self.store.save_state_unfenced(
            key, {"paused": False, "schedule": schedule, "updated_at": now, "wake_at": now}, now
        )

    async def reset_cursor(
        self, key: PKey, live: Callable[[str | None], str | None], *, clear_snapshot: bool
    ) -> None:
        """Rewind the live lane: ``live`` maps the stored live cursor to the new one
        (``None``: no live cursor, the poller's initial one is used).

        The key's HTTP validators are forgotten, so the first requests after the reset are
        answered in full, never ``304`` for what was read before; a full listing in
        progress starts over. With ``clear_snapshot`` the item rows go too, and with them
        the deletes held for those rows.
        """
        state = await self.state(key)
        cursors = dict(state.cursors)
        cursor = live(cursors.get("live"))
        if cursor is None:
            cursors.pop("live", None)
        else:
            cursors["live"] = cursor
        now = self.clock.now()
        await self.store.clear_validators(key)
        patch = reset_cursor_patch(state, cursors, now)
        progress = state.listing.lanes.get("live")
        if progress is not None and progress.pass_id is not None:
            # A full listing in progress starts over: its next cursor is no longer ours.
            lanes = {**state.listing.lanes, "live": dataclasses.replace(progress, pass_id=None)}
            patch["listing"] = dataclasses.replace(state.listing, lanes=lanes)
        if clear_snapshot:
            await self.store.clear_items(key)
            patch["held_deletes"] = None  # the rows they named are gone
        await self.store.save_state_unfenced(key, patch, now)

    # --- parked -----------------------------------------------------------------------------

    async def parked_list(
        self, key: PKey, *, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Parked rows of the key, oldest first, optionally of one ``kind``."""
        return await self.store.list_parked(key, kind=kind, limit=limit)

    async def parked_retry(self, key: PKey, ids: Sequence[str]) -> int:
        """Parked poison events back to the outbox (their holds released) and the key's
        deliveries unblocked; returns how many moved."""
        moved = await self.store.retry_parked(key, list(ids))
        if moved:
            await self._unblock(key)
        return moved

    async def parked_discard(self, key: PKey, ids: Sequence[str]) -> int:
        """Parked rows dropped for good and the key's deliveries unblocked; returns how
        many were dropped."""
        dropped = await self.store.discard_parked(key, list(ids))
        if dropped:
            await self._unblock(key)
        return dropped

    async def _unblock(self, key: PKey) -> None:
        # Whatever the parked rows held back becomes deliverable at once.
        now = self.clock.now()
        state = await self.state(key)
        schedule = dataclasses.replace(state.schedule, next_retry_at=now, drain_blocked=False)
        await self.store.save_state_unfenced(
            key, {"schedule": schedule, "updated_at": now, "wake_at": now}, now
        )

    # --- held deletes -----------------------------------------------------------------------

    async def deletes_held(self, key: PKey) -> HeldDeletes | None:
        """The deletes the mass-delete guard holds for the key, ``None`` when none."""
        state = await self.stored(key)
        return None if state is None else state.held_deletes

    async def deletes_confirm(self, key: PKey) -> HeldDeletes | None:
        """The hold confirmed and the key due now: the lease holder's next run emits
        them. Returns the hold as it was, ``None`` when there was none."""
        now = self.clock.now()
        state = await self.store.load_state(key)
        held = None if state is None else state.held_deletes
        if held is None:
            return None
        patch: StatePatch = {
            "held_deletes": dataclasses.replace(held, confirmed=True),
            "updated_at": now,
            "wake_at": now,
        }
        await self.store.save_state_unfenced(key, patch, now)
        return held

    async def deletes_discard(self, key: PKey) -> HeldDeletes | None:
        """The hold dropped: nothing is emitted, the rows stay in the snapshot (a later
        pass that still misses them proposes them again). Returns the hold as it was,
        ``None`` when there was none."""
        now = self.clock.now()
        state = await self.store.load_state(key)
        held = None if state is None else state.held_deletes
        if held is None:
            return None
        await self.store.save_state_unfenced(key, {"held_deletes": None, "updated_at": now}, now)
        return held

    # --- reporting --------------------------------------------------------------------------

    async def inspect_key(
        self,
        key: PKey,
        now: int,
        *,
        grace_ms: int,
        view: CursorView | None = None,
        late_window: Callable[[LateArrivals], int | None] | None = None,
        queued: bool | None = None,
        filtered: int | None = None,
        consumers: list[str] | None = None,
    ) -> PollerInspect:
        """One key's entry of an ``inspect()`` report, from what the store holds.

        Args:
            key: The key.
            now: The report's time.
            grace_ms: How long the key may be due with nobody on it before it is overdue.
            view: How each lane's cursor is shown (default: :func:`stored_view`).
            late_window: The lookback window in force for the key's late arrivals
                (default: the one stored with the figures).
            queued: This engine holds the key due, waiting for room (absent when ``None``:
                a fact of a process, not of the store); likewise ``filtered`` and
                ``consumers``.
            filtered: Events this engine's consumers turned down.
            consumers: The names of this engine's consumers of the poller.
        """
        store = self.store
        state = await self.stored(key)
        lease = await store.get_lease(key)
        cursors, lag_ms = cursor_report(state, view or stored_view, now)
        schedule = schedule_to_json(
            state.schedule if state is not None else empty_poller_state(now).schedule
        )
        waiting = waiting_ms(state, lease, now)
        late = state.late if state is not None else LateArrivals()
        # A plain dict filled in the report's order, where the facts of a process
        # (``queued``, ``filtered``, ``consumers``) sit among the store's.
        report: dict[str, Any] = {
            "poller": key.poller,
            "partition": key.partition,
            "paused": bool(state and state.paused),
            "lease": None
            if lease is None
            else {"owner": lease.owner, "epoch": lease.epoch, "expires_at": lease.expires_at},
            "cursors": cursors,
            "schedule": schedule,
            "last_poll": schedule["last_poll"],
            "outbox_pending": await store.count_pending(key),
            "parked": await store.count_parked(key),
            "items": await store.count_items(key),
            "lag_ms": lag_ms,
            "listing": listing_report(state),
            "held_deletes": held_deletes_to_json(state.held_deletes) if state else None,
            "waiting_ms": waiting,
            "overdue": is_overdue(waiting, grace_ms),
        }
        if queued is not None:
            report["queued"] = queued
        window = None if late_window is None else late_window(late)
        report["late_arrivals"] = late_report(late, window)
        if filtered is not None:
            report["filtered"] = filtered
        if consumers is not None:
            report["consumers"] = consumers
        return cast(PollerInspect, report)


def cursor_report(
    state: PollerState | None, view: CursorView, now: int
) -> tuple[dict[str, Any], int | None]:
    """Every lane's cursor as ``view`` shows it (``inspect()``'s ``cursors``), and the live
    lane's lag."""
    cursors: dict[str, Any] = {}
    lag_ms: int | None = None
    if state is None:
        return cursors, lag_ms
    for lane, text in state.cursors.items():
        if text is None:
            continue
        cursors[lane], lane_lag = view(lane, text, now)
        if lane == "live":
            lag_ms = lane_lag
    return cursors, lag_ms


def stored_cursor(text: str) -> Any:
    """A stored cursor as its JSON reads (the text itself when it is not JSON)."""
    try:
        return wkjson.loads(text)
    except ValueError:
        return text


def stored_lag_ms(live: Any, now: int) -> int | None:
    """Lag of a stored timestamp watermark, when it reads with the default timestamp
    rules (``None`` for any other cursor)."""
    if not isinstance(live, dict) or set(live) != {"value", "tie_break"}:
        return None
    value = live["value"]
    if value is None:
        return None
    ms = read_timestamp_ms(value, None)
    return None if ms is None else round(now - ms)


def stored_view(lane: str, text: str, now: int) -> tuple[Any, int | None]:
    """A cursor shown as stored, without the poller's strategy (see :data:`CursorView`)."""
    value = stored_cursor(text)
    return value, stored_lag_ms(value, now) if lane == "live" else None


def reset_cursor_patch(
    state: PollerState, cursors: Mapping[str, str | None], now: int
) -> StatePatch:
    """What resetting the live cursor writes: the new ``cursors``, due now, and the
    default lookback's memory forgotten (it was of the old cursor: the next cycle starts
    at the new one)."""
    return {
        "cursors": cursors,
        "schedule": dataclasses.replace(state.schedule, next_due_at=now),
        "lookback": Lookback(),
        "updated_at": now,
        "wake_at": now,
    }


def listing_report(state: PollerState | None) -> dict[str, Any]:
    """``inspect()``'s view of the full listings: per lane, the pass in progress (``None``
    between passes), what the last complete pass did, and the passes cut short."""
    if state is None or not state.listing.lanes:
        return {}
    report: dict[str, Any] = {}
    for lane, progress in listing_to_json(state.listing)["lanes"].items():
        current = None
        if progress["pass_id"] is not None:
            current = {
                name: progress[name]
                for name in (
                    "pass_id",
                    "started_at",
                    "pages",
                    "items",
                    "invalid",
                    "not_modified",
                    "listed",
                )
            }
        report[lane] = {
            "pass": current,
            "completed": progress["completed"],
            "last_completed_at": progress["last_completed_at"],
            "last_outcome": progress["last_outcome"],
            "disagreed": progress["disagreed"],
            "proven": len(progress["proven"]),
            "unproven": progress["unproven"],
            "abandoned": progress["abandoned"],
            "last_abandoned_at": progress["last_abandoned_at"],
            "last_abandoned": progress["last_abandoned"],
        }
    return report
