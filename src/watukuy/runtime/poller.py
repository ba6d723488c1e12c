"""Declaring a poller: how to fetch and how to identify items.

:func:`define_poller` validates everything eagerly (a :class:`ConfigError` names the field
and the value), applies the defaults of the original watukuy, and returns an immutable
:class:`PollerDefinition`. Options are small value objects (``Schedule``, ``Delivery``, ...);
a plain ``dict`` with the same keys is accepted for each of them.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import field
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    overload,
)

from watukuy.cursor import CursorConfig, CursorOf, CursorStrategy, SnapshotDiff, make_strategy
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.options import (
    Circuit,
    Deletes,
    Delivery,
    EventIds,
    EventLog,
    IdMode,
    Reconcile,
    Schedule,
)
from watukuy.model.partition import Partition
from watukuy.validate import SchemaAdapter, schema_adapter

if TYPE_CHECKING:
    from .context import FetchContext

from watukuy.model.records import dataclass

__all__ = [
    "FetchFn",
    "JsonObject",
    "OnInvalid",
    "OnSchemaChange",
    "PartitionsFn",
    "PollerDefinition",
    "Retain",
    "define_poller",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
P = TypeVar("P")

Retain = Literal["hash", "payload"]
OnInvalid = Literal["quarantine", "skip", "fail"]
OnSchemaChange = Literal["rebaseline", "emit"]

FetchFn: TypeAlias = Callable[["FetchContext[P]"], Any]
"""``fetch(ctx)``: an ``async def`` returning a ``Page`` (or dict, or list of items), an async
generator yielding pages, or a plain ``def`` (run in a worker thread). ``FetchFn[P]`` takes a
``FetchContext[P]``, where ``P`` is the position type of the poller's cursor."""

JsonObject: TypeAlias = dict[str, Any]
"""What an item is when a poller has no ``schema``: the JSON object as the API sent it."""

SchemaLike: TypeAlias = "type[T] | _TypeAdapterLike[T] | Callable[[Any], T]"

_NAME: Final = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}")


PartitionsFn = Callable[[], "Iterable[str | Partition] | Awaitable[Iterable[str | Partition]]"]


class _TypeAdapterLike(Protocol[T_co]):
    def validate_python(self, obj: Any, /) -> T_co: ...

    def dump_python(self, obj: Any, /, *, mode: Any = ...) -> Any: ...


@dataclass(frozen=True, slots=True, eq=False)
class PollerDefinition(Generic[T]):
    """A validated poller, ready to hand to ``Engine(pollers=[...])``.

    Built by :func:`define_poller`; every option is resolved (defaults applied, durations
    parsed). Treat it as opaque except for reading.
    """

    name: str
    fetch: Callable[[Any], Any]
    identity: Callable[[T], Any]
    cursor: CursorConfig
    strategy: CursorStrategy[Any]
    schema: Any
    adapter: SchemaAdapter[T]
    version: Callable[[T], Any] | None
    fingerprint: Callable[[T], Any] | None
    schema_version: int
    schedule: Schedule
    budget: str | None
    budget_weight: float
    budget_cost: float
    partitions: PartitionsFn | None
    partitions_refresh_ms: int
    delivery: Delivery
    retain: Retain
    reconcile: Reconcile | None
    on_invalid: OnInvalid
    on_schema_change: OnSchemaChange
    max_pages_per_cycle: int
    circuit: Circuit
    log: EventLog | None
    source: str
    ids: EventIds = field(default_factory=EventIds)
    deletes: Deletes = field(default_factory=Deletes)
    array_key: str | None = "id"
    prefetch: bool = True
    own_source: bool = False
    """Whether ``define_poller`` was given ``source=``: an engine's ``source_prefix`` then
    leaves ``source`` as it is."""
    probe_every_ms: int = field(init=False)

    def __post_init__(self) -> None:
        probe = self.circuit.probe_every_ms
        object.__setattr__(self, "probe_every_ms", self.schedule.max_ms if probe is None else probe)

    @property
    def partitioned(self) -> bool:
        """True when the poller declares ``partitions``."""
        return self.partitions is not None

    @property
    def retain_payload(self) -> bool:
        """True when item payloads are stored (``retain="payload"``)."""
        return self.retain == "payload"

    def __repr__(self) -> str:
        return f"PollerDefinition(name={self.name!r}, cursor={self.strategy.kind})"


