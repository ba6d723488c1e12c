"""A logger that keeps what it is given, for assertions: ``Engine(logger=CapturingLogger())``.

The engine's lines about one key carry ``poller`` and ``partition`` fields; the logger
reads them, so a test asks for ``log.for_poller("orders")`` instead of matching text.
"""

from __future__ import annotations

import logging

__all__ = ["CapturingLogger"]


class _Keep(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.NOTSET)
        self._into = into

    def emit(self, record: logging.LogRecord) -> None:
        self._into.append(record)


class CapturingLogger(logging.Logger):
    """A ``logging.Logger`` that keeps every record it is given, and prints none.

    It stands outside the ``logging`` hierarchy (no parent, nothing propagates), so what it
    keeps is exactly what the code under test gave it, whatever the process's logging
    configuration. Example::

        log = CapturingLogger()
        engine = wk.Engine(store=wk.MemoryStore(), pollers=[orders], logger=log)
        ...
        assert log.for_poller("orders").at("WARNING").messages == []

    Args:
        name: The logger's name, as records show it.
        level: The lowest level kept (default: everything).
    """

    def __init__(self, name: str = "watukuy.test", level: int | str = logging.DEBUG) -> None:
        super().__init__(name, level)
        self.propagate = False
        self._records: list[logging.LogRecord] = []
        self.addHandler(_Keep(self._records))

    @property
    def records(self) -> list[logging.LogRecord]:
        """The records kept, oldest first (a copy)."""
        return list(self._records)

    @property
    def messages(self) -> list[str]:
        """The formatted message of each record kept, oldest first."""
        return [record.getMessage() for record in self._records]

    def at(self, level: int | str) -> CapturingLogger:
        """A logger holding the records kept at ``level`` or above (``"WARNING"``, ``30``).

        Raises:
            ValueError: ``level`` is not a level name ``logging`` knows.
        """
        number = _level_number(level)
        return self._holding([r for r in self._records if r.levelno >= number])

    def for_poller(self, poller: str, partition: str | None = None) -> CapturingLogger:
        """A logger holding the records about ``poller`` (and ``partition``, when given).

        A record is about a key when it has the ``poller`` field (and ``partition``) the
        engine gives every line of a key run.
        """
        return self._holding(
            [
                r
                for r in self._records
                if getattr(r, "poller", None) == poller
                and (partition is None or getattr(r, "partition", None) == partition)
            ]
        )

    def clear(self) -> None:
        """Forget every record kept so far."""
        self._records.clear()

    def _holding(self, records: list[logging.LogRecord]) -> CapturingLogger:
        view = CapturingLogger(self.name, self.level)
        view._records.extend(records)
        return view


def _level_number(level: int | str) -> int:
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown logging level {level!r}")
    return number
