"""Hold what a poller delivered against the vendor's history, and compute the figures.

:func:`evaluate` takes the :class:`~.oracle.History` and the journal of one recipe (every
delivery of every process that ran it) and returns a :class:`Verdict`:

- **obligations / missed**: every version that surely stayed visible 10 s or more must
  have been delivered (an event whose item is that version);
- **wrong final states**: each order's last event must be the vendor's final state; an
  order deleted at the end counts only where deletes are observable (full listings), and
  only once the delete is :data:`DELETE_SETTLE_S` old (two passes must confirm it);
- **phantom deletes**: a ``deleted`` event needs a delete at the vendor after the version
  the poller had delivered before it, and before the event;
- **unexplained duplicates**: an event delivered twice must have been delivered first by
  a process that was then killed (the in-flight bound of a crash);
- **order violations**: per order, events never go back to an older version;
- **unknown versions**: an event whose item matches no version the vendor ever had
  (always a bug in the tier or the engine);
- **delete latency**: from a delete's commit to its ``deleted`` event, for every delete
  that got one; a delete still standing at the end, :data:`DELETE_SETTLE_S` old, without
  one is undelivered.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .oracle import History, Version, VersionKey, stamp_us

VISIBLE_S = 10.0
DELETE_SETTLE_S = 25.0
"""How long a delete is given before its absence is judged: a full listing reports it after
two complete passes that agree, and at the tier's schedule (5 s, growing by half on idle
cycles) two passes after a delete can take 5 + 7.5 + 11.25 s."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One row of a journal's ``deliveries`` table."""

    event_id: str
    type: str
    subject: str
    lane: str
    data: Mapping[str, Any] | None
    instance: str
    at: float


def read_journal(path: Path) -> tuple[list[Delivery], list[dict[str, Any]], list[dict[str, Any]]]:
    """Deliveries, cycles and errors of a journal, in the order they were written."""
    with sqlite3.connect(path, timeout=30) as db:
        db.row_factory = sqlite3.Row
        deliveries = [
            Delivery(
                row["event_id"],
                row["type"],
                row["subject"],
                row["lane"],
                json.loads(row["data"]),
                row["instance"],
                row["at"],
            )
            for row in db.execute("SELECT * FROM deliveries ORDER BY n")
        ]
        polls = [dict(row) for row in db.execute("SELECT * FROM polls ORDER BY n")]
        errors = [dict(row) for row in db.execute("SELECT * FROM errors ORDER BY n")]
    return deliveries, polls, errors


def drf_key(item: Mapping[str, Any]) -> VersionKey:
    """The version a DRF order shows."""
    return (int(item["id"]), int(item["version"]), stamp_us(item["updated_at"]))


def json_key(item: Mapping[str, Any]) -> VersionKey:
    """The version a json-server order shows."""
    return (int(item["id"]), int(item["version"]), stamp_us(item["updatedAt"]))


@dataclass
class Verdict:
    """What one recipe's deliveries showed against the history."""

    obligations: int = 0
    delivered: int = 0
    missed: list[VersionKey] = field(default_factory=list)
    wrong_final: list[int] = field(default_factory=list)
    phantom_deletes: list[tuple[int, float]] = field(default_factory=list)
    deliveries: int = 0
    duplicates: int = 0
    unexplained_duplicates: list[str] = field(default_factory=list)
    order_violations: list[int] = field(default_factory=list)
    unknown_versions: list[VersionKey] = field(default_factory=list)
    delete_latency: list[float] = field(default_factory=list)
    deletes_undelivered: int = 0

    def figures(self) -> dict[str, Any]:
        """The verdict as plain figures (what the report prints)."""
        latency = self.delete_latency
        return {
            "obligations": self.obligations,
            "delivered": self.delivered,
            "missed": len(self.missed),
            "wrong_final": len(self.wrong_final),
            "phantom_deletes": len(self.phantom_deletes),
            "deliveries": self.deliveries,
            "duplicates": self.duplicates,
            "unexplained_duplicates": len(self.unexplained_duplicates),
            "order_violations": len(self.order_violations),
            "unknown_versions": len(self.unknown_versions),
            "deletes_seen": len(latency),
            "deletes_undelivered": self.deletes_undelivered,
            "delete_latency_p50_s": round(statistics.median(latency), 1) if latency else None,
            "delete_latency_max_s": round(max(latency), 1) if latency else None,
        }


