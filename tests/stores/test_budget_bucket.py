"""The sliding-window-log arithmetic, in process and in Redis: the same answers, call for call.

A budget of ``requests`` per ``per`` is a hard cap: the costs granted in any window of
``per`` never add up to more than ``requests``.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Coroutine
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.budget import Grant, InMemoryBudgetStore, take
from watukuy.budget.bucket import bucket_used, take_bucket
from watukuy.budget.manager import BudgetManager
from watukuy.budget.window import window_used
from watukuy.model.errors import ConfigError
from watukuy.model.options import Budget
from watukuy.model.ports import BudgetPolicy, BudgetStore
from watukuy.stores.redis import RedisBudgetStore
from watukuy.testing.clock import VirtualClock

POLICY = BudgetPolicy(requests=10, per_ms=1_000)  # at most 10 in any second

# (cost, now, expected wait in ms), played in order against one budget.
SCRIPT: list[tuple[float, int, int]] = [
    (4, 0, 0),  # an unused budget: granted at once
    (3, 100, 0),
    (3, 250, 0),  # 10 in the window: full
    (1, 250, 750),  # room for 1 once the grant at 0 leaves, at 0 + 1000
    (0, 250, 0),  # cost 0 is always granted and records nothing
    (5, 999, 101),  # 5 fits once the grants at 0 and 100 are gone: at 1100
    (1, 1_000, 0),  # the grant at 0 stops counting at 1000 exactly
    (4, 1_000, 100),  # 7 in the window; the grant at 100 must go too
    (4, 1_099, 1),  # one millisecond before the boundary
    (4, 1_100, 0),  # at the boundary
    (0.5, 1_200, 0),  # fractional costs
    (0.25, 1_200, 0),  # a second grant at the same time
    (1.5, 1_200, 50),  # 8.75 in the window: the 3 granted at 250 must go (at 1250)
    (1.25, 1_249, 0),  # exactly 10: a full window is not an exceeded one
    (1.5, 1_250, 0),  # the grant at 250 left
    (10, 1_250, 1_000),  # the whole budget: only once every grant has left
    (2, 900, 1_100),  # a caller whose clock is behind: later grants still count
    (1.5, 900, 0),  # ... and its grant is placed in time order
    (10, 60_000, 0),  # a long idle spell: everything left
    (1, 60_999, 1),
    (1, 61_000, 0),
    (0, 61_000, 0),
]

# The log after SCRIPT[: n + 1], for a few n: (time, cost) oldest first.
LOGS: dict[int, list[tuple[int, float]]] = {
    2: [(0, 4), (100, 3), (250, 3)],
    6: [(100, 3), (250, 3), (1_000, 1)],
    9: [(250, 3), (1_000, 1), (1_100, 4)],
    14: [(1_000, 1), (1_100, 4), (1_200, 0.5), (1_200, 0.25), (1_249, 1.25), (1_250, 1.5)],
    17: [
        (900, 1.5),
        (1_000, 1),
        (1_100, 4),
        (1_200, 0.5),
        (1_200, 0.25),
        (1_249, 1.25),
        (1_250, 1.5),
    ],
    20: [(61_000, 1)],
}


# Where the order of a floating-point sum decides: 0.3 + 0.4 + 0.2 (newest first) is
# 0.8999999999999999, so 0.1 more fits in 1; 0.2 + 0.4 + 0.3 (oldest first) is
# 0.9000000000000001, and it would not. Both sides must add in the same order.
FLOAT_POLICY = BudgetPolicy(requests=1, per_ms=1_000)
FLOAT_SCRIPT: list[tuple[float, int, int]] = [
    (0.2, 0, 0),
    (0.4, 1, 0),
    (0.3, 2, 0),
    (0.1, 3, 0),
    (0.1, 4, 996),
    (0.3, 5, 996),  # room once the grant at 1 leaves: 0.3 + 0.1 + 0.3 <= 1
]


def reference(log: list[tuple[int, float]], cost: float, now: int) -> int:
    """The rules written out independently of :func:`take`: exact sums, a brute-force wait."""
    per, cap = POLICY.per_ms, Fraction(POLICY.requests)

    def counted(at: int) -> Fraction:
        return sum((Fraction(c) for t, c in log if t > at - per), Fraction(0))

    if cost == 0 or counted(now) + Fraction(cost) <= cap:
        return 0
    return next(w for w in range(1, 10 * per) if counted(now + w) + Fraction(cost) <= cap)


def as_pairs(grants: tuple[Grant, ...]) -> list[tuple[int, float]]:
    return [(g.time, g.cost) for g in grants]


def test_take_follows_the_script() -> None:
    grants: tuple[Grant, ...] = ()
    for step, (cost, now, wait) in enumerate(SCRIPT):
        wanted = reference(as_pairs(grants), cost, now)
        before = grants
        grants, got = take(grants, POLICY, cost, now)
        assert (got, wanted) == (wait, wait), f"step {step}: {(cost, now)}"
        if got or not cost:
            assert grants == before, f"step {step}: nothing changes without a grant"
        if step in LOGS:
            assert as_pairs(grants) == LOGS[step], f"step {step}"


def test_sums_run_newest_first() -> None:
    grants: tuple[Grant, ...] = ()
    for step, (cost, now, wait) in enumerate(FLOAT_SCRIPT):
        grants, got = take(grants, FLOAT_POLICY, cost, now)
        assert got == wait, f"step {step}: {(cost, now)}"


def test_take_is_pure() -> None:
    log = (Grant(0, 4.0), Grant(100, 6.0))
    assert take(log, POLICY, 1, 1_000) == ((Grant(100, 6.0), Grant(1_000, 1.0)), 0)
    assert log == (Grant(0, 4.0), Grant(100, 6.0))
    assert take([], POLICY, 10, 5) == ((Grant(5, 10.0),), 0)


def test_a_denied_take_still_forgets_grants_out_of_the_window() -> None:
    log = (Grant(0, 5.0), Grant(500, 5.0), Grant(900, 5.0))
    assert take(log, POLICY, 6, 1_000) == ((Grant(500, 5.0), Grant(900, 5.0)), 900)


def test_grants_of_one_time_leave_together() -> None:
    log = (Grant(0, 3.0), Grant(200, 3.0), Grant(200, 3.0), Grant(300, 1.0))
    # Room for 5 needs 5 to leave: the grant at 0 is not enough, those at 200 go together.
    assert take(log, POLICY, 5, 400)[1] == 200 + 1_000 - 400


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=40).map(lambda n: n / 4),  # 0.25 .. 10
            st.sampled_from([0, 0, 1, 3, 250, 999, 1_000, 1_001]),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_never_more_than_requests_in_any_window_and_the_wait_is_exact(
    steps: list[tuple[float, int]],
) -> None:
    grants: tuple[Grant, ...] = ()
    granted: list[tuple[int, float]] = []
    now = 1_767_225_600_000
    for cost, step in steps:
        now += step
        grants, wait = take(grants, POLICY, cost, now)
        if wait == 0:
            granted.append((now, cost))
            continue
        # Exact: one millisecond earlier it does not fit; at the answer it does.
        assert wait > 0
        if wait > 1:
            assert take(grants, POLICY, cost, now + wait - 1)[1] > 0
        assert take(grants, POLICY, cost, now + wait)[1] == 0
        # Memory is the grants of one window.
        assert all(g.time > now - POLICY.per_ms for g in grants)
    for start, _ in granted:
        in_window = sum(c for t, c in granted if start <= t < start + POLICY.per_ms)
        assert in_window <= POLICY.requests


@pytest.mark.parametrize("cost", [-1, math.nan, math.inf, "1", True])
async def test_a_bad_cost_is_a_config_error(cost: Any) -> None:
    with pytest.raises(ConfigError, match=rf"^cost: expected a finite number >= 0, got {cost!r}"):
        await InMemoryBudgetStore().try_take("erp", POLICY, cost, 0)


async def test_a_cost_larger_than_the_budget_is_a_config_error() -> None:
    store = InMemoryBudgetStore()
    with pytest.raises(
        ConfigError,
        match=r"^cost: a cost of 10.5 can never be granted by a budget of 10 requests per window$",
    ):
        await store.try_take("erp", POLICY, 10.5, 0)
    assert store.peek("erp") == ()


@pytest.mark.parametrize(
    ("policy", "field"),
    [(BudgetPolicy(0, 1_000), "requests"), (BudgetPolicy(10, 0), "per_ms")],
)
async def test_a_bad_policy_is_a_config_error(policy: BudgetPolicy, field: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{field}: expected a positive integer, got 0$"):
        await InMemoryBudgetStore().try_take("erp", policy, 1, 0)


@pytest.mark.parametrize("now", [1.5, "0", None, True])
async def test_a_bad_now_is_a_config_error(now: Any) -> None:
    with pytest.raises(ConfigError, match=rf"^now: expected an integer epoch in ms, got {now!r}$"):
        await InMemoryBudgetStore().try_take("erp", POLICY, 1, now)


async def test_logs_are_per_budget_name() -> None:
    store = InMemoryBudgetStore()
    assert isinstance(store, BudgetStore)
    assert await store.try_take("a", POLICY, 10, 0) == 0
    assert await store.try_take("b", POLICY, 10, 0) == 0
    assert await store.try_take("a", POLICY, 1, 0) == 1_000
    assert store.peek("a") == (Grant(0, 10.0),)
    assert await store.try_take("c", POLICY, 0, 0) == 0
    assert store.peek("c") == ()  # cost 0 recorded nothing, not even an empty log
    assert repr(store) == "InMemoryBudgetStore(budgets=2)"
    store.clear()
    assert store.peek("a") == ()
    assert await store.try_take("a", POLICY, 10, 0) == 0


# --- Redis: the Lua mirror ----------------------------------------------------------------


@pytest.fixture
def redis_budget(redis_client: Any, redis_prefix: str) -> RedisBudgetStore:
    return RedisBudgetStore(redis_client, prefix=redis_prefix)


async def stored_log(redis_client: Any, key: str) -> list[tuple[int, float]]:
    """The Redis log as ``(time, cost)`` pairs, checking the member layout on the way."""
    pairs: list[tuple[int, float]] = []
    seq_of: dict[int, int] = {}
    for member, score in await redis_client.zrange(key, 0, -1, withscores=True):
        time, seq, cost = member.decode().split(":")
        assert int(time) == score
        assert seq == f"{seq_of.get(int(time), 0):010d}"  # numbered per time, in order
        seq_of[int(time)] = seq_of.get(int(time), 0) + 1
        pairs.append((int(time), float(cost)))
    return pairs


@pytest.mark.redis
async def test_redis_follows_the_script(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    memory = InMemoryBudgetStore()
    for step, (cost, now, wait) in enumerate(SCRIPT):
        answers = (
            await memory.try_take("erp", POLICY, cost, now),
            await redis_budget.try_take("erp", POLICY, cost, now),
        )
        assert answers == (wait, wait), f"step {step}: {(cost, now)}"
        log = await stored_log(redis_client, f"{redis_prefix}budget:erp")
        assert log == as_pairs(memory.peek("erp")), f"step {step}"
        if step in LOGS:
            assert log == LOGS[step], f"step {step}"


@pytest.mark.redis
async def test_redis_adds_in_the_same_order(redis_budget: RedisBudgetStore) -> None:
    for step, (cost, now, wait) in enumerate(FLOAT_SCRIPT):
        got = await redis_budget.try_take("erp", FLOAT_POLICY, cost, now)
        assert got == wait, f"step {step}: {(cost, now)}"


@pytest.mark.redis
async def test_redis_and_memory_agree_on_a_long_random_run(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    chance = random.Random(20260101)
    memory = InMemoryBudgetStore()
    # Windows of seconds: the keys expire in Redis time, and the run takes well under that.
    policies = {
        "a": BudgetPolicy(7, 60_000),
        "b": BudgetPolicy(4, 5_000),
        "c": BudgetPolicy(10, 10_000),
    }
    now, answers = 1_767_225_600_000, []
    for _ in range(900):
        name = chance.choice("abc")
        cost = chance.choice([0, 1, 1, 2, 0.25, 1 / 3, 1 / 3, 0.1, 2.5, chance.random() * 3])
        now += chance.choice([0, 0, 1, 7, 333, 1_000, 4_999, 5_000, -50])
        policy = policies[name]
        pair = (
            await memory.try_take(name, policy, cost, now),
            await redis_budget.try_take(name, policy, cost, now),
        )
        answers.append(pair)
        assert pair[0] == pair[1], (name, cost, now)
    waits = [a for a, _ in answers if a]
    assert len(waits) > 100  # the run exercised waiting, not only granting
    assert len(set(waits)) > 50  # ... with many different waits
    for name in "abc":  # and the stored logs hold the same doubles
        log = await stored_log(redis_client, f"{redis_prefix}budget:{name}")
        assert log == as_pairs(memory.peek(name))
        assert len(log) > 0


@pytest.mark.redis
async def test_redis_logs_live_under_the_prefix_and_expire_with_the_window(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    key = f"{redis_prefix}budget:erp"
    assert await redis_budget.try_take("erp", POLICY, 2.5, 1_000) == 0
    assert await redis_client.zrange(key, 0, -1, withscores=True) == [
        (b"1000:0000000000:2.5", 1000.0)
    ]
    assert 900 < await redis_client.pttl(key) <= 1_000  # per after the newest grant
    assert await redis_budget.try_take("erp", POLICY, 1, 1_000) == 0
    assert await redis_client.zrange(key, 0, -1) == [
        b"1000:0000000000:2.5",
        b"1000:0000000001:1.0",
    ]
    # A grant older than the newest one keeps the key alive for the newest.
    assert await redis_budget.try_take("erp", POLICY, 1, 600) == 0
    assert 1_300 < await redis_client.pttl(key) <= 1_400
    # A denied take leaves the expiry alone.
    assert await redis_budget.try_take("erp", POLICY, 6, 1_000) == 600
    assert 1_300 < await redis_client.pttl(key) <= 1_400
    # Cost 0 never reaches Redis, and bad arguments are refused before it.
    await redis_client.delete(key)
    assert await redis_budget.try_take("erp", POLICY, 0, 1_000) == 0
    assert await redis_client.exists(key) == 0
    with pytest.raises(ConfigError, match=r"^cost: "):
        await redis_budget.try_take("erp", POLICY, -1, 1_000)
    with pytest.raises(ConfigError, match=r"^cost: a cost of 11 can never be granted"):
        await redis_budget.try_take("erp", POLICY, 11, 1_000)
    assert await redis_client.exists(key) == 0


@pytest.mark.redis
async def test_redis_a_missing_key_is_an_empty_window(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    assert await redis_budget.try_take("erp", POLICY, 10, 5_000) == 0
    assert await redis_budget.try_take("erp", POLICY, 1, 5_000) == 1_000
    await redis_client.delete(f"{redis_prefix}budget:erp")  # what expiry does
    assert await redis_budget.try_take("erp", POLICY, 10, 5_000) == 0


# --- token buckets and held grants, in Redis too ---------------------------------------------

BUCKET = BudgetPolicy(requests=10, per_ms=1_000, burst=3)


@pytest.mark.redis
async def test_redis_bucket_agrees_with_memory(redis_budget: RedisBudgetStore) -> None:
    chance = random.Random(7)
    memory = InMemoryBudgetStore()
    policies = {"a": BUCKET, "b": BudgetPolicy(requests=3, per_ms=1_000, burst=5)}
    now = 1_767_225_600_000
    first = [await redis_budget.try_take("a", BUCKET, 1, now) for _ in range(5)]
    assert first == [0, 0, 0, 100, 100]
    for _ in range(300):
        name = chance.choice("ab")
        cost = chance.choice([0, 1, 1, 2, 0.5, 1 / 3])
        now += chance.choice([0, 0, 1, 33, 100, 250, 1_000])
        pair = (
            await memory.try_take(name, policies[name], cost, now),
            await redis_budget.try_take(name, policies[name], cost, now),
        )
        assert pair[0] == pair[1], (name, cost, now)


@pytest.mark.redis
@pytest.mark.parametrize(
    ("policy", "cost", "message"),
    [
        (BUCKET, 5, "a cost of 5 can never be granted by a burst of 3"),
        (POLICY, 11, "a cost of 11 can never be granted by a budget of 10 requests per window"),
        (
            BudgetPolicy(10, 1_000, burst=30),
            31,
            "a cost of 31 can never be granted by a burst of 30",
        ),
    ],
)
async def test_a_cost_never_granted_is_refused_alike_in_memory_and_redis(
    redis_budget: RedisBudgetStore, policy: BudgetPolicy, cost: float, message: str
) -> None:
    for store in (InMemoryBudgetStore(), redis_budget):
        with pytest.raises(ConfigError, match=rf"^cost: {message}$"):
            await store.try_take("erp", policy, cost, 1_000)
    # What a bucket holds (its burst, even above requests) is granted by both.
    capacity = policy.requests if policy.burst is None else policy.burst
    assert await InMemoryBudgetStore().try_take("erp", policy, capacity, 0) == 0
    assert await redis_budget.try_take("erp", policy, capacity, 0) == 0


@pytest.mark.redis
async def test_redis_holds_and_settles_like_memory(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    policy = BudgetPolicy(requests=2, per_ms=1_000)
    memory = InMemoryBudgetStore()
    now = 1_767_225_600_000
    for store in (memory, redis_budget):
        assert await store.try_hold("erp", policy, 1, now, stamp=now + 30_000, ticket="t1") == 0
        assert await store.try_take("erp", policy, 1, now) == 0
        # Held: the first grant still counts after a second.
        assert await store.try_take("erp", policy, 1, now + 1_500) == 0
        assert await store.try_take("erp", policy, 1, now + 1_500) == 1_000
        await store.settle("erp", policy, "t1", stamp=now + 30_000, at=now + 400, now=now + 1_500)
        assert await store.try_take("erp", policy, 1, now + 1_500) == 0
        await store.settle("erp", policy, "nope", stamp=now + 30_000, at=now, now=now + 1_500)
    members = await redis_client.zrange(f"{redis_prefix}budget:erp", 0, -1, withscores=True)
    assert [int(score) for _, score in members] == [now + 1_500, now + 1_500]
    assert [(g.time, g.cost) for g in memory.peek("erp")] == [(now + 1_500, 1), (now + 1_500, 1)]
    ttl = await redis_client.pttl(f"{redis_prefix}budget:erp")
    assert 0 < ttl <= 1_000


# --- usage: how much of a budget is in use -----------------------------------------------


def test_window_use_is_the_costs_still_in_the_window() -> None:
    policy = BudgetPolicy(requests=5, per_ms=1_000)
    log = (Grant(0, 1), Grant(400, 2), Grant(999, 0.5))
    assert window_used(log, policy, 999) == 3.5
    assert window_used(log, policy, 1_000) == 2.5  # the grant at 0 stops counting at 1_000
    assert window_used(log, policy, 1_400) == 0.5
    assert window_used(log, policy, 1_999) == 0.0
    assert window_used((), policy, 5) == 0.0
    # A held grant, logged at its stamp ahead of now, counts already.
    assert window_used((Grant(0, 1), Grant(30_000, 1, "t")), policy, 10) == 2.0


def test_bucket_use_is_the_tokens_not_yet_refilled() -> None:
    policy = BudgetPolicy(requests=10, per_ms=1_000, burst=3)  # one token per 100 ms
    assert bucket_used(None, policy, 0) == 0.0
    tat: float | None = None
    for _ in range(3):
        tat, wait = take_bucket(tat, policy, 1, 0)
        assert wait == 0
    assert bucket_used(tat, policy, 0) == 3.0
    assert bucket_used(tat, policy, 150) == 1.5
    assert bucket_used(tat, policy, 300) == 0.0
    assert bucket_used(tat, policy, 10_000) == 0.0


@pytest.mark.redis
async def test_redis_and_memory_agree_on_the_use_of_every_budget(
    redis_budget: RedisBudgetStore,
) -> None:
    chance = random.Random(20261201)
    memory = InMemoryBudgetStore()
    policies = {
        "a": BudgetPolicy(7, 60_000),
        "b": BudgetPolicy(4, 5_000),
        "c": BudgetPolicy(10, 1_000, burst=3),
    }
    now, uses = 1_767_225_600_000, set()
    for step in range(400):
        name = chance.choice("abc")
        policy = policies[name]
        cost = chance.choice([0, 1, 1, 2, 0.25, 1 / 3, 0.1])
        # Redis expires an idle bucket in its own (real) time: the virtual clock must run
        # ahead of it, so every step moves it on by more than a step takes.
        now += chance.choice([250, 260, 333, 480, 1_000, 4_999])
        if chance.random() < 0.3:
            ticket = f"t{step}"
            if policy.burst is None:
                await memory.try_hold(name, policy, cost, now, stamp=now + 200, ticket=ticket)
                await redis_budget.try_hold(name, policy, cost, now, stamp=now + 200, ticket=ticket)
        else:
            await memory.try_take(name, policy, cost, now)
            await redis_budget.try_take(name, policy, cost, now)
        for other, other_policy in policies.items():
            later = now + chance.choice([0, 50, 999])
            pair = (
                await memory.usage(other, other_policy, later),
                await redis_budget.usage(other, other_policy, later),
            )
            assert pair[0] == pair[1], (step, other, later)
            assert 0 <= pair[0] <= (other_policy.burst or other_policy.requests)
            uses.add(pair[0])
    assert len(uses) > 20  # the run met many different uses, not only empty budgets
    assert await redis_budget.usage("never-used", policies["a"], now) == 0.0


async def test_the_manager_reports_each_budget_with_its_use_and_queue() -> None:
    clock = VirtualClock(1_000_000)
    store = InMemoryBudgetStore()
    manager = BudgetManager(
        {"erp": Budget(requests=2, per="1s"), "crm": Budget(requests=10, per="1m", burst=4)},
        store,
        clock,
    )
    assert manager.names == ("erp", "crm")
    empty = await manager.usage("erp")
    assert (empty.used, empty.requests, empty.per_ms, empty.burst, empty.waiting) == (
        0.0,
        2,
        1_000,
        None,
        0,
    )

    def ask(budget: str, requester: str) -> Coroutine[Any, Any, int]:
        return manager.acquire(
            budget, requester=requester, lane="live", weight=1.0, cost=1.0, max_wait_ms=60_000
        )

    await ask("erp", "a")
    await ask("erp", "a")
    third = asyncio.ensure_future(ask("erp", "b"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    full = await manager.usage("erp")
    assert (full.used, full.waiting) == (2.0, 1)
    await ask("crm", "a")
    assert (await manager.usage("crm")).used == 1.0
    with pytest.raises(ConfigError, match="unknown budget"):
        await manager.usage("nope")
    await clock.advance_ms(1_000)
    await third
    assert (await manager.usage("erp")).used == 1.0


async def test_without_a_usage_read_the_store_reports_an_unknown_use() -> None:
    class Minimal:
        async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
            return 0

    manager = BudgetManager({"erp": Budget(requests=2, per="1s")}, Minimal(), VirtualClock(0))
    assert (await manager.usage("erp")).used is None
