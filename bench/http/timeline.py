"""One initial sync of the engine, timed from the inside: where its wall time goes.

The vendor (:mod:`bench.http.vendor`) runs in its own process; the engine's sync
(:mod:`bench.http.engine_child`, on SQLite) runs in this one with timers around four
places: each ``fetch`` call (from the creation of its task to its result), each request of
``ctx.http``, each call on the SQLite store's worker thread (by name) and each wait of the
event loop in ``epoll``. It prints:

* wall and CPU (every thread of the process), what the process wrote to storage, and the
  connections the vendor accepted;
* the worker thread's seconds per call name (``commit_poll``, ``ack_events``, ...);
* the loop's idle time, split by what was running meanwhile: a SQLite call, an HTTP
  request, or neither;
* the prefetch's overlap: how much of the commits' time had the next page's fetch in
  flight, and how long no fetch was in flight between two pages;
* with ``--pages``, one line per page: when each step of its request came (the ``fetch``
  call made, ``ctx.http`` called, stored validators read, a connection taken, the request
  written, the answer's head and body, the page returned, the lane taking it up), each in
  milliseconds after the one before, and the event loop's longest busy stretch meanwhile:
  what stands between one page's answer and the next page's request.

The timers wrap private functions of watukuy (``Fetch.__init__`` in
``watukuy.runtime.fetching``, ``HttpClient.request`` and ``_add_conditions``,
``AsyncioTransport._acquire`` and ``_exchange``, ``LaneCycle._select``,
``SqliteStore._in_worker`` and ``SqliteStore._commit``): a change there fails here with
an ``AttributeError``, not with a wrong figure. The figures are the CPU's and the disk's of
a shared machine: compare runs made one after the other, not with figures from another
day.

Run: ``python -m bench.http.timeline --shape stdlib --items 20000 [--latency-ms 50]
[--no-prefetch] [--pages]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import resource
import selectors
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._proc import VendorProcess
from ._workload import SHAPES

Span = tuple[float, float]

# The page whose fetch task runs: a task copies the context it was created in.
_PAGE: contextvars.ContextVar[int] = contextvars.ContextVar("page", default=0)


class Timeline:
    """Intervals (milliseconds since the timeline began) of what the engine did."""

    def __init__(self) -> None:
        self._origin = time.perf_counter()
        self.fetches: dict[int, list[float]] = {}
        self.requests: list[Span] = []
        self.commits: list[Span] = []
        self.sqlite_calls: list[Span] = []
        self.sqlite_by_name: defaultdict[str, float] = defaultdict(float)
        self.idle: list[Span] = []
        self.marks: defaultdict[int, dict[str, float]] = defaultdict(dict)
        """Per page: when each step of its request happened (see :meth:`install`)."""

    def now(self) -> float:
        return (time.perf_counter() - self._origin) * 1000

    def mark(self, name: str, page: int | None = None) -> None:
        """Note when ``name`` happened to ``page`` (the running fetch task's by default);
        the first time counts."""
        self.marks[_PAGE.get() if page is None else page].setdefault(name, self.now())

    def install(self) -> None:
        """Wrap the engine's functions named in the module docstring, and the selector."""
        from watukuy.http import _transport
        from watukuy.http._client import HttpClient
        from watukuy.runtime import fetching
        from watukuy.runtime.lane import LaneCycle
        from watukuy.stores.sqlite import SqliteStore

        timeline = self
        fetch_init = fetching.Fetch.__init__

        def init(fetch: Any, ctx: Any, *args: Any, **options: Any) -> None:
            times = timeline.fetches[ctx.page] = [timeline.now()]
            timeline.mark("created", ctx.page)
            token = _PAGE.set(ctx.page)
            try:
                fetch_init(fetch, ctx, *args, **options)
            finally:
                _PAGE.reset(token)
            fetch.task.add_done_callback(lambda _: times.append(timeline.now()))
            fetch.task.add_done_callback(lambda _: timeline.mark("done", ctx.page))

        def wrap_async(owner: Any, name: str, before: str, after: str) -> None:
            original = getattr(owner, name)

            async def wrapped(*args: Any, **options: Any) -> Any:
                timeline.mark(before)
                try:
                    return await original(*args, **options)
                finally:
                    timeline.mark(after)

            setattr(owner, name, wrapped)

        wrap_async(HttpClient, "_add_conditions", "validators", "validated")
        wrap_async(_transport.AsyncioTransport, "_acquire", "acquire", "acquired")
        wrap_async(_transport.AsyncioTransport, "_exchange", "sent", "head")
        select_items = LaneCycle._select

        def timed_select_items(lane: Any, cursor: Any, page: Any, fetch: Any) -> Any:
            timeline.mark("used", fetch.ctx.page)
            return select_items(lane, cursor, page, fetch)

        LaneCycle._select = timed_select_items  # type: ignore[method-assign]

        request = HttpClient.request

        async def timed_request(client: Any, *args: Any, **options: Any) -> Any:
            started = timeline.now()
            timeline.mark("request")
            try:
                return await request(client, *args, **options)
            finally:
                timeline.requests.append((started, timeline.now()))
                timeline.mark("answered")

        in_worker = SqliteStore._in_worker

        def timed_worker(store: Any, what: str, fn: Callable[..., Any], args: Any) -> Any:
            started = timeline.now()
            try:
                return in_worker(store, what, fn, args)
            finally:
                ended = timeline.now()
                timeline.sqlite_calls.append((started, ended))
                timeline.sqlite_by_name[what] += ended - started
                if what == "commit_poll":
                    timeline.commits.append((started, ended))

        select = selectors.EpollSelector.select

        def timed_select(selector: Any, timeout: float | None = None) -> Any:
            started = timeline.now()
            try:
                return select(selector, timeout)
            finally:
                timeline.idle.append((started, timeline.now()))

        fetching.Fetch.__init__ = init  # type: ignore[method-assign,assignment]
        HttpClient.request = timed_request  # type: ignore[method-assign,assignment]
        SqliteStore._in_worker = timed_worker  # type: ignore[method-assign,assignment]
        selectors.EpollSelector.select = timed_select  # type: ignore[method-assign,assignment]


def _covered(span: Span, others: list[Span]) -> float:
    """The length of ``span`` covered by the union of ``others``."""
    parts = sorted(
        (max(span[0], a), min(span[1], b)) for a, b in others if min(span[1], b) > max(span[0], a)
    )
    total, end = 0.0, float("-inf")
    for start, stop in parts:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def report(timeline: Timeline, wall: float, cpu: float, written: float, connections: int) -> None:
    """Print the figures listed in the module docstring."""
    pages = sorted(page for page, times in timeline.fetches.items() if len(times) == 2)
    spans = [(timeline.fetches[page][0], timeline.fetches[page][1]) for page in pages]
    idle = sum(b - a for a, b in timeline.idle)
    on_sqlite = sum(_covered(span, timeline.sqlite_calls) for span in timeline.idle)
    on_http = sum(_covered(span, timeline.requests) for span in timeline.idle)
    on_either = sum(
        _covered(span, timeline.sqlite_calls + timeline.requests) for span in timeline.idle
    )
    commits = sum(b - a for a, b in timeline.commits)
    overlapped = sum(_covered(span, spans) for span in timeline.commits)
    gaps = [spans[i + 1][0] - spans[i][1] for i in range(len(spans) - 1)]
    print(
        f"wall {wall:.0f} ms, cpu {cpu:.0f} ms (every thread), written {written:.1f} MB, "
        f"{len(pages)} pages, {len(timeline.requests)} requests, "
        f"{connections} connections at the vendor"
    )
    print("sqlite worker thread, ms per call name:")
    for name, ms in sorted(timeline.sqlite_by_name.items(), key=lambda row: -row[1]):
        print(f"  {name:<24} {ms:8.0f}")
    print(
        f"event loop idle in epoll: {idle:.0f} ms; while a SQLite call ran {on_sqlite:.0f} ms, "
        f"while an HTTP request ran {on_http:.0f} ms, while neither ran {idle - on_either:.0f} ms"
    )
    print(
        f"fetch calls: {sum(b - a for a, b in spans):.0f} ms in flight, HTTP requests "
        f"{sum(b - a for a, b in timeline.requests):.0f} ms; no fetch in flight between two "
        f"pages: {sum(gaps):.0f} ms in all"
    )
    print(
        f"commits: {commits:.0f} ms on the worker thread, {overlapped:.0f} ms of it with a "
        f"fetch in flight (the prefetch's overlap)"
    )


_STEPS = (
    "created",
    "request",
    "validators",
    "validated",
    "acquire",
    "acquired",
    "sent",
    "head",
    "answered",
    "done",
    "used",
)


def report_pages(timeline: Timeline) -> None:
    """One line per page: when each step of its request came, in ms after the one before
    (``-`` for a step it did not take), and the loop's longest busy stretch meanwhile."""
    busy = [(a[1], b[0]) for a, b in zip(timeline.idle, timeline.idle[1:], strict=False)]
    header = "".join(f"{step[:9]:>10}" for step in _STEPS)
    print("per page, ms after the step before (created: after the page before was used):")
    print(f"{'page':>5}{header}{'busy max':>10}")
    used = 0.0
    for page in sorted(timeline.marks):
        marks = timeline.marks[page]
        if not page:
            continue
        row, last = [], used
        for step in _STEPS:
            at = marks.get(step)
            row.append("-" if at is None else f"{at - last:.1f}")
            last = at if at is not None else last
        start, end = marks.get("created", 0.0), marks.get("used", 0.0)
        longest = max((b - a for a, b in busy if a < end and b > start), default=0.0)
        used = marks.get("used", used)
        print(f"{page:>5}" + "".join(f"{cell:>10}" for cell in row) + f"{longest:10.1f}")
    pages = [page for page in sorted(timeline.marks) if page]
    gaps = [
        timeline.marks[page + 1]["sent"] - timeline.marks[page]["done"]
        for page in pages
        if "done" in timeline.marks[page] and "sent" in timeline.marks.get(page + 1, {})
    ]
    periods = [
        timeline.marks[page + 1]["used"] - timeline.marks[page]["used"]
        for page in pages[1:]
        if "used" in timeline.marks[page] and "used" in timeline.marks.get(page + 1, {})
    ]
    if gaps and periods:
        print(
            f"medians: page returned -> next request written {statistics.median(gaps):.1f} ms; "
            f"one page to the next (from page 2) {statistics.median(periods):.1f} ms"
        )


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run the vendor and one timed sync, print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.http.timeline")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="stdlib")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-prefetch", action="store_true")
    parser.add_argument("--pages", action="store_true", help="print a line per page")
    args = parser.parse_args(argv)
    from . import engine_child

    timeline = Timeline()
    timeline.install()
    with (
        VendorProcess(args.items, args.latency_ms, shape=args.shape) as vendor,
        tempfile.TemporaryDirectory() as tmp,
    ):
        before = vendor.connections()
        child = [
            "sync",
            "--url",
            vendor.url,
            "--shape",
            args.shape,
            "--sqlite",
            str(Path(tmp) / "engine.db"),
        ]
        if args.no_prefetch:
            child.append("--no-prefetch")
        blocks = resource.getrusage(resource.RUSAGE_SELF).ru_oublock
        cpu = time.process_time()
        started = timeline.now()
        out = asyncio.run(engine_child.run(engine_child.parse(child)))
        wall = timeline.now() - started
        cpu = (time.process_time() - cpu) * 1000
        blocks = resource.getrusage(resource.RUSAGE_SELF).ru_oublock - blocks
        connections = vendor.connections() - before - 1
    print(f"items {out['items']:,}, events {out['events']:,}, delivered {out['delivered']:,}")
    report(timeline, wall, cpu, blocks * 512 / 1e6, connections)
    if args.pages:
        report_pages(timeline)


if __name__ == "__main__":
    main()
