"""Replica processes on one shared store: exclusivity, fair shares, takeover after SIGKILL.

The harness serves a ``FakeApi`` (system clock, one tenant per partition, fixed latency)
over real HTTP on 127.0.0.1 in its own event loop, creates a fresh PostgreSQL schema or
Redis key prefix, and starts three replica processes (:mod:`bench.scale.replica`) that poll
it through one partitioned poller at a fixed interval, while the harness changes 1% of the
partitions per second. After ``before_kill_s`` one replica is SIGKILLed; the others run
``after_kill_s`` more, then get SIGTERM.

The API's request log records, for every request, the replica (``x-client-id``), the lane
cycle it belongs to (``x-scale-run``), when it was sent (``x-scale-sent``) and when it was
answered; everything below is computed from that log.

* A *poll* of a key is one lane cycle: its requests share an ``x-scale-run``; it spans from
  the first request's send time to the last request's answer. An *overlap* is two polls of
  one key whose spans intersect. Target: none.
* A replica's *share* is the number of polls it started between ``warmup_s`` and the kill.
  Target: the largest share is at most 25% above the smallest.
* The killed replica's keys are those it held a lease on when it died (read from the store
  right after the kill) and those whose last poll before the kill was its own. Each must be
  polled by another replica within two lease TTLs of the kill.
* Every change (and every initial item) reaches a handler of some replica.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import watukuy as wk
from watukuy.model.rows import PKey
from watukuy.testing import FakeApi
from watukuy.testing.fake_api import RequestRecord

from ._fleet import (
    Replica,
    make_api,
    now_ms,
    read_events,
    replica_arguments,
    spawn,
    start_all,
    terminate,
)
from ._report import Figure, ratio
from ._services import namespace, store_url
from .replica import make_store, tenant_name

__all__ = [
    "DEFINITIONS",
    "Poll",
    "ReplicasConfig",
    "ReplicasRun",
    "double_polls",
    "overlaps",
    "polls_from_log",
    "replicas_figures",
    "run_replicas",
]

SHARE_SPREAD_TARGET = 0.25

DEFINITIONS = """
poll: one lane cycle of one key, as the API's request log shows it (requests sharing an
  x-scale-run header); it spans from the first request's send time to the last answer.
overlap: two polls of one key whose spans intersect.
share: polls a replica started between the warm-up and the kill; spread = largest /
  smallest - 1.
killed replica's keys: keys it held a lease on at the kill (read from the store) and keys
  whose last poll before the kill was its own; each must be polled by another replica
  within two lease TTLs of the SIGKILL.
