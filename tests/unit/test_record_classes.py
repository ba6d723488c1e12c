"""``watukuy.model.records.dataclass`` makes the classes ``dataclasses.dataclass`` makes.

Every shape of record the package uses is made twice, once by each decorator, and the two
classes are compared: signature, ``repr``, ``==``, ``hash``, ordering, frozen fields,
``replace``, ``asdict``, pickling and copies. Then every record of the package made by it
is checked against the class ``dataclasses.dataclass`` makes from the same fields.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import reprlib
import sys
import types
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

import watukuy
from watukuy.model import records
from watukuy.model.records import dataclass as record

Decorator = Callable[..., Any]
FIELD = dataclasses.field


def _shapes(make: Decorator) -> dict[str, type]:
    """The same class bodies, decorated by ``make``."""

    @make(frozen=True, slots=True)
    class Frozen:
        """Defaults, a factory, a keyword-only field and a class variable."""

        a: int
        b: str = "b"
        c: list[int] = FIELD(default_factory=list)
        d: int = FIELD(default=4, kw_only=True)
        k: ClassVar[int] = 7

        @property
        def double(self) -> int:
            return self.a * 2

    @make(frozen=True, slots=True, kw_only=True)
    class Derived:
        """Fields set by ``__post_init__``, one hidden from ``repr`` and ``==``."""

        every: int
        label: str | None = None
        twice: int = FIELD(init=False, repr=False, compare=False)
        secret: str = FIELD(default="s", repr=False, compare=False)

        def __post_init__(self) -> None:
            if self.every < 0:
                raise ValueError(f"every must be >= 0, got {self.every!r}")
            object.__setattr__(self, "twice", self.every * 2)

    @make(frozen=True, slots=True, order=True)
    class Ordered:
        """Compared by both fields."""

        poller: str
        partition: str = ""

        def __str__(self) -> str:
            return f"{self.poller}/{self.partition}"

    @make(slots=True)
    class Mutable:
        """Not frozen: assignable, unhashable."""

        n: int = 0
        items: list[str] = FIELD(default_factory=list)

    @make(frozen=True, slots=True, eq=False)
    class Identity:
        """Compared and hashed by identity."""

        value: Any = None

    @make(frozen=True, slots=True)
    class Own:
        """Its own ``repr`` and ``==``; ``hash`` comes from ``@dataclass``'s table."""

        x: int

        def __repr__(self) -> str:
            return f"<own {self.x}>"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Own) and other.x % 10 == self.x % 10

    @make(frozen=True, slots=True)
    class Hashed:
        """Its own ``hash``."""

        x: int

        def __hash__(self) -> int:
            return 42

    @make(frozen=True, slots=True)
    class Empty:
        """No field."""

    @make(frozen=True, slots=True)
    class One:
        """One field, which may be NaN."""

        x: Any

    @make(frozen=True, slots=True)
    class PartlyHashed:
        """One field out of the hash, one out of ``==`` but in the hash."""

        a: int
        b: int = FIELD(default=0, hash=False)
        c: int = FIELD(default=0, compare=False, hash=True)

    return {
        cls.__name__: cls
        for cls in (
            Frozen,
            Derived,
            Ordered,
            Mutable,
            Identity,
            Own,
            Hashed,
            Empty,
            One,
            PartlyHashed,
        )
    }


def _published(prefix: str, shapes: dict[str, type]) -> dict[str, type]:
    """Module-level names for the shapes, so that pickle finds them."""
    for name, cls in shapes.items():
        cls.__qualname__ = f"{prefix}{name}"
        globals()[cls.__qualname__] = cls
    return shapes


OURS = _published("Ours", _shapes(record))
THEIRS = _published("Theirs", _shapes(dataclasses.dataclass))


def _same_repr(ours: object, theirs: object) -> bool:
    return repr(ours).replace("Ours", "") == repr(theirs).replace("Theirs", "")


def _hash(value: object) -> object:
    try:
        return hash(value)
    except TypeError as error:
        return str(error)


# Arguments to build each shape with: (args, kwargs) pairs, the first two equal.
SAMPLES: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "Frozen": [((1,), {}), ((1, "b", []), {"d": 4}), ((1, "x"), {"c": [2], "d": 9})],
    "Derived": [((), {"every": 2}), ((), {"every": 2, "secret": "t"}), ((), {"every": 3})],
    "Ordered": [(("a",), {}), (("a", ""), {}), (("a", "b"), {}), (("b",), {})],
    "Mutable": [((), {}), ((0, []), {}), ((1, ["x"]), {})],
    "Identity": [((1,), {}), ((1,), {})],
    "Own": [((1,), {}), ((11,), {}), ((2,), {})],
    "Hashed": [((1,), {}), ((1,), {}), ((2,), {})],
    "Empty": [((), {}), ((), {})],
    "One": [((float("nan"),), {}), ((1,), {}), ((2,), {})],
    "PartlyHashed": [((1, 2, 3), {}), ((1, 5, 3), {}), ((1, 2, 4), {})],
}


