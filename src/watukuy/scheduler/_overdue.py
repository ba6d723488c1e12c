"""Whether a key is overdue: due, and left without the engine's attention for too long.

A key is *due* at its stored ``wake_at``, the time the engine itself planned for its next
run when it last finished one (the live poll, a delivery retry, a reconcile or backfill
cycle, whichever comes first; see ``runtime.runner.wake_time``). From then on the engine
is expected to show up: to take the key's lease and run. The rule, in order:

1. A key with no state, a paused key, and a key with nothing planned (neither a
   ``wake_at`` nor a ``next_due_at``) waits for nobody: ``None``.
2. A key whose lease is held (not expired) is being worked on: ``0``. A long page, a slow
   vendor or a full listing of many pages keeps the lease renewed, and is progress.
3. Otherwise the key has waited since the later of its due time and the last write to its
   state (``updated_at``: every committed page writes it, so a run that stopped half-way
   counts from its last page, not from when it came due).

The waiting time is a fact; *overdue* is a judgement: waiting longer than a grace. The
grace covers what legitimately delays a run past its due time in a healthy system: a
trigger made by another process is seen at the engine's next resync, a replica that died
holding the lease leaves it to expire before another takes the key, and the daemon spreads
wake-ups a little so that replicas share keys. :func:`overdue_grace` is the engine's
grace, never under :data:`OVERDUE_GRACE_MS`.

The daemon's own loop is judged the same way, in the engine's process: it plans when it
comes round next, and runs late by more than :func:`loop_grace` only when it is stuck or
gone.

A vendor that answers with no new items does not make a key overdue: the key is polled on
schedule and planned again. A stopped engine does: nobody plans the key again.
"""

from __future__ import annotations

from watukuy.model.rows import Lease, PollerState

__all__ = [
    "LOOP_GRACE_MS",
    "OVERDUE_GRACE_MS",
    "is_overdue",
    "loop_grace",
    "overdue_grace",
    "waiting_ms",
]

OVERDUE_GRACE_MS = 60_000
"""The least grace: a key is overdue once it has waited more than a minute past its due
time with nobody working on it."""


def waiting_ms(state: PollerState | None, lease: Lease | None, now: int) -> int | None:
    """How long a key has been due with nobody working on it, in milliseconds.

    Args:
        state: The key's stored state (``None``: never stored).
        lease: The key's lease as stored, if any.
        now: Current time (epoch ms).

    Returns:
        ``None`` when the key waits for nobody (no state, paused, nothing planned); ``0``
        while it is not due yet or its lease is held; else the milliseconds since it came
        due, or since the last write to its state when that is later.
    """
    if state is None or state.paused:
        return None
    due = state.wake_at
    if due is None:
        # Rows written before wake_at existed: the live lane's own due time.
        due = state.schedule.next_due_at
    if due is None:
        return None
    if lease is not None and lease.expires_at > now:
        return 0
    return max(0, now - max(due, state.updated_at))


def is_overdue(waiting: int | None, grace_ms: int) -> bool:
    """Whether a key that has waited ``waiting`` ms (see :func:`waiting_ms`) is overdue.

    Args:
        waiting: What :func:`waiting_ms` returned.
        grace_ms: How long a key may wait before it counts as overdue.

    Returns:
        ``True`` when it has waited longer than the grace.
    """
    return waiting is not None and waiting > grace_ms


def overdue_grace(*, resync_ms: int, lease_ttl_ms: int) -> int:
    """The grace of an engine: a trigger from another process is seen within one resync,
    and a dead replica's lease lapses within one TTL; never under :data:`OVERDUE_GRACE_MS`.

    Args:
        resync_ms: The engine's ``resync_every``.
        lease_ttl_ms: The engine's lease TTL.

    Returns:
        The grace in milliseconds.
    """
    return max(OVERDUE_GRACE_MS, resync_ms + lease_ttl_ms)


LOOP_GRACE_MS = 30_000
"""The least time a daemon's loop may run late (past the wake-up it planned) before it
counts as stalled."""


def loop_grace(resync_ms: int) -> int:
    """How late a daemon's loop may come round before it counts as stalled: one resync
    period (a resync's store round trips and a slow ``partitions()`` delay a loop that is
    well), never under :data:`LOOP_GRACE_MS`.

    Args:
        resync_ms: The engine's ``resync_every``.

    Returns:
        The grace in milliseconds.
    """
    return max(LOOP_GRACE_MS, resync_ms)
