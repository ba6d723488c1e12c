"""The token-bucket arithmetic, in process and in Redis: the same answers, call for call."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from watukuy.budget import InMemoryBudgetStore
from watukuy.budget.bucket import Bucket, take
from watukuy.core.errors import ConfigError
from watukuy.core.ports import BudgetPolicy, BudgetStore
from watukuy.stores.redis import RedisBudgetStore

POLICY = BudgetPolicy(requests=10, per_ms=1_000)  # 10 tokens, one every 100 ms

# (cost, now, expected wait in ms), played in order against one bucket.
SCRIPT: list[tuple[float, int, int]] = [
    (10, 0, 0),  # a new bucket is full: the whole burst at once
    (1, 0, 100),  # empty: one token is 100 ms away, and nothing is taken
    (1, 50, 50),  # half a token refilled: 50 ms to go
    (1, 100, 0),  # exactly one token
    (0, 100, 0),  # cost 0 never waits (and takes nothing)
    (5, 300, 300),  # two tokens after 200 ms, three missing
    (2, 300, 0),  # the two are there
    (0.5, 340, 10),  # a partial refill of 0.4 tokens; 0.1 missing
    (0.5, 350, 0),
    (3, 200, 300),  # the clock went back: no refill, no negative refill
    (3, 650, 0),  # refill counts from 350, the latest time seen
    (4, 60_000, 0),  # a long idle spell refills to the cap, never beyond
    (7, 60_000, 100),  # 6 left, so 1 missing
    (11, 60_000, 500),  # more than the bucket holds: always asked to wait
    (11, 61_000, 100),  # full again, still one short
    (0, 61_000, 0),
    (10, 61_000, 0),
]


def _wanted(bucket: Bucket | None, cost: float, now: int) -> tuple[float, int]:
    """The same rules written out independently of :func:`take`, in plain arithmetic."""
    tokens, updated = (
        (POLICY.requests, now) if bucket is None else (bucket.tokens, bucket.updated_at)
    )
    if now > updated:
        tokens = min(POLICY.requests, tokens + (now - updated) * POLICY.requests / POLICY.per_ms)
    if tokens >= cost:
        return tokens - cost, 0
    return tokens, math.ceil((cost - tokens) * POLICY.per_ms / POLICY.requests)


def test_take_follows_the_script() -> None:
    bucket: Bucket | None = None
    for step, (cost, now, wait) in enumerate(SCRIPT):
        tokens_wanted, wait_wanted = _wanted(bucket, cost, now)
        bucket, got = take(bucket, POLICY, cost, now)
        assert (got, wait_wanted) == (wait, wait), f"step {step}: {(cost, now)}"
        assert bucket.tokens == pytest.approx(tokens_wanted, abs=1e-12), f"step {step}"


def test_a_new_bucket_starts_full_at_now() -> None:
    assert take(None, POLICY, 0, 5_000) == (Bucket(10.0, 5_000), 0)
    assert take(None, POLICY, 4, 5_000) == (Bucket(6.0, 5_000), 0)


def test_time_never_runs_backwards_for_a_bucket() -> None:
    bucket, wait = take(Bucket(0.0, 1_000), POLICY, 1, 400)
    assert (bucket, wait) == (Bucket(0.0, 1_000), 100)


@pytest.mark.parametrize("cost", [-1, math.nan, math.inf, "1", True])
async def test_a_bad_cost_is_a_config_error(cost: Any) -> None:
    with pytest.raises(ConfigError, match=rf"^cost: expected a finite number >= 0, got {cost!r}"):
        await InMemoryBudgetStore().try_take("erp", POLICY, cost, 0)


@pytest.mark.parametrize(
    ("policy", "field"),
    [(BudgetPolicy(0, 1_000), "requests"), (BudgetPolicy(10, 0), "per_ms")],
)
async def test_a_bad_policy_is_a_config_error(policy: BudgetPolicy, field: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{field}: expected a positive integer, got 0$"):
        await InMemoryBudgetStore().try_take("erp", policy, 1, 0)


async def test_buckets_are_per_budget_name() -> None:
    store = InMemoryBudgetStore()
    assert isinstance(store, BudgetStore)
    assert await store.try_take("a", POLICY, 10, 0) == 0
    assert await store.try_take("b", POLICY, 10, 0) == 0
    assert await store.try_take("a", POLICY, 1, 0) == 100
    assert store.peek("a") == Bucket(0.0, 0)
    assert store.peek("c") is None
    store.clear()
    assert await store.try_take("a", POLICY, 10, 0) == 0


# --- Redis: the Lua mirror ----------------------------------------------------------------


@pytest.fixture
def redis_budget(redis_client: Any, redis_prefix: str) -> RedisBudgetStore:
    return RedisBudgetStore(redis_client, prefix=redis_prefix)


@pytest.mark.redis
async def test_redis_follows_the_script(redis_budget: RedisBudgetStore) -> None:
    memory = InMemoryBudgetStore()
    for step, (cost, now, wait) in enumerate(SCRIPT):
        answers = (
            await memory.try_take("erp", POLICY, cost, now),
            await redis_budget.try_take("erp", POLICY, cost, now),
        )
        assert answers == (wait, wait), f"step {step}: {(cost, now)}"


@pytest.mark.redis
async def test_redis_and_memory_agree_on_a_long_random_run(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    chance = random.Random(20260101)
    memory = InMemoryBudgetStore()
    policies = {"a": BudgetPolicy(7, 60_000), "b": BudgetPolicy(1_000, 1_000)}
    now, answers = 1_767_225_600_000, []
    for _ in range(600):
        name = chance.choice("ab")
        cost = chance.choice([0, 1, 1, 2, 0.25, 1 / 3, 7.5, chance.random() * 3])
        now += chance.choice([0, 0, 1, 7, 333, 8_571, -50])
        policy = policies[name]
        pair = (
            await memory.try_take(name, policy, cost, now),
            await redis_budget.try_take(name, policy, cost, now),
        )
        answers.append(pair)
        assert pair[0] == pair[1], (name, cost, now)
    assert {a for a, _ in answers} != {0}  # the run exercised waiting, not only granting
    for name in "ab":  # and the stored buckets are the same doubles
        stored = await redis_client.hgetall(f"{redis_prefix}budget:{name}")
        bucket = memory.peek(name)
        assert bucket is not None
        assert float(stored[b"tokens"]) == bucket.tokens
        assert int(float(stored[b"updated_at"])) == bucket.updated_at


@pytest.mark.redis
async def test_redis_buckets_live_under_the_prefix(
    redis_budget: RedisBudgetStore, redis_client: Any, redis_prefix: str
) -> None:
    assert await redis_budget.try_take("erp", POLICY, 2.5, 1_000) == 0
    assert await redis_client.hgetall(f"{redis_prefix}budget:erp") == {
        b"tokens": b"7.5",
        b"updated_at": b"1000",
    }
    with pytest.raises(ConfigError, match=r"^cost: "):
        await redis_budget.try_take("erp", POLICY, -1, 1_000)
