"""The faulty store: a process that dies at an armed kill point."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from watukuy.model.errors import SerializedError
from watukuy.model.ports import StateStore
from watukuy.model.rows import CommitBatch, Lease, ParkedRow, PKey, StatePatch, Validator

from ._audit import LeaseAudit
from ._forwarding import ForwardingStore
from ._kills import KILL_POINTS, KillPoint, SimulatedCrash

__all__ = ["FaultyStore"]

T = TypeVar("T")

_NO_KILLS: Final = dict.fromkeys(KILL_POINTS, 0)


def _observe(task: asyncio.Future[Any]) -> None:
    """Read the outcome of a call nobody awaits any more (its process died)."""
    if not task.cancelled():
        task.exception()


class FaultyStore(ForwardingStore):
    """A store wrapper that kills its process at an armed kill point.

    See :mod:`watukuy.testing.faulty` for the process-death semantics.

    One instance plays one process: arm a kill point with :meth:`arm`; when the matching
    call comes, the kill fires once, the wrapper becomes :attr:`dead`, and every later call
    raises :class:`SimulatedCrash`. The ``handler`` kill point is not a death: the consumer
    asks :meth:`take_handler_kill` and raises an ordinary exception when it says yes.

    Args:
        inner: The real store, shared with the processes that come after this one.
        owner: The instance id of the engine using this wrapper (for messages).
        audit: Where lease traffic is checked for G5 (share it across incarnations).
        log: Receives one line per kill.

    Attributes:
        armed: The kill point waiting to fire, or ``None``.
        dead: True once a store-level kill fired.
        killed_by: The kill point that killed the process, if one did.
        kills: How many times each kill point fired through this wrapper.
    """

    def __init__(
        self,
        inner: StateStore,
        *,
        owner: str = "",
        audit: LeaseAudit | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self.owner = owner
        self.audit = audit if audit is not None else LeaseAudit()
        self.armed: KillPoint | None = None
        self.dead = False
        self.killed_by: KillPoint | None = None
        self.kills: dict[KillPoint, int] = dict(_NO_KILLS)
        self._log = log or (lambda line: None)

    def arm(self, point: KillPoint | None) -> None:
        """Arm ``point`` (replacing any armed one); ``None`` disarms."""
        if point is not None and point not in KILL_POINTS:
            raise ValueError(f"unknown kill point {point!r}; expected one of {KILL_POINTS}")
        self.armed = point

    def fire(self, point: KillPoint, detail: str = "") -> SimulatedCrash:
        """Record that ``point`` fired and disarm; store-level points also kill the process.

        Returns:
            The exception to raise.
        """
        self.armed = None
        self.kills[point] += 1
        if point != "handler":
            self.dead = True
            self.killed_by = point
        who = f" {self.owner}" if self.owner else ""
        fate = "handler fails once" if point == "handler" else "dies"
        self._log(f"kill {point}:{who} {fate}{f' ({detail})' if detail else ''}")
        return SimulatedCrash(point, detail)

    def take_handler_kill(self, detail: str = "") -> bool:
        """True (once) when the ``handler`` kill point is armed; it is then disarmed."""
        if self.armed != "handler":
            return False
        self.fire("handler", detail)
        return True

    async def _run(self, call: Awaitable[T]) -> T:
        # A call already handed to the inner store runs to completion even when the process
        # dies meanwhile, as a request already on the wire would. It also keeps cancellation
        # away from the inner store, whose connection pool every simulated process shares:
        # a real death closes its own connections instead.
        task = asyncio.ensure_future(call)
        task.add_done_callback(_observe)
        return await asyncio.shield(task)

    def _enter(self, operation: str) -> None:
        if self.dead:
            who = self.owner or "the process"
            raise SimulatedCrash("dead", f"{who} already died; {operation} never ran")

    def _kill(self, point: KillPoint, detail: str) -> None:
        if self.armed == point:
            raise self.fire(point, detail)

    # --- the kill points and the lease audit ----------------------------------------------

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """K1 ``before-acquire``; audits the acquisition."""
        self._enter("acquire_lease")
        self._kill("before-acquire", f"{owner} never got the lease of {key}")
        lease = await self._run(self.inner.acquire_lease(key, owner, ttl_ms, now))
        if lease is not None:
            self.audit.acquired(key, lease, now)
        return lease

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Forwarded; audits the renewal."""
        renewed = await super().renew_lease(key, lease, ttl_ms, now)
        if renewed:
            self.audit.renewed(key, lease, now + ttl_ms)
        return renewed

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """K7 ``during-release``: the lease lingers until it expires."""
        self._enter("release_lease")
        self._kill("during-release", f"epoch {lease.epoch} of {key} lingers until it expires")
        await self._run(self.inner.release_lease(key, lease))
        self.audit.released(key, lease)

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """K2 ``after-fetch`` (nothing persisted) and K3 ``after-commit`` (persisted)."""
        self._enter("commit_poll")
        count = len(batch.events)
        self._kill("after-fetch", f"{count} event(s) fetched, none committed")
        await self._run(self.inner.commit_poll(key, lease, batch))
        self.audit.accepted(key, lease, "commit_poll")
        self._kill("after-commit", f"{count} event(s) committed, none dispatched")

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """K4 ``before-ack`` (the handler ran, no ack) and ``mid-dispatch`` (acked, then
        dead with the rest of the batch in flight)."""
        self._enter("ack_events")
        shown = ", ".join(event_id[:10] for event_id in event_ids)
        self._kill("before-ack", f"delivered {shown}, not acked")
        await self._run(self.inner.ack_events(key, lease, event_ids))
        self.audit.accepted(key, lease, "ack_events")
        self._kill("mid-dispatch", f"acked {shown}, the rest of the batch is in flight")

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """K5/K6 ``after-ack-before-schedule``: the schedule is never saved."""
        self._enter("save_state")
        self._kill("after-ack-before-schedule", f"schedule of epoch {lease.epoch} not saved")
        await self._run(self.inner.save_state(key, lease, patch))
        self.audit.accepted(key, lease, "save_state")

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Forwarded; audited as a fenced write."""
        await super().record_attempt(key, lease, event_id, error, next_attempt_at)
        self.audit.accepted(key, lease, "record_attempt")

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Forwarded; audited as a fenced write."""
        await super().park_event(key, lease, row)
        self.audit.accepted(key, lease, "park_event")

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Forwarded; audited as a fenced write."""
        await super().set_validator(key, lease, url_hash, validator)
        self.audit.accepted(key, lease, "set_validator")

    def __repr__(self) -> str:
        state = "dead" if self.dead else f"armed={self.armed!r}"
        return f"FaultyStore({self.inner!r}, owner={self.owner!r}, {state})"
