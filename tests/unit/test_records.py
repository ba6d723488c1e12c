"""fast_init: the faster constructor keeps every behaviour of the dataclass it replaces."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from watukuy.model.events import Event
from watukuy.model.partition import Partition
from watukuy.model.records import fast_init
from watukuy.model.rows import OutboxRow
from watukuy.runtime.hooks import DeliveredDetails


@dataclasses.dataclass(frozen=True, slots=True)
class _Reference:
    a: int
    b: str = "b"
    c: list[int] = dataclasses.field(default_factory=list)
    d: int = dataclasses.field(default=4, kw_only=True)


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class _Fast:
    a: int
    b: str = "b"
    c: list[int] = dataclasses.field(default_factory=list)
    d: int = dataclasses.field(default=4, kw_only=True)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1,), {"c": [2], "d": 9}), ((), {"a": 3, "b": "y"})],
)
def test_same_values_as_the_dataclass_init(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    fast, reference = _Fast(*args, **kwargs), _Reference(*args, **kwargs)
    assert dataclasses.astuple(fast) == dataclasses.astuple(reference)
    assert repr(fast) == repr(reference).replace("_Reference", "_Fast")


def test_same_signature_and_errors() -> None:
    assert str(inspect.signature(_Fast)) == str(inspect.signature(_Reference))
    with pytest.raises(TypeError):
        _Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Fast(1, "b", [], 4)  # type: ignore[call-arg]  # d is keyword-only


def test_a_default_factory_runs_once_per_instance() -> None:
    first, second = _Fast(1), _Fast(1)
    assert first.c == []
    assert first.c is not second.c


def test_still_frozen_hashable_and_comparable() -> None:
    fast = _Fast(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]
    assert fast == _Fast(1, "b", [], d=4)
    assert hash(_Fast(1, c=None)) == hash(_Fast(1, c=None))  # type: ignore[arg-type]
    assert dataclasses.replace(fast, a=5).a == 5


def test_the_hot_records_use_it() -> None:
    for cls in (Event, OutboxRow, Partition, DeliveredDetails):
        assert "_set0" in cls.__init__.__code__.co_names, cls
    event: Event[Any] = Event("id", "created", "urn:watukuy:a", "s", "t", "a", "", "live", 1)
    assert (event.cursor, event.data, event.previous, event.attempt) == (None, None, None, 1)
    assert OutboxRow(event_id="e", sequence=1, event="{}").attempts == 0
    assert Partition("acme") == Partition(key="acme", data=None)
    details = DeliveredDetails(
        poller="a",
        partition="",
        lane="live",
        instance_id="i",
        event=event,
        attempt=1,
        duration_ms=0,
    )
    assert details.event is event
    with pytest.raises(TypeError):
        DeliveredDetails("a", "", "live", "i", event, 1, 0)  # type: ignore[call-arg]


def test_refuses_what_it_cannot_reproduce() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class NotInInit:
        a: int = dataclasses.field(default=0, init=False)

    for cls in (NoSlots, PostInit, NotInInit):
        with pytest.raises(TypeError):
            fast_init(cls)