def _outcome(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return cls(*args, **kwargs)
    except Exception as error:
        return error


def _same_error(ours: BaseException, theirs: BaseException) -> bool:
    # "X.__init__() missing ...": the class's own name differs between the two.
    return type(ours) is type(theirs) and (
        str(ours).rpartition("__init__() ")[2] == str(theirs).rpartition("__init__() ")[2]
    )


@pytest.mark.parametrize("name", sorted(OURS))
def test_the_class_is_what_dataclass_makes(name: str) -> None:
    ours, theirs = OURS[name], THEIRS[name]
    assert dataclasses.is_dataclass(ours)
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert ours.__match_args__ == theirs.__match_args__  # type: ignore[attr-defined]
    assert ours.__slots__ == theirs.__slots__  # type: ignore[attr-defined]
    for attribute in ("init", "repr", "eq", "order", "unsafe_hash", "frozen"):
        assert getattr(ours.__dataclass_params__, attribute) == getattr(  # type: ignore[attr-defined]
            theirs.__dataclass_params__,  # type: ignore[attr-defined]
            attribute,
        ), attribute
    assert [
        (f.name, f.type, f.init, f.repr, f.compare, f.hash, f.kw_only)
        for f in dataclasses.fields(ours)
    ] == [
        (f.name, f.type, f.init, f.repr, f.compare, f.hash, f.kw_only)
        for f in dataclasses.fields(theirs)
    ]
    assert (ours.__hash__ is None) == (theirs.__hash__ is None)
    assert ours.__doc__ == theirs.__doc__
    assert ours.__init__.__qualname__ == f"{ours.__qualname__}.__init__"
    assert ours.__init__.__annotations__ == theirs.__init__.__annotations__


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_instances_behave_alike(name: str) -> None:
    ours_cls, theirs_cls = OURS[name], THEIRS[name]
    ours = [_outcome(ours_cls, *sample) for sample in SAMPLES[name]]
    theirs = [_outcome(theirs_cls, *sample) for sample in SAMPLES[name]]
    for mine, other in zip(ours, theirs, strict=True):
        assert _same_repr(mine, other)
        assert dataclasses.astuple(mine) == dataclasses.astuple(other)
        assert dataclasses.asdict(mine) == dataclasses.asdict(other)
        assert (mine == object()) == (other == object())
        assert (mine != mine) == (other != other)
    for i, j in [(i, j) for i in range(len(ours)) for j in range(len(ours))]:
        if name == "Identity":
            assert (ours[i] == ours[j]) == (i == j)
            continue
        assert (ours[i] == ours[j]) == (theirs[i] == theirs[j]), (i, j)
        if theirs_cls.__hash__ is not None and theirs[i] == theirs[j]:
            assert (_hash(ours[i]) == _hash(ours[j])) == (_hash(theirs[i]) == _hash(theirs[j]))
        if theirs_cls.__dataclass_params__.order:  # type: ignore[attr-defined]
            for compare in ("__lt__", "__le__", "__gt__", "__ge__"):
                assert getattr(ours[i], compare)(ours[j]) == getattr(theirs[i], compare)(theirs[j])
    if theirs_cls.__hash__ is not None and name not in ("Identity", "One"):
        assert _hash(ours[0]) == _hash(theirs[0])


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_frozen_copies_pickles_and_replace(name: str) -> None:
    cls = OURS[name]
    instance = cls(*SAMPLES[name][0][0], **SAMPLES[name][0][1])
    fields = dataclasses.fields(cls)
    if cls.__dataclass_params__.frozen and fields:  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field"):
            setattr(instance, fields[0].name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field"):
            delattr(instance, fields[0].name)
        with pytest.raises(AttributeError):
            instance.elsewhere = 1
    for twin in (
        copy.copy(instance),
        copy.deepcopy(instance),
        pickle.loads(pickle.dumps(instance)),
        dataclasses.replace(instance),
    ):
        assert repr(twin) == repr(instance)
        assert type(twin) is cls


def test_errors_of_construction_match() -> None:
    for name in SAMPLES:
        for args, kwargs in [((), {}), ((1, 2, 3, 4, 5), {}), ((), {"nope": 1})]:
            mine, other = _outcome(OURS[name], args, kwargs), _outcome(THEIRS[name], args, kwargs)
            if isinstance(other, BaseException):
                assert isinstance(mine, BaseException), (name, args, kwargs)
                assert _same_error(mine, other), (name, mine, other)
    mine = _outcome(OURS["Derived"], (), {"every": -1})
    other = _outcome(THEIRS["Derived"], (), {"every": -1})
    assert _same_error(mine, other)


def test_mutable_records_assign_and_are_unhashable() -> None:
    mutable = OURS["Mutable"]()
    mutable.n = 5
    assert mutable.n == 5
    with pytest.raises(TypeError, match="unhashable"):
        hash(mutable)


def test_a_record_that_contains_itself_shows_dots() -> None:
    ours, theirs = OURS["Mutable"](), THEIRS["Mutable"]()
    ours.items.append(ours)
    theirs.items.append(theirs)
    assert _same_repr(ours, theirs)
    assert repr(ours) == "OursMutable(n=0, items=[...])"


def test_defaults_after_non_defaults_fail_when_the_class_is_made() -> None:
    for make in (record, dataclasses.dataclass):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default"):

            @make(frozen=True, slots=True)
            class Wrong:
                """Wrong."""

                a: int = 0
                b: int  # type: ignore[misc]


def test_what_it_does_not_handle_goes_to_dataclass() -> None:
    @record(frozen=True)
    class NoSlots:
        """No slots."""

        a: int

    @record(frozen=True, slots=True)
    class Undocumented:
        a: int

    @record(frozen=True, slots=True, kw_only=True)
    class Child(OURS["Derived"]):  # type: ignore[misc]
        """A subclass of a record."""

        extra: int = 0

    for cls in (NoSlots, Undocumented, Child):
        assert not isinstance(cls.__dict__.get("__init__"), records._Lazy)
        assert "__init__" in cls.__dict__
    child = Child(every=1, extra=2)
    assert (child.twice, child.extra) == (2, 2)
    assert Undocumented.__doc__ == "Undocumented(a: 'int')"


def test_init_is_compiled_on_first_use() -> None:
    @record(frozen=True, slots=True)
    class Fresh:
        """Never built yet."""

        a: int
        b: int = 2

    assert isinstance(Fresh.__dict__["__init__"], records._Lazy)
    assert Fresh(1).b == 2
    compiled = Fresh.__dict__["__init__"]
    assert isinstance(compiled, types.FunctionType)
    assert "_set0" in compiled.__code__.co_names  # frozen slots written through descriptors
    assert records.fast_init(Fresh) is Fresh


def _package_records() -> list[type]:
    found: list[type] = []
    for info in pkgutil.walk_packages(watukuy.__path__, "watukuy."):
        if info.name.endswith("__main__") or ".cli" in info.name or ".demo" in info.name:
            continue
        if info.name.startswith("watukuy.core."):  # the deprecated alias: names walked at home
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency that is not installed
            continue
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == module.__name__
                and _made_by_records(value)
                and value not in found
            ):
                found.append(value)
    return found


def _made_by_records(cls: type) -> bool:
    init = cls.__dict__.get("__init__")
    return isinstance(init, records._Lazy) or (
        isinstance(init, types.FunctionType)
        and init.__code__.co_filename == "<string>"
        and "__dataclass_fields__" in cls.__dict__
        and _generated(cls.__dict__.get("__repr__"))
    )


def _generated(value: Any) -> bool:
    code = getattr(value, "__code__", None)
    # __repr__ is wrapped by reprlib.recursive_repr, as dataclasses wraps its own.
    return isinstance(value, records._Lazy) or (
        code is not None and code.co_filename in (records.__file__, reprlib.__file__, "<string>")
    )


def _as_dataclass_would(cls: type) -> type:
    """The class ``dataclasses.dataclass`` makes from ``cls``'s own definition."""
    skip = {"__slots__", "__dict__", "__weakref__", "__dataclass_fields__"}
    skip |= {"__dataclass_params__", "__match_args__", "__getstate__", "__setstate__"}
    namespace = {
        key: value
        for key, value in cls.__dict__.items()
        if key not in skip
        and not _generated(value)
        and not isinstance(value, types.MemberDescriptorType)
    }
    for field in dataclasses.fields(cls):
        namespace[field.name] = dataclasses.field(
            default=field.default,
            default_factory=field.default_factory,
            init=field.init,
            repr=field.repr,
            hash=field.hash,
            compare=field.compare,
            metadata=field.metadata,
            kw_only=field.kw_only,
        )
    made = cls.__dataclass_params__  # type: ignore[attr-defined]
    plain = type(cls)(cls.__name__, cls.__bases__, namespace)
    plain.__qualname__ = cls.__qualname__
    return dataclasses.dataclass(
        plain, eq=made.eq, order=made.order, frozen=made.frozen, slots=True
    )


def test_every_record_of_the_package_is_what_dataclass_would_make() -> None:
    found = _package_records()
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in found}
    # The records a nothing-changed tick builds are among them.
    for expected in (
        "watukuy.model.rows.PKey",
        "watukuy.model.rows.PollerState",
        "watukuy.model.options.Schedule",
        "watukuy.cursor.config.TimestampCursor",
        "watukuy.runtime.results.TickResult",
    ):
        assert expected in names
    for cls in found:
        reference = _as_dataclass_would(cls)
        label = f"{cls.__module__}.{cls.__qualname__}"
        assert str(inspect.signature(cls)) == str(inspect.signature(reference)), label
        assert cls.__match_args__ == reference.__match_args__, label  # type: ignore[attr-defined]
        assert (cls.__hash__ is None) == (reference.__hash__ is None), label
        for attribute in ("eq", "order", "frozen"):
            assert getattr(cls.__dataclass_params__, attribute) == getattr(  # type: ignore[attr-defined]
                reference.__dataclass_params__,  # type: ignore[attr-defined]
                attribute,
            ), label
    assert "watukuy.model.rows" in sys.modules


