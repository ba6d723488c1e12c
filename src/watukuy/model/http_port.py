"""The seam between the engine and ``ctx.http``.

The engine does not speak HTTP. For every lane cycle it asks an :class:`HttpFactory` (the
adapter in ``watukuy.http``) for the object ``fetch`` receives as ``ctx.http``, handing it
an :class:`HttpScope`: which key and lane it serves, how to reach the stored validators
(fenced by the current lease), the budget gate, and an :class:`HttpObservations` record the
helper fills in (rate-limit headers, 304s) and the runner reads back for the scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import field
from typing import Any, Protocol, runtime_checkable

from .http_api import FetchHttp
from .ports import Clock, StateStore
from .records import dataclass
from .redact import DEFAULT_REDACTION, Redaction
from .rows import Lane, Lease, PKey, RateLimitInfo, Validator

__all__ = ["BudgetGate", "HttpFactory", "HttpObservations", "HttpScope"]


@dataclass(slots=True)
class HttpObservations:
    """What ``ctx.http`` learned during one page; reset by the runner before each page.

    Attributes:
        rate_limit: Rate-limit headers of the most recent response that had any.
        not_modified: A request of this page was answered ``304 Not Modified``.
        requests: Requests sent.
        waited_ms: Time spent waiting for budget room.
        defer_validators: Keep new ETag / Last-Modified values in ``pending_validators``
            instead of storing them at once. The runner stores them only after the page they
            describe has been committed (and fully used): a validator stored for a page that
            was then lost in a crash, or partly held back by ``lag``, would turn the next
            identical request into a 304 and hide those items.
        pending_validators: ``(url_hash, validator)`` pairs waiting to be stored.
    """

    rate_limit: RateLimitInfo | None = None
    not_modified: bool = False
    requests: int = 0
    waited_ms: int = 0
    defer_validators: bool = False
    pending_validators: list[tuple[str, Validator]] = field(default_factory=list)

    def reset_page(self) -> None:
        """Forget the per-page flags and validators (rate-limit info is kept: it is still
        the latest)."""
        self.not_modified = False
        self.pending_validators.clear()


@runtime_checkable
class BudgetGate(Protocol):
    """Grants budget tokens before a request is sent (see ``watukuy.budget``)."""

    async def acquire(
        self,
        budget: str,
        *,
        requester: str,
        lane: Lane,
        weight: float,
        cost: float,
        max_wait_ms: int,
    ) -> int:
        """Wait for ``cost`` tokens of ``budget``; returns the milliseconds waited.

        Raises:
            BudgetTimeoutError: No tokens within ``max_wait_ms``.
        """
        ...


@dataclass(frozen=True, slots=True)
class HttpScope:
    """Everything ``ctx.http`` needs to serve one lane cycle of one key.

    Attributes:
        key: The (poller, partition) being polled.
        lane: The lane (budget priority).
        store: The state store, for validators.
        lease: Returns the current lease (it changes when the keeper renews it).
        observations: Filled in by the helper, read by the runner.
        budget: Budget name of the poller, or ``None``.
        budget_weight: The poller's ``budget_weight``.
        budget_cost: The poller's default cost per request.
        max_wait_ms: Longest budget wait before ``BudgetTimeoutError``.
        gate: The engine's budget gate (``None`` when the engine has no budgets).
        clock: The engine's clock (rate-limit reset times, Retry-After dates).
        logger: Logger scoped to the key.
        on_budget_wait: Called with (budget, waited_ms) after a request had to wait.
        redaction: The engine's secrets policy (URLs in errors and logs, headers in logs).
        validators: Whether this lane sends and stores ``ETag`` / ``Last-Modified``
            validators at all. Only the live lane does: a backfill or a reconcile listing
            exists to read everything again, so a ``304`` could only hide what it is for.
        on_sending: Called, maybe more than once, when a request is about to go out, or
            is about to wait on something other than its own preparation (budget tokens, a
            free request slot). A page asked for ahead
            waits for it before its lane goes back to the page before (see
            :meth:`Fetch.sending <watukuy.runtime.fetching.Fetch.sending>`).
    """

    key: PKey
    lane: Lane
    store: StateStore
    lease: Callable[[], Lease]
    observations: HttpObservations
    budget: str | None
    budget_weight: float
    budget_cost: float
    max_wait_ms: int
    gate: BudgetGate | None
    clock: Clock
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
    on_budget_wait: Callable[[str, int], Any] = field(default=lambda budget, waited: None)
    redaction: Redaction = DEFAULT_REDACTION
    validators: bool = True
    on_sending: Callable[[], None] = field(default=lambda: None)


@runtime_checkable
class HttpFactory(Protocol):
    """Builds the ``ctx.http`` object for one lane cycle."""

    def bind(self, scope: HttpScope) -> FetchHttp:
        """Return the object ``fetch`` sees as ``ctx.http``."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP client if the factory created it."""
        ...
