"""The oracle: what the handler heard, held against the vendor's own history.

Every violation starts with a tag in brackets, the *kind* the shrinker keeps while it
removes steps:

- ``[seen]`` a version that stayed visible through a whole cycle that could read it never
  reached the handler. "Could read it": the cycle ended without error, truncation or
  death, its answers reached the end of the listing (or, for a timestamp cursor, stopped
  at an item ``lag`` held back), it started from the first page of an id-ordered listing,
  and an offset listing did not shift under it (no insert or delete during the cycle). A
  keyset cycle reads what sorts after its first request's position, and a timestamp cursor
  with ``lag`` only what was older than the lag when the cycle started. After
  ``reset_cursor(clear_snapshot=True)`` such a version must be emitted *again*.
- ``[backfill]`` a backfill that completed left out a version it had to read: with
  ``force`` every version visible through it is re-emitted by the backfill lane; without,
  every one is emitted at least once.
- ``[final]`` the newest event of an item is not the vendor's final state (a ``deleted``
  for an item removed at the end, where deletes are observable).
- ``[consumer]`` a consumer that deduplicates by ``event.id`` (a table of processed ids)
  does not end with exactly the vendor's final state.
- ``[unchanged]`` an item written once and never touched got an event other than its
  ``created`` (forced backfills may re-emit it as ``updated``), or two ``created`` ids.
- ``[order]`` per item, distinct events arrive in increasing sequence and never carry an
  older write than one already delivered.
- ``[ids]`` one observation under two ids, or one id for two observations.
- ``[phantom]`` a ``deleted`` for an item the vendor held throughout the window of the
  listing passes that confirmed it: from the first page of the pass before the emitting
  one to the delete's commit (or any ``deleted`` where deletes are not observable).

Why the window starts a pass early. A full listing reports a delete once two complete
passes in a row missed the item (``Deletes.confirm_passes``). An item the vendor really
deleted during the first of them, and re-created before or during the second (which then
also misses it, its page having moved or lied), was deleted: ``deleted`` then ``created``
is a true account of the vendor's history, as late as any delete a poller finds. What the
engine must never do is report deleted an item that was there all along, which is what a
listing that moves under its pages used to cause; an item held throughout both passes is
exactly that. (Passes are told apart by the page-1 answers that reached the store: a failed
or uncommitted page-1 request starts nothing.) One case is left out: when the pass before
the emitting one was answered ``200`` with an empty list that cut the listing short before
the item, and the emitting pass missed it too, the two passes look to any poller exactly
like a listing that lost the item (two lies in a row, or a lie and a move); only
``Deletes(verify=)`` can tell, and beyond a share of the snapshot the mass-delete guard
holds such deletes. Such a delete is excused only when no answer of either pass showed the
item, and then so are its consequences: the item's next ``created`` is a new observation
to the engine (``[ids]`` does not ask it to repeat the first id, ``[unchanged]`` skips the
item). A single lying pass must never cause a delete.

Where deletes are observable: a snapshot diff always, an incremental strategy only with a
reconcile listing. Without one, items the vendor deleted may stay in the consumer's table
(it was never told), and the checks expect no ``deleted`` at all. After
``reset_cursor(clear_snapshot=True)`` the engine has forgotten what it knew: an item deleted
at the vendor before a listing saw it again is never reported deleted, and the checks allow
that too.

The ``[stall]`` and ``[settle]`` checks (no convergence, or requests or events that do not
stop once nothing changes) are made by the run itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.model import json as wkjson
from watukuy.testing.fake_api._items import parse_instant

from ._config import ConformanceConfig
from ._vendor import Cycle, RequestRecord, Vendor, Version

__all__ = ["BackfillOp", "ClearOp", "Delivery", "check"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One completed handler call."""

    id: str
    type: str
    subject: str
    sequence: int
    lane: str
    data: Any
    instance: str
    request: int

    @property
    def rev(self) -> int | None:
        """The vendor write the event carries (``None`` for a delete)."""
        if self.type == "deleted" or not isinstance(self.data, dict):
            return None
        rev = self.data.get("rev")
        return rev if isinstance(rev, int) else None