def test_order_needs_eq_as_with_dataclass() -> None:
    for make in (record, dataclasses.dataclass):
        with pytest.raises(ValueError, match="eq must be true if order is true"):

            @make(frozen=True, slots=True, order=True, eq=False)
            class Wrong:
                """Wrong."""

                a: int


def test_fields_are_read_as_dataclass_reads_them() -> None:
    # The package's records take the path that reads the fields without @dataclass.
    assert records._FAST_FIELDS

    def made(make: Decorator) -> type:
        @make(frozen=True, slots=True)
        class Marked:
            """A KW_ONLY marker, a class variable given by field() and a real annotation."""

            a: int
            _: dataclasses.KW_ONLY
            b: int = 2
            shared: ClassVar[int] = FIELD(default=5)

        return Marked

    def real(make: Decorator) -> type:
        # Annotations as objects, not strings: dataclasses' own reading decides each one.
        namespace = {
            "__doc__": "Real.",
            "__annotations__": {"k": ClassVar[int], "a": int, "_": dataclasses.KW_ONLY, "b": int},
            "k": 1,
            "b": 2,
        }
        made_class: type = make(frozen=True, slots=True)(type("Real", (), namespace))
        return made_class

    for shape in (made, real):
        ours, theirs = shape(record), shape(dataclasses.dataclass)
        assert isinstance(ours.__dict__["__init__"], records._Lazy)
        assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
        assert ours.__match_args__ == theirs.__match_args__ == ("a",)  # type: ignore[attr-defined]
        assert ours.__slots__ == theirs.__slots__ == ("a", "b")  # type: ignore[attr-defined]
        assert [(f.name, f.kw_only) for f in dataclasses.fields(ours)] == [
            (f.name, f.kw_only) for f in dataclasses.fields(theirs)
        ]
        assert ours(1, b=3) == ours(1, b=3) != ours(1)
    ours, theirs = made(record), made(dataclasses.dataclass)
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert ours.shared == theirs.shared == 5  # type: ignore[attr-defined]


