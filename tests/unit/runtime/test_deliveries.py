"""Deliveries: the one caller of a key run's dispatcher, and what it counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from watukuy.model.events import WrittenPage
from watukuy.model.rows import OutboxRow
from watukuy.runtime.consumers import Consumers
from watukuy.runtime.deliveries import Deliveries
from watukuy.runtime.dispatcher import Dispatcher, DrainResult

_CONSUMERS = cast(Consumers, object())
_ROWS = cast(Sequence[OutboxRow], ("row",))
_PAGE = cast(WrittenPage, object())


class FakeDispatcher:
    """Answers each drain with the next scripted result and records the calls."""

    def __init__(self, *results: DrainResult, settle_fails: bool = False) -> None:
        self._results = list(results)
        self._settle_fails = settle_fails
        self.calls: list[tuple[Any, ...]] = []

    async def drain(
        self,
        consumers: Consumers | None,
        committed: Sequence[OutboxRow] = (),
        events: WrittenPage | None = None,
        *,
        settle: bool = True,
    ) -> DrainResult:
        self.calls.append(("drain", consumers, tuple(committed), events, settle))
        return self._results.pop(0)

    async def settle(self) -> None:
        self.calls.append(("settle",))
        if self._settle_fails:
            raise RuntimeError("the ack writer failed")


def _deliveries(dispatcher: FakeDispatcher) -> Deliveries:
    return Deliveries(cast(Dispatcher, dispatcher), _CONSUMERS)


async def test_the_outbox_is_delivered_with_its_acks_awaited_and_counted_at_once() -> None:
    dispatcher = FakeDispatcher(DrainResult(delivered=3))
    deliveries = _deliveries(dispatcher)

    await deliveries.deliver()

    assert dispatcher.calls == [("drain", _CONSUMERS, (), None, True)]
    assert deliveries.take().delivered == 3
    assert deliveries.drained.delivered == 3


async def test_a_handed_page_counts_once_its_acks_settled() -> None:
    handed = DrainResult(delivered=1)
    dispatcher = FakeDispatcher(handed)
    deliveries = _deliveries(dispatcher)

    await deliveries.hand(_ROWS, _PAGE)
    handed.delivered = 2  # the acks still being written land after the hand-over
    assert dispatcher.calls == [("drain", _CONSUMERS, ("row",), _PAGE, False)]
    assert deliveries.take().delivered == 0
    assert deliveries.drained.delivered == 0

    await deliveries.settle()

    assert deliveries.take().delivered == 2
    assert deliveries.drained.delivered == 2


async def test_take_splits_the_run_into_steps_and_drained_keeps_the_whole_run() -> None:
    deliveries = _deliveries(
        FakeDispatcher(
            DrainResult(delivered=1), DrainResult(delivered=4, failed=1), DrainResult(delivered=2)
        )
    )

    await deliveries.deliver()
    first = deliveries.take()
    await deliveries.hand(_ROWS, _PAGE)
    await deliveries.settle()
    await deliveries.deliver(_ROWS, _PAGE)
    second = deliveries.take()

    assert (first.delivered, first.failed) == (1, 0)
    assert (second.delivered, second.failed) == (6, 1)
    assert deliveries.take() == DrainResult()
    assert (deliveries.drained.delivered, deliveries.drained.failed) == (7, 1)


async def test_a_halt_is_known_as_soon_as_the_page_is_handed() -> None:
    deliveries = _deliveries(FakeDispatcher(DrainResult(halted=True)))
    assert not deliveries.halted()

    await deliveries.hand(_ROWS, _PAGE)

    assert deliveries.halted()
    assert not deliveries.drained.halted  # not counted before its acks settled
    await deliveries.settle()
    assert deliveries.halted()
    assert deliveries.take().halted


async def test_what_landed_is_counted_even_when_waiting_for_the_acks_fails() -> None:
    deliveries = _deliveries(FakeDispatcher(DrainResult(delivered=5), settle_fails=True))
    await deliveries.hand(_ROWS, _PAGE)

    with pytest.raises(RuntimeError, match="ack writer"):
        await deliveries.settle()

    assert deliveries.take().delivered == 5
    with pytest.raises(RuntimeError):
        await deliveries.settle()  # a second wait counts nothing twice
    assert deliveries.take().delivered == 0
    assert deliveries.drained.delivered == 5
