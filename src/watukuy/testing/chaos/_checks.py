"""The guarantees, checked against what the handler saw and what the API holds.

Pure functions over plain records, so a check reads like the promise it enforces:

- G1 convergence: for every item the API holds at the end, the newest delivered event is a
  ``created``/``updated`` carrying exactly the item; for every item removed after it was
  observed, the newest delivered event is ``deleted``, unless the engine announced that it
  holds that delete back for an operator (the key's ``held_deletes``: counted as
  ``held``, not lost). Every ``created``/``updated`` carries
  data the API really served (no phantom versions), and each id lives a simple life:
  ``created``, ``updated``..., at most one ``deleted``, nothing after it, and a
  ``deleted`` only for an item that really was removed.
- G2: every delivery of one event id carries the same type, subject, data and previous,
  and the same sequence (an id under two sequences was committed twice).
- G3: per subject, distinct events arrive in strictly increasing sequence order, and a
  redelivery never comes after a newer event of its subject.
- G1 at-least-once: every event id a commit wrote to the outbox was delivered at least once
  (not only the newest event of each item).
- G9 duplicates: an event is delivered again only after an earlier delivery of it was in
  flight when its process died or lost its lease (delivered, never acked); each such
  delivery excuses one redelivery, so duplicates never exceed what was in flight at the
  kills.
- ``retain``: with payloads, ``previous`` of an ``updated`` and ``data`` of a ``deleted``
  equal the last payload delivered for the item; without them both are ``None``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.model import json as wkjson
from watukuy.model.events import iso_time

__all__ = [
    "Acked",
    "Delivery",
    "Ended",
    "TimelineEntry",
    "convergence",
    "evaluate",
    "held_removals",
    "redeliveries",
    "undelivered",
]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One completed handler invocation."""

    id: str
    type: str
    subject: str
    sequence: int
    lane: str
    data: Any
    previous: Any
    attempt: int
    instance: str
    at: int


