"""A hook set added to an engine after it was built: it hears the next cycles, and nothing
once it is removed."""

from __future__ import annotations

import pytest

import watukuy as wk
from watukuy.runtime.hooks import CommitDetails, FetchDetails, Hooks

from .conftest import World, item, orders, seed, timestamp_fetch


class Pages(Hooks):
    """Items per page fetched, and events per commit."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.events: list[int] = []

    def on_fetch(self, details: FetchDetails) -> None:
        self.items.append(details.items)

    async def on_commit(self, details: CommitDetails) -> None:
        self.events.append(details.events)


async def test_an_added_hook_set_hears_the_cycles_until_it_is_removed(world: World) -> None:
    seed(world, 12)
    engine = world.engine(orders(fetch=timestamp_fetch(limit=5)))
    engine.on("orders", lambda event, ctx: None)
    pages = Pages()
    remove = engine.add_hooks(pages)

    await engine.tick()
    assert pages.items == [5, 5, 2]
    assert sum(pages.events) == 12

    remove()
    world.api.add(item(13, "2025-12-31T13:00:00.000Z"))
    await world.clock.advance("10m")
    result = await engine.tick()
    assert result.polled[0].events == 1  # the cycle ran, and the removed set heard none of it
    assert (pages.items, sum(pages.events)) == ([5, 5, 2], 12)


async def test_an_object_without_hooks_is_refused(world: World) -> None:
    engine = world.engine(orders())
    with pytest.raises(wk.ConfigError, match=r"^hooks: "):
        engine.add_hooks(object())