def evaluate(
    history: History,
    deliveries: list[Delivery],
    *,
    key_of: Callable[[Mapping[str, Any]], VersionKey],
    end: float,
    deletes_observable: bool,
    killed: Iterable[str] = (),
) -> Verdict:
    """Hold ``deliveries`` against ``history`` (see the module docstring)."""
    verdict = Verdict(deliveries=len(deliveries))
    killed_instances = set(killed)
    known = history.by_key()
    first_by_id: dict[str, Delivery] = {}
    unique: list[Delivery] = []
    for delivery in deliveries:
        earlier = first_by_id.get(delivery.event_id)
        if earlier is None:
            first_by_id[delivery.event_id] = delivery
            unique.append(delivery)
            continue
        verdict.duplicates += 1
        if earlier.instance not in killed_instances or earlier.data != delivery.data:
            verdict.unexplained_duplicates.append(delivery.event_id)

    delivered_keys: set[VersionKey] = set()
    per_order: dict[int, list[tuple[Delivery, Version | None]]] = {}
    for delivery in unique:
        identity = int(delivery.subject)
        state: Version | None = None
        if delivery.type != "deleted" and delivery.data is not None:
            key = key_of(delivery.data)
            state = known.get(key)
            if state is None:
                verdict.unknown_versions.append(key)
            else:
                delivered_keys.add(key)
        per_order.setdefault(identity, []).append((delivery, state))

    _obligations(verdict, history, delivered_keys, end)
    _final_states(verdict, history, per_order, deletes_observable, end)
    _deletes(verdict, history, per_order, end, deletes_observable)
    _order(verdict, history, per_order)
    return verdict


def _obligations(
    verdict: Verdict, history: History, delivered: set[VersionKey], end: float
) -> None:
    for states in history.versions.values():
        for state in states:
            if state.deleted or state.visible_for(end) < VISIBLE_S:
                continue
            verdict.obligations += 1
            if state.key in delivered:
                verdict.delivered += 1
            else:
                verdict.missed.append(state.key)


def _final_states(
    verdict: Verdict,
    history: History,
    per_order: Mapping[int, list[tuple[Delivery, Version | None]]],
    deletes_observable: bool,
    end: float,
) -> None:
    for identity, final in history.final().items():
        events = per_order.get(identity, [])
        last = events[-1] if events else None
        if final.deleted:
            if not deletes_observable or not events or final.visible_for(end) < DELETE_SETTLE_S:
                continue  # not observable, never known, or not confirmable yet
            if last is None or last[0].type != "deleted":
                verdict.wrong_final.append(identity)
        elif (
            last is None or last[0].type == "deleted" or last[1] is None or last[1].key != final.key
        ):
            verdict.wrong_final.append(identity)


def _deletes(
    verdict: Verdict,
    history: History,
    per_order: Mapping[int, list[tuple[Delivery, Version | None]]],
    end: float,
    deletes_observable: bool,
) -> None:
    for identity, events in per_order.items():
        states = history.versions.get(identity, [])
        shown_from = 0.0  # when the version the poller had delivered became visible
        for delivery, state in events:
            if delivery.type != "deleted":
                if state is not None:
                    shown_from = state.visible_from
                continue
            justified = any(
                s.deleted and shown_from <= s.visible_from <= delivery.at for s in states
            )
            if not justified:
                verdict.phantom_deletes.append((identity, delivery.at))
    if not deletes_observable:
        return
    for identity, states in history.versions.items():
        events = per_order.get(identity, [])
        if not events:
            continue  # the poller never knew the order
        gone = [state for state in states if state.deleted]
        for n, state in enumerate(gone):
            # A `deleted` event belongs to the latest delete before it.
            before = gone[n + 1].visible_from if n + 1 < len(gone) else float("inf")
            seen = [
                delivery.at
                for delivery, _ in events
                if delivery.type == "deleted" and state.visible_from <= delivery.at < before
            ]
            if seen:
                verdict.delete_latency.append(min(seen) - state.visible_from)
            elif state.visible_until is None and state.visible_for(end) >= DELETE_SETTLE_S:
                # A delete undone by a re-creation may go unreported while the vendor
                # never pauses (passes that disagree wait); one that stands may not.
                verdict.deletes_undelivered += 1


def _order(
    verdict: Verdict,
    history: History,
    per_order: Mapping[int, list[tuple[Delivery, Version | None]]],
) -> None:
    for identity, events in per_order.items():
        states = history.versions.get(identity, [])
        newest = -1
        for delivery, state in events:
            if delivery.type == "deleted":
                # The delete of the newest state delivered so far, or a later one.
                later = [s.order for s in states if s.deleted and s.order > newest]
                position = min(later) if later else newest
            elif state is None:
                continue
            else:
                position = state.order
            if position < newest:
                verdict.order_violations.append(identity)
                break
            newest = position