@dataclass(frozen=True, slots=True)
class Acked:
    """Event ids whose ack the store accepted."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Ended:
    """A process died, or lost its lease: what it delivered and had not acked is abandoned."""

    instance: str


TimelineEntry = Delivery | Acked | Ended
"""What :func:`redeliveries` reads, in the order it happened."""


def short(event_id: str) -> str:
    """The first ten characters of an id, enough to tell events apart in a message."""
    return event_id[:10]


def text(value: Any) -> str:
    """Compact JSON for messages."""
    try:
        return wkjson.dumps(value)
    except TypeError:
        return repr(value)


def _by_subject(deliveries: Iterable[Delivery]) -> dict[str, list[Delivery]]:
    grouped: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        grouped.setdefault(delivery.subject, []).append(delivery)
    return grouped


def _newest(deliveries: Sequence[Delivery]) -> Delivery:
    return max(deliveries, key=lambda d: d.sequence)


def convergence(
    deliveries: Sequence[Delivery],
    final: Mapping[str, Mapping[str, Any]],
    removed: Mapping[str, int],
    *,
    deletes_observable: bool,
    held: Collection[str] = (),
) -> list[str]:
    """G1 convergence: what the handler last heard per item equals what the API holds.

    A removal whose identity is in ``held`` (deletes the engine announced it holds back
    for an operator: the key's ``held_deletes``) is not a lost delete; see
    :func:`held_removals`."""
    problems: list[str] = []
    grouped = _by_subject(deliveries)
    for identity, item in final.items():
        seen = grouped.get(identity)
        if not seen:
            problems.append(
                f"G1: item {identity} (version {item.get('version')}) is in the API but no "
                "event was ever delivered for it"
            )
            continue
        last = _newest(seen)
        if last.type == "deleted":
            problems.append(
                f"G1: item {identity} is in the API but its newest delivered event is "
                f"deleted (seq {last.sequence})"
            )
        elif last.data != item:
            problems.append(
                f"G1: item {identity} did not converge: newest delivered {last.type} "
                f"seq {last.sequence} has {text(last.data)}, the API has {text(item)}"
            )
    if deletes_observable:
        for identity, at in removed.items():
            seen = grouped.get(identity)
            if not seen:
                continue  # created and removed between two polls: never observed
            last = _newest(seen)
            if last.type != "deleted" and identity not in held:
                problems.append(
                    f"G1: item {identity} was removed from the API at {iso_time(at)} but its newest "
                    f"delivered event is {last.type} (seq {last.sequence}), not deleted"
                )
    return problems


def held_removals(
    deliveries: Sequence[Delivery], removed: Mapping[str, int], held: Collection[str]
) -> list[str]:
    """The observed removals not delivered as ``deleted`` because the engine holds them
    (their identity is in ``held``): announced, so not lost, and counted apart."""
    grouped = _by_subject(deliveries)
    out: list[str] = []
    for identity in removed:
        seen = grouped.get(identity)
        if seen and identity in held and _newest(seen).type != "deleted":
            out.append(identity)
    return out


def _check_ids(deliveries: Sequence[Delivery], problems: list[str]) -> int:
    first: dict[str, Delivery] = {}
    for d in deliveries:
        earlier = first.get(d.id)
        if earlier is None:
            first[d.id] = d
            continue
        if (earlier.type, earlier.subject) != (d.type, d.subject) or (
            earlier.data,
            earlier.previous,
        ) != (d.data, d.previous):
            problems.append(
                f"G2: event {short(d.id)} was redelivered with different content: first "
                f"{earlier.type} {earlier.subject} {text(earlier.data)}, then {d.type} "
                f"{d.subject} {text(d.data)}"
            )
        elif earlier.sequence != d.sequence:
            problems.append(
                f"G2/G4: event {short(d.id)} ({d.type} {d.subject}) was committed twice, as "
                f"seq {earlier.sequence} and seq {d.sequence}"
            )
    return len(first)


def _check_subject(
    subject: str,
    seen: Sequence[Delivery],
    served: Sequence[Mapping[str, Any]],
    *,
    removed: bool,
    retain_payload: bool,
    problems: list[str],
) -> None:
    delivered_ids: set[str] = set()
    last_seq: int | None = None
    last_type: str | None = None
    last_data: Any = None
    for d in seen:
        if d.id in delivered_ids:
            if last_seq is not None and d.sequence < last_seq:
                problems.append(
                    f"G3: {subject}: seq {d.sequence} ({d.type}) was redelivered after seq "
                    f"{last_seq} had been delivered"
                )
            continue
        delivered_ids.add(d.id)
        if last_seq is not None and d.sequence <= last_seq:
            problems.append(
                f"G3: {subject}: seq {d.sequence} ({d.type}) was delivered after seq {last_seq}"
            )
        if last_type is None and d.type != "created":
            problems.append(
                f"G1: {subject}: the first delivered event is {d.type} (seq {d.sequence}); "
                "its created event was lost"
            )
        elif last_type == "deleted":
            problems.append(
                f"G1: {subject}: {d.type} (seq {d.sequence}) was delivered after its deleted "
                f"(seq {last_seq})"
            )
        elif last_type is not None and d.type == "created":
            problems.append(
                f"G1: {subject}: created (seq {d.sequence}) was delivered again after "
                f"{last_type} (seq {last_seq})"
            )
        if d.type == "deleted" and not removed:
            problems.append(
                f"G1: {subject}: deleted (seq {d.sequence}) was delivered, but the item was "
                "never removed from the API"
            )
        if d.type != "deleted" and not any(d.data == version for version in served):
            problems.append(
                f"G1: {d.type} {subject} seq {d.sequence} carries data the API never served: "
                f"{text(d.data)}"
            )
        if retain_payload:
            if d.type == "updated" and d.previous != last_data:
                problems.append(
                    f"retain: updated {subject} seq {d.sequence} has previous "
                    f"{text(d.previous)}, the last delivered payload was {text(last_data)}"
                )
            if d.type == "deleted" and d.data != last_data:
                problems.append(
                    f"retain: deleted {subject} seq {d.sequence} has data {text(d.data)}, the "
                    f"last delivered payload was {text(last_data)}"
                )
        elif d.previous is not None or (d.type == "deleted" and d.data is not None):
            problems.append(
                f"retain: {d.type} {subject} seq {d.sequence} carries a payload although the "
                "poller retains hashes only"
            )
        last_seq = d.sequence if last_seq is None else max(last_seq, d.sequence)
        last_type = d.type
        if d.type != "deleted":
            last_data = d.data


def undelivered(
    committed: Mapping[str, tuple[int, str]], deliveries: Sequence[Delivery]
) -> list[str]:
    """G1: every committed event id was delivered at least once.

    Args:
        committed: Every event id a successful ``commit_poll`` wrote, with its sequence and
            its envelope (JSON text).
        deliveries: Every completed handler call.
    """
    delivered = {d.id for d in deliveries}
    problems: list[str] = []
    for event_id, (sequence, envelope) in committed.items():
        if event_id in delivered:
            continue
        try:
            event = wkjson.loads(envelope)
            what = f"{event.get('type')} {event.get('subject')}"
        except ValueError:
            what = "event"
        problems.append(
            f"G1: {what} {short(event_id)} (seq {sequence}) was committed but never delivered"
        )
    return problems


def redeliveries(timeline: Iterable[TimelineEntry]) -> tuple[list[str], int]:
    """G9: no event is delivered again unless an earlier delivery of it was abandoned.

    Returns:
        The violations, and how many deliveries were in flight (delivered, not acked) when
        their process ended: the most duplicates the run may have.
    """
    problems: list[str] = []
    open_: dict[str, str] = {}  # delivered and not acked yet, by a live process
    abandoned: set[str] = set()
    acked: set[str] = set()
    in_flight = 0
    for entry in timeline:
        if isinstance(entry, Acked):
            for event_id in entry.ids:
                if open_.pop(event_id, None) is not None:
                    acked.add(event_id)
        elif isinstance(entry, Ended):
            gone = [event_id for event_id, who in open_.items() if who == entry.instance]
            for event_id in gone:
                del open_[event_id]
                abandoned.add(event_id)
            in_flight += len(gone)
        else:
            event_id, what = entry.id, f"{entry.type} {entry.subject} seq {entry.sequence}"
            if event_id in open_:
                problems.append(
                    f"G9: {what} ({short(event_id)}) was delivered again by {entry.instance} "
                    f"while its delivery by {open_[event_id]} was neither acked nor abandoned"
                )
            elif event_id in abandoned:
                abandoned.discard(event_id)  # the redelivery an abandoned delivery allows
            elif event_id in acked:
                problems.append(
                    f"G9: {what} ({short(event_id)}) was delivered again by {entry.instance} "
                    "after it had been acked"
                )
            open_[event_id] = entry.instance
    return problems, in_flight


def evaluate(
    deliveries: Sequence[Delivery],
    served: Mapping[str, Sequence[Mapping[str, Any]]],
    final: Mapping[str, Mapping[str, Any]],
    removed: Mapping[str, int],
    *,
    deletes_observable: bool,
    retain_payload: bool,
    held: Collection[str] = (),
) -> tuple[list[str], int]:
    """Check G1, G2, G3 and the ``retain`` rules.

    Args:
        deliveries: Every completed handler call, in the order they happened.
        served: Every version the API ever stored, per id.
        final: The API's items at the end, by id.
        removed: When each removed id was removed.
        deletes_observable: Whether the poller can see deletes.
        retain_payload: Whether the poller keeps payloads.
        held: Identities whose delete the engine holds back, announced (not lost).

    Returns:
        The violations, and the number of distinct event ids delivered.
    """
    problems: list[str] = []
    unique = _check_ids(deliveries, problems)
    for subject, seen in _by_subject(deliveries).items():
        _check_subject(
            subject,
            seen,
            served.get(subject, ()),
            removed=subject in removed,
            retain_payload=retain_payload,
            problems=problems,
        )
    problems.extend(
        convergence(deliveries, final, removed, deletes_observable=deletes_observable, held=held)
    )
    return problems, unique
