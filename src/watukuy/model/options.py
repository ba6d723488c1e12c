"""Small value objects for poller and engine options.

Each one validates itself when built (a :class:`~watukuy.ConfigError` names the field and
the value), keeps what the user wrote for ``repr``, and exposes the parsed milliseconds as
``*_ms`` attributes for the engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field
from typing import Any, Literal

from .durations import Duration, parse_duration
from .errors import ConfigError
from .records import dataclass

__all__ = [
    "AckMode",
    "Backoff",
    "Budget",
    "Circuit",
    "Deletes",
    "Delivery",
    "EventIds",
    "EventLog",
    "MAX_THROTTLE_MS",
    "Fairness",
    "IdMode",
    "Poison",
    "PoisonAction",
    "Reconcile",
    "Retry",
    "Schedule",
]

MAX_THROTTLE_MS = 86_400_000
"""No ``Retry-After`` or rate-limit header can make a key wait longer than one day."""

IdMode = Literal["distinct", "compat"]
PoisonAction = Literal["park", "halt"]
AckMode = Literal["auto", "manual"]
Fairness = Literal["round-robin", "weighted"]
Paging = Literal["offset", "keyset"]
ListingOrder = Literal["fixed", "changing"]


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _positive_int(value: object, field_name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"expected an integer >= {minimum}, got {value!r}", field=field_name)
    return value


def _number(value: object, field_name: str, *, low: float, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"expected a number, got {value!r}", field=field_name)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ConfigError(f"expected a number {bound}, got {value!r}", field=field_name)
    return float(value)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter: the wait before retry *n* is uniform in
    ``[0, min(max, base * factor ** (n - 1))]``.

    Args:
        base: First ceiling.
        factor: Growth per attempt (``>= 1``).
        max: Largest ceiling.
    """

    base: Duration = "1s"
    factor: float = 2
    max: Duration = "10m"
    base_ms: int = field(init=False, repr=False, compare=False)
    max_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _set(self, "base_ms", parse_duration(self.base, "backoff.base"))
        _set(self, "max_ms", parse_duration(self.max, "backoff.max"))
        _number(self.factor, "backoff.factor", low=1)
        if self.max_ms < self.base_ms:
            raise ConfigError(
                f"must be at least backoff.base ({self.base!r}), got {self.max!r}",
                field="backoff.max",
            )


@dataclass(frozen=True, slots=True)
class Schedule:
    """How often the live lane polls.

    Args:
        min: Shortest interval, and the starting one.
        max: Longest interval (idle cycles grow toward it).
        adaptive: AIMD on (events halve the interval, idle cycles multiply it by 1.5);
            ``False`` pins the interval at ``min``.
        jitter: Symmetric jitter applied to every wait, as a fraction (``0.1`` = ±10%).
        backoff: Backoff after fetch failures, and the growth of the wait after repeated
            throttles that name no usable ``Retry-After``.
        throttle_max: Longest wait a ``Retry-After`` header or rate-limit pacing can impose
            (default: ``max``, at most one day; never more than one day).
    """

    min: Duration = "30s"
    max: Duration = "5m"
    adaptive: bool = True
    jitter: float = 0.1
    backoff: Backoff = field(default_factory=Backoff)
    throttle_max: Duration | None = None
    min_ms: int = field(init=False, repr=False, compare=False)
    max_ms: int = field(init=False, repr=False, compare=False)
    throttle_max_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _set(self, "min_ms", parse_duration(self.min, "schedule.min"))
        _set(self, "max_ms", parse_duration(self.max, "schedule.max"))
        if self.min_ms <= 0:
            raise ConfigError(f"must be greater than zero, got {self.min!r}", field="schedule.min")
        if self.max_ms < self.min_ms:
            raise ConfigError(
                f"must be at least schedule.min ({self.min!r}), got {self.max!r}",
                field="schedule.max",
            )
        if not isinstance(self.adaptive, bool):
            raise ConfigError(f"expected a bool, got {self.adaptive!r}", field="schedule.adaptive")
        _number(self.jitter, "schedule.jitter", low=0, high=1)
        if not isinstance(self.backoff, Backoff):
            raise ConfigError(f"expected a Backoff, got {self.backoff!r}", field="schedule.backoff")
        if self.throttle_max is None:
            ceiling = min(self.max_ms, MAX_THROTTLE_MS)
        else:
            ceiling = parse_duration(self.throttle_max, "schedule.throttle_max")
            if not 0 < ceiling <= MAX_THROTTLE_MS:
                raise ConfigError(
                    f"must be greater than zero and at most one day, got {self.throttle_max!r}",
                    field="schedule.throttle_max",
                )
        _set(self, "throttle_max_ms", ceiling)


