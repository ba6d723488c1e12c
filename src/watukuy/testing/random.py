"""Reproducible randomness for tests and simulations."""

from __future__ import annotations

import random as _random
from collections.abc import MutableSequence, Sequence
from typing import TypeVar

__all__ = ["SeededRandom"]

T = TypeVar("T")


class SeededRandom:
    """A :class:`~watukuy.model.ports.Random` that gives the same sequence for the same seed.

    Args:
        seed: Any integer; equal seeds give equal sequences on every platform.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._random = _random.Random(seed)

    def random(self) -> float:
        """A float uniformly distributed in ``[0, 1)`` (the ``Random`` port)."""
        return self._random.random()

    def next(self) -> float:
        """Same as :meth:`random`."""
        return self._random.random()

    def int(self, low: int, high: int) -> int:
        """An integer uniformly distributed in ``[low, high]`` (both inclusive)."""
        return self._random.randint(low, high)

    def pick(self, items: Sequence[T]) -> T:
        """One element of a non-empty sequence."""
        if not items:
            raise ValueError("pick() from an empty sequence")
        return items[self._random.randrange(len(items))]

    def shuffle(self, items: MutableSequence[T]) -> MutableSequence[T]:
        """Shuffle in place and return the same sequence."""
        self._random.shuffle(items)
        return items

    def chance(self, probability: float) -> bool:
        """``True`` with the given probability."""
        return self._random.random() < probability

    def fork(self) -> SeededRandom:
        """An independent generator derived from this one (for a sub-simulation)."""
        return SeededRandom(self._random.getrandbits(63))

    def __repr__(self) -> str:
        return f"SeededRandom(seed={self.seed})"
