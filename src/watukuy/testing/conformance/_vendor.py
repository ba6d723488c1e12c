"""The reference vendor: a :class:`FakeApi` dataset that changes while it is read, and keeps
its own history as the oracle's ground truth.

Every request passes through :meth:`Vendor.handle` (an ``httpx.MockTransport`` handler).
Before answering it takes the plan's request-level steps (changes, kill arms, and the fate
of this request), then answers from the FakeApi listings:

- ``GET /items?since=&after_id=&limit=`` keyset over ``(updated_at, id)``;
- ``GET /items/token?cursor=&limit=`` id order, opaque tokens (no shift);
- ``GET /items/page?page=&page_size=`` id order, numbered pages (a delete or an insert
  before the position shifts what the next page holds);
- ``GET /items/one?id=`` one item, or ``404`` (what ``Deletes(verify=)`` asks).

With ETags on, a ``200`` carries a strong ``ETag`` of its body and a matching
``If-None-Match`` gets ``304``. The vendor knows the body behind every answer, 304s
included, so the oracle knows whether a cycle really reached the end of the listing.

Stamps. A write is stamped ``max(now, newest stamp already served + 1 ms)``: the vendor
never writes behind what it has shown, so a keyset reader cannot miss a write except a
*late* one. A late write is stamped ``d`` ms in the past, only where the poller promises to
cover it: inside ``lag`` (stamped ``now - d``; the watermark never passes ``now - lag``),
or inside ``overlap`` (stamped ``newest served - d``, and applied after the current tick so
that the next cycle's overlapped first request covers it), or, with the default lookback,
as a slow commit (stamped ``now - d`` with ``d`` under half its first window, visible at
once: the first cycle that starts after it re-reads it). A configuration without
``shifts`` holds inserts and deletes that arrive during a tick until it ends (updates still
land between any two requests): offset pages then never shift under a cycle. Without a tie-break, no more
than ``page_size - 1`` writes share one stamp (a longer run cannot be paged by a plain
``>=`` filter, which is a documented limit, not a defect).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from watukuy.model import json as wkjson
from watukuy.model.events import iso_time
from watukuy.testing.clock import VirtualClock
from watukuy.testing.fake_api import FakeApi
from watukuy.testing.fake_api._items import parse_instant

from ._config import ConformanceConfig
from ._plan import Step

__all__ = ["BASE_URL", "Cycle", "RequestRecord", "Vendor", "Version"]

BASE_URL: Final = "https://vendor.test"


@dataclass(slots=True)
class Version:
    """One write of one item: its data (``None`` for a delete) and when it was visible.

    ``gap`` is the number of the first request that can see it; ``until`` the number of
    the first request that sees the next write of the item (``None``: still current).
    """

    identity: str
    rev: int
    data: dict[str, Any] | None
    gap: int
    stamp_ms: int
    until: int | None = None

    @property
    def deleted(self) -> bool:
        """A delete, not a version of the item."""
        return self.data is None

    def visible_through(self, first: int, last: int) -> bool:
        """Visible to every request from ``first`` to ``last``."""
        return self.gap <= first and (self.until is None or self.until > last)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as the vendor saw it."""

    number: int
    lane: str
    route: str
    params: dict[str, str]
    status: int
    items: tuple[tuple[str, int], ...]
    end: bool
    at: int
    instance: str
    fault: str | None = None

    @property
    def starts_listing(self) -> bool:
        """Asks for the first page of an id-ordered listing."""
        if self.route == "page":
            return self.params.get("page") == "1"
        if self.route == "token":
            return "cursor" not in self.params
        return False


@dataclass(slots=True)
class Cycle:
    """One lane cycle between ``on_poll_start`` and ``on_poll_end`` of one process."""

    lane: str
    instance: str
    started_at: int
    first: int
    last: int = 0
    failed: bool = False
    truncated: bool = False
    ended: bool = False


@dataclass(slots=True)
class Feed:
    """The plan, consumed in order by the driver and by the vendor."""

    steps: list[Step]
    position: int = 0
    deferred: list[Step] = field(default_factory=list)

    def peek(self) -> Step | None:
        """The next step, not taken."""
        return self.steps[self.position] if self.position < len(self.steps) else None

    def take(self) -> Step | None:
        """The next step, taken."""
        step = self.peek()
        if step is not None:
            self.position += 1
        return step