@dataclass(frozen=True, slots=True)
class Circuit:
    """When to stop hammering a failing API.

    Args:
        failures: Consecutive fetch failures that open the circuit.
        probe_every: How long an open circuit waits before a half-open probe
            (default: ``schedule.max``).
    """

    failures: int = 5
    probe_every: Duration | None = None
    probe_every_ms: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _positive_int(self.failures, "circuit.failures")
        _set(
            self,
            "probe_every_ms",
            None
            if self.probe_every is None
            else parse_duration(self.probe_every, "circuit.probe_every"),
        )


@dataclass(frozen=True, slots=True)
class Retry:
    """Handler retries.

    Args:
        attempts: Total delivery attempts before an event is poison (``1`` = no retry).
        backoff: Wait between attempts (full jitter).
    """

    attempts: int = 5
    backoff: Backoff = field(default_factory=lambda: Backoff(base="1s", factor=2, max="2m"))

    def __post_init__(self) -> None:
        _positive_int(self.attempts, "delivery.retry.attempts")
        if not isinstance(self.backoff, Backoff):
            raise ConfigError(
                f"expected a Backoff, got {self.backoff!r}", field="delivery.retry.backoff"
            )


@dataclass(frozen=True, slots=True)
class Poison:
    """What happens to an event that used up its attempts.

    Args:
        action: ``"park"`` moves it to the parked table; ``"halt"`` also opens the circuit.
        hold_key: Keep later events of the same ordering key pending while it is parked.
    """

    action: PoisonAction = "park"
    hold_key: bool = True

    def __post_init__(self) -> None:
        if self.action not in ("park", "halt"):
            raise ConfigError(
                f"expected 'park' or 'halt', got {self.action!r}", field="delivery.poison.action"
            )
        if not isinstance(self.hold_key, bool):
            raise ConfigError(
                f"expected a bool, got {self.hold_key!r}", field="delivery.poison.hold_key"
            )


@dataclass(frozen=True, slots=True)
class Delivery:
    """How committed events reach the handler.

    Args:
        ordering_key: ``(event) -> str``; events with equal keys are delivered strictly in
            sequence order. Default: the event's subject (the item identity).
        concurrency: Ordering keys in flight at once.
        retry: Retries of a failing handler.
        poison: What to do after the last attempt.
        ack_mode: ``"auto"`` acks when the handler returns; ``"manual"`` requires
            ``ctx.ack()`` before it returns.
    """

    ordering_key: Callable[[Any], str] | None = None
    concurrency: int = 1
    retry: Retry = field(default_factory=Retry)
    poison: Poison = field(default_factory=Poison)
    ack_mode: AckMode = "auto"

    def __post_init__(self) -> None:
        if self.ordering_key is not None and not callable(self.ordering_key):
            raise ConfigError(
                f"expected a callable, got {self.ordering_key!r}", field="delivery.ordering_key"
            )
        _positive_int(self.concurrency, "delivery.concurrency")
        if not isinstance(self.retry, Retry):
            raise ConfigError(f"expected a Retry, got {self.retry!r}", field="delivery.retry")
        if not isinstance(self.poison, Poison):
            raise ConfigError(f"expected a Poison, got {self.poison!r}", field="delivery.poison")
        if self.ack_mode not in ("auto", "manual"):
            raise ConfigError(
                f"expected 'auto' or 'manual', got {self.ack_mode!r}", field="delivery.ack_mode"
            )


@dataclass(frozen=True, slots=True)
class Reconcile:
    """A slow full listing that finds deletes for incremental strategies.

    Args:
        every: Time between complete reconcile listings (the first runs on the first cycle).
        fetch: Lists everything, paged by ``ctx.page``; same shapes as the poller's fetch.
    """

    every: Duration
    fetch: Callable[..., Any]
    every_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _set(self, "every_ms", parse_duration(self.every, "reconcile.every"))
        if self.every_ms <= 0:
            raise ConfigError(
                f"must be greater than zero, got {self.every!r}", field="reconcile.every"
            )
        if not callable(self.fetch):
            raise ConfigError(f"expected a callable, got {self.fetch!r}", field="reconcile.fetch")


