"""The ports: what the core needs from the outside world, and nothing more.

The engine talks to time through :class:`Clock`, to chance through :class:`Random`, to
durable state through :class:`StateStore` and to shared rate budgets through
:class:`BudgetStore`; user code that may block (a sync handler, a sync ``fetch``) runs
through :class:`Offload`. Adapters implement them (``watukuy.stores``, ``watukuy.SystemClock``);
tests inject doubles (``watukuy.testing.VirtualClock``, ``SeededRandom``, ``MemoryStore``).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from .errors import ConfigError, SerializedError
from .records import dataclass
from .rows import (
    CommitBatch,
    ItemMark,
    ItemRow,
    Lease,
    LoggedEvent,
    OutboxRow,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
    StatePatch,
    StoreCapabilities,
    Tombstone,
    Validator,
)

__all__ = [
    "BudgetPolicy",
    "BudgetStore",
    "Clock",
    "InlineOffload",
    "Offload",
    "Random",
    "StateStore",
    "StoreClock",
    "budget_capacity",
    "check_budget_args",
    "describe_capacity",
]


@runtime_checkable
class Clock(Protocol):
    """Time, as the engine sees it. Every time is integer epoch milliseconds."""

    def now(self) -> int:
        """The current time in epoch milliseconds."""
        ...

    async def sleep(self, ms: int) -> None:
        """Wait ``ms`` milliseconds (cancellable, like :func:`asyncio.sleep`)."""
        ...


@runtime_checkable
class StoreClock(Protocol):
    """A store whose server has a clock of its own (PostgreSQL, Redis).

    Leases are judged by the clock of each process that takes or keeps one; the engine
    compares this clock with its own at start and warns when the two differ by more than
    the lease safety margin can absorb (see
    https://watukuy.readthedocs.io/en/latest/stores/#clocks-and-leases).
    """

    async def server_time(self) -> int:
        """The server's current time in epoch milliseconds."""
        ...


T = TypeVar("T")


@runtime_checkable
class Offload(Protocol):
    """Where the engine runs user code that may block: a sync handler, a sync ``fetch``.

    The runtime starts no thread of its own; it hands such calls to this port.
    ``watukuy.Engine`` runs them on worker threads (``asyncio.to_thread``), so that they
    may block without holding the event loop; :class:`InlineOffload` runs them in place.
    """

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Call ``fn(*args)`` and return what it returns (or raise what it raises)."""
        ...


class InlineOffload:
    """An :class:`Offload` that calls the function right away, on the event loop's thread
    (a blocking function then blocks the loop): for code with no thread to offer."""

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Call ``fn(*args)`` here and now."""
        return fn(*args)

    def __repr__(self) -> str:
        return "InlineOffload()"


@runtime_checkable
class Random(Protocol):
    """Randomness for jitter and ids; inject ``SeededRandom`` to make runs reproducible."""

    def random(self) -> float:
        """A float uniformly distributed in ``[0, 1)``."""
        ...


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """A hard cap: grants of at most ``requests`` (summed costs) in any ``per_ms`` window;
    with ``burst``, a token bucket instead: ``burst`` at once, then ``requests`` per
    ``per_ms`` (see ``watukuy.budget.bucket``)."""

    requests: int
    per_ms: int
    burst: int | None = None


def budget_capacity(policy: BudgetPolicy) -> int:
    """The largest cost one request can ever be granted: a token bucket's ``burst`` (it
    never holds more tokens), else the window's ``requests``."""
    return policy.requests if policy.burst is None else policy.burst


def describe_capacity(policy: BudgetPolicy) -> str:
    """:func:`budget_capacity` in words, for the errors that refuse a larger cost."""
    if policy.burst is not None:
        return f"a burst of {policy.burst}"
    return f"a budget of {policy.requests} requests per window"


def check_budget_args(policy: BudgetPolicy, cost: float, now: int) -> None:
    """Reject a policy, cost or time the window arithmetic cannot work with.

    Raises:
        ConfigError: ``requests`` or ``per_ms`` is not a positive integer, ``cost`` is
            negative, not a finite number, or larger than the budget can ever grant at once
            (``burst`` for a token bucket, ``requests`` for a window), or ``now`` is not an
            integer.
    """
    requests, per_ms = policy.requests, policy.per_ms
    if isinstance(requests, bool) or not isinstance(requests, int) or requests <= 0:
        raise ConfigError(f"expected a positive integer, got {requests!r}", field="requests")
    if isinstance(per_ms, bool) or not isinstance(per_ms, int) or per_ms <= 0:
        raise ConfigError(f"expected a positive integer, got {per_ms!r}", field="per_ms")
    if (
        isinstance(cost, bool)
        or not isinstance(cost, int | float)
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise ConfigError(f"expected a finite number >= 0, got {cost!r}", field="cost")
    burst = policy.burst
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int) or burst <= 0):
        raise ConfigError(f"expected a positive integer, got {burst!r}", field="burst")
    if cost > budget_capacity(policy):
        raise ConfigError(
            f"a cost of {cost!r} can never be granted by {describe_capacity(policy)}",
            field="cost",
        )
    if isinstance(now, bool) or not isinstance(now, int):
        raise ConfigError(f"expected an integer epoch in ms, got {now!r}", field="now")


