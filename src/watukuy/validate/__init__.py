"""Schema adapters: one shape for pydantic models, TypeAdapters, msgspec structs and callables.

A poller's ``schema`` turns each raw item from the API into the typed item handlers see.
:func:`schema_adapter` wraps whatever the user passed into a :class:`SchemaAdapter` with
three operations: ``validate`` (raw to typed, or the issues found), ``dump`` (typed to JSON
data, for hashing and storage) and ``load`` (stored JSON back to typed, for redelivery).
Neither pydantic nor msgspec is a dependency: they are recognised by shape.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

from watukuy.model.errors import ConfigError, ValidationIssue
from watukuy.model.json import to_jsonable
from watukuy.model.records import dataclass

__all__ = [
    "Invalid",
    "SchemaAdapter",
    "Valid",
    "is_passthrough",
    "schema_adapter",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Valid(Generic[T]):
    """A raw item the schema accepted, and the typed item it produced."""

    item: T


@dataclass(frozen=True, slots=True)
class Invalid:
    """A raw item the schema rejected, with what was wrong."""

    issues: list[ValidationIssue]

    @property
    def message(self) -> str:
        """All issues on one line."""
        parts = []
        for issue in self.issues:
            path = ".".join(str(p) for p in issue.get("path", []))
            parts.append(f"{path}: {issue['message']}" if path else issue["message"])
        return "; ".join(parts) or "invalid item"


class SchemaAdapter(Protocol[T]):
    """What the engine needs from a schema."""

    def validate(self, raw: Any) -> Valid[T] | Invalid:
        """Check a raw item; never raises for bad data."""
        ...

    def dump(self, item: Any) -> Any:
        """The typed item as plain JSON data."""
        ...

    def load(self, data: Any) -> Any:
        """Stored JSON data back to the typed item (the data itself when it no longer fits)."""
        ...


class _Passthrough:
    """No schema: items are used as the API returned them."""

    def validate(self, raw: Any) -> Valid[Any] | Invalid:
        return Valid(raw)

    def dump(self, item: Any) -> Any:
        return to_jsonable(item)

    def load(self, data: Any) -> Any:
        return data


def _pydantic_issues(error: Exception) -> list[ValidationIssue] | None:
    errors = getattr(error, "errors", None)
    if not callable(errors) or type(error).__name__ != "ValidationError":
        return None
    try:
        details = errors()
    except Exception:  # pragma: no cover - a foreign ValidationError without pydantic's API
        return None
    issues: list[ValidationIssue] = []
    for detail in details:
        issue: ValidationIssue = {"message": str(detail.get("msg", "invalid"))}
        loc = detail.get("loc")
        if loc:
            issue["path"] = [p if isinstance(p, int) else str(p) for p in loc]
        issues.append(issue)
    return issues


_MSGSPEC_PATH = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$")


def _msgspec_issues(error: Exception) -> list[ValidationIssue]:
    match = _MSGSPEC_PATH.match(str(error))
    assert match is not None  # the pattern matches any string
    issue: ValidationIssue = {"message": match.group("message")}
    raw_path = match.group("path")
    if raw_path:
        path: list[str | int] = []
        for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", raw_path):
            path.append(part[0] if part[0] else int(part[1]))
        issue["path"] = path
    return [issue]


def _issues_from(error: Exception) -> list[ValidationIssue]:
    pydantic = _pydantic_issues(error)
    if pydantic is not None:
        return pydantic
    if type(error).__module__.startswith("msgspec"):
        return _msgspec_issues(error)
    return [{"message": f"{type(error).__name__}: {error}"}]


class _PydanticModel:
    def __init__(self, model: Any) -> None:
        self._model = model

    def validate(self, raw: Any) -> Valid[Any] | Invalid:
        try:
            return Valid(self._model.model_validate(raw))
        except Exception as error:
            return Invalid(_issues_from(error))

    def dump(self, item: Any) -> Any:
        return to_jsonable(item)

    def load(self, data: Any) -> Any:
        try:
            return self._model.model_validate(data)
        except Exception:
            return data


class _PydanticTypeAdapter:
    def __init__(self, adapter: Any) -> None:
        self._adapter = adapter

    def validate(self, raw: Any) -> Valid[Any] | Invalid:
        try:
            return Valid(self._adapter.validate_python(raw))
        except Exception as error:
            return Invalid(_issues_from(error))

    def dump(self, item: Any) -> Any:
        return to_jsonable(self._adapter.dump_python(item, mode="json"))

    def load(self, data: Any) -> Any:
        try:
            return self._adapter.validate_python(data)
        except Exception:
            return data


class _MsgspecStruct:
    def __init__(self, struct_type: type[Any]) -> None:
        self._type = struct_type

    def validate(self, raw: Any) -> Valid[Any] | Invalid:
        import msgspec  # present whenever a msgspec Struct type exists

        try:
            return Valid(msgspec.convert(raw, self._type))
        except msgspec.ValidationError as error:
            return Invalid(_msgspec_issues(error))

    def dump(self, item: Any) -> Any:
        return to_jsonable(item)

    def load(self, data: Any) -> Any:
        import msgspec

        try:
            return msgspec.convert(data, self._type)
        except msgspec.ValidationError:
            return data


class _Callable:
    def __init__(self, parse: Callable[[Any], Any]) -> None:
        self._parse = parse

    def validate(self, raw: Any) -> Valid[Any] | Invalid:
        try:
            return Valid(self._parse(raw))
        except Exception as error:
            return Invalid(_issues_from(error))

    def dump(self, item: Any) -> Any:
        return to_jsonable(item)

    def load(self, data: Any) -> Any:
        try:
            return self._parse(data)
        except Exception:
            return data


def _is_pydantic_model(schema: Any) -> bool:
    return isinstance(schema, type) and hasattr(schema, "model_validate")


def _is_type_adapter(schema: Any) -> bool:
    return hasattr(schema, "validate_python") and hasattr(schema, "dump_python")


def _is_msgspec_struct(schema: Any) -> bool:
    return isinstance(schema, type) and hasattr(schema, "__struct_fields__")


def is_passthrough(adapter: SchemaAdapter[Any]) -> bool:
    """True for the adapter of a poller without a schema: every item is valid as it is."""
    return type(adapter) is _Passthrough


def schema_adapter(schema: Any) -> SchemaAdapter[Any]:
    """Wrap a poller's ``schema`` option.

    Args:
        schema: ``None``; a pydantic model class; a pydantic ``TypeAdapter``; a msgspec
            ``Struct`` type; or any callable ``(raw) -> item`` that raises on bad input.

    Raises:
        ConfigError: ``schema`` is none of those.
    """
    if schema is None:
        return _Passthrough()
    if _is_pydantic_model(schema):
        return _PydanticModel(schema)
    if _is_type_adapter(schema):
        return _PydanticTypeAdapter(schema)
    if _is_msgspec_struct(schema):
        return _MsgspecStruct(cast(type[Any], schema))
    if callable(schema):
        return _Callable(schema)
    raise ConfigError(
        "expected a pydantic model, a TypeAdapter, a msgspec Struct type or a callable, "
        f"got {schema!r}",
        field="schema",
    )