@dataclass(frozen=True, slots=True)
class Deletes:
    """When a full listing (``SnapshotDiff`` or ``reconcile``) may emit ``deleted``.

    A full listing finds deletes by what it did not list. Listings paged by number or
    offset shift when the vendor deletes or inserts between two pages, so a live item can
    fall between pages and be missed once; and an outage that answers ``200`` with an
    empty list would delete everything. Two rules keep both from reaching a handler:

    - an identity is deleted only after ``confirm_passes`` consecutive complete passes
      all missed it, and either the newest two of them agree (the older one listed
      nothing the newer one is missing, missed nothing the newer one listed and listed no
      item twice) or, with ``order="fixed"``, a pass proved that identity absent (its
      nearest listed neighbours came in one page read, see
      https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing); a pass
      with an invalid item or a ``304`` page is not complete and deletes nothing; a
      delete that 8 complete passes missed without either is held for an operator;
    - the **mass-delete guard**: when one pass would delete more than ``guard_share`` of
      the snapshot, and at least ``guard_min`` items, the deletes are held, reported
      (``inspect()``, the ``on_deletes_held`` hook, a WARNING, the health check) and wait
      for an operator (``engine.deletes.confirm()`` / ``discard()``, or the CLI).

    Args:
        confirm_passes: Consecutive complete passes that must miss an identity before it is
            deleted (from ``2`` on, with ``paging="offset"``, the newest two must also
            agree); ``1`` deletes on the first miss (only for listings that cannot shift,
            such as keyset pagination).
        paging: How the listing pages. ``"offset"`` (default, the safe choice): by page
            number or offset, where a delete or insert between two pages shifts items, so
            the confirming passes must agree. ``"keyset"``: each page continues after the
            last item's key or an opaque token, so no change between pages can move a live
            item out of the listing (as long as the sort key of an item never changes);
            the passes then need not agree, and a vendor that deletes something between
            every two passes still gets its deletes reported on time.
        order: How the listing is sorted. ``"fixed"`` (default): an item's place relative
            to the others never changes while it lives (sorted by id or creation time),
            so one page read is a window of the listing at one moment and proves absent
            what lies between two of its items; deletes of a vendor that never holds
            still come out on their own proof. ``"changing"``: sorted by a field that
            changes (such as ``updated_at``), where an item can move back across the
            reading position; no proofs are taken, and deletes wait for passes that agree.
        guard_share: The guard's threshold, a share of the snapshot in ``(0, 1]``;
            ``None`` turns the guard off.
        guard_min: The guard holds nothing smaller than this many deletes.
        guard_release_passes: Held deletes go out by themselves once this many further
            complete passes in a row still want them; ``None`` (default) waits for an
            operator.
        verify: ``(identity, ctx) -> bool`` (sync or async): asked once per delete before
            it is emitted; return ``False`` when the API no longer has the item (a ``404``)
            and ``True`` when it still does (the item is then kept and counts as seen).
            ``ctx`` is a ``FetchContext`` (``ctx.http`` included) with ``cursor=None``.
            An exception fails the cycle; the deletes are tried again on the next one.
            With ``verify`` no live item is ever reported deleted, whatever the listing
            does between pages, and the passes need not agree; it costs one call per
            delete.
    """

    confirm_passes: int = 2
    guard_share: float | None = 0.5
    guard_min: int = 10
    guard_release_passes: int | None = None
    verify: Callable[..., Any] | None = None
    paging: Paging = "offset"
    order: ListingOrder = "fixed"

    def __post_init__(self) -> None:
        _positive_int(self.confirm_passes, "deletes.confirm_passes")
        if self.guard_share is not None:
            share = _number(self.guard_share, "deletes.guard_share", low=0, high=1)
            if share <= 0:
                raise ConfigError(
                    f"expected a number above 0, got {self.guard_share!r}",
                    field="deletes.guard_share",
                )
        _positive_int(self.guard_min, "deletes.guard_min", minimum=0)
        if self.guard_release_passes is not None:
            _positive_int(self.guard_release_passes, "deletes.guard_release_passes")
        if self.paging not in ("offset", "keyset"):
            raise ConfigError(
                f"expected 'offset' or 'keyset', got {self.paging!r}", field="deletes.paging"
            )
        if self.order not in ("fixed", "changing"):
            raise ConfigError(
                f"expected 'fixed' or 'changing', got {self.order!r}", field="deletes.order"
            )
        if self.verify is not None and not callable(self.verify):
            raise ConfigError(f"expected a callable, got {self.verify!r}", field="deletes.verify")

    @property
    def proves(self) -> bool:
        """True when a pass proves identities absent one by one (offset paging, a fixed
        order, no ``verify``, at least two confirming passes): see
        https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing."""
        return (
            self.paging == "offset"
            and self.order == "fixed"
            and self.verify is None
            and self.confirm_passes > 1
        )

    def holds(self, deletes: int, snapshot: int) -> bool:
        """True when the guard holds ``deletes`` out of a snapshot of ``snapshot`` rows."""
        if self.guard_share is None or deletes == 0 or deletes < self.guard_min:
            return False
        return deletes > self.guard_share * snapshot