@dataclass(frozen=True, slots=True)
class ClearOp:
    """``reset_cursor(clear_snapshot=True)``: requests from ``request`` on must re-emit;
    events with a sequence above ``sequence`` came after it."""

    request: int
    sequence: int


@dataclass(slots=True)
class BackfillOp:
    """A ``backfill()`` and, once it completed, the request it completed at (``-1``: a
    later backfill replaced it first)."""

    request: int
    sequence: int
    force: bool
    target_ms: int | None
    done_at: int | None = None


def _text(value: Any) -> str:
    try:
        return wkjson.dumps(value)
    except TypeError:
        return repr(value)


def change_key(config: ConformanceConfig, data: Mapping[str, Any]) -> Any:
    """What tells two versions apart for this configuration."""
    if config.change_key == "value":
        return data.get("value")
    return wkjson.dumps(dict(data))


class _Checker:
    def __init__(
        self,
        config: ConformanceConfig,
        vendor: Vendor,
        deliveries: Sequence[Delivery],
        commits: Mapping[str, int],
        clears: Sequence[ClearOp],
        backfills: Sequence[BackfillOp],
        committed: Collection[int] = (),
    ) -> None:
        self.config = config
        self.committed = committed
        self.vendor = vendor
        self.deliveries = deliveries
        self.commits = commits
        self.clears = clears
        self.backfills = backfills
        self.problems: list[str] = []
        self.obliged: set[int] = set()
        self.excused: set[str] = set()
        self.by_subject: dict[str, list[Delivery]] = {}
        for delivery in deliveries:
            self.by_subject.setdefault(delivery.subject, []).append(delivery)
        self.by_rev: dict[int, Version] = {
            version.rev: version
            for versions in vendor.history.values()
            for version in versions
            if not version.deleted
        }
        self.final = vendor.final()

    def fail(self, text: str) -> None:
        self.problems.append(text)

    # --- [seen] ---------------------------------------------------------------------------

    def _requests(self, cycle: Cycle) -> list[RequestRecord]:
        """The listing requests of a cycle (``verify`` lookups are not part of it)."""
        return [r for r in self.vendor.requests[cycle.first - 1 : cycle.last] if r.route != "one"]

    def _held_back(self, request: RequestRecord) -> bool:
        lag = self.config.lag_ms if self.config.strategy == "timestamp" else 0
        for _, rev in request.items:
            version = self.by_rev.get(rev)
            if version is not None and version.stamp_ms > request.at - lag:
                return True
        return False

    def _readable(self, cycle: Cycle) -> list[RequestRecord] | None:
        if not cycle.ended or cycle.failed or cycle.truncated:
            return None
        requests = self._requests(cycle)
        if not requests or any(
            r.status not in (200, 304) or r.fault or r.instance != cycle.instance for r in requests
        ):
            return None
        first, last = requests[0], requests[-1]
        if first.route == "since":
            return requests if last.end or self._held_back(last) else None
        if not last.end or not first.starts_listing:
            return None
        if first.route == "page" and self._shifted(cycle.first, cycle.last):
            return None
        return requests

    def _shifted(self, first: int, last: int) -> bool:
        for versions in self.vendor.history.values():
            previous: Version | None = None
            for version in versions:
                inserted = version.deleted or previous is None or previous.deleted
                if inserted and first < version.gap <= last:
                    return True
                previous = version
        return False

    def _after_position(self, version: Version, request: RequestRecord) -> bool:
        since = request.params.get("since")
        if since is None:
            return True
        micros = parse_instant(since)
        if micros is None:
            return True
        stamp = version.stamp_ms * 1000
        after_id = request.params.get("after_id")
        if stamp != micros:
            return stamp > micros
        return after_id is None or version.identity > after_id

    def _distinct(self, version: Version) -> bool:
        key = change_key(self.config, version.data or {})
        for earlier in self.vendor.history[version.identity]:
            if earlier.rev >= version.rev:
                return True
            if not earlier.deleted and change_key(self.config, earlier.data or {}) == key:
                return False
        return True

    def _emitted(self, version: Version, after_sequence: int, lane: str | None = None) -> bool:
        return any(
            d.rev == version.rev
            and d.sequence > after_sequence
            and (lane is None or d.lane == lane)
            for d in self.by_subject.get(version.identity, ())
        )

    def _clear_before(self, request: int) -> int:
        sequence = 0
        for clear in self.clears:
            if clear.request <= request:
                sequence = max(sequence, clear.sequence)
        return sequence

    def seen(self) -> None:
        reported: set[int] = set()
        for cycle in self.vendor.cycles:
            if cycle.lane not in ("live", "reconcile"):
                continue
            requests = self._readable(cycle)
            if requests is None:
                continue
            first = requests[0]
            keyset = first.route == "since"
            settled_by = cycle.started_at - (
                self.config.lag_ms if self.config.strategy == "timestamp" else 0
            )
            after = self._clear_before(cycle.first)
            for versions in self.vendor.history.values():
                for version in versions:
                    if version.deleted or version.rev in reported:
                        continue
                    if not version.visible_through(cycle.first, cycle.last):
                        continue
                    if keyset and (
                        not self._after_position(version, first)
                        or (self.config.strategy == "timestamp" and version.stamp_ms > settled_by)
                    ):
                        continue
                    if not self._distinct(version):
                        continue
                    self.obliged.add(version.rev)
                    if not self._emitted(version, after):
                        reported.add(version.rev)
                        again = " again after reset_cursor(clear_snapshot=True)" if after else ""
                        self.fail(
                            f"[seen] {version.identity} rev {version.rev} "
                            f"{_text(version.data)} was visible through the whole "
                            f"{cycle.lane} cycle of requests #{cycle.first}-#{cycle.last} "
                            f"({cycle.instance}) but never reached the handler{again}"
                        )

    # --- [backfill] -----------------------------------------------------------------------

    def backfill(self) -> None:
        for op in self.backfills:
            if op.done_at is None or op.done_at < 0:
                continue  # never completed, or replaced by a later backfill
            for versions in self.vendor.history.values():
                for version in versions:
                    if version.deleted or not version.visible_through(op.request, op.done_at):
                        continue
                    if op.target_ms is not None and version.stamp_ms > op.target_ms:
                        continue
                    if op.force and not self._emitted(version, op.sequence, "backfill"):
                        self.fail(
                            f"[backfill] backfill(force=True) from request #{op.request} "
                            f"completed at #{op.done_at} without re-emitting "
                            f"{version.identity} rev {version.rev}"
                        )
                    elif not op.force and self._distinct(version) and not self._emitted(version, 0):
                        self.fail(
                            f"[backfill] backfill() from request #{op.request} completed at "
                            f"#{op.done_at}, but {version.identity} rev {version.rev} "
                            f"{_text(version.data)} never reached the handler"
                        )

    # --- [final] and [consumer] -----------------------------------------------------------

    def _matches(self, data: Any, item: Mapping[str, Any]) -> bool:
        if not isinstance(data, dict):
            return False
        if self.config.change_key == "value":
            return data.get("value") == item.get("value")
        return data == dict(item)

    def _forgotten(self, last: Delivery) -> bool:
        """The engine last spoke of the item before a ``clear_snapshot`` and never saw it
        again: it cannot report a delete of what it no longer knows."""
        return any(clear.sequence >= last.sequence for clear in self.clears)

    def final_state(self) -> None:
        observable = self.config.deletes_observable
        for identity in sorted(self.vendor.history):
            item = self.final.get(identity)
            seen = self.by_subject.get(identity)
            if item is not None:
                if not seen:
                    self.fail(f"[final] {identity} {_text(item)} is in the vendor, never emitted")
                    continue
                last = max(seen, key=lambda d: d.sequence)
                if last.type == "deleted" or not self._matches(last.data, item):
                    shown = "deleted" if last.type == "deleted" else _text(last.data)
                    self.fail(
                        f"[final] {identity}: newest event {last.type} seq {last.sequence} "
                        f"is {shown}, the vendor has {_text(item)}"
                    )
            elif observable and seen:
                last = max(seen, key=lambda d: d.sequence)
                if last.type != "deleted" and not self._forgotten(last):
                    self.fail(
                        f"[final] {identity} was deleted at the vendor; its newest event is "
                        f"{last.type} seq {last.sequence}"
                    )

    def consumer(self) -> None:
        processed: set[str] = set()
        table: dict[str, Any] = {}
        for delivery in self.deliveries:
            if delivery.id in processed:
                continue
            processed.add(delivery.id)
            if delivery.type == "deleted":
                table.pop(delivery.subject, None)
            else:
                table[delivery.subject] = delivery.data
        for identity, item in sorted(self.final.items()):
            held = table.get(identity)
            if held is None or not self._matches(held, item):
                self.fail(
                    f"[consumer] a consumer deduplicating by event.id holds "
                    f"{_text(held) if held is not None else 'nothing'} for {identity}; "
                    f"the vendor has {_text(item)}"
                )
        if self.config.deletes_observable:
            newest: dict[str, Delivery] = {}
            for d in self.deliveries:
                if d.subject not in newest or d.sequence > newest[d.subject].sequence:
                    newest[d.subject] = d
            for identity in sorted(set(table) - set(self.final)):
                if self._forgotten(newest[identity]):
                    continue
                self.fail(
                    f"[consumer] a consumer deduplicating by event.id still holds {identity}, "
                    "which the vendor deleted"
                )

    # --- [unchanged], [order], [ids], [phantom] -------------------------------------------

    def unchanged(self) -> None:
        for identity, versions in sorted(self.vendor.history.items()):
            if len(versions) != 1 or versions[0].deleted or identity in self.excused:
                continue  # (an excused [phantom] delete re-creates the item, see phantom())
            only = versions[0]
            created: set[str] = set()
            for d in self.by_subject.get(identity, ()):
                forced = d.type == "updated" and d.lane == "backfill"
                if d.type == "created":
                    created.add(d.id)
                if (d.type != "created" and not forced) or d.rev != only.rev:
                    self.fail(
                        f"[unchanged] {identity} was written once and never changed, yet got "
                        f"{d.type} seq {d.sequence} ({d.lane}) {_text(d.data)}"
                    )
            if len(created) > 1:
                self.fail(f"[unchanged] {identity} got {len(created)} distinct created ids")

    def order(self) -> None:
        for identity, seen in sorted(self.by_subject.items()):
            ids: set[str] = set()
            last_seq = -1
            last_rev = -1
            for d in seen:
                if d.id in ids:
                    continue
                ids.add(d.id)
                if d.sequence <= last_seq:
                    self.fail(
                        f"[order] {identity}: seq {d.sequence} ({d.type}) arrived after seq "
                        f"{last_seq}"
                    )
                last_seq = max(last_seq, d.sequence)
                rev = d.rev
                if rev is not None:
                    if rev < last_rev:
                        self.fail(
                            f"[order] {identity}: rev {rev} arrived after rev {last_rev} "
                            f"(seq {d.sequence}, {d.type})"
                        )
                    last_rev = max(last_rev, rev)

    def ids(self) -> None:
        by_id: dict[str, Delivery] = {}
        by_observation: dict[tuple[str, str, int], str] = {}
        for d in self.deliveries:
            earlier = by_id.get(d.id)
            if earlier is None:
                by_id[d.id] = d
            elif (earlier.type, earlier.subject, earlier.rev) != (d.type, d.subject, d.rev):
                self.fail(
                    f"[ids] one id {d.id[:10]} for two observations: {earlier.type} "
                    f"{earlier.subject} rev {earlier.rev} and {d.type} {d.subject} rev {d.rev} "
                    "(a consumer deduplicating by id drops the second)"
                )
            rev = d.rev
            if rev is None or d.subject in self.excused:
                continue  # after an excused [phantom] delete, its re-creation is new
            key = (d.subject, d.type, rev)
            known = by_observation.setdefault(key, d.id)
            if known != d.id:
                self.fail(
                    f"[ids] {d.type} {d.subject} rev {rev} delivered under two ids "
                    f"({known[:10]}, {d.id[:10]})"
                )

    def phantom(self) -> None:
        reported: set[str] = set()
        for d in self.deliveries:
            if d.type != "deleted" or d.id in reported:
                continue
            reported.add(d.id)
            if not self.config.deletes_observable:
                self.fail(
                    f"[phantom] deleted {d.subject} seq {d.sequence} from a poller that "
                    "cannot observe deletes"
                )
                continue
            commit = self.commits.get(d.id, d.request)
            starts = self._pass_starts(d.lane, commit)
            emitting = starts[-1] if starts else 1
            start = starts[-2] if len(starts) > 1 else 1
            if self.vendor.absent_between(d.subject, start, commit):
                continue
            if self._hidden_by_a_lie(d.subject, d.lane, start, emitting, commit):
                self.excused.add(d.subject)
                continue
            self.fail(
                f"[phantom] deleted {d.subject} seq {d.sequence} ({d.lane}, committed "
                f"after request #{commit}), but the vendor held it throughout the passes "
                f"from request #{start}"
            )

    def _pass_starts(self, lane: str, commit: int) -> list[int]:
        """The requests up to ``commit`` that started a pass of ``lane``: page-1 answers
        that reached the store (all page-1 requests when the run did not say)."""
        return [
            request.number
            for request in self.vendor.requests[:commit]
            if request.lane == lane
            and request.starts_listing
            and (not self.committed or request.number in self.committed)
        ]

    def _hidden_by_a_lie(
        self, identity: str, lane: str, first: int, emitting: int, commit: int
    ) -> bool:
        """A request of ``lane`` from ``first`` to before ``emitting`` was answered with an
        empty list that ended the listing before ``identity`` (which the vendor held), and
        no answer from ``first`` to ``commit`` showed ``identity``: the two passes looked
        exactly like a listing without it."""
        lied = False
        for request in self.vendor.requests[first - 1 : commit]:
            if request.lane != lane or request.route == "one":
                continue
            if request.fault == "empty":
                hidden = (
                    request.number < emitting
                    and bool(request.items)
                    and identity >= request.items[0][0]
                    and self.vendor.present_at(identity, request.number)
                )
                lied = lied or hidden
            elif request.status in (200, 304) and any(
                shown == identity for shown, _ in request.items
            ):
                return False
        return lied


