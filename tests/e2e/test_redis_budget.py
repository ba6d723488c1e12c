"""G6 across processes: two engines sharing one ``RedisBudgetStore`` budget never exceed it.

Two child processes (``_budget_child.py``) each run a daemon engine whose poller wants a
request every 50 ms, charged to the budget ``shared`` of 20 requests per 10 s kept in Redis
(real clock, real Redis at ``WATUKUY_TEST_REDIS_URL``, a key prefix of this test's own).
Both poll one FakeApi served by this test over real HTTP for 25 s, together asking for
about 40 requests a second, twenty times what the budget allows.

The budget is a token bucket: 20 tokens, refilled continuously at 2 per second. Over any
stretch of time ``d`` it can grant at most ``20 + 2 * d`` tokens (a full bucket, then the
refill). That bound is checked on the grant times both children recorded (with 100 ms of
slack: two processes read the clock a moment before their takes reach Redis, not always in
the same order) and on the server's request log (with 1 s of slack for a granted request's
trip to the server). A bucket per process instead of one shared bucket would allow twice as
much and fail both checks. Note that the bound is not "20 in any 10 s window": a full
bucket's burst plus ten seconds of refill make up to 40 in the first window. The total must
also come close to what the budget allows: at least 40 requests in 25 s (the bucket's
maximum is 20 + 2 * 25 = 70).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from watukuy import SystemClock
from watukuy.testing import FakeApi, fake_items

pytestmark = [pytest.mark.slow, pytest.mark.redis]

CHILD = Path(__file__).with_name("_budget_child.py")
RUN_SECONDS = 25
BURST = 20  # Budget(requests=20, ...): the bucket's size
RATE_PER_MS = 20 / 10_000  # ... per="10s": refill rate
TRANSIT_SLACK_MS = 1_000  # grant -> server log, for the check on the server's side
CLOCK_SLACK_MS = 100  # two processes reading the clock just before their takes


def worst_excess(times: list[int], slack_ms: int) -> float:
    """The largest ``count - (BURST + RATE * (span + slack))`` over every run of grants.

    Positive means that some stretch of time saw more requests than the bucket can grant.
    """
    ordered = sorted(times)
    worst = float("-inf")
    for i, first in enumerate(ordered):
        for j in range(i, len(ordered)):
            count = j - i + 1
            allowed = BURST + RATE_PER_MS * (ordered[j] - first + slack_ms)
            worst = max(worst, count - allowed)
    return worst


def busiest_window(times: list[int], window_ms: int) -> int:
    """Most requests in any window ``[t, t + window_ms)``."""
    ordered = sorted(times)
    return max(
        sum(1 for other in ordered[i:] if other < start + window_ms)
        for i, start in enumerate(ordered)
    )


async def run_child(api_url: str, redis_url: str, prefix: str, name: str, start_at: int) -> Any:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        "--api",
        api_url,
        "--redis",
        redis_url,
        "--prefix",
        prefix,
        "--name",
        name,
        "--start-at",
        str(start_at),
        "--seconds",
        str(RUN_SECONDS),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=RUN_SECONDS + 60)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_two_processes_share_one_redis_budget_and_never_exceed_it(
    redis_url: str, redis_prefix: str
) -> None:
    api = FakeApi(items=fake_items(5))
    server = await api.serve()
    try:
        # Both children start on the same instant, once their imports are done.
        start_at = SystemClock().now() + 3_000
        outcomes = await asyncio.gather(
            *(
                run_child(server.url, redis_url, redis_prefix, name, start_at)
                for name in ("child-a", "child-b")
            ),
            return_exceptions=True,  # let the other child finish before reporting
        )
    finally:
        await server.close()
    children: list[dict[str, Any]] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        children.append(outcome)

    served = [record for record in api.log if record.route == "since"]
    granted = [at for child in children for at in child["granted"]]
    per_child = {child["name"]: len(child["granted"]) for child in children}
    summary = (
        f"{len(served)} requests {per_child}, busiest 10 s window "
        f"{busiest_window([r.at for r in served], 10_000)}"
    )

    assert {child["name"]: child["errors"] for child in children} == {
        "child-a": [],
        "child-b": [],
    }
    assert {r.status for r in served} == {200}
    # Every token granted became exactly one request, and nothing went out without one.
    assert len(served) == len(granted), summary
    assert {r.client for r in served} == {"child-a", "child-b"}
    assert min(per_child.values()) >= 10, summary  # both processes really competed
    assert sum(len(child["waits"]) for child in children) >= 30, summary  # budget-bound
    # Never more than the bucket allows, on the grant times and on the server's clock.
    assert worst_excess(granted, CLOCK_SLACK_MS) <= 0, summary
    assert worst_excess([r.at for r in served], TRANSIT_SLACK_MS) <= 0, summary
    # ... and close to what it allows over the run.
    in_run = [at for at in granted if start_at <= at < start_at + RUN_SECONDS * 1000]
    assert len(in_run) >= 40, summary
