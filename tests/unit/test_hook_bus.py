"""The hook bus: a record per hook that someone listens to, built from the emitted fields."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import logging
import textwrap
from typing import Any

import pytest

from watukuy.model.errors import ConfigError
from watukuy.model.rows import PKey
from watukuy.runtime import hooks
from watukuy.runtime._hook_names import HOOK_NAMES
from watukuy.runtime._hookbus import HookBus, HookContext, HookEmitter
from watukuy.runtime.scope import KeyHooks

FIELDS: dict[str, Any] = {"poller": "p", "partition": "", "lane": "live", "instance_id": "i"}


def test_every_hook_has_its_record_type() -> None:
    assert set(hooks.RECORD_TYPES) == set(HOOK_NAMES)
    for name, cls in hooks.RECORD_TYPES.items():
        assert issubclass(cls, hooks.HookContext)
        assert f"``{name}``" in (cls.__doc__ or "")
    assert hooks.HOOK_NAMES is HOOK_NAMES


def test_a_listened_hook_gets_its_record_and_an_unheard_one_builds_none() -> None:
    got: list[object] = []

    class Listener:
        def on_fetch(self, details: hooks.FetchDetails) -> None:
            got.append(details)

    bus = HookBus([Listener()], logging.getLogger("test"))
    emitter = bus.emitter(HookContext(**FIELDS))
    fetch: dict[str, Any] = {"page": 1, "duration_ms": 2, "items": 3, "not_modified": False}
    asyncio.run(emitter.on_fetch(**fetch))
    asyncio.run(emitter.on_commit(events=0, upserts=0, deletes=0, duration_ms=1))  # nobody listens
    assert got == [hooks.FetchDetails(**FIELDS, **fetch)]
    assert dataclasses.asdict(got[0])["items"] == 3  # type: ignore[call-overload]


def _own_parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """``(name, annotation, default)`` of the keyword parameters besides the context."""
    context = {field.name for field in dataclasses.fields(hooks.HookContext)}
    return [
        (p.name, p.annotation, p.default)
        for p in inspect.signature(function).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in context
    ]


def test_every_hook_has_an_emitter_method_taking_its_record_fields() -> None:
    for name, cls in hooks.RECORD_TYPES.items():
        method = getattr(HookEmitter, name)
        assert _own_parameters(method) == _own_parameters(cls), name


def test_the_emitter_builds_each_record_from_its_context_and_fields() -> None:
    got: dict[str, object] = {}

    class Everything:
        def __getattr__(self, name: str) -> Any:
            if name not in HOOK_NAMES:
                raise AttributeError(name)
            return lambda details: got.setdefault(name, details)

    context = HookContext(**FIELDS)
    emitter = HookBus([Everything()], logging.getLogger("test")).emitter(context)
    assert emitter.context is context
    for name, cls in hooks.RECORD_TYPES.items():
        fields = {param: f"{param}-value" for param, _, _ in _own_parameters(cls)}
        asyncio.run(getattr(emitter, name)(**fields))
        assert got[name] == cls(**FIELDS, **fields), name


def test_the_emitter_builds_nothing_without_a_listener_and_keeps_the_order() -> None:
    calls: list[str] = []

    class First:
        async def on_poll_start(self, details: hooks.PollStartDetails) -> None:
            calls.append(f"first {details.started_at}")

    class Second:
        def on_poll_start(self, details: hooks.PollStartDetails) -> None:
            calls.append(f"second {details.started_at}")
            raise RuntimeError("a failing hook is logged, never raised")

    bus = HookBus([First(), Second()], logging.getLogger("test"))
    emitter = bus.emitter(HookContext(**FIELDS))
    asyncio.run(emitter.on_poll_start(started_at=7))
    asyncio.run(emitter.on_fetch(page=1, duration_ms=2, items=3, not_modified=False))
    assert calls == ["first 7", "second 7"]
    assert not emitter.has("on_fetch")
    assert emitter.has("on_poll_start")


def test_the_hooks_base_class_declares_no_method_at_run_time() -> None:
    # A subclass listens only to the hooks it defines: the bus finds no other method.
    class One(hooks.Hooks):
        def on_fetch(self, details: hooks.FetchDetails) -> None: ...

    assert [name for name in HOOK_NAMES if hasattr(One(), name)] == ["on_fetch"]


def test_the_hooks_base_class_declares_every_hook_with_its_record() -> None:
    # The declarations exist for type checkers only: read them from the source.
    tree = ast.parse(textwrap.dedent(inspect.getsource(hooks.Hooks)))
    declared = {
        node.name: ast.unparse(node.args.args[1].annotation)  # type: ignore[arg-type]
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    }
    assert declared == {name: cls.__name__ for name, cls in hooks.RECORD_TYPES.items()}


def test_a_key_has_one_emitter_per_lane_made_once() -> None:
    bus = HookBus([], logging.getLogger("test"))
    key_hooks = KeyHooks(bus, PKey("orders", "eu"), "me")

    live = key_hooks("live")

    assert key_hooks("live") is live
    assert key_hooks("reconcile") is not live
    assert live.context == HookContext(
        poller="orders", partition="eu", lane="live", instance_id="me"
    )
    assert key_hooks("reconcile").context.lane == "reconcile"


def test_a_hook_set_added_later_listens_until_it_is_removed() -> None:
    calls: list[str] = []

    class Pages:
        def __init__(self, name: str) -> None:
            self.name = name

        def on_fetch(self, details: hooks.FetchDetails) -> None:
            calls.append(f"{self.name} {details.page}")

    bus = HookBus([Pages("built in")], logging.getLogger("test"))
    emitter = bus.emitter(HookContext(**FIELDS))

    def fetch(page: int) -> None:
        asyncio.run(emitter.on_fetch(page=page, duration_ms=0, items=0, not_modified=False))

    remove = bus.add(Pages("added"))
    fetch(1)
    remove()
    remove()  # a second call removes nothing more
    fetch(2)
    assert calls == ["built in 1", "added 1", "built in 2"]


def test_a_hook_set_removed_while_a_hook_fires_still_hears_that_hook() -> None:
    calls: list[str] = []
    removes: list[Any] = []

    class Remover:
        def on_poll_start(self, details: hooks.PollStartDetails) -> None:
            calls.append("remover")
            while removes:
                removes.pop()()

    class Later:
        def on_poll_start(self, details: hooks.PollStartDetails) -> None:
            calls.append("later")

    bus = HookBus([Remover()], logging.getLogger("test"))
    removes.append(bus.add(Later()))
    emitter = bus.emitter(HookContext(**FIELDS))
    asyncio.run(emitter.on_poll_start(started_at=1))
    asyncio.run(emitter.on_poll_start(started_at=2))
    # The first firing started with both listeners; "later" was gone for the second.
    assert calls == ["remover", "later", "remover"]


def test_an_object_without_hook_methods_is_refused_by_name() -> None:
    bus = HookBus([], logging.getLogger("test"))
    with pytest.raises(ConfigError, match=r"^hooks: expected a hook set") as refused:
        bus.add(object())
    assert refused.value.field == "hooks"
    assert not bus.has("on_fetch")