def check(
    config: ConformanceConfig,
    vendor: Vendor,
    deliveries: Sequence[Delivery],
    commits: Mapping[str, int],
    clears: Sequence[ClearOp],
    backfills: Sequence[BackfillOp],
    stats: dict[str, int] | None = None,
    *,
    committed: Collection[int] = (),
) -> list[str]:
    """Every oracle check (see the module docstring); returns the violations.

    ``committed`` holds the requests whose answers reached the store (pass starts for the
    ``[phantom]`` window). ``stats`` (when given) receives ``obligations``: how many versions the ``[seen]`` check
    held the handler to.
    """
    checker = _Checker(config, vendor, deliveries, commits, clears, backfills, committed)
    checker.phantom()
    checker.ids()
    checker.unchanged()
    checker.seen()
    checker.backfill()
    checker.order()
    checker.final_state()
    checker.consumer()
    if stats is not None:
        stats["obligations"] = len(checker.obliged)
    return checker.problems


def converged(
    config: ConformanceConfig,
    vendor: Vendor,
    deliveries: Sequence[Delivery],
    clears: Sequence[ClearOp],
) -> bool:
    """The cheap end-of-run test used during quiescence: ``[final]`` holds."""
    checker = _Checker(config, vendor, deliveries, {}, clears, ())
    checker.final_state()
    return not checker.problems
