"""What a key run is given: the engine's dependencies, and the key's own scope (its lease,
its consumers, its logger) that every step of the run shares."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import field
from typing import Any

from watukuy.cursor import CursorStrategy
from watukuy.model.http_port import BudgetGate, HttpFactory
from watukuy.model.partition import Partition
from watukuy.model.ports import Clock, InlineOffload, Offload, Random, StateStore
from watukuy.model.records import dataclass
from watukuy.model.redact import DEFAULT_REDACTION, RedactingLogger, Redaction
from watukuy.model.rows import Lane, PKey

from ._hook_names import HookContext
from ._hookbus import HookBus, HookEmitter
from .consumers import Consumers
from .lease import LeaseKeeper
from .poller import PollerDefinition

__all__ = ["EngineDeps", "KeyHooks", "KeyScope"]


@dataclass(frozen=True, slots=True)
class EngineDeps:
    """What every key run shares with the engine."""

    store: StateStore
    clock: Clock
    random: Random
    hooks: HookBus
    instance_id: str
    lease_ttl_ms: int
    lease_renew_ms: int
    batch_size: int
    http: HttpFactory | None
    budgets: BudgetGate | None
    reconcile_strategy: CursorStrategy[Any]
    budget_max_wait: Callable[[str], int | None] = field(default=lambda name: None)
    lease_margin_ms: int = 0
    redaction: Redaction = DEFAULT_REDACTION
    filtered: dict[PKey, int] = field(default_factory=dict)
    """Events turned down by a consumer's ``when=`` filter, per key, since the start."""
    offload: Offload = field(default_factory=InlineOffload)
    """Where a sync ``fetch`` runs (the engine's worker threads)."""
    log: RedactingLogger = field(
        default_factory=lambda: RedactingLogger(logging.getLogger("watukuy"))
    )
    """The engine's logger; each key run logs through a child of it named after the key."""


class KeyHooks:
    """The hooks of one key: one :class:`HookEmitter` per lane, made the first time the
    lane fires one and kept for the rest of the key run.

    Args:
        bus: The engine's hook bus.
        key: The key.
        instance_id: This engine instance.
    """

    __slots__ = ("_bus", "_emitters", "_instance_id", "_key")

    def __init__(self, bus: HookBus, key: PKey, instance_id: str) -> None:
        self._bus = bus
        self._key = key
        self._instance_id = instance_id
        self._emitters: dict[Lane, HookEmitter] = {}

    def __call__(self, lane: Lane) -> HookEmitter:
        """The hooks of the key and ``lane``."""
        emitter = self._emitters.get(lane)
        if emitter is None:
            context = HookContext(
                poller=self._key.poller,
                partition=self._key.partition,
                lane=lane,
                instance_id=self._instance_id,
            )
            emitter = self._emitters[lane] = self._bus.emitter(context)
        return emitter


@dataclass(frozen=True, slots=True)
class KeyScope:
    """One key run under its lease, as its lane cycles see it.

    Attributes:
        deps: Engine-wide dependencies.
        poller: The poller.
        partition: The partition (``Partition("")`` when not partitioned).
        keeper: Keeps the run's lease (and says when it is lost).
        consumers: The poller's consumers, or ``None`` (events then wait in the outbox).
        cancel: Set when the run is cancelled (the engine stops, the lease is lost).
        should_stop: True once the deadline passed or the engine is stopping (checked
            between pages).
        logger: Logs with the poller and partition, cleaned of secrets.
        hooks: The hooks of the key, per lane: ``scope.hooks(lane).on_fetch(...)``.
    """

    deps: EngineDeps
    poller: PollerDefinition[Any]
    partition: Partition
    keeper: LeaseKeeper
    consumers: Consumers | None
    cancel: asyncio.Event
    should_stop: Callable[[], bool]
    logger: RedactingLogger
    hooks: KeyHooks

    @property
    def key(self) -> PKey:
        """The key of the run."""
        return PKey(self.poller.name, self.partition.key)
