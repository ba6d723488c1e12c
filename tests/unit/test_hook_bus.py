"""The hook bus: a record per hook that someone listens to, built from the emitted fields."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from watukuy.runtime import hooks
from watukuy.runtime._hook_names import HOOK_NAMES
from watukuy.runtime._hookbus import HookBus, record_type

FIELDS: dict[str, Any] = {"poller": "p", "partition": "", "lane": "live", "instance_id": "i"}


def test_every_hook_has_its_record_type() -> None:
    assert set(hooks.RECORD_TYPES) == set(HOOK_NAMES)
    for name, cls in hooks.RECORD_TYPES.items():
        assert issubclass(cls, hooks.HookContext)
        assert record_type(name) is cls
        assert f"``{name}``" in (cls.__doc__ or "")
    assert hooks.HOOK_NAMES is HOOK_NAMES


def test_a_listened_hook_gets_its_record_and_an_unheard_one_builds_none() -> None:
    got: list[object] = []

    class Listener:
        def on_fetch(self, details: hooks.FetchDetails) -> None:
            got.append(details)

    bus = HookBus([Listener()], logging.getLogger("test"))
    fetch: dict[str, Any] = {"page": 1, "duration_ms": 2, "items": 3, "not_modified": False}
    asyncio.run(bus.emit("on_fetch", **FIELDS, **fetch))
    # No listener: the fields are not even checked against the record.
    asyncio.run(bus.emit("on_commit", **FIELDS, no_such_field=1))
    assert got == [hooks.FetchDetails(**FIELDS, **fetch)]
    assert dataclasses.asdict(got[0])["items"] == 3  # type: ignore[call-overload]
