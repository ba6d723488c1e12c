"""The same promises on every connection kind: once per id, nothing left by a failure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from inbox_kinds import Boom, Consumer, make_event


async def test_a_fresh_event_applies_and_its_redeliveries_do_not(consumer: Consumer) -> None:
    first, second = make_event(1), make_event(2)
    assert await consumer.apply(first) is True
    assert await consumer.apply(first) is False
    assert await consumer.apply(second) is True
    assert await consumer.apply(first) is False
    assert await consumer.count() == 2
    assert await consumer.ids() == 2


async def test_a_failed_effect_leaves_neither_the_effect_nor_the_id(consumer: Consumer) -> None:
    event = make_event(7)
    with pytest.raises(Boom):
        await consumer.apply(event, fail=True)
    assert (await consumer.count(), await consumer.ids()) == (0, 0)
    assert await consumer.apply(event) is True  # the retry is fresh
    assert (await consumer.count(), await consumer.ids()) == (1, 1)


async def test_the_same_id_of_another_poller_is_another_event(consumer: Consumer) -> None:
    assert await consumer.apply(make_event(3, poller="orders")) is True
    assert await consumer.apply(make_event(3, poller="invoices")) is True
    assert await consumer.count() == 2


async def test_migrate_runs_again_without_harm(consumer: Consumer) -> None:
    await consumer.apply(make_event(1))
    await consumer.migrate()
    assert await consumer.ids() == 1


async def test_prune_goes_by_event_time(consumer: Consumer) -> None:
    await consumer.apply(make_event(1, time="2026-01-01T00:00:00.000Z"))
    await consumer.apply(make_event(2, time="2026-02-01T00:00:00.000Z"))
    await consumer.apply(make_event(3, time="2026-03-01T00:00:00.000Z"))
    assert await consumer.prune(older_than=datetime(2026, 2, 1, tzinfo=UTC)) == 1
    assert await consumer.ids() == 2
    # A pruned id is forgotten: its event would be applied again.
    assert await consumer.apply(make_event(1, time="2026-01-01T00:00:00.000Z")) is True
    assert await consumer.prune(older_than="0s") == 3  # everything observed before now
    assert await consumer.prune() == 0
