"""Frozen generic records can be built through their alias (``Page[Order](...)``)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from typing import Any

import pytest

import watukuy
from watukuy.model.events import Event
from watukuy.model.page import Page


def _frozen_generic_records() -> list[type[Any]]:
    found: dict[str, type[Any]] = {}
    for info in pkgutil.walk_packages(watukuy.__path__, "watukuy."):
        if ".testing" in info.name or info.name.endswith("__main__"):
            continue
        if info.name.startswith("watukuy.core."):  # the deprecated alias: names walked at home
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed
            continue
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == module.__name__
                and dataclasses.is_dataclass(value)
                and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
                and "__slots__" in value.__dict__
                and typing.Generic in value.__mro__
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


RECORDS = _frozen_generic_records()


def test_the_public_generic_records_are_among_those_checked() -> None:
    assert Page in RECORDS
    assert Event in RECORDS
    assert len(RECORDS) >= 10


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__qualname__)
def test_assigning_to_a_frozen_generic_record_raises_an_attribute_error(cls: type[Any]) -> None:
    # typing sets __orig_class__ on what Record[X](...) returns and expects AttributeError.
    instance = object.__new__(cls)
    with pytest.raises(dataclasses.FrozenInstanceError):
        instance.__orig_class__ = cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        del instance.__orig_class__


def test_a_page_and_an_event_are_built_through_their_alias() -> None:
    page = Page[dict[str, Any]](items=[{"id": 1}], has_more=False)
    assert page == Page(items=[{"id": 1}], has_more=False)
    fields = {f.name: None for f in dataclasses.fields(Event) if f.init}
    event = Event[dict[str, Any]](**fields)
    assert isinstance(event, Event)
