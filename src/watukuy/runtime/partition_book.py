"""What the engine knows of each poller's partitions.

A partitioned poller's ``partitions()`` is called again every ``partitions_refresh``; the
:class:`PartitionBook` keeps the last list, an index by key, which keys appeared since the
last ``tick()`` and which were removed (paused in the store, resumed when they come back).
It also walks the rolling audit, a few keys at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from watukuy.model.errors import ConfigError
from watukuy.model.partition import Partition
from watukuy.model.ports import Clock, StateStore
from watukuy.model.rows import PKey

from .poller import PollerDefinition

__all__ = ["AUDIT_BATCH", "PartitionBook"]

_log = logging.getLogger("watukuy")

# The daemon re-reads the state of this many keys per resync, in turn: a rolling audit that
# finds an index entry a crash or a Redis cluster left stale, at a cost per pass that does
# not grow with the number of keys.
AUDIT_BATCH = 16

_SINGLE = Partition("")


class PartitionBook:
    """The partitions of every poller of one engine, refreshed when due.

    Args:
        pollers: The engine's pollers by name.
        store: Where removed partitions are paused and returning ones resumed.
        clock: The engine's clock.
        appeared: Called with each key that was listed for the first time (or again).
        disappeared: Called with each key no longer listed.
        logger: Where a failing refresh is reported.
    """

    def __init__(
        self,
        pollers: Mapping[str, PollerDefinition[Any]],
        store: StateStore,
        clock: Clock,
        *,
        appeared: Callable[[PKey, int], None],
        disappeared: Callable[[PKey], None],
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    ) -> None:
        self._log = logger
        self._pollers = pollers
        self._store = store
        self._clock = clock
        self._appeared = appeared
        self._disappeared = disappeared
        self._lists: dict[str, list[Partition]] = {}
        self._index: dict[str, dict[str, Partition]] = {}
        self._listed_at: dict[str, int] = {}
        self._fresh: dict[str, set[str]] = {}
        self._removed: dict[str, set[str]] = {}
        self._audit_at: dict[str, int] = {}
        self._raw: dict[str, list[Any]] = {}  # what partitions() returned last, as listed

    async def of(self, name: str, *, force: bool = False) -> list[Partition]:
        """The current partitions of a poller, calling ``partitions()`` again when its
        refresh period is over (or ``force``). A failing refresh keeps the previous list;
        a failing first call raises."""
        poller = self._pollers[name]
        if poller.partitions is None:
            return [_SINGLE]
        now = self._clock.now()
        last = self._listed_at.get(name)
        if not force and last is not None and now - last < poller.partitions_refresh_ms:
            return self._lists[name]
        try:
            raw = await _listed(poller)
            if name in self._lists and _same(raw, self._raw.get(name)):
                # The usual refresh: the same tenants as last time. Nothing to rebuild.
                self._listed_at[name] = now
                return self._lists[name]
            listed = _checked(poller, raw)
        except Exception as error:
            if name not in self._lists:
                raise
            self._log.warning(
                "partitions() of %s failed, keeping the previous list: %s", name, error
            )
            self._listed_at[name] = now
            return self._lists[name]
        await self._apply(name, listed, first=last is None)
        self._raw[name] = raw
        self._listed_at[name] = now
        return self._lists[name]

    def named(self, key: PKey) -> Partition | None:
        """The listed partition of a key, or ``None`` when it is not (or no longer) listed."""
        if self._pollers[key.poller].partitions is None:
            return _SINGLE if key.partition == "" else None
        return self._index.get(key.poller, {}).get(key.partition)

    def pick(self, name: str, keys: list[str]) -> list[Partition]:
        """The listed partitions among ``keys``, in the order given, without repeats."""
        if self._pollers[name].partitions is None:
            return [_SINGLE] if "" in keys else []
        index = self._index.get(name, {})
        return [index[key] for key in dict.fromkeys(keys) if key in index]

    def next_refresh(self, name: str) -> int | None:
        """When the partitions of a poller are due to be listed again (``None``: never
        listed yet, or not partitioned)."""
        poller = self._pollers[name]
        last = self._listed_at.get(name)
        if poller.partitions is None or last is None:
            return None
        return last + poller.partitions_refresh_ms

    def take_fresh(self, name: str) -> set[str]:
        """Partition keys listed since the last call, forgotten once returned."""
        return self._fresh.pop(name, set())

    def audit_slice(self, name: str, partitions: list[Partition]) -> list[Partition]:
        """The next :data:`AUDIT_BATCH` partitions of the rolling audit, wrapping around."""
        if not partitions:
            return []
        start = self._audit_at.get(name, 0) % len(partitions)
        chosen = partitions[start : start + AUDIT_BATCH]
        if len(chosen) < AUDIT_BATCH:
            chosen += partitions[: min(start, AUDIT_BATCH - len(chosen))]
        self._audit_at[name] = start + len(chosen)
        return chosen

    async def _apply(self, name: str, listed: list[Partition], *, first: bool) -> None:
        before = self._index.get(name, {})
        current = {partition.key: partition for partition in listed}
        now = self._clock.now()
        if first:
            stored = {key.partition for key in await self._store.list_keys(name)}
            gone = stored - current.keys()
        else:
            gone = before.keys() - current.keys()
        removed = self._removed.setdefault(name, set())
        for partition in sorted(gone):
            key = PKey(name, partition)
            state = await self._store.load_state(key)
            if state is not None and not state.paused:
                await self._store.save_state_unfenced(
                    key, {"paused": True, "updated_at": now, "wake_at": None}, now
                )
                removed.add(partition)
            self._disappeared(key)
        new = current.keys() - before.keys()
        self._fresh.setdefault(name, set()).update(new)
        for partition in sorted(new):
            key = PKey(name, partition)
            if partition in removed:
                removed.discard(partition)
                await self._store.save_state_unfenced(
                    key, {"paused": False, "updated_at": now, "wake_at": now}, now
                )
            self._appeared(key, now)
        self._lists[name] = listed
        self._index[name] = current


async def _listed(poller: PollerDefinition[Any]) -> list[Any]:
    """What ``partitions()`` returned, as a new list (sync or async)."""
    assert poller.partitions is not None
    listed: Any = poller.partitions()
    if isinstance(listed, Awaitable):
        listed = await listed
    return list(listed)


def _same(raw: list[Any], previous: list[Any] | None) -> bool:
    """Whether ``partitions()`` returned what it returned last time (keys and data)."""
    if previous is None or len(raw) != len(previous):
        return False
    try:
        return bool(raw == previous)
    except Exception:  # data whose == raises or is ambiguous (arrays): treat as changed
        return False


def _checked(poller: PollerDefinition[Any], listed: list[Any]) -> list[Partition]:
    """The partitions of a listing, each key checked.

    Raises:
        ConfigError: A key that is not a non-empty string of Unicode characters (any
            character, NUL included; not a lone surrogate), or a key listed twice.
    """
    partitions: list[Partition] = []
    seen: set[str] = set()
    for entry in listed:
        partition = entry if isinstance(entry, Partition) else Partition(entry)
        if not isinstance(partition.key, str) or not partition.key:
            raise ConfigError(
                f"poller {poller.name!r}: partition keys must be non-empty strings, got "
                f"{partition.key!r}",
                field="partitions",
            )
        if not partition.key.isascii() and not _encodable(partition.key):
            raise ConfigError(
                f"poller {poller.name!r}: partition key {partition.key!r} holds a lone "
                "surrogate, which has no UTF-8 form (no store can keep it)",
                field="partitions",
            )
        if partition.key in seen:
            raise ConfigError(
                f"poller {poller.name!r}: duplicate partition key {partition.key!r}",
                field="partitions",
            )
        seen.add(partition.key)
        partitions.append(partition)
    return partitions


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