"""


# --- the request log ----------------------------------------------------------------------


@dataclass
class Poll:
    """One lane cycle of one key, as the API saw it."""

    client: str
    tenant: str
    start: int
    end: int
    requests: int = 0


def polls_from_log(records: Iterable[RequestRecord]) -> list[Poll]:
    """Group the logged requests into polls (by ``x-scale-run``), sorted by start."""
    polls: dict[str, Poll] = {}
    for record in records:
        run = record.headers.get("x-scale-run")
        if run is None or record.client is None:
            continue
        sent = int(record.headers.get("x-scale-sent", record.at))
        poll = polls.get(run)
        if poll is None:
            poll = polls[run] = Poll(record.client, record.tenant, sent, record.at)
        poll.start = min(poll.start, sent)
        poll.end = max(poll.end, record.at)
        poll.requests += 1
    return sorted(polls.values(), key=lambda p: (p.start, p.end))


def overlaps(polls: Sequence[Poll]) -> list[tuple[Poll, Poll]]:
    """Pairs of polls of one key whose spans intersect."""
    by_tenant: dict[str, list[Poll]] = defaultdict(list)
    for poll in polls:
        by_tenant[poll.tenant].append(poll)
    found = []
    for tenant_polls in by_tenant.values():
        latest: Poll | None = None
        for poll in tenant_polls:  # sorted by start
            if latest is not None and poll.start < latest.end:
                found.append((latest, poll))
            if latest is None or poll.end > latest.end:
                latest = poll
    return found


def double_polls(polls: Sequence[Poll], window_ms: int) -> int:
    """Consecutive polls of one key by two replicas less than ``window_ms`` apart."""
    last: dict[str, Poll] = {}
    count = 0
    for poll in polls:
        previous = last.get(poll.tenant)
        if (
            previous is not None
            and previous.client != poll.client
            and poll.start - previous.start < window_ms
        ):
            count += 1
        last[poll.tenant] = poll
    return count


# --- exclusivity, shares, takeover --------------------------------------------------------


@dataclass(frozen=True)
class ReplicasConfig:
    """Knobs of the exclusivity / shares / takeover run."""

    partitions: int = 300
    items: int = 5
    replicas: int = 3
    interval: str = "5s"
    lease_ttl: str = "10s"
    resync: str = "5s"
    latency: str = "300ms"
    warmup_s: float = 10.0
    before_kill_s: float = 40.0
    after_kill_s: float = 30.0
    quiet_s: float = 12.0
    settle_s: float = 30.0
    changes_per_s: float = 0.01
    seed: int = 9


@dataclass
class ReplicasRun:
    """What one exclusivity / shares / takeover run measured."""

    kind: str
    lease_ttl_ms: int
    polls: int = 0
    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    overlaps: list[tuple[Poll, Poll]] = field(default_factory=list)
    double_polls: int = 0
    shares: dict[str, int] = field(default_factory=dict)
    victim: str = ""
    held_at_kill: list[str] = field(default_factory=list)
    last_polled_by_victim: list[str] = field(default_factory=list)
    takeover_ms: dict[str, float] = field(default_factory=dict)
    expected: int = 0
    delivered: int = 0
    missing: list[Any] = field(default_factory=list)
    duplicates: int = 0
    changes: int = 0
    settle_s: float = 0.0
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    @property
    def spread(self) -> float:
        """How much larger the largest share is than the smallest (0.25 = 25%)."""
        values = list(self.shares.values())
        return ratio(max(values), min(values)) - 1 if values else float("nan")

    def takeover_max_s(self, keys: Iterable[str]) -> float:
        """Seconds from the kill to the slowest first poll of ``keys`` by another replica."""
        delays = [self.takeover_ms.get(k, float("inf")) for k in keys]
        return max(delays) / 1000 if delays else float("nan")

    def summary(self) -> dict[str, Any]:
        """JSON-ready details."""
        return {
            "kind": self.kind,
            "lease_ttl_ms": self.lease_ttl_ms,
            "polls": self.polls,
            "requests": self.requests,
            "statuses": self.statuses,
            "overlaps": [[vars(a), vars(b)] for a, b in self.overlaps[:20]],
            "overlap_count": len(self.overlaps),
            "double_polls": self.double_polls,
            "shares": self.shares,
            "victim": self.victim,
            "held_at_kill": self.held_at_kill,
            "last_polled_by_victim": len(self.last_polled_by_victim),
            "takeover_max_s_held": self.takeover_max_s(self.held_at_kill),
            "takeover_max_s_last_polled": self.takeover_max_s(self.last_polled_by_victim),
            "expected_events": self.expected,
            "delivered_events": self.delivered,
            "missing": self.missing[:20],
            "duplicates": self.duplicates,
            "changes": self.changes,
            "settle_s": self.settle_s,
            "exit_codes": self.exit_codes,
        }


async def _change_loop(
    api: FakeApi,
    config: ReplicasConfig,
    until: float,
    expected: set[Any],
    replicas: list[Replica],
) -> int:
    """Change ``changes_per_s`` of the partitions every second until ``until``.

    Only a partition whose every expected state has been delivered is changed: an API
    never shows the states between two polls, so a change made before the previous state
    was seen could not be delivered by any engine. "Seen" means delivered, not merely
    answered: on a loaded machine a poll can be answered and then fenced off (its lease
    expired before it committed), and the next holder rightly sees only the newer state.
    """
    rng = random.Random(config.seed)
    per_tick = max(1, round(config.partitions * config.changes_per_s))
    width = max(3, len(str(config.items)))
    changes = 0
    while time.monotonic() < until:
        await asyncio.sleep(1.0)
        seen = {(p, s, v) for p, s, v, _ in read_events(r.events for r in replicas)}
        waiting = {tenant for tenant, _, _ in expected - seen}
        ready = sorted({tenant for tenant, _, _ in expected} - waiting)
        for name in rng.sample(ready, min(per_tick, len(ready))):
            item = f"item-{rng.randrange(config.items) + 1:0{width}d}"
            updated = api.tenant(name).update(item, status="changed")
            expected.add((name, item, int(updated["version"])))
            changes += 1
    return changes


async def _settle(replicas: list[Replica], expected: set[Any], limit_s: float) -> float:
    """Wait, at most ``limit_s``, until the survivors delivered every expected change.

    On a loaded machine a change made just before the quiet period ends may still be on
    its way (a poll takes longer than the lease TTL there); late is not lost. A change still
    missing after ``limit_s`` is reported missing. Returns how long the wait took.
    """
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        seen = {(p, s, v) for p, s, v, _ in read_events(r.events for r in replicas)}
        if expected <= seen:
            break
        await asyncio.sleep(0.5)
    return round(time.monotonic() - started, 3)


async def _leases_of(kind: str, space: str, owner: str, partitions: int, now: int) -> list[str]:
    store = make_store(kind, store_url(kind), space)
    try:
        held = []
        for index in range(partitions):
            lease = await store.get_lease(PKey("accounts", tenant_name(index)))
            if lease is not None and lease.owner == owner and lease.expires_at > now:
                held.append(tenant_name(index))
        return held
    finally:
        await store.close()


def _takeover(
    polls: Sequence[Poll], victim: str, kill_at: int
) -> tuple[list[str], dict[str, float]]:
    last_before: dict[str, Poll] = {}
    first_after: dict[str, Poll] = {}
    for poll in polls:
        if poll.start < kill_at:
            last_before[poll.tenant] = poll
        elif poll.client != victim and poll.tenant not in first_after:
            first_after[poll.tenant] = poll
    victims = sorted(t for t, p in last_before.items() if p.client == victim)
    delays = {t: float(p.start - kill_at) for t, p in first_after.items()}
    return victims, delays


async def run_replicas(kind: str, config: ReplicasConfig, folder: Path) -> ReplicasRun:
    """Run the exclusivity / shares / takeover scenario on one store kind."""
    ttl_ms = wk.parse_duration(config.lease_ttl, "lease_ttl")
    result = ReplicasRun(kind, ttl_ms)
    api, created = make_api(config.partitions, config.items, config.latency, 100)
    expected = set(created)
    server = await api.serve()
    replicas: list[Replica] = []
    try:
        async with namespace(kind) as space:
            store = make_store(kind, store_url(kind), space)
            await store.migrate()
            await store.close()
            options = {
                "schedule-min": config.interval,
                "schedule-max": config.interval,
                "lease-ttl": config.lease_ttl,
                "resync": config.resync,
            }
            arguments = replica_arguments(kind, space, server.url, config.partitions, options)
            replicas = [
                await spawn(f"{kind[:2]}-r{i + 1}", folder, arguments)
                for i in range(config.replicas)
            ]
            await start_all(replicas)
            go_at = now_ms()
            started = time.monotonic()
            total = config.before_kill_s + config.after_kill_s
            changer = asyncio.create_task(
                _change_loop(api, config, started + total - config.quiet_s, expected, replicas)
            )
            await asyncio.sleep(config.before_kill_s)
            victim = replicas[1] if len(replicas) > 1 else replicas[0]
            # A takeover needs something to take over: the victim must be the last replica
            # that polled some key when it dies. On a loaded machine, or when the others
            # took most keys, it may not be yet, so wait (bounded) until it is.
            give_up = time.monotonic() + 60
            while (
                time.monotonic() < give_up
                and not _takeover(polls_from_log(api.log), victim.instance, now_ms())[0]
            ):
                await asyncio.sleep(0.05)
            victim.process.send_signal(signal.SIGKILL)
            kill_at = now_ms()
            await victim.process.wait()
            result.victim = victim.instance
            result.held_at_kill = await _leases_of(
                kind, space, victim.instance, config.partitions, kill_at
            )
            await asyncio.sleep(max(0.0, started + total - time.monotonic()))
            result.changes = await changer
            result.settle_s = await _settle(replicas, expected, config.settle_s)
            result.exit_codes = await terminate(replicas)
    finally:
        await terminate(replicas)
        await server.close()

    records = api.log
    polls = polls_from_log(records)
    result.requests = len(records)
    result.statuses = dict(Counter(r.status for r in records))
    result.polls = len(polls)
    result.overlaps = overlaps(polls)
    interval_ms = wk.parse_duration(config.interval, "interval")
    result.double_polls = double_polls(polls, interval_ms // 2)
    window = (go_at + int(config.warmup_s * 1000), kill_at)
    shares = Counter(p.client for p in polls if window[0] <= p.start < window[1])
    result.shares = {r.instance: shares.get(r.instance, 0) for r in replicas}
    result.last_polled_by_victim, result.takeover_ms = _takeover(polls, victim.instance, kill_at)
    events = read_events(r.events for r in replicas)
    seen = {(p, s, v) for p, s, v, _ in events}
    result.expected = len(expected)
    result.delivered = len(expected & seen)
    result.missing = sorted(expected - seen)
    result.duplicates = len(events) - len(set(events))
    return result


def replicas_figures(result: ReplicasRun) -> list[Figure]:
    """The figures of one exclusivity / shares / takeover run."""
    scenario = f"replicas/{result.kind}"
    shares = ", ".join(f"{k}={v}" for k, v in result.shares.items())
    keys = sorted(set(result.held_at_kill) | set(result.last_polled_by_victim))
    takeover = result.takeover_max_s(keys)
    limit_s = 2 * result.lease_ttl_ms / 1000
    return [
        Figure(
            scenario,
            "overlaps",
            f"polls of one key by two replicas at once ({result.polls:,} polls)",
            len(result.overlaps),
            "",
            "0",
            not result.overlaps,
        ),
        Figure(
            scenario,
            "share_spread",
            f"share spread, largest vs smallest ({shares})",
            result.spread * 100,
            "%",
            f"<= {SHARE_SPREAD_TARGET:.0%}",
            result.spread <= SHARE_SPREAD_TARGET,
        ),
        Figure(
            scenario,
            "takeover",
            f"killed replica's keys polled again, slowest "
            f"({len(result.held_at_kill)} leased at the kill, {len(keys)} in all)",
            takeover,
            "s",
            f"<= 2 TTL ({limit_s:g} s)",
            takeover <= limit_s,
        ),
        Figure(
            scenario,
            "takeover_held",
            "  of which leased at the kill, slowest",
            result.takeover_max_s(result.held_at_kill),
            "s",
        ),
        Figure(
            scenario,
            "delivered",
            f"items and changes delivered ({result.changes} changes)"
            + (f"; missing: {result.missing[:3]}" if result.missing else ""),
            f"{result.delivered}/{result.expected}",
            "",
            "all",
            result.delivered == result.expected,
        ),
        Figure(
            scenario,
            "double_polls",
            "back-to-back polls of a key by two replicas within half an interval",
            result.double_polls,
        ),
    ]