_OPTION_CLASSES: Final[dict[str, type[Any]]] = {
    "schedule": Schedule,
    "delivery": Delivery,
    "circuit": Circuit,
    "reconcile": Reconcile,
    "log": EventLog,
    "ids": EventIds,
}


def _coerce_option(name: str, value: Any, cls: type[T]) -> T:
    """Accept an instance of ``cls`` or a mapping of its constructor arguments."""
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        known = {f.name for f in dataclasses.fields(cast(Any, cls)) if f.init}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(
                f"unknown option(s) {unknown}; expected some of {sorted(known)}", field=name
            )
        try:
            return cls(**value)
        except TypeError as error:
            raise ConfigError(str(error), field=name) from error
    raise ConfigError(
        f"expected a {cls.__name__} (or a dict of its options), got {value!r}", field=name
    )


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> Any:
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise ConfigError(f"expected one of {listed}, got {value!r}", field=name)
    return value


def _callable(name: str, value: Any, *, required: bool) -> Any:
    if value is None:
        if required:
            raise ConfigError("is required", field=name)
        return None
    if not callable(value):
        raise ConfigError(f"expected a callable, got {value!r}", field=name)
    return value


def _number(name: str, value: Any, *, minimum: float, exclusive: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and (value > minimum if exclusive else value >= minimum):
        return float(value)
    bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
    raise ConfigError(f"expected a number {bound}, got {value!r}", field=name)


def _int(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"expected an integer >= {minimum}, got {value!r}", field=name)
    return value


@overload
def define_poller(
    *,
    name: str,
    fetch: FetchFn[P],
    identity: Callable[[T], Any],
    cursor: CursorOf[P],
    schema: SchemaLike[T],
    version: Callable[[T], Any] | None = None,
    fingerprint: Callable[[T], Any] | None = None,
    schema_version: int = 1,
    schedule: Schedule | Mapping[str, Any] | None = None,
    budget: str | None = None,
    budget_weight: float = 1,
    budget_cost: float = 1,
    partitions: PartitionsFn | None = None,
    partitions_refresh: Duration = "5m",
    delivery: Delivery | Mapping[str, Any] | None = None,
    retain: Retain = "hash",
    reconcile: Reconcile | Mapping[str, Any] | None = None,
    on_invalid: OnInvalid = "quarantine",
    on_schema_change: OnSchemaChange = "rebaseline",
    max_pages_per_cycle: int = 50,
    circuit: Circuit | Mapping[str, Any] | None = None,
    log: EventLog | Mapping[str, Any] | None = None,
    source: str | None = None,
    ids: EventIds | IdMode | Mapping[str, Any] = "distinct",
    deletes: Deletes | Mapping[str, Any] | None = None,
    array_key: str | None = "id",
    prefetch: bool = True,
) -> PollerDefinition[T]: ...


@overload
def define_poller(
    *,
    name: str,
    fetch: FetchFn[P],
    identity: Callable[[JsonObject], Any],
    cursor: CursorOf[P],
    schema: None = None,
    version: Callable[[JsonObject], Any] | None = None,
    fingerprint: Callable[[JsonObject], Any] | None = None,
    schema_version: int = 1,
    schedule: Schedule | Mapping[str, Any] | None = None,
    budget: str | None = None,
    budget_weight: float = 1,
    budget_cost: float = 1,
    partitions: PartitionsFn | None = None,
    partitions_refresh: Duration = "5m",
    delivery: Delivery | Mapping[str, Any] | None = None,
    retain: Retain = "hash",
    reconcile: Reconcile | Mapping[str, Any] | None = None,
    on_invalid: OnInvalid = "quarantine",
    on_schema_change: OnSchemaChange = "rebaseline",
    max_pages_per_cycle: int = 50,
    circuit: Circuit | Mapping[str, Any] | None = None,
    log: EventLog | Mapping[str, Any] | None = None,
    source: str | None = None,
    ids: EventIds | IdMode | Mapping[str, Any] = "distinct",
    deletes: Deletes | Mapping[str, Any] | None = None,
    array_key: str | None = "id",
    prefetch: bool = True,
) -> PollerDefinition[JsonObject]: ...


def define_poller(
    *,
    name: str,
    fetch: FetchFn[Any],
    identity: Callable[[Any], Any],
    cursor: Any,
    schema: Any = None,
    version: Callable[[Any], Any] | None = None,
    fingerprint: Callable[[Any], Any] | None = None,
    schema_version: int = 1,
    schedule: Schedule | Mapping[str, Any] | None = None,
    budget: str | None = None,
    budget_weight: float = 1,
    budget_cost: float = 1,
    partitions: PartitionsFn | None = None,
    partitions_refresh: Duration = "5m",
    delivery: Delivery | Mapping[str, Any] | None = None,
    retain: Retain = "hash",
    reconcile: Reconcile | Mapping[str, Any] | None = None,
    on_invalid: OnInvalid = "quarantine",
    on_schema_change: OnSchemaChange = "rebaseline",
    max_pages_per_cycle: int = 50,
    circuit: Circuit | Mapping[str, Any] | None = None,
    log: EventLog | Mapping[str, Any] | None = None,
    source: str | None = None,
    ids: EventIds | IdMode | Mapping[str, Any] = "distinct",
    deletes: Deletes | Mapping[str, Any] | None = None,
    array_key: str | None = "id",
    prefetch: bool = True,
) -> PollerDefinition[Any]:
    """Declare a poller.

    Args:
        name: Unique name, ``^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$``.
        fetch: Fetches one page: an ``async def fetch(ctx)`` returning a ``Page`` (or a dict,
            or a list of items), an async generator of pages, or a plain ``def``.
        identity: ``(item) -> str`` (an ``int`` is written in decimal).
        cursor: ``TimestampCursor``, ``TokenCursor``, ``PageCursor``, ``SnapshotDiff`` or
            ``CustomCursor``.
        schema: Validates raw items (a pydantic model, a ``TypeAdapter``, a msgspec ``Struct``
            or a callable ``(raw) -> item``); without one, items are the JSON objects sent.
        version: ``(item) -> str | int``; an unchanged version skips hashing.
        fingerprint: ``(item) -> data`` hashed to detect changes (default: the whole item).
        schema_version: Bump when the item shape changes (see ``on_schema_change``).
        schedule: A :class:`Schedule`: interval bounds, AIMD, jitter, fetch backoff.
        budget: Name of a shared rate budget given to the engine.
        budget_weight: Share of the budget under ``fairness="weighted"``.
        budget_cost: Tokens each HTTP call costs (``0`` is free).
        partitions: ``() -> [str | Partition]`` (sync or async); one key per partition.
        partitions_refresh: How often ``partitions`` is called again.
        delivery: A :class:`Delivery`: ordering, concurrency, retries, poison, ack mode.
        retain: ``"hash"`` (default) or ``"payload"`` (deleted events carry the last payload,
            updated events ``previous`` and the JSON Patch ``changes``).
        reconcile: A :class:`Reconcile`: a slow full listing that finds deletes.
        on_invalid: Invalid items are ``"quarantine"``-d (default), ``"skip"``-ped, or
            ``"fail"`` the page.
        on_schema_change: ``"rebaseline"`` silently, or ``"emit"`` ``updated`` events.
        max_pages_per_cycle: Catch-up pages per cycle before the cycle is truncated.
        circuit: A :class:`Circuit`: failures that open it, and the probe interval.
        log: An :class:`EventLog` to keep (enables ``engine.replay()``).
        source: CloudEvents ``source``; default ``urn:watukuy:<name>``, or the engine's
            ``source_prefix`` followed by the name. A poller's own ``source`` wins over the
            engine's prefix. It is part of every event id: changing it changes the ids.
        ids: ``"distinct"`` (default), ``"compat"`` (the original watukuy's ids), or an
            :class:`EventIds` that also sets how long tombstones are kept.
        deletes: A :class:`Deletes`: confirming passes, the mass-delete guard, the order.
        array_key: The member that identifies array objects when ``changes`` are computed;
            ``None`` diffs every array by position.
        prefetch: Ask for the next page while the current one commits (default); turn it
            off for an API whose next request acknowledges the previous page.

    Returns:
        The validated, immutable definition.

    Raises:
        ConfigError: Any option is invalid; the message names it and the value.
    """
    return _definition(**locals())  # every argument, by name, as given


def _check_plain(
    name: Any,
    budget: Any,
    source: Any,
    array_key: Any,
    prefetch: Any,
) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"must match ^[a-zA-Z0-9][a-zA-Z0-9._-]{{0,127}}$, got {name!r}", field="name"
        )
    if budget is not None and (not isinstance(budget, str) or not budget):
        raise ConfigError(f"expected a budget name, got {budget!r}", field="budget")
    if source is not None and (not isinstance(source, str) or not source):
        raise ConfigError(f"expected a non-empty string, got {source!r}", field="source")
    if array_key is not None and (not isinstance(array_key, str) or not array_key):
        raise ConfigError(f"expected a member name or None, got {array_key!r}", field="array_key")
    if not isinstance(prefetch, bool):
        raise ConfigError(f"expected True or False, got {prefetch!r}", field="prefetch")