class Vendor:
    """The changing API and its history (see the module docstring).

    Args:
        config: The configuration under test.
        clock: The run's clock.
        feed: The plan, shared with the driver.
        on_kill: Called when a ``K`` step kills the process during a request; it must
            raise (the process dies in the middle of the request).
        arm: Arms a store kill point in the current process.
    """

    def __init__(
        self,
        config: ConformanceConfig,
        clock: VirtualClock,
        feed: Feed,
        *,
        on_kill: Callable[[int], None],
        arm: Callable[[str], None],
    ) -> None:
        self.config = config
        self.clock = clock
        self.feed = feed
        self.api = FakeApi(clock, page_size=config.page_size, base_url=BASE_URL, log_limit=1)
        self._on_kill = on_kill
        self._arm = arm
        self.requests: list[RequestRecord] = []
        self.history: dict[str, list[Version]] = {}
        self.cycles: list[Cycle] = []
        self.current: Cycle | None = None
        self.lane = "live"
        self.instance = ""
        self.rev = 0
        self.counters: dict[str, int] = {}
        self.served_max_ms = -1
        self._stamp_uses: dict[int, int] = {}
        self.pending_fault: str | None = None
        self.writes = 0
        self.deletes = 0
        self.faults: dict[str, int] = {}

    # --- the transport ----------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        """The in-process transport every request of the engine goes through."""
        return httpx.MockTransport(self.handle)

    @property
    def next_request(self) -> int:
        """The number the next request will get."""
        return len(self.requests) + 1

    async def handle(self, request: httpx.Request) -> httpx.Response:
        """Take this request's steps, then answer it."""
        fate = self.pending_fault
        self.pending_fault = None
        while fate is None:
            step = self.feed.peek()
            if step is None or step.between_ticks:
                break
            self.feed.take()
            if step.consumes_request:
                fate = "kill" if step.kind == "kill" else step.name or "pass"
            else:
                self.apply(step, request_level=True)
        number = self.next_request
        route = {
            "/items": "since",
            "/items/token": "token",
            "/items/page": "page",
            "/items/one": "one",
        }.get(request.url.path, "?")
        params = dict(request.url.params)
        if fate == "kill":
            self._record(number, route, params, 0, [], end=False)
            self._on_kill(number)
        if fate in ("429", "500"):
            self.faults[fate] = self.faults.get(fate, 0) + 1
            self._record(number, route, params, int(fate), [], end=False)
            headers = {"retry-after": "1"} if fate == "429" else {}
            return httpx.Response(int(fate), headers=headers, json={"title": f"fault {fate}"})
        if route == "one":
            item = self.api.get(params.get("id", ""))
            self._record(number, route, params, 200 if item else 404, [], end=True)
            if item is None:
                return httpx.Response(404, json={"title": "no such item"})
            return httpx.Response(200, json=item)
        body, items, end = self._listing(route, params)
        if fate in ("empty", "bad"):
            self.faults[fate] = self.faults.get(fate, 0) + 1
            body = self._corrupt(body, fate)
        content = wkjson.dumps(body).encode()
        headers = {"content-type": "application/json"}
        status = 200
        if self.config.etags:
            etag = '"' + hashlib.sha256(content).hexdigest()[:24] + '"'
            headers["etag"] = etag
            if request.headers.get("if-none-match") == etag:
                status = 304
        fault = fate if fate in ("empty", "bad") else None
        self._record(number, route, params, status, items, end=end, fault=fault)
        if status == 304:
            return httpx.Response(304, headers={"etag": headers["etag"]})
        return httpx.Response(200, headers=headers, content=content)

    def _listing(
        self, route: str, params: dict[str, str]
    ) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
        size = int(params.get("limit") or params.get("page_size") or self.config.page_size)
        if route == "since":
            since = self.api.list_since(params.get("since"), params.get("after_id"), size)
            body: dict[str, Any] = {"data": since.data, "has_more": since.has_more}
            return body, since.data, not since.has_more
        if route == "token":
            token = self.api.list_token(params.get("cursor"), size)
            return {"data": token.data, "next": token.next}, token.data, token.next is None
        if route == "page":
            page = self.api.list_page(int(params.get("page", "1")), size)
            body = {"data": page.data, "page": page.page, "has_more": page.has_more}
            return body, page.data, not page.has_more
        raise ValueError(f"the conformance vendor has no route {route!r}")

    @staticmethod
    def _corrupt(body: dict[str, Any], fate: str) -> dict[str, Any]:
        if fate == "empty":
            body = {**body, "data": []}
            if "has_more" in body:
                body["has_more"] = False
            if "next" in body:
                body["next"] = None
            return body
        data = [dict(item) for item in body["data"]]
        if data:
            del data[0]["id"]
        return {**body, "data": data}

    def _record(
        self,
        number: int,
        route: str,
        params: dict[str, str],
        status: int,
        items: list[dict[str, Any]],
        *,
        end: bool,
        fault: str | None = None,
    ) -> None:
        for item in items:
            micros = parse_instant(item.get("updated_at"))
            if micros is not None:
                self.served_max_ms = max(self.served_max_ms, micros // 1000)
        self.requests.append(
            RequestRecord(
                number=number,
                lane=self.lane,
                route=route,
                params=params,
                status=status,
                items=tuple((str(item["id"]), int(item["rev"])) for item in items),
                end=end,
                at=self.clock.now(),
                instance=self.instance,
                fault=fault,
            )
        )

    # --- changes ----------------------------------------------------------------------------

    def apply(self, step: Step, *, request_level: bool = False) -> None:
        """Apply a change or a kill arm (request-level steps the driver takes between ticks
        come here too)."""
        if step.kind == "arm":
            self._arm(step.name)
        elif request_level and self._defer(step):
            self.feed.deferred.append(step)
        elif step.kind == "delete":
            self._delete(step.identity)
        elif step.kind == "write":
            self._write(step.identity, step.value, step.late_ms)
        elif step.kind == "fault":
            self.pending_fault = step.name
        elif step.kind == "kill":
            raise ValueError("a kill between ticks is the driver's to carry out")

    def _defer(self, step: Step) -> bool:
        """Whether a change that arrives during a cycle waits for the end of the tick: a
        late write the lag does not cover (the next cycle's overlap does), and, without
        ``shifts``, an insert or a delete."""
        if step.kind == "write" and step.late_ms and not self._lag_covers(step.late_ms):
            return True
        if self.config.shifts or step.kind not in ("write", "delete"):
            return False
        return step.kind == "delete" or self.api.get(self.real_id(step.identity)) is None

    def apply_deferred(self) -> None:
        """Apply the changes held back until the end of a tick."""
        deferred, self.feed.deferred = self.feed.deferred, []
        for step in deferred:
            self.apply(step)

    def _lag_covers(self, late_ms: int) -> bool:
        """Whether a late write lands at once, stamped ``now - d``: inside ``lag``, or as a
        slow commit the default lookback re-reads."""
        config = self.config
        return config.strategy == "timestamp" and (config.lookback or late_ms < config.lag_ms)

    def _stamp(self, late_ms: int) -> int:
        config = self.config
        now = self.clock.now()
        window = config.late_window_ms
        if late_ms and window:
            late = min(late_ms, window)
            stamp = now - late if self._lag_covers(late) else self.served_max_ms - late
            return max(stamp, 0)
        stamp = max(now, self.served_max_ms + 1)
        if not config.tie_break or config.strategy == "custom":
            while self._stamp_uses.get(stamp, 0) >= config.page_size - 1:
                stamp += 1
        self._stamp_uses[stamp] = self._stamp_uses.get(stamp, 0) + 1
        return stamp

    def real_id(self, identity: str) -> str:
        """The vendor's id for a plan's id: with ``odd_ids`` every third one carries a NUL,
        the id-escaping characters ``|`` and ``\\``, an accent and an emoji."""
        if self.config.odd_ids and identity[1:].isdigit() and int(identity[1:]) % 3 == 0:
            return f"{identity}|\\\x00é🙂"
        return identity

    def _write(self, identity: str, value: int, late_ms: int) -> None:
        identity = self.real_id(identity)
        self.rev += 1
        self.writes += 1
        counter = self.counters.get(identity, 0) + 1
        self.counters[identity] = counter
        stamp = self._stamp(late_ms)
        fields: dict[str, Any] = {
            "value": value,
            "rev": self.rev,
            "version": counter,
            "updated_at": iso_time(stamp),
        }
        if self.api.get(identity) is None:
            stored = self.api.add({"id": identity, **fields})
        else:
            stored = self.api.update(identity, **fields)
        self._push(Version(identity, self.rev, stored, self.next_request, stamp))

    def _delete(self, identity: str) -> None:
        identity = self.real_id(identity)
        if not self.api.remove(identity):
            return
        self.rev += 1
        self.deletes += 1
        self._push(Version(identity, self.rev, None, self.next_request, self.clock.now()))

    def _push(self, version: Version) -> None:
        versions = self.history.setdefault(version.identity, [])
        if versions:
            versions[-1].until = version.gap
        versions.append(version)

    # --- cycles (fed by the engine's hooks) -------------------------------------------------

    def cycle_started(self, lane: str, instance: str, started_at: int) -> None:
        """``on_poll_start``."""
        self.lane = lane
        self.instance = instance
        self.current = Cycle(lane, instance, started_at, first=self.next_request)

    def cycle_failed(self) -> None:
        """``on_error`` during a cycle."""
        if self.current is not None:
            self.current.failed = True

    def cycle_ended(self, truncated: bool) -> None:
        """``on_poll_end``."""
        cycle, self.current = self.current, None
        if cycle is None:
            return
        cycle.last = len(self.requests)
        cycle.truncated = truncated
        cycle.ended = True
        self.cycles.append(cycle)
        self.lane = "live"

    def cycle_killed(self) -> None:
        """The process died: the running cycle never ends."""
        self.current = None
        self.lane = "live"

    # --- the final state --------------------------------------------------------------------

    def final(self) -> dict[str, dict[str, Any]]:
        """The items the vendor holds now, by id."""
        return {item["id"]: item for item in self.api.all()}

    def present_at(self, identity: str, number: int) -> bool:
        """Whether request ``number`` could see ``identity``."""
        current = False
        for version in self.history.get(identity, ()):
            if version.gap > number:
                break
            current = not version.deleted
        return current

    def absent_between(self, identity: str, first: int, last: int) -> bool:
        """Whether ``identity`` was missing from the vendor at some moment from request
        ``first`` to request ``last``."""
        if not self.present_at(identity, first):
            return True
        return any(
            version.deleted and first < version.gap <= last
            for version in self.history.get(identity, ())
        )
