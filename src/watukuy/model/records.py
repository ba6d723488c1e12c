"""Records: frozen, slotted dataclasses made cheaply at import and built fast at run time.

Two helpers, both about the cost of ``@dataclass`` on the records of the engine:

* :func:`dataclass` is what the modules of watukuy decorate their records with. Type
  checkers read it as :func:`dataclasses.dataclass`, and the classes it makes are
  dataclasses in every respect (``fields``, ``replace``, ``asdict``, ``__match_args__``,
  the same ``__init__`` signature, ``repr``, ``==``, ``hash``, ordering, frozen
  instances, pickling). What changes is when the methods are made: Python 3.11's
  ``@dataclass`` compiles six functions for each frozen class when its module is
  imported, paid for every record a process loads before its first poll whether it uses
  them or not (``make bench``'s whole-process rows over HTTP show that cost when it comes
  back: a fresh process per cycle, as a cron ``tick`` runs). Here the frozen ``__setattr__`` /
  ``__delattr__`` are plain functions over the class's fields, made without compiling
  anything, and ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and the ordering
  are the code ``@dataclass`` writes, compiled when something first looks them up (the
  first instance, the first ``==``, ``hash`` or ``repr``, ``inspect.signature``).
* :func:`fast_init` gives a class made by :func:`dataclasses.dataclass` itself the same
  fast ``__init__``.

A frozen dataclass assigns each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), which makes construction cost several times what the same class
costs unfrozen. The rows, events and hook records on the hot paths are built hundreds of
thousands of times per sync, so their ``__init__`` writes each slot through its descriptor
instead. Everything else stays what ``@dataclass`` makes: the same signature and defaults,
``FrozenInstanceError`` on assignment, ``repr``, ``==`` and ``hash``.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import inspect
import reprlib
import sys
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["dataclass", "fast_init"]

# dataclasses' private helpers, read by :func:`_slotted` (checked by :func:`_fast_fields`).
_dc: Any = dataclasses

C = TypeVar("C", bound=type)

if TYPE_CHECKING:
    from dataclasses import dataclass
else:

    def dataclass(
        cls: type | None = None,
        /,
        *,
        init: bool = True,
        repr: bool = True,
        eq: bool = True,
        order: bool = False,
        unsafe_hash: bool = False,
        frozen: bool = False,
        match_args: bool = True,
        kw_only: bool = False,
        slots: bool = False,
        weakref_slot: bool = False,
    ) -> Any:
        """:func:`dataclasses.dataclass`, with the methods of slotted classes made lazily.

        Slotted classes with an ``__init__``, a ``repr`` and a docstring, no ``InitVar``,
        no ``unsafe_hash`` nor ``weakref_slot``, and no dataclass among their bases get
        the methods described in the module's docstring; any other class is handed to
        :func:`dataclasses.dataclass` as it is.
        """
        params = {
            "init": init,
            "repr": repr,
            "eq": eq,
            "order": order,
            "unsafe_hash": unsafe_hash,
            "frozen": frozen,
            "match_args": match_args,
            "kw_only": kw_only,
            "slots": slots,
            "weakref_slot": weakref_slot,
        }

        def wrap(cls: type) -> type:
            if _is_plain_record(cls, params):
                return _record(cls, eq=eq, order=order, frozen=frozen, params=params)
            return dataclasses.dataclass(cls, **params)

        return wrap if cls is None else wrap(cls)


def _is_plain_record(cls: type, params: dict[str, bool]) -> bool:
    if not (params["slots"] and params["init"] and params["repr"]) or not _PARAMS_WRITABLE:
        return False
    if params["unsafe_hash"] or params["weakref_slot"] or not cls.__doc__:
        return False
    if any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return False
    annotations = inspect.get_annotations(cls)
    return not any(
        "InitVar" in str(kind) or isinstance(kind, dataclasses.InitVar)
        for kind in annotations.values()
    )


def _record(cls: type, *, eq: bool, order: bool, frozen: bool, params: dict[str, bool]) -> type:
    if order and not eq:
        raise ValueError("eq must be true if order is true")
    own = cls.__dict__
    # ``class X: def __eq__`` without ``__hash__`` leaves ``__hash__ = None`` in the body.
    own_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (own_hash is dataclasses.MISSING or (own_hash is None and "__eq__" in own))
    cls = _slotted(cls, kw_only=params["kw_only"], match_args=params["match_args"])
    # What ``@dataclass`` would have recorded: these classes have every method it makes.
    made = cls.__dataclass_params__  # type: ignore[attr-defined]
    made.init, made.repr, made.eq, made.order, made.frozen = True, True, eq, order, frozen
    every = dataclasses.fields(cls)
    _check_defaults(cls, every)
    shown = tuple(field.name for field in every if field.repr)
    compared = tuple(field.name for field in every if field.compare)
    _set(cls, "__init__", _Lazy(cls, "__init__", _compiled_init))
    _set(cls, "__repr__", _Lazy(cls, "__repr__", _repr(shown)))
    if eq:
        _set(cls, "__eq__", _Lazy(cls, "__eq__", _comparison("__eq__", "==", compared)))
        if not explicit_hash:
            if frozen:
                hashed = tuple(
                    field.name
                    for field in every
                    if (field.compare if field.hash is None else field.hash)
                )
                _put(cls, "__hash__", _Lazy(cls, "__hash__", _hash(hashed)))
            else:
                type.__setattr__(cls, "__hash__", None)
    if order:
        for name, operator_ in _ORDER.items():
            if name in cls.__dict__:
                raise TypeError(
                    f"Cannot overwrite attribute {name} in class {cls.__name__}. "
                    "Consider using functools.total_ordering"
                )
            _set(cls, name, _Lazy(cls, name, _comparison(name, operator_, compared)))
    if frozen:
        names = frozenset(field.name for field in every)
        for name, method in (
            ("__setattr__", _frozen_setattr(cls, names)),
            ("__delattr__", _frozen_delattr(cls, names)),
        ):
            if name in cls.__dict__:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
            _set(cls, name, method)
        # Pickling and ``copy`` restore the slots past the frozen ``__setattr__``.
        if "__getstate__" not in cls.__dict__:
            type.__setattr__(cls, "__getstate__", _getstate)
        if "__setstate__" not in cls.__dict__:
            type.__setattr__(cls, "__setstate__", _setstate)
    abc.update_abstractmethods(cls)
    return cls


def _slotted(cls: type, *, kw_only: bool, match_args: bool) -> type:
    """What ``@dataclass(init=False, repr=False, eq=False, slots=True)`` makes of a record.

    The fields, ``__dataclass_fields__``, ``__dataclass_params__``, ``__match_args__`` and
    the class made again with ``__slots__``, as :func:`dataclasses.dataclass` makes them,
    for a class with no dataclass among its bases (:func:`_is_plain_record`). What makes
    it cheaper is the reading of string annotations: ``@dataclass`` matches each one
    against regular expressions three times (``KW_ONLY``, ``ClassVar``, ``InitVar``), and
    here only an annotation that may name one of them (:func:`_may_be_pseudo_field`) is
    read, by dataclasses' own code (about 35 against 57 microseconds a class). A Python
    whose :mod:`dataclasses` lacks the names this relies on, or gives them another
    meaning, gets :func:`dataclasses.dataclass` itself.
    """
    if not _FAST_FIELDS:
        return dataclasses.dataclass(
            cls,
            init=False,
            repr=False,
            eq=False,
            order=False,
            frozen=False,
            match_args=match_args,
            kw_only=kw_only,
            slots=True,
        )
    return _fields_and_slots(cls, kw_only=kw_only, match_args=match_args)


def _fields_and_slots(cls: type, *, kw_only: bool, match_args: bool) -> type:
    """:func:`_slotted` without ``@dataclass``: see its docstring."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    own: dict[str, Any] = inspect.get_annotations(cls)
    made: dict[str, dataclasses.Field[Any]] = {}
    kw_only_seen = False
    for name, kind in own.items():
        # What only dataclasses' own reading can tell: a real type, or a string that may
        # name a pseudo-field.
        if not isinstance(kind, str) or _may_be_pseudo_field(cls, kind):
            if _is_kw_only_marker(cls, kind):
                if kw_only_seen:
                    raise TypeError(f"{name!r} is KW_ONLY, but KW_ONLY has already been specified")
                kw_only_seen = kw_only = True
                continue
            made[name] = _dc._get_field(cls, name, kind, kw_only)
            continue
        default = cls.__dict__.get(name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            field = default
        else:
            if isinstance(default, types.MemberDescriptorType):
                default = dataclasses.MISSING
            field = dataclasses.field(default=default)
        field.name = name
        field.type = kind
        field._field_type = _dc._FIELD  # type: ignore[attr-defined]
        if field.kw_only is dataclasses.MISSING:
            field.kw_only = kw_only
        if field.default.__class__.__hash__ is None:
            raise ValueError(
                f"mutable default {type(field.default)} for field {name} is not allowed: "
                "use default_factory"
            )
        made[name] = field
    for name, value in cls.__dict__.items():
        if isinstance(value, dataclasses.Field) and name not in own:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    every = [
        field
        for field in made.values()
        if field._field_type is _dc._FIELD  # type: ignore[attr-defined]
    ]
    namespace = dict(cls.__dict__)
    for name, field in made.items():
        # As ``@dataclass``: a pseudo-field given by ``field()`` keeps its default only.
        if isinstance(namespace.get(name), dataclasses.Field):
            if field.default is dataclasses.MISSING:
                del namespace[name]
            else:
                namespace[name] = field.default
    inherited = {slot for base in cls.__mro__[1:-1] for slot in _dc._get_slots(base)}
    namespace["__slots__"] = tuple(field.name for field in every if field.name not in inherited)
    for field in every:
        namespace.pop(field.name, None)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__dataclass_fields__"] = made
    params = copy.copy(_PROBE_PARAMS)
    for name, value in (("match_args", match_args), ("kw_only", kw_only)):
        if hasattr(params, name):  # Python 3.12 and later record them
            setattr(params, name, value)
    namespace["__dataclass_params__"] = params
    if match_args and "__match_args__" not in namespace:
        namespace["__match_args__"] = tuple(
            field.name for field in every if field.init and not field.kw_only
        )
    qualname = cls.__qualname__
    slotted: type = type(cls)(cls.__name__, cls.__bases__, namespace)
    slotted.__qualname__ = qualname
    return slotted


def _is_kw_only_marker(cls: type, kind: object) -> bool:
    """Whether an annotation is ``dataclasses.KW_ONLY``, read as ``@dataclass`` reads it
    (a string annotation only when :func:`_may_be_pseudo_field` says it may be one)."""
    if not isinstance(kind, str):
        return bool(_dc._is_kw_only(kind, dataclasses))
    return bool(_dc._is_type(kind, cls, dataclasses, dataclasses.KW_ONLY, _dc._is_kw_only))


_PSEUDO: tuple[object, ...] = (
    typing.ClassVar,
    dataclasses.InitVar,
    dataclasses.KW_ONLY,
    typing,
    dataclasses,
)


def _may_be_pseudo_field(cls: type, kind: str) -> bool:
    """Whether a string annotation may name ``ClassVar``, ``InitVar`` or ``KW_ONLY``: it
    spells one of them, or its first name is one of them (or their module) in the class's
    module, under whatever name it was imported. Only those are read by ``@dataclass``'s
    regular expressions."""
    if "ClassVar" in kind or "InitVar" in kind or "KW_ONLY" in kind:
        return True
    module = sys.modules.get(cls.__module__)
    if module is None:
        return False
    head = module.__dict__.get(kind.split("[", 1)[0].split(".", 1)[0].strip())
    return any(head is pseudo for pseudo in _PSEUDO)


@dataclasses.dataclass(init=False, repr=False, eq=False, slots=True)
class _Probe:
    """What ``@dataclass`` records of a class :func:`_slotted` makes."""

    probe: int


_PROBE_PARAMS: Any = _Probe.__dataclass_params__  # type: ignore[attr-defined]


def _described(cls: type) -> list[tuple[Any, ...]]:
    return [
        (f.name, f.type, f.default, f.init, f.repr, f.compare, f.hash, f.kw_only)
        for f in dataclasses.fields(cls)
    ]


def _fast_fields() -> bool:
    """Whether :mod:`dataclasses` has the private names :func:`_slotted` relies on, and
    a class made by it is what ``@dataclass`` makes of the same class."""
    names = ("_FIELD", "_is_type", "_is_kw_only", "_get_field", "_get_slots")
    if not all(hasattr(dataclasses, name) for name in names):
        return False

    class Probe:
        """Probe."""

        probe: int

    try:
        made = _fields_and_slots(Probe, kw_only=False, match_args=True)
    except Exception:  # any change in what these private names mean: use @dataclass
        return False
    return (
        _described(made) == _described(_Probe)
        and made.__slots__ == _Probe.__slots__  # type: ignore[attr-defined]
        and made.__match_args__ == _Probe.__match_args__  # type: ignore[attr-defined]
    )


def _params_writable() -> bool:
    """Whether ``__dataclass_params__`` takes the flags this module records there (it does
    on every Python this package supports; a future one may freeze it)."""
    try:
        copy.copy(_PROBE_PARAMS).frozen = True
    except AttributeError:
        return False
    return True


_PARAMS_WRITABLE = _params_writable()
_FAST_FIELDS = _fast_fields()


def _set(cls: type, name: str, value: Any) -> None:
    """Add a method the way ``@dataclass`` does: never over one the class defines."""
    if name not in cls.__dict__:
        _put(cls, name, value)


def _put(cls: type, name: str, value: Any) -> None:
    if isinstance(value, types.FunctionType):
        value.__qualname__ = f"{cls.__qualname__}.{name}"
        value.__module__ = cls.__module__
    type.__setattr__(cls, name, value)


def _check_defaults(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """``@dataclass``'s own check, when the class is made: defaults come last."""
    seen_default = False
    for field in fields:
        if not field.init or field.kw_only:
            continue
        if (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        ):
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {field.name!r} follows default argument")


def _repr(names: tuple[str, ...]) -> Callable[[type], Any]:
    """Builds the ``__repr__`` ``@dataclass`` makes."""
    shown = ", ".join(f"{name}={{self.{name}!r}}" for name in names)
    source = f'def __repr__(self):\n    return self.__class__.__qualname__ + f"({shown})"\n'
    # As dataclasses' own: a record that contains itself shows "..." there.
    return lambda cls: reprlib.recursive_repr()(_compiled(source, "__repr__"))


def _tuple(owner: str, names: tuple[str, ...]) -> str:
    """``(self.a,self.b,)``: the tuple ``@dataclass`` compares and hashes."""
    return "(" + "".join(f"{owner}.{name}," for name in names) + ")"


def _comparison(name: str, operator_: str, names: tuple[str, ...]) -> Callable[[type], Any]:
    """Builds the ``__eq__`` or ordering method ``@dataclass`` makes."""
    source = (
        f"def {name}(self, other):\n"
        "    if other.__class__ is self.__class__:\n"
        f"        return {_tuple('self', names)} {operator_} {_tuple('other', names)}\n"
        "    return NotImplemented\n"
    )
    return lambda cls: _compiled(source, name)


def _hash(names: tuple[str, ...]) -> Callable[[type], Any]:
    """Builds the ``__hash__`` ``@dataclass`` makes for a frozen class."""
    source = f"def __hash__(self):\n    return hash({_tuple('self', names)})\n"
    return lambda cls: _compiled(source, "__hash__")


def _compiled(source: str, name: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # code generated from the dataclass's own field names
    return namespace[name]


_ORDER: dict[str, str] = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}


def _frozen_setattr(owner: type, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name in names or type(self) is owner:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        parent: Any = super(owner, self)
        parent.__setattr__(name, value)

    return __setattr__


def _frozen_delattr(owner: type, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if name in names or type(self) is owner:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        parent: Any = super(owner, self)
        parent.__delattr__(name)

    return __delattr__


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, field.name) for field in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for field, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, field.name, value)


class _Lazy:
    """A method of a record until something looks it up: then it is made by ``build``,
    put in the class in place of this object, and returned."""

    __slots__ = ("_build", "_cls", "_name")

    def __init__(self, cls: type, name: str, build: Callable[[type], Any]) -> None:
        self._cls = cls
        self._name = name
        self._build = build

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        cls = self._cls
        if cls.__dict__.get(self._name) is self:
            _put(cls, self._name, self._build(cls))
        return cls.__dict__[self._name].__get__(instance, owner)


def _compiled_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` ``@dataclass`` makes, writing frozen slots through their descriptors."""
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY, "_object_setattr": object.__setattr__}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    annotations: dict[str, Any] = {}
    for index, field in enumerate(dataclasses.fields(cls)):
        name = field.name
        has_default = field.default is not dataclasses.MISSING
        has_factory = field.default_factory is not dataclasses.MISSING
        if field.init:
            annotations[name] = field.type
            param = name
            if has_default:
                namespace[f"_default{index}"] = field.default
                param = f"{name}=_default{index}"
            elif has_factory:
                param = f"{name}=_FACTORY"
            (keyword if field.kw_only else positional).append(param)
        if has_factory:
            namespace[f"_factory{index}"] = field.default_factory
            value = (
                f"_factory{index}() if {name} is _FACTORY else {name}"
                if field.init
                else f"_factory{index}()"
            )
        elif field.init:
            value = name
        elif has_default:
            namespace[f"_default{index}"] = field.default
            value = f"_default{index}"
        else:
            continue  # set by __post_init__, or left unset as @dataclass leaves it
        if not frozen:
            body.append(f"    self.{name} = {value}")
            continue
        slot = getattr(cls, name, None)
        if isinstance(slot, types.MemberDescriptorType):
            namespace[f"_set{index}"] = slot.__set__
            body.append(f"    _set{index}(self, {value})")
        else:
            body.append(f"    _object_setattr(self, {name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)  # code generated from the dataclass's own fields
    init: Callable[..., None] = namespace["__init__"]
    init.__annotations__ = {**annotations, "return": None}
    return init


def fast_init(cls: C) -> C:
    """Replace the ``__init__`` of a frozen, slotted dataclass by an equivalent faster one.

    Apply it above ``@dataclass(frozen=True, slots=True)``. Classes with ``__post_init__``,
    ``InitVar`` or ``init=False`` fields are refused: the generated code handles none of those.

    Raises:
        TypeError: ``cls`` is not a frozen, slotted dataclass this helper supports.
    """
    if isinstance(cls.__dict__.get("__init__"), _Lazy):
        return cls  # made by this module's dataclass(): its __init__ is already this one
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
