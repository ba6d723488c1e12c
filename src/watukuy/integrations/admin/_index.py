"""The overview's rows: paged from the key list, or sorted and filtered from a snapshot.

Two paths, so that 10,000 keys cost what one page costs:

- **By key, no status filter** (the default view): the key list (one store call) is
  filtered by poller and partition text, sliced to the page, and only the page's keys are
  read (:meth:`Backend.summary`, four calls each).
- **Sorted by another column, or filtered by status**: those need every key's state, so
  they come from a :class:`KeyIndex`, a snapshot of every key's summary rebuilt at most
  once per ``ttl``. A stale snapshot is served while the next one is built in the
  background; the page says how old it is. Below ``wait_below`` keys the default view
  keeps the snapshot fresh too (for the counts per status); above it, the default view
  never scans every key.

:class:`LagHistory` keeps the lag readings the page has taken of each key, for the charts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.model.rows import PKey

from ._backend import Backend, KeySummary

__all__ = ["SORTS", "STATUSES", "KeyIndex", "LagHistory", "Overview", "OverviewQuery"]

_log = logging.getLogger("watukuy")

STATUSES: dict[str, str] = {
    "all": "all keys",
    "problems": "needs attention",
    "overdue": "overdue",
    "open": "circuit open",
    "parked": "parked rows",
    "failing": "failing",
    "paused": "paused",
    "outbox": "outbox waiting",
    "held": "deletes held",
}
"""Status filters: value -> label."""

_FILTERS: dict[str, Callable[[KeySummary], bool]] = {
    "all": lambda row: True,
    "problems": lambda row: row.problem,
    "overdue": lambda row: row.overdue,
    "open": lambda row: row.circuit == "open",
    "parked": lambda row: row.parked > 0,
    "failing": lambda row: row.failures > 0,
    "paused": lambda row: row.paused,
    "outbox": lambda row: row.outbox > 0,
    "held": lambda row: bool(row.held_deletes),
}

_CIRCUIT_RANK = {"open": 2, "half-open": 1, "closed": 0}
_MISSING = -(2**62)

SORTS: dict[str, tuple[str, Callable[[KeySummary], Any]]] = {
    "key": ("key", lambda row: (row.key.poller, row.key.partition)),
    "status": (
        "status",
        lambda row: (row.overdue, _CIRCUIT_RANK.get(row.circuit, 0), row.parked, row.failures),
    ),
    "lag": ("lag", lambda row: _MISSING if row.lag_ms is None else row.lag_ms),
    "last_poll": ("last poll", lambda row: row.last_poll_at or _MISSING),
    "next_due": ("next due", lambda row: row.next_due_at or _MISSING),
    "outbox": ("outbox", lambda row: row.outbox),
    "parked": ("parked", lambda row: row.parked),
}
"""Sortable columns: value -> (label, sort key)."""


@dataclass(frozen=True, slots=True)
class OverviewQuery:
    """What the overview was asked for (validated query parameters)."""

    poller: str = ""
    q: str = ""
    status: str = "all"
    sort: str = "key"
    desc: bool = False
    page: int = 1

    @classmethod
    def parse(cls, params: Any) -> OverviewQuery:
        """From query parameters; unknown values fall back to the defaults."""
        status = params.get("status", "all")
        sort = params.get("sort", "key")
        try:
            page = max(1, int(params.get("page", "1")))
        except ValueError:
            page = 1
        return cls(
            poller=str(params.get("poller", ""))[:200],
            q=str(params.get("q", ""))[:200],
            status=status if status in STATUSES else "all",
            sort=sort if sort in SORTS else "key",
            desc=params.get("desc", "") in ("1", "true", "on"),
            page=page,
        )

    @property
    def fast(self) -> bool:
        """Served from the key list alone (no snapshot needed)."""
        return self.status == "all" and self.sort == "key"

    def params(self, **changes: Any) -> dict[str, str]:
        """Query parameters for a link to this view with ``changes``."""
        values = {
            "poller": self.poller,
            "q": self.q,
            "status": self.status,
            "sort": self.sort,
            "desc": "1" if self.desc else "",
            "page": str(self.page),
        }
        values.update({name: str(value) for name, value in changes.items()})
        defaults = {"status": "all", "sort": "key", "page": "1"}
        return {
            name: value for name, value in values.items() if value and defaults.get(name) != value
        }


@dataclass(frozen=True, slots=True)
class Overview:
    """One page of the overview.

    Attributes:
        rows: The page's keys.
        total: Keys matching the query.
        pages: Number of pages.
        page: This page (1-based, clamped).
        snapshot_at: When the snapshot the rows come from was taken (``None``: read now).
        counts: Keys per status filter, from the latest snapshot (``None`` until there is one).
        all_keys: Every key the page knows of.
        pollers: Poller names for the filter.
    """

    rows: list[KeySummary]
    total: int
    pages: int
    page: int
    snapshot_at: int | None
    counts: dict[str, int] | None
    all_keys: int
    pollers: list[str]


class KeyIndex:
    """Every key's summary, rebuilt at most once per ``ttl_ms``.

    Args:
        backend: Where summaries come from.
        ttl_ms: How old a snapshot may be before the next one is built.
        history: Where each scanned key's lag is recorded.
    """

    def __init__(self, backend: Backend, ttl_ms: int, history: LagHistory) -> None:
        self._backend = backend
        self._ttl_ms = ttl_ms
        self._history = history
        self._rows: list[KeySummary] | None = None
        self._counts: dict[str, int] | None = None
        self._pollers: list[str] = []
        self._taken_at = 0
        self._building: asyncio.Task[None] | None = None

    @property
    def taken_at(self) -> int | None:
        """When the current snapshot was taken (``None``: none yet)."""
        return None if self._rows is None else self._taken_at

    def counts(self) -> dict[str, int] | None:
        """Keys per status filter in the current snapshot."""
        return self._counts

    async def rows(self, *, wait: bool) -> list[KeySummary] | None:
        """The snapshot; a stale one starts a rebuild in the background.

        Args:
            wait: Without any snapshot yet, wait for the first one (otherwise ``None``
                while it is built).
        """
        now = self._backend.clock.now()
        stale = self._rows is None or now - self._taken_at >= self._ttl_ms
        if stale and (self._building is None or self._building.done()):
            self._building = asyncio.ensure_future(self._build())
            # Retrieved here, so a failure nobody waits for is not reported as unhandled.
            self._building.add_done_callback(lambda task: task.cancelled() or task.exception())
        if self._rows is None and wait and self._building is not None:
            await asyncio.shield(self._building)  # a failed first build raises here
        return self._rows

    def invalidate(self) -> None:
        """Make the next read rebuild (after an action changed a key)."""
        self._taken_at = -(2**62)

    async def close(self) -> None:
        """Stop a build in progress."""
        if self._building is not None and not self._building.done():
            self._building.cancel()
            with contextlib.suppress(BaseException):
                await self._building

    async def _build(self) -> None:
        try:
            await self._scan()
        except Exception as error:
            if self._rows is None:
                raise  # the request waiting for the first snapshot reports it
            # A stale snapshot stays in use; the next stale read tries again.
            _log.warning("admin page: rebuilding the key snapshot failed: %s", error)

    async def _scan(self) -> None:
        backend = self._backend
        now = backend.clock.now()
        keys = await backend.keys()
        rows = await backend.summaries(keys, now)
        for row in rows:
            self._history.record(row.key, now, row.lag_ms)
        self._counts = {
            name: sum(1 for row in rows if test(row)) for name, test in _FILTERS.items()
        }
        self._pollers = backend.pollers(keys)
        self._rows = rows
        self._taken_at = now

    async def page(
        self, query: OverviewQuery, page_size: int, *, wait_below: int = 2_000
    ) -> Overview:
        """One page of the overview for ``query``.

        Args:
            query: The view asked for.
            page_size: Rows per page.
            wait_below: With fewer keys than this, the first snapshot is waited for, so a
                small installation never sees "counting...".
        """
        backend = self._backend
        now = backend.clock.now()
        if query.fast:
            keys = await backend.keys()
            wait = len(keys) < wait_below
            filtered = bool(query.poller or query.q)
            matching = [key for key in keys if _matches(key, query)] if filtered else keys
            start, pages, page = _slice(len(matching), query.page, page_size)
            chosen = matching[start : start + page_size]
            rows = await backend.summaries(chosen, now)
            for row in rows:
                self._history.record(row.key, now, row.lag_ms)
            if wait:
                # Counts stay fresh for a small installation; a large one rebuilds its
                # snapshot only when a view needs it (sorted, filtered, the parked page).
                await self.rows(wait=True)
            return Overview(
                rows,
                len(matching),
                pages,
                page,
                None,
                self.counts(),
                len(keys),
                backend.pollers(keys),
            )
        snapshot = await self.rows(wait=True)
        assert snapshot is not None
        test = _FILTERS[query.status]
        filtered = bool(query.poller or query.q) or query.status != "all"
        selected = (
            [row for row in snapshot if _matches(row.key, query) and test(row)]
            if filtered
            else list(snapshot)
        )
        _, sort_key = SORTS[query.sort]
        selected.sort(key=sort_key, reverse=query.desc)
        start, pages, page = _slice(len(selected), query.page, page_size)
        return Overview(
            selected[start : start + page_size],
            len(selected),
            pages,
            page,
            self.taken_at,
            self.counts(),
            len(snapshot),
            self._pollers,
        )


def _matches(key: PKey, query: OverviewQuery) -> bool:
    if query.poller and key.poller != query.poller:
        return False
    return not query.q or query.q.lower() in key.partition.lower() or query.q == key.poller


def _slice(total: int, page: int, size: int) -> tuple[int, int, int]:
    pages = max(1, -(-total // size))
    page = min(page, pages)
    return (page - 1) * size, pages, page


class LagHistory:
    """The lag readings the page has taken of each key (a bounded ring per key).

    The store keeps no history of lag, so the chart of a key starts when the page first
    reads it (an overview refresh, the key's page, a snapshot) and shows the latest
    ``points`` readings, at most one per ``spacing_ms``.

    Args:
        points: Readings kept per key.
        keys: Keys kept (the least recently read are forgotten first).
        spacing_ms: Readings closer together than this are merged into the later one.
    """

    def __init__(self, points: int = 120, keys: int = 20_000, spacing_ms: int = 1_000) -> None:
        self._points = points
        self._keys = keys
        self._spacing_ms = spacing_ms
        self._data: OrderedDict[PKey, deque[tuple[int, int]]] = OrderedDict()

    def record(self, key: PKey, at: int, lag_ms: int | None) -> None:
        """Remember one reading (``None`` lags are not charted)."""
        if lag_ms is None:
            return
        ring = self._data.get(key)
        if ring is None:
            ring = self._data[key] = deque(maxlen=self._points)
            while len(self._data) > self._keys:
                self._data.popitem(last=False)
        else:
            self._data.move_to_end(key)
        if ring and at - ring[-1][0] < self._spacing_ms:
            ring[-1] = (at, lag_ms)
        else:
            ring.append((at, lag_ms))

    def readings(self, key: PKey) -> Sequence[tuple[int, int]]:
        """The key's readings, oldest first."""
        return list(self._data.get(key, ()))