def _check_functions(
    fetch: Any, identity: Any, version: Any, fingerprint: Any, partitions: Any
) -> None:
    _callable("fetch", fetch, required=True)
    _callable("identity", identity, required=True)
    _callable("version", version, required=False)
    _callable("fingerprint", fingerprint, required=False)
    if partitions is not None:
        _callable("partitions", partitions, required=True)
    if inspect.isclass(fetch):
        raise ConfigError(f"expected a function, got the class {fetch!r}", field="fetch")


def _definition(**given: Any) -> PollerDefinition[Any]:
    """Check every argument of :func:`define_poller` and build the definition."""
    name = given["name"]
    _check_plain(name, given["budget"], given["source"], given["array_key"], given["prefetch"])
    _check_functions(
        given["fetch"],
        given["identity"],
        given["version"],
        given["fingerprint"],
        given["partitions"],
    )
    cursor = given["cursor"]
    strategy = make_strategy(cursor)  # raises ConfigError for anything that is not a cursor
    reconcile, log, ids = given["reconcile"], given["log"], given["ids"]
    resolved_reconcile = (
        None if reconcile is None else _coerce_option("reconcile", reconcile, Reconcile)
    )
    if resolved_reconcile is not None and isinstance(cursor, SnapshotDiff):
        raise ConfigError(
            "is redundant with the snapshot diff cursor, which finds deletes every cycle",
            field="reconcile",
        )
    source = given["source"]
    return PollerDefinition(
        name=name,
        fetch=given["fetch"],
        identity=given["identity"],
        cursor=cursor,
        strategy=strategy,
        schema=given["schema"],
        adapter=schema_adapter(given["schema"]),
        version=given["version"],
        fingerprint=given["fingerprint"],
        schema_version=_int("schema_version", given["schema_version"], minimum=1),
        schedule=_coerce_option("schedule", given["schedule"] or Schedule(), Schedule),
        budget=given["budget"],
        budget_weight=_number("budget_weight", given["budget_weight"], minimum=0, exclusive=True),
        budget_cost=_number("budget_cost", given["budget_cost"], minimum=0, exclusive=False),
        partitions=given["partitions"],
        partitions_refresh_ms=parse_duration(given["partitions_refresh"], "partitions_refresh"),
        delivery=_coerce_option("delivery", given["delivery"] or Delivery(), Delivery),
        retain=_choice("retain", given["retain"], ("hash", "payload")),
        reconcile=resolved_reconcile,
        on_invalid=_choice("on_invalid", given["on_invalid"], ("quarantine", "skip", "fail")),
        on_schema_change=_choice(
            "on_schema_change", given["on_schema_change"], ("rebaseline", "emit")
        ),
        max_pages_per_cycle=_int("max_pages_per_cycle", given["max_pages_per_cycle"], minimum=1),
        circuit=_coerce_option("circuit", given["circuit"] or Circuit(), Circuit),
        log=None if log is None else _coerce_option("log", log, EventLog),
        source=source if source is not None else f"urn:watukuy:{name}",
        ids=(
            EventIds(mode=_choice("ids", ids, ("distinct", "compat")))
            if isinstance(ids, str)
            else _coerce_option("ids", ids, EventIds)
        ),
        deletes=_coerce_option("deletes", given["deletes"] or Deletes(), Deletes),
        array_key=given["array_key"],
        prefetch=given["prefetch"],
        own_source=source is not None,
    )
