"""Every error watukuy raises, under one root.

The tree::

    WatukuyError                  code varies: CIRCUIT_OPEN, NOT_RUNNING, UNKNOWN_POLLER,
    │                             UNSUPPORTED, INVALID_STATE, INVALID_PAGE, or a code below
    ├── ConfigError               CONFIG: bad poller/engine configuration or operation argument
    ├── LeaseLostError            LEASE_LOST: a fenced write met a newer lease epoch
    ├── HttpError                 HTTP: a non-2xx (other than 304) answer from ``ctx.http``
    ├── NotModifiedError          INVALID_STATE: the body of a ``304 Not Modified`` was read
    ├── StoreError                STORE: a store adapter failed; the driver error is ``__cause__``
    ├── ValidationError           VALIDATION: an item failed the schema (``on_invalid="fail"``)
    ├── HandlerError              HANDLER: wraps a handler failure when it is serialised
    ├── ReplayUnavailableError    REPLAY_UNAVAILABLE: ``replay()`` on a poller without ``log``
    └── BudgetTimeoutError        BUDGET_TIMEOUT: no budget tokens within ``max_wait``

Every error carries a stable ``code`` string; match on it (or on the class), never on the
message. :func:`~watukuy.model.redact.serialize_error` turns any exception into the JSON-safe dictionary that is
stored with retried and parked events and passed to hooks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, TypedDict

__all__ = [
    "BudgetTimeoutError",
    "ConfigError",
    "ErrorCode",
    "HandlerError",
    "HttpError",
    "LeaseLostError",
    "NotModifiedError",
    "ReplayUnavailableError",
    "SerializedError",
    "StoreError",
    "ValidationError",
    "ValidationIssue",
    "WatukuyError",
]

ErrorCode = Literal[
    "WATUKUY",
    "CONFIG",
    "LEASE_LOST",
    "HTTP",
    "STORE",
    "VALIDATION",
    "HANDLER",
    "REPLAY_UNAVAILABLE",
    "BUDGET_TIMEOUT",
    "CIRCUIT_OPEN",
    "NOT_RUNNING",
    "UNKNOWN_POLLER",
    "UNSUPPORTED",
    "INVALID_STATE",
    "INVALID_PAGE",
]


class SerializedError(TypedDict, total=False):
    """An exception reduced to JSON-safe fields (stored on outbox and parked rows)."""

    name: str
    message: str
    code: str
    stack: str
    status: int
    cause: SerializedError
    history: list[dict[str, Any]]
    issues: list[dict[str, Any]]


class ValidationIssue(TypedDict, total=False):
    """One problem found by a schema: a message and where in the item it was found."""

    message: str
    path: list[str | int]


class WatukuyError(Exception):
    """Root of every error raised by watukuy.

    Args:
        message: Human-readable description.
        code: Stable machine-readable code; defaults to the class's own code.
    """

    default_code: ClassVar[ErrorCode] = "WATUKUY"

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.code: ErrorCode = code or self.default_code


class ConfigError(WatukuyError):
    """Invalid configuration or operation argument, raised eagerly.

    The message names the offending field and the value it received, for example
    ``schedule.min: expected a duration like '5s', got 'soon'``.

    Args:
        message: What is wrong.
        field: Dotted path of the offending option, when there is one.
    """

    default_code: ClassVar[ErrorCode] = "CONFIG"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field: str | None = field


class LeaseLostError(WatukuyError):
    """A fenced write found that this process no longer holds the key's lease.

    Args:
        poller: Poller name of the key.
        partition: Partition of the key (``""`` for single-partition pollers).
        epoch: The epoch this process tried to write with.
    """

    default_code: ClassVar[ErrorCode] = "LEASE_LOST"

    def __init__(self, poller: str, partition: str, epoch: int, detail: str = "") -> None:
        where = f"{poller}/{partition}" if partition else poller
        suffix = f": {detail}" if detail else ""
        super().__init__(f"lease lost for {where} at epoch {epoch}{suffix}")
        self.poller = poller
        self.partition = partition
        self.epoch = epoch

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.poller, self.partition, self.epoch))


class NotModifiedError(WatukuyError):
    """``fetch`` read the body (``json()``, ``text``, ``content``) of a ``304 Not Modified``
    answer, which has none.

    Raised by the responses of ``ctx.http``. When it escapes ``fetch``, the lane does not
    count a failure: it reads the page as ``Page(items=[], has_more=False)``, which is what
    a ``fetch`` that checks ``response.not_modified`` returns. The listing is as it was
    when the validator was stored, so nothing is new and the cursor keeps its place. Code
    ``INVALID_STATE``.
    """

    default_code: ClassVar[ErrorCode] = "INVALID_STATE"


class HttpError(WatukuyError):
    """A non-2xx answer (other than 304 Not Modified) from ``ctx.http``.

    Attributes:
        status: HTTP status code.
        url: Absolute URL of the request, with user info and sensitive query parameters
            masked (``ctx.http`` builds it so; see :class:`~watukuy.model.redact.Redaction`).
        method: HTTP method.
        retry_after: ``Retry-After`` in seconds, when the server sent one.
        rate_limit: Parsed rate-limit headers, when present.
        problem: RFC 9457 Problem Details, when the body carried them.
        body_text: The first 64 KiB of the response body.
        is_throttle: True for 429, and for 503 with ``Retry-After``.
    """

    default_code: ClassVar[ErrorCode] = "HTTP"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        url: str,
        method: str,
        retry_after: float | None = None,
        rate_limit: Any = None,
        problem: Mapping[str, Any] | None = None,
        body_text: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.url = url
        self.method = method
        self.retry_after = retry_after
        self.rate_limit = rate_limit
        self.problem = dict(problem) if problem is not None else None
        self.body_text = body_text

    @property
    def is_throttle(self) -> bool:
        """True when the server asked us to slow down rather than failed."""
        return self.status == 429 or (self.status == 503 and self.retry_after is not None)


class StoreError(WatukuyError):
    """A store adapter failed. The driver's own exception is ``__cause__``."""

    default_code: ClassVar[ErrorCode] = "STORE"


class ValidationError(WatukuyError):
    """An item failed the poller's schema and ``on_invalid`` is ``"fail"``.

    Attributes:
        issues: The problems the schema reported.
    """

    default_code: ClassVar[ErrorCode] = "VALIDATION"

    def __init__(self, message: str, issues: Sequence[ValidationIssue] = ()) -> None:
        super().__init__(message)
        self.issues: list[ValidationIssue] = list(issues)


class HandlerError(WatukuyError):
    """Wraps a handler failure with the event id and attempt it happened on."""

    default_code: ClassVar[ErrorCode] = "HANDLER"

    def __init__(self, message: str, *, event_id: str, attempt: int) -> None:
        super().__init__(message)
        self.event_id = event_id
        self.attempt = attempt


class ReplayUnavailableError(WatukuyError):
    """``replay()`` was called on a poller that keeps no event log."""

    default_code: ClassVar[ErrorCode] = "REPLAY_UNAVAILABLE"


class BudgetTimeoutError(WatukuyError):
    """No budget tokens became available within ``max_wait``; the cycle is deferred.

    Attributes:
        budget: Name of the budget that ran dry.
    """

    default_code: ClassVar[ErrorCode] = "BUDGET_TIMEOUT"

    def __init__(self, budget: str, waited_ms: int) -> None:
        super().__init__(f"budget {budget!r} had no tokens within {waited_ms}ms")
        self.budget = budget
        self.waited_ms = waited_ms
