"""The configurations a conformance run can put a poller in, and which of them are open.

A :class:`ConformanceConfig` is one poller set-up (strategy and options) together with the
vendor behaviours that set-up must survive. :data:`CONFIGS` is the named matrix the test
tier and the long sweep walk; :data:`KNOWN_OPEN` names the configurations that still find
a known defect, with the defect, so that the test tier leaves them to the sweep until the
fix lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from watukuy.cursor.lookback import LOOKBACK_FLOOR_MS

__all__ = [
    "CONFIGS",
    "KNOWN_OPEN",
    "OPEN_DEFECTS",
    "ChangeKey",
    "ConformanceConfig",
    "Fault",
    "Op",
    "Strategy",
    "config_named",
    "known_open",
]

Strategy = Literal["timestamp", "token", "page", "snapshot_diff", "custom"]
ChangeKey = Literal["hash", "counter", "value"]
"""How the poller tells versions apart: the content hash of the whole item (``"hash"``),
the item's own ``version`` counter (``"counter"``), or a fingerprint of ``value`` only
(``"value"``: states can return, ``open -> closed -> open``)."""

Op = Literal["reset", "reset_clear", "backfill", "backfill_force"]
"""Operator actions between ticks: ``reset_cursor(None)``, the same with
``clear_snapshot=True``, ``backfill(None)`` (from the very beginning) and
``backfill(None, force=True)``."""

Fault = Literal["429", "500", "empty", "bad"]
"""Vendor misbehaviour on one request: a throttle, a server error, a ``200`` with an empty
list (an outage that lies), or an item of the answer without its ``id``."""

FULL_LISTING: Final = frozenset({"snapshot_diff"})


@dataclass(frozen=True, slots=True)
class ConformanceConfig:
    """One poller set-up and the vendor behaviours it is held to.

    Args:
        name: Short name used on the command line and in reports.
        strategy: The cursor strategy.
        tie_break: Timestamp cursor: filter ties by id (``after_id``); otherwise only
            ``overlap`` copes with a page boundary inside a run of equal timestamps, and
            the vendor keeps such runs shorter than a page.
        lag_ms: Timestamp cursor ``lag``.
        overlap_ms: Timestamp cursor ``overlap``.
        lookback: Timestamp cursor with no ``overlap`` at all: its default lookback. Late
            changes are then commits that land up to half its first window after their
            stamp (``now - d``), visible at once, as a database's slow transactions are.
        initial_now: Timestamp cursor ``initial`` is the start of the run (history exists
            before it); the plan then backfills from ``None`` at some point.
        etags: The vendor sends ``ETag`` and answers ``304`` to a matching
            ``If-None-Match``.
        page_size: Items per page of every listing.
        page_cap: ``max_pages_per_cycle``.
        reconcile: Incremental strategies get a reconcile listing (numbered pages), which
            makes deletes observable.
        change_key: How versions are told apart (see :data:`ChangeKey`).
        ops: Operator actions the plan may take between ticks.
        faults: Vendor faults the plan may inject.
        kills: Whether the plan kills the process (at store kill points and mid-request).
        late: Whether the vendor makes changes visible late (stamped up to the covered
            window in the past); only where ``lag`` or ``overlap`` promise to cover it.
        items: Items in the vendor before the first step.
        id_pool: How many distinct ids the vendor draws from (ids are reused after a
            delete, and new ids land anywhere in the id order, so offset pages shift).
        shifts: Inserts and deletes may land between two requests of a cycle, shifting
            numbered pages under it; without, they wait for the end of the tick.
        odd_ids: Every third id carries a NUL, ``|``, ``\\``, an accent and an emoji.
        verify: Full listings ask ``Deletes(verify=)`` (``GET /items/one``, ``404`` means
            gone) before a delete.
        concurrency: ``delivery.concurrency``.
        consumers: How many consumers the engine has: ``1``, the default one; ``2`` adds
            a second, ``"mirror"``, that fails the first attempt of about a third of the
            events. The oracle holds each consumer to everything it holds one to, on its
            own deliveries.
    """

    name: str
    strategy: Strategy
    tie_break: bool = True
    lag_ms: int = 0
    overlap_ms: int = 0
    lookback: bool = False
    initial_now: bool = False
    etags: bool = False
    page_size: int = 3
    page_cap: int = 50
    reconcile: bool = False
    change_key: ChangeKey = "hash"
    ops: tuple[Op, ...] = ()
    faults: tuple[Fault, ...] = ("429", "500")
    kills: bool = True
    late: bool = False
    items: int = 8
    id_pool: int = 14
    shifts: bool = True
    odd_ids: bool = False
    verify: bool = False
    concurrency: int = 2
    consumers: int = 1

    @property
    def full_listing(self) -> bool:
        """Every live cycle lists everything (a snapshot diff)."""
        return self.strategy in FULL_LISTING

    @property
    def deletes_observable(self) -> bool:
        """Whether the poller can see deletes: a full listing, or a reconcile listing."""
        return self.full_listing or self.reconcile

    @property
    def late_window_ms(self) -> int:
        """How far in the past a late change may be stamped and still be promised: strictly
        inside ``lag`` or ``overlap`` (0: no late changes)."""
        if self.strategy != "timestamp" or not self.late:
            return 0
        if self.lookback:
            return LOOKBACK_FLOOR_MS // 2 - 1
        return max(self.lag_ms, self.overlap_ms) - 1 if max(self.lag_ms, self.overlap_ms) else 0


def _c(name: str, strategy: Strategy, **options: object) -> ConformanceConfig:
    return ConformanceConfig(name, strategy, **options)  # type: ignore[arg-type]


_OPS_INCREMENTAL: Final[tuple[Op, ...]] = ("reset", "reset_clear")

CONFIGS: Final[tuple[ConformanceConfig, ...]] = (
    # --- timestamp ---------------------------------------------------------------------
    _c("ts", "timestamp"),
    _c("ts-lag", "timestamp", lag_ms=1_500, late=True),
    _c("ts-overlap", "timestamp", overlap_ms=2_000, late=True),
    _c("ts-overlap-notie", "timestamp", overlap_ms=2_000, tie_break=False, late=True),
    _c("ts-lag-overlap", "timestamp", lag_ms=1_000, overlap_ms=2_000, late=True),
    _c("ts-default", "timestamp", lookback=True, late=True),
    _c("ts-default-notie", "timestamp", lookback=True, tie_break=False, late=True),
    _c("ts-cap", "timestamp", page_cap=1, lag_ms=500),
    _c("ts-etag", "timestamp", etags=True, lag_ms=500),
    _c("ts-etag-overlap", "timestamp", etags=True, overlap_ms=2_000, late=True),
    _c("ts-reconcile", "timestamp", reconcile=True, lag_ms=500),
    _c("ts-reconcile-still", "timestamp", reconcile=True, lag_ms=500, shifts=False),
    _c("ts-reconcile-cap", "timestamp", reconcile=True, page_cap=2, shifts=False),
    _c("ts-ops", "timestamp", ops=(*_OPS_INCREMENTAL, "backfill", "backfill_force")),
    _c("ts-ops-etag", "timestamp", etags=True, ops=(*_OPS_INCREMENTAL, "backfill_force")),
    _c("ts-ops-reconcile", "timestamp", reconcile=True, ops=("reset_clear",)),
    _c("ts-initial-now", "timestamp", initial_now=True, ops=("backfill",), items=12),
    _c("ts-value", "timestamp", change_key="value"),
    _c("ts-counter", "timestamp", change_key="counter", lag_ms=500),
    _c("ts-odd-ids", "timestamp", odd_ids=True, reconcile=True, shifts=False),
    _c("ts-two-consumers", "timestamp", consumers=2, reconcile=True, lag_ms=500),
    # --- token -------------------------------------------------------------------------
    _c("token", "token"),
    _c("token-cap", "token", page_cap=2),
    _c("token-etag", "token", etags=True),
    _c("token-reconcile", "token", reconcile=True),
    _c("token-ops", "token", ops=_OPS_INCREMENTAL),
    _c("token-value", "token", change_key="value"),
    _c("token-odd-ids", "token", odd_ids=True),
    _c("token-two-consumers", "token", consumers=2, ops=_OPS_INCREMENTAL),
    # --- page --------------------------------------------------------------------------
    _c("page", "page"),
    _c("page-cap", "page", page_cap=2),
    _c("page-etag", "page", etags=True),
    _c("page-reconcile", "page", reconcile=True),
    _c("page-reconcile-still", "page", reconcile=True, shifts=False),
    _c("page-reconcile-verify", "page", reconcile=True, verify=True),
    _c("page-ops", "page", ops=_OPS_INCREMENTAL),
    # --- snapshot diff -----------------------------------------------------------------
    _c("snapshot", "snapshot_diff"),
    _c("snapshot-still", "snapshot_diff", shifts=False),
    _c("snapshot-verify", "snapshot_diff", verify=True),
    _c("snapshot-verify-cap", "snapshot_diff", verify=True, page_cap=2),
    _c("snapshot-verify-empty", "snapshot_diff", verify=True, faults=("500", "empty", "bad")),
    _c("snapshot-still-etag", "snapshot_diff", shifts=False, etags=True),
    _c("snapshot-still-counter", "snapshot_diff", shifts=False, change_key="counter"),
    _c("snapshot-still-ops", "snapshot_diff", shifts=False, ops=("reset_clear",)),
    _c("snapshot-still-odd-ids", "snapshot_diff", shifts=False, odd_ids=True),
    _c("snapshot-cap", "snapshot_diff", page_cap=2, shifts=False),
    _c("snapshot-etag", "snapshot_diff", etags=True),
    _c("snapshot-empty", "snapshot_diff", faults=("500", "empty"), shifts=False),
    _c("snapshot-bad", "snapshot_diff", faults=("500", "bad"), shifts=False),
    _c("snapshot-ops", "snapshot_diff", ops=("reset_clear",)),
    _c("snapshot-value", "snapshot_diff", change_key="value", shifts=False),
    _c("snapshot-counter", "snapshot_diff", change_key="counter"),
    _c("snapshot-two-consumers", "snapshot_diff", consumers=2, verify=True),
    # --- custom ------------------------------------------------------------------------
    _c("custom", "custom"),
    _c("custom-reconcile", "custom", reconcile=True),
    _c("custom-reconcile-still", "custom", reconcile=True, shifts=False),
    _c("custom-etag", "custom", etags=True),
    _c("custom-cap", "custom", page_cap=1),
)
"""The named configurations (``python -m watukuy.testing.conformance --list``)."""

OPEN_DEFECTS: Final[dict[str, str]] = {
    "recreated-between-cycles": (
        "snapshot-cap (a pass spread over cycles): an item deleted, created again and deleted "
        "again while passes read the listing ends with a live item reported deleted and "
        "created again under a new id; seen on the code before the per-identity proofs too, "
        "not yet told apart from the delete-and-re-create histories "
        "https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing "
        "leaves to verify="
    ),
}
"""Defects found and not fixed yet: label -> what breaks."""

KNOWN_OPEN: Final[dict[str, str]] = {}
"""Configuration name -> the open defect (a key of :data:`OPEN_DEFECTS`) it finds on
today's code, with ``@store`` when it shows on one store only. The test tier leaves these
to the long sweep until the fix lands."""


def known_open(name: str, store: str) -> str | None:
    """The open defect configuration ``name`` finds on ``store`` (``"memory"``,
    ``"sqlite"``, ``"postgres"``, ``"redis"``), or ``None``."""
    entry = KNOWN_OPEN.get(name)
    if entry is None:
        return None
    defect, _, only = entry.partition("@")
    return defect if not only or only == store else None


def config_named(name: str) -> ConformanceConfig:
    """The configuration called ``name``.

    Raises:
        KeyError: No configuration has that name (the message lists them).
    """
    for config in CONFIGS:
        if config.name == name:
            return config
    names = ", ".join(config.name for config in CONFIGS)
    raise KeyError(f"no conformance configuration {name!r}; expected one of: {names}")
