"""Must NOT type-check: hook sets whose methods do not fit the records they receive.

Each ``# case:`` region (up to the next one) must draw at least one error from mypy --strict
and from pyright --strict, and the code before the first case none
(``tests/e2e/test_typing.py``).
"""

from __future__ import annotations

import watukuy as wk
from watukuy.runtime.hooks import CommitDetails, FetchDetails, Hooks, ParkedDetails


class Fine(Hooks):
    def on_fetch(self, details: FetchDetails) -> None:
        print(details.page, details.items, details.poller)

    async def on_parked(self, details: ParkedDetails) -> None:
        print(details.row.id)


engine = wk.Engine(store=wk.MemoryStore(), pollers=[], hooks=[Fine()])


# case: a hook given another hook's record
class WrongRecord(Hooks):
    def on_fetch(self, details: CommitDetails) -> None:
        print(details.upserts)


# case: a field the record does not have (a typo)
class Typo(Hooks):
    def on_fetch(self, details: FetchDetails) -> None:
        print(details.pages)


# case: a hook that returns something other than None or an awaitable of None
class Returns(Hooks):
    def on_commit(self, details: CommitDetails) -> int:
        return details.events


# case: a hook that takes more than its record
class TooMany(Hooks):
    def on_parked(self, details: ParkedDetails, extra: int) -> None:
        print(extra)
