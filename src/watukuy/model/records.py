"""A faster ``__init__`` for the frozen records built on the hot paths.

A frozen dataclass assigns each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), which makes construction cost several times what the same class
costs unfrozen. The rows, events and changes built once per item of a sync (``ItemRow``,
``OutboxRow``, ``ListingLink``, ``Event``, ``Candidate``, ``Change``, the per-event hook
records) are decorated with :func:`fast_init`, whose ``__init__`` writes each slot through
its descriptor instead. Everything else stays what ``@dataclass`` makes: the same signature
and defaults, ``FrozenInstanceError`` on assignment, ``repr``, ``==`` and ``hash``.
``make bench`` (``bench_engine``) is where what it buys shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["dataclass", "fast_init"]

# ``dataclass`` is :func:`dataclasses.dataclass` itself, named here for the modules that
# still import it from this one.

C = TypeVar("C", bound=type)


def fast_init(cls: C) -> C:
    """Replace the ``__init__`` of a frozen, slotted dataclass by an equivalent faster one.

    Apply it above ``@dataclass(frozen=True, slots=True)``. Classes with ``__post_init__``,
    ``InitVar`` or ``init=False`` fields are refused: the generated code handles none of those.

    Raises:
        TypeError: ``cls`` is not a frozen, slotted dataclass this helper supports.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} must be a frozen dataclass with slots=True")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__; fast_init does not call it")
    fields = dataclasses.fields(cls)
    if any(not field.init for field in fields) or any(
        isinstance(field.type, dataclasses.InitVar) for field in fields
    ):
        raise TypeError(f"{cls.__name__} has init=False or InitVar fields")

    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for index, field in enumerate(fields):
        name = field.name
        setter = f"_set{index}"
        namespace[setter] = getattr(cls, name).__set__  # the slot's member descriptor
        if field.default is not dataclasses.MISSING:
            namespace[f"_default{index}"] = field.default
            param = f"{name}=_default{index}"
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{index}"] = field.default_factory
            param = f"{name}=_FACTORY"
            body.append(f"    if {name} is _FACTORY: {name} = _factory{index}()")
        else:
            param = name
        (keyword if field.kw_only else positional).append(param)
        body.append(f"    {setter}(self, {name})")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)  # code generated from the dataclass's own fields
    init = namespace["__init__"]
    original = cls.__dict__["__init__"]
    init.__qualname__ = original.__qualname__
    init.__module__ = original.__module__
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(original.__annotations__)
    type.__setattr__(cls, "__init__", init)
    return cls


class _Factory:
    """Marks a parameter whose default comes from a ``default_factory``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