def test_field_mistakes_fail_as_with_dataclass() -> None:
    for make in (record, dataclasses.dataclass):
        with pytest.raises(ValueError, match="mutable default <class 'list'> for field a"):

            @make(frozen=True, slots=True)
            class Mutable:
                """Mutable."""

                a: list[int] = []  # noqa: RUF012

        with pytest.raises(TypeError, match="'b' is a field but has no type annotation"):

            @make(frozen=True, slots=True)
            class Unannotated:
                """Unannotated."""

                a: int
                b = FIELD(default=1)

        with pytest.raises(TypeError, match="KW_ONLY has already been specified"):

            @make(frozen=True, slots=True)
            class Twice:
                """Twice."""

                _: dataclasses.KW_ONLY
                a: int
                __: dataclasses.KW_ONLY


CV = ClassVar
KO = dataclasses.KW_ONLY


def test_pseudo_fields_under_other_names_are_read_as_dataclass_reads_them() -> None:
    def made(make: Decorator) -> type:
        @make(frozen=True, slots=True)
        class Aliased:
            """ClassVar and KW_ONLY imported under other names."""

            a: int
            shared: CV[int] = 3
            _: KO
            b: int = 2

        return Aliased

    ours, theirs = made(record), made(dataclasses.dataclass)
    assert (
        str(inspect.signature(ours))
        == str(inspect.signature(theirs))
        == "(a: 'int', *, b: 'int' = 2) -> None"
    )
    assert ours.__slots__ == theirs.__slots__ == ("a", "b")  # type: ignore[attr-defined]
    assert ours.shared == theirs.shared == 3  # type: ignore[attr-defined]
