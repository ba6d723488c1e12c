"""What ``fetch`` and handlers receive besides their main argument."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import field
from typing import Generic, TypeVar

from watukuy.model.errors import WatukuyError
from watukuy.model.http_api import FetchHttp
from watukuy.model.partition import Partition
from watukuy.model.records import dataclass
from watukuy.model.rows import DEFAULT_CONSUMER, Lane

__all__ = ["Cancelled", "FetchContext", "HandlerContext"]

C = TypeVar("C")

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]


class Cancelled(WatukuyError):
    """The cycle was cancelled (engine stopping, lease lost) while work was in progress."""


@dataclass(frozen=True, slots=True)
class FetchContext(Generic[C]):
    """The argument of ``fetch``.

    Attributes:
        cursor: Where to continue, typed by strategy: ``TimestampPosition(value,
            tie_break)``, ``TokenPosition(value)``, ``PagePosition(page)``, ``None`` for a
            snapshot diff, or your own value for a custom cursor.
        page: 1-based index of this request within the cycle (use it to page full listings);
            for a full listing (``SnapshotDiff``, ``reconcile``) the index within its pass,
            so a pass cut by the page cap or a deadline resumes at the next page.
        page_token: For a full listing paged by tokens, the token of this page: the
            ``Page.cursor`` (a ``str``) that the page before it returned with
            ``has_more=True``. It is stored with the pass, so a pass resumed in another
            cycle, after a restart or on another replica, gets it too. ``None`` on the
            first page of a pass, for listings whose pages return no ``str`` cursor, and
            in every other lane (a token cursor's token is :attr:`cursor`).
        partition: The partition being polled (``Partition("")`` when not partitioned).
        lane: ``"live"``, ``"reconcile"`` or ``"backfill"``.
        http: The HTTP helper (``ctx.http.get(...)``), bound to this key and lane; its
            requests return a :class:`~watukuy.model.http_api.FetchResponse`.
        attempt: 1 + the consecutive failures of this key (``1`` normally).
        logger: A logger scoped to the poller and partition.
    """

    cursor: C
    page: int
    partition: Partition
    lane: Lane
    http: FetchHttp
    attempt: int
    logger: Logger
    page_token: str | None = None
    _cancel: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def cancelled(self) -> bool:
        """True once the cycle has been cancelled; long fetches may check it and stop."""
        return self._cancel.is_set()

    def raise_if_cancelled(self) -> None:
        """Raise :class:`Cancelled` when the cycle has been cancelled."""
        if self._cancel.is_set():
            raise Cancelled("the cycle was cancelled", code="NOT_RUNNING")


@dataclass(slots=True)
class HandlerContext:
    """The second argument of a handler.

    Attributes:
        partition: The partition the event belongs to, including its transient ``data``.
        attempt: 1-based delivery attempt (same as ``event.attempt``).
        logger: A logger scoped to the poller and partition.
        consumer: The name of the consumer the event is delivered to (``"default"``
            unless ``on()`` was given ``consumer=``).
    """

    partition: Partition
    attempt: int
    logger: Logger
    consumer: str = DEFAULT_CONSUMER
    _cancel: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _acked: bool = field(default=False, repr=False)
    _open: bool = field(default=True, repr=False)

    def ack(self) -> None:
        """Acknowledge the event (required before returning with ``ack_mode="manual"``;
        a harmless no-op in ``"auto"`` mode). Calling it after the handler returned has no
        effect."""
        if self._open:
            self._acked = True

    @property
    def acked(self) -> bool:
        """True when :meth:`ack` was called while the handler ran."""
        return self._acked

    @property
    def cancelled(self) -> bool:
        """True once the engine is stopping without drain or the lease was lost."""
        return self._cancel.is_set()
