"""Writers that commit out of stamp order, as a database-backed API's do.

Each writer stamps its row's ``updated_at`` when its transaction starts and makes the row
visible in a :class:`~watukuy.testing.FakeApi` only when the transaction commits, a little
later; a share of the transactions are slow (a lock wait, a request that holds its
transaction open). The defaults are what a Django REST Framework API over PostgreSQL showed
with transactions held up to 3 s: commits up to 4.3 s after the stamp. Used by the
late-commit tests and ``python -m bench lookback``; not part of the public surface.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from watukuy.model.events import iso_time

from .fake_api import FakeApi

__all__ = ["LateWriters", "WrittenVersion"]


@dataclass(slots=True)
class WrittenVersion:
    """One committed version: visible from ``visible_at`` until ``replaced_at``."""

    identity: str
    version: int
    visible_at: int
    replaced_at: int | None = None


@dataclass(slots=True)
class LateWriters:
    """Start a few transactions per step on ``ids`` rows and commit each when its time comes.

    Attributes:
        api: Where committed rows become visible.
        rng: The source of every choice (seed it for a reproducible run).
        ids: How many distinct rows the writers update.
        per_step: Most transactions started in one step (at least none).
        slow_share: The share of transactions that commit between ``slow_ms`` after their
            stamp; the others commit within ``fast_ms``.
        history: Every version committed, in commit order.
    """

    api: FakeApi
    rng: random.Random
    ids: int = 60
    per_step: int = 3
    slow_share: float = 0.1
    slow_ms: tuple[int, int] = (3_000, 4_300)
    fast_ms: tuple[int, int] = (0, 1_500)
    history: list[WrittenVersion] = field(default_factory=list)
    _pending: list[tuple[int, str, int, int]] = field(default_factory=list)
    _versions: dict[str, int] = field(default_factory=dict)
    _current: dict[str, WrittenVersion] = field(default_factory=dict)

    def step(self, now: int) -> None:
        """Start this step's transactions, stamped ``now``, then commit every one whose
        time has come, oldest commit first."""
        rng = self.rng
        for _ in range(rng.randint(0, self.per_step)):
            identity = f"o{rng.randint(1, self.ids):03d}"
            version = self._versions[identity] = self._versions.get(identity, 0) + 1
            low, high = self.slow_ms if rng.random() < self.slow_share else self.fast_ms
            self._pending.append((now + int(rng.uniform(low, high)), identity, now, version))
        due = sorted(entry for entry in self._pending if entry[0] <= now)
        for entry in due:
            self._pending.remove(entry)
            _, identity, stamp, version = entry
            fields = {"updated_at": iso_time(stamp), "version": version, "status": "v"}
            if self.api.get(identity) is None:
                self.api.add({"id": identity, **fields})
            else:
                self.api.update(identity, **fields)
            previous = self._current.get(identity)
            if previous is not None:
                previous.replaced_at = now
            written = self._current[identity] = WrittenVersion(identity, version, now)
            self.history.append(written)

    def final(self) -> dict[str, int]:
        """Each row's last committed version."""
        return {identity: written.version for identity, written in self._current.items()}

    def lost(
        self, delivered: set[tuple[str, int]], visible_ms: int = 10_000
    ) -> list[WrittenVersion]:
        """The versions that stayed visible ``visible_ms`` or more (or are still current)
        and are not among the ``(identity, version)`` pairs ``delivered``."""
        return [
            written
            for written in self.history
            if (
                written.replaced_at is None
                or written.replaced_at - written.visible_at >= visible_ms
            )
            and (written.identity, written.version) not in delivered
        ]