@dataclass(frozen=True, slots=True)
class EventLog:
    """Keep committed events in a replay log (enables ``engine.replay()``).

    Args:
        retention: How long logged events are kept.
    """

    retention: Duration = "7d"
    retention_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _set(self, "retention_ms", parse_duration(self.retention, "log.retention"))


@dataclass(frozen=True, slots=True)
class EventIds:
    """How event ids are made, and how long deleted identities are remembered for them.

    Args:
        mode: ``"distinct"`` (default): every distinct observation gets an id no other
            event of its item had, also when the item returns to an earlier version or is
            deleted and re-created; the first event of an item keeps the original
            watukuy's id. ``"compat"``: every id is the original watukuy's, byte for byte
            (for a consumer handed over from it); an item that returns to an earlier
            version then repeats an earlier id.
        tombstones: How long the store keeps what it knew of a deleted identity (its
            revision), so that a re-creation gets new ids; ``None`` (default) keeps it as
            long as the key exists. An identity re-created after its tombstone was pruned
            starts over like a new item, with the ids of its first life: keep tombstones
            at least as long as consumers keep the ids they have processed.
    """

    mode: IdMode = "distinct"
    tombstones: Duration | None = None
    tombstones_ms: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("distinct", "compat"):
            raise ConfigError(
                f"expected 'distinct' or 'compat', got {self.mode!r}", field="ids.mode"
            )
        retention = (
            None if self.tombstones is None else parse_duration(self.tombstones, "ids.tombstones")
        )
        if retention is not None and retention <= 0:
            raise ConfigError(
                f"expected a positive duration or None, got {self.tombstones!r}",
                field="ids.tombstones",
            )
        _set(self, "tombstones_ms", retention)

    @property
    def compat(self) -> bool:
        """True when ids are the original watukuy's for every event."""
        return self.mode == "compat"


@dataclass(frozen=True, slots=True)
class Budget:
    """A shared rate budget across every poller (and lane) using it.

    By default a hard cap: at most ``requests`` in any window of ``per``, the costs of the
    requests counted in any ``per``-long stretch adding up to no more than ``requests``. A
    request is charged its poller's ``budget_cost`` (1 by default). An unused budget grants
    ``requests`` at once; after that a request waits until enough earlier grants are
    ``per`` old. Through ``ctx.http`` a grant counts until ``per`` after its answer arrived,
    so the cap also holds in the vendor's own count.

    With ``burst`` it is a token bucket instead: ``burst`` requests at once, then one every
    ``per / requests`` (``Budget(10, "1s", burst=3)``: three at once, then one per 100 ms).

    Args:
        requests: The most that may be granted in any window of ``per`` (the hard cap), or
            the refill rate per ``per`` of a bucket.
        per: Window length.
        burst: Capacity of a token bucket; ``None`` (the default) keeps the hard cap.
        fairness: ``"round-robin"``: the earliest deadline (the request waiting longest)
            first, then the requester served least recently; or ``"weighted"`` by each
            poller's ``budget_weight``.
        max_wait: Longest a request waits for room in the window before the cycle is
            deferred with ``BudgetTimeoutError`` (default: the poller's ``schedule.max``).
    """

    requests: int
    per: Duration
    fairness: Fairness = "round-robin"
    max_wait: Duration | None = None
    burst: int | None = None
    per_ms: int = field(init=False, repr=False, compare=False)
    max_wait_ms: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _positive_int(self.requests, "budget.requests")
        if self.burst is not None:
            _positive_int(self.burst, "budget.burst")
        _set(self, "per_ms", parse_duration(self.per, "budget.per"))
        if self.per_ms <= 0:
            raise ConfigError(f"must be greater than zero, got {self.per!r}", field="budget.per")
        if self.fairness not in ("round-robin", "weighted"):
            raise ConfigError(
                f"expected 'round-robin' or 'weighted', got {self.fairness!r}",
                field="budget.fairness",
            )
        _set(
            self,
            "max_wait_ms",
            None if self.max_wait is None else parse_duration(self.max_wait, "budget.max_wait"),
        )
