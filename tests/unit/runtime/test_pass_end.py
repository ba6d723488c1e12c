"""``PassEnd`` releases confirmed held deletes with a store, a lease, a clock, the poller and
an event maker and a commit and delivery path: no lane cycle, no engine."""

from __future__ import annotations

import logging
from typing import Any

import watukuy as wk
from watukuy.model.events import Event, WrittenPage
from watukuy.model.redact import DEFAULT_REDACTION
from watukuy.model.rows import (
    CommitBatch,
    HeldDeletes,
    ItemRow,
    ListingPass,
    ListingState,
    OutboxRow,
    PKey,
)
from watukuy.pipeline.events import EventMaker
from watukuy.runtime._hook_names import HookContext
from watukuy.runtime._hookbus import HookBus
from watukuy.runtime.context import FetchContext
from watukuy.runtime.lease import LeaseKeeper
from watukuy.runtime.page_build import page_rules
from watukuy.runtime.pass_end import DeletePath, PassEnd

KEY = PKey("catalog", "")
LOGGER = logging.getLogger("test_pass_end")


class _Path:
    """An emit path that writes the events and remembers what went where."""

    def __init__(self, store: wk.MemoryStore, keeper: LeaseKeeper) -> None:
        self.store = store
        self.keeper = keeper
        self.commits: list[tuple[CommitBatch, int]] = []
        self.delivered: list[str] = []

    async def commit(
        self, batch: CommitBatch, observed: list[Event[Any]] | None, deletes: int
    ) -> None:
        await self.store.commit_poll(KEY, self.keeper.lease, batch)
        self.commits.append((batch, deletes))

    async def deliver(self, rows: list[OutboxRow], page: WrittenPage) -> None:
        self.delivered.extend(page.subject(i) for i in range(len(page)))


def _context() -> FetchContext[Any]:
    raise AssertionError("no verify= here")


async def test_confirmed_held_deletes_are_released_without_a_lane_cycle(lease_key: Any) -> None:
    leased = await lease_key(KEY)
    store, clock, keeper = leased.store, leased.clock, leased.keeper
    lease = keeper.lease
    rows = [ItemRow(identity, None, f"h-{identity}", 1) for identity in ("a", "b", "c")]
    await store.commit_poll(KEY, lease, CommitBatch(upserts=rows, seen=["a", "b"], seen_pass=1))
    await store.commit_poll(KEY, lease, CommitBatch(seen=["c"], seen_pass=3))
    held = HeldDeletes(lane="live", below=2, count=2, snapshot=3, held_at=0, confirmed=True)
    listing = ListingState(counter=3, lanes={"live": ListingPass(last_missed=2)})
    await store.save_state(KEY, lease, {"held_deletes": held, "listing": listing})
    state = await store.load_state(KEY)
    assert state is not None

    poller = wk.define_poller(
        name=KEY.poller, fetch=lambda ctx: [], identity=lambda o: o["id"], cursor=wk.SnapshotDiff()
    )
    path = _Path(store, keeper)
    ending = PassEnd(
        store=store,
        key=KEY,
        lane="live",
        keeper=keeper,
        clock=clock,
        poller=poller,
        hooks=HookBus([], LOGGER).emitter(
            HookContext(poller=KEY.poller, partition=KEY.partition, lane="live", instance_id="me")
        ),
        logger=LOGGER,
        events=EventMaker(
            page_rules(
                poller,
                strategy=poller.strategy,
                key=KEY,
                lane="live",
                full_scan=True,
                redaction=DEFAULT_REDACTION,
            )
        ),
        path=DeletePath(commit=path.commit, deliver=path.deliver),
        context=_context,
    )
    state, emitted = await ending.release_held(state)

    assert emitted == 2
    assert path.delivered == ["a", "b"]
    assert [(list(batch.deletes), deletes) for batch, deletes in path.commits] == [(["a", "b"], 2)]
    saved = await store.load_state(KEY)
    assert saved is not None
    assert saved == state
    assert saved.held_deletes is None
    assert saved.listing.lanes["live"].last_missed == 0
    assert saved.sequence == 2
    assert await store.count_items(KEY) == 1
    assert await store.count_pending(KEY) == 2
