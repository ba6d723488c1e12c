"""What the engine remembers about single keys between their runs, outside the store.

Both ways of running keys read these marks: the daemon (:mod:`~watukuy.runtime.daemon`) and
``tick()`` (:mod:`~watukuy.runtime.tick`); the engine's key run writes the store backoff.
"""

from __future__ import annotations

from dataclasses import field

from watukuy.model.records import dataclass
from watukuy.model.rows import PKey

__all__ = ["KeyMarks"]


@dataclass(slots=True)
class KeyMarks:
    """Per-key marks of this process.

    Attributes:
        forced: Keys whose next run is forced (a trigger asked for it, or a run was asked
            for while the key ran): it runs even if its stored state says it is not due.
        store_backoff: Keys whose last run failed before its state could be saved (the
            store failing): ``(failures in a row, no new run before this time)``. The store
            that would keep their schedule is the one failing, so it is kept here.
    """

    forced: set[PKey] = field(default_factory=set)
    store_backoff: dict[PKey, tuple[int, int]] = field(default_factory=dict)

    def take_forced(self, key: PKey) -> bool:
        """Whether ``key``'s next run is forced; the mark is used up."""
        forced = key in self.forced
        self.forced.discard(key)
        return forced
