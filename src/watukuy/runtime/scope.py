"""What a key run is given: the engine's dependencies, and the key's own scope (its lease,
its consumers, its logger) that every step of the run shares."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import field
from typing import Any

from watukuy.cursor import CursorStrategy
from watukuy.model.http_port import BudgetGate, HttpFactory
from watukuy.model.partition import Partition
from watukuy.model.ports import Clock, InlineOffload, Offload, Random, StateStore
from watukuy.model.records import dataclass
from watukuy.model.redact import DEFAULT_REDACTION, RedactingLogger, Redaction
from watukuy.model.rows import PKey

from ._hookbus import HookBus
from .consumers import Consumers
from .lease import LeaseKeeper
from .poller import PollerDefinition

__all__ = ["EngineDeps", "KeyScope"]


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
    """

    deps: EngineDeps
    poller: PollerDefinition[Any]
    partition: Partition
    keeper: LeaseKeeper
    consumers: Consumers | None
    cancel: asyncio.Event
    should_stop: Callable[[], bool]
    logger: RedactingLogger

    @property
    def key(self) -> PKey:
        """The key of the run."""
        return PKey(self.poller.name, self.partition.key)