@runtime_checkable
class BudgetStore(Protocol):
    """Where budget grant logs live. In-process by default; ``RedisBudgetStore`` shares them.

    A store may also offer ``try_hold(budget, policy, cost, now, *, stamp, ticket)`` and
    ``settle(budget, policy, ticket, *, stamp, at, now)`` (both built-in stores do): a grant
    held until its answer arrives, so that budgets hold as the vendor counts them (see
    ``watukuy.budget.window``). Without them a grant counts from the moment it is made.
    A store may also offer ``usage(budget, policy, now) -> float``, a read of how much of
    the budget is in use (both built-in stores do); ``inspect()`` and the admin page show
    it, and show nothing without it.
    """

    async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
        """Grant ``cost`` at ``now`` if it fits in the budget's window.

        Returns:
            ``0`` when granted; otherwise the milliseconds until it would fit, having
            taken nothing.
        """
        ...


@runtime_checkable
class StateStore(Protocol):
    """The durability port: leases, state, snapshot, outbox, parked rows, validators, log.

    Rules every implementation follows (the contract suite in
    ``watukuy.testing.store_contract`` checks each one):

    1. **Fencing.** Every method that takes a :class:`Lease` compares its owner and epoch
       with the stored lease and raises ``LeaseLostError`` on a mismatch or when the lease
       is gone. ``acquire_lease`` succeeds only when the key is unowned or its lease has
       expired (``expires_at <= now``), and increments the epoch on every acquisition.
    2. **Atomicity.** ``commit_poll`` writes the state patch, upserts, seen marks, deletes,
       events, log entries and parked rows in one transaction, or nothing.
    3. **Ordering.** ``load_pending`` returns rows in sequence order and never filters by
       ``next_attempt_at``; the dispatcher decides what is eligible.
    4. **Unfenced administrative writes** (``save_state_unfenced``, ``retry_parked``,
       ``discard_parked``, ``delete_key``, ``clear_items``) never touch the lease.
    5. **Copies, not references.** Nothing a caller receives aliases the store's state.
    6. **No I/O in the constructor.** ``migrate()`` creates what is missing, idempotently,
       and is safe to run from several processes at once.
    7. **Driver failures** surface as ``StoreError`` with the driver error as its cause.
    8. **Tombstones.** An identity that leaves the snapshot leaves a :class:`Tombstone`
       behind, in the same transaction: a commit's ``deletes`` make ``"deleted"`` ones,
       ``clear_items`` makes ``"cleared"`` ones. ``load_tombstones`` reads them,
       ``commit_poll`` drops those of ``batch.revived``, ``prune_tombstones`` and
       ``delete_key`` remove them. ``ItemRow.revision`` round-trips unchanged.
    9. **Due index.** Every write of a state keeps the per-poller index of its ``wake_at``
       in step, atomically with the write, so ``due_keys`` never scans every key. (A
       backend that cannot, like ``RedisStore`` on a cluster, says how stale it may get.)
    """

    @property
    def capabilities(self) -> StoreCapabilities:
        """What this store supports."""
        ...

    async def migrate(self) -> None:
        """Create tables/keys that are missing. Idempotent."""
        ...

    async def close(self) -> None:
        """Release resources this store opened itself."""
        ...

    # leases
    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """Take the key's lease if it is free or expired; ``None`` when someone holds it."""
        ...

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Extend a held lease to ``now + ttl_ms``; ``False`` when it is no longer ours."""
        ...

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """Give the lease up (a no-op when it is no longer ours)."""
        ...

    async def get_lease(self, key: PKey) -> Lease | None:
        """The current lease of the key, expired or not; ``None`` when never leased."""
        ...

    # state
    async def load_state(self, key: PKey) -> PollerState | None:
        """The key's state, or ``None`` when the key has never been seen."""
        ...

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """Fenced partial update of the key's state."""
        ...

    async def save_state_unfenced(self, key: PKey, patch: StatePatch, now: int) -> None:
        """Administrative partial update (pause, resume, trigger, reset); creates the key
        with an empty state when it does not exist yet."""
        ...

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        """Every key with state, optionally of one poller, sorted."""
        ...

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """The keys of ``poller`` whose stored ``wake_at`` is at or before ``until``.

        The store keeps an index of ``PollerState.wake_at`` in step with every write of the
        state (``save_state``, ``save_state_unfenced``, the state patch of ``commit_poll``,
        key creation, ``delete_key``), in the same transaction as that write, so this costs
        time in proportion to the answer rather than to the number of keys. Keys whose
        ``wake_at`` is ``None`` are never returned.

        Args:
            poller: The poller whose partitions are wanted; other pollers are ignored.
            until: Inclusive upper bound (epoch ms).
            limit: At most this many entries (``None``: all of them; ``<= 0``: none).

        Returns:
            ``(partition, wake_at)`` pairs ordered by ``(wake_at, partition)``.
        """
        ...

    async def delete_key(self, key: PKey) -> None:
        """Remove every row of the key: state, lease, items, tombstones, outbox, parked,
        validators, log."""
        ...

    async def clear_items(self, key: PKey) -> None:
        """Drop the key's snapshot (item rows) only, each row becoming a ``"cleared"``
        :class:`Tombstone` (``removed_at`` = its ``seen_at``) in the same transaction."""
        ...

    # items
    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        """The stored rows of those identities that exist."""
        ...

    async def load_tombstones(self, key: PKey, identities: Sequence[str]) -> dict[str, Tombstone]:
        """The tombstones of those identities that have one (with or without a live row)."""
        ...

    async def prune_tombstones(self, key: PKey, older_than: int) -> int:
        """Delete tombstones removed before ``older_than``; returns how many."""
        ...

    def stream_identities(self, key: PKey, batch_size: int = 1000) -> AsyncIterator[list[str]]:
        """Every stored identity of the key, in batches of at most ``batch_size``."""
        ...

    def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """The stored identities whose seen mark is below ``before``, in code-point order,
        in batches of at most ``batch_size``.

        Every snapshot row carries a seen mark: ``0`` when it is created, then the
        ``seen_pass`` of the last ``commit_poll`` that listed it in ``CommitBatch.seen``
        (an upsert keeps the mark of an existing row). A full listing marks what it lists
        with its pass id; the rows left below a pass's id are what it did not see.
        """
        ...

    async def load_marks(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The seen mark and :class:`~watukuy.model.rows.ListingLink` of each stored
        identity among ``identities`` (absent ones are left out). A row's link is the last
        one a ``commit_poll`` wrote in ``CommitBatch.links``; ``None`` before that."""
        ...

    async def count_items(self, key: PKey) -> int:
        """Size of the key's snapshot."""
        ...

    # atomic commit and outbox
    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Write the whole batch in one transaction, fenced by ``lease``."""
        ...

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        """Up to ``limit`` pending rows in sequence order, regardless of ``next_attempt_at``;
        only rows with ``sequence > after_sequence`` when it is given (keyset paging)."""
        ...

    async def count_pending(self, key: PKey) -> int:
        """Number of pending outbox rows."""
        ...

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """Remove delivered rows from the outbox (fenced)."""
        ...

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Count a failed attempt: increment ``attempts``, store the error and retry time."""
        ...

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Move an outbox row to the parked table in one step (fenced)."""
        ...

    async def list_parked(
        self, key: PKey, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Parked rows, oldest first, optionally of one kind."""
        ...

    async def count_parked(self, key: PKey) -> int:
        """Number of parked rows of either kind."""
        ...

    async def retry_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Put parked poison events back in the outbox as pending, at their original
        sequence, with attempts reset; returns how many moved. Invalid items are left."""
        ...

    async def discard_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Delete parked rows; returns how many were deleted."""
        ...

    async def held_keys(self, key: PKey) -> set[str]:
        """Ordering keys held back by parked rows."""
        ...

    # HTTP validators
    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        """The stored ETag / Last-Modified for a URL hash."""
        ...

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Store validators for a URL hash (fenced)."""
        ...

    async def clear_validators(self, key: PKey) -> None:
        """Forget every validator of the key, and nothing else (an unfenced admin write:
        ``reset_cursor`` calls it, so that no request after the reset is answered ``304``
        on the strength of what was read before it)."""
        ...

    # event log
    async def read_log(
        self,
        key: PKey,
        *,
        after_sequence: int | None = None,
        from_time: int | None = None,
        to_time: int | None = None,
        limit: int = 1000,
    ) -> list[LoggedEvent]:
        """Logged events in sequence order, filtered by sequence and/or time
        (``from_time <= created_at <= to_time``)."""
        ...

    async def prune_log(self, key: PKey, older_than: int) -> int:
        """Delete log entries created before ``older_than``; returns how many."""
        ...
