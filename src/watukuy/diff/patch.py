"""Change sets: RFC 6902 JSON Patches between two JSON documents, and the pointers they touch.

Pure and deterministic. :func:`json_patch` compares two plain JSON values (``dict``, ``list``,
``str``, ``int``, ``float``, ``bool``, ``None``) and returns the operations that turn the
first into the second; :func:`apply_patch` applies such a patch, so that
``apply_patch(before, json_patch(before, after)) == after`` for every pair.

How values are compared:

- objects member by member, in sorted key order: ``remove`` for a member that went away,
  ``add`` for a new one, and the members in both compared in turn;
- arrays of objects that all carry a distinct ``array_key`` (``"id"`` by default) on both
  sides are matched by that key: ``remove`` for an element whose key went away, ``add`` for a
  new one, ``move`` when an element changed place, and the elements in both compared in
  turn, so a line that kept its ``id`` shows up as ``/lines/2/qty``, wherever it moved;
- every other array by position: the common positions compared in turn, then ``add`` at the
  end or ``remove`` from the end;
- anything else as a whole: ``replace`` when it differs. ``True`` and ``1`` differ (JSON
  tells booleans from numbers); ``1`` and ``1.0`` are equal, as in JSON.

Paths are JSON Pointers (RFC 6901): ``~`` is written ``~0`` and ``/`` is written ``~1``
inside a member name.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeAlias

from watukuy.model.errors import ConfigError
from watukuy.model.events import patch_paths as changed_paths

__all__ = [
    "DEFAULT_ARRAY_KEY",
    "JsonPatch",
    "apply_patch",
    "changed_paths",
    "element_identity",
    "escape_pointer",
    "join_pointer",
    "json_equal",
    "json_patch",
    "keyed_array",
    "split_pointer",
]

JsonPatch: TypeAlias = list[dict[str, Any]]
"""An RFC 6902 JSON Patch: a list of operations such as
``{"op": "replace", "path": "/status", "value": "paid"}``."""

DEFAULT_ARRAY_KEY: Final = "id"
"""The member that identifies an object in an array unless the poller says otherwise."""


def escape_pointer(segment: str) -> str:
    """One reference token of a JSON Pointer: ``a/b~c`` becomes ``a~1b~0c``."""
    if "~" in segment or "/" in segment:
        return segment.replace("~", "~0").replace("/", "~1")
    return segment


def join_pointer(segments: Iterable[str | int]) -> str:
    """The JSON Pointer of these segments: ``["lines", 2, "qty"]`` -> ``/lines/2/qty``."""
    return "".join("/" + escape_pointer(str(segment)) for segment in segments)


def split_pointer(pointer: str) -> list[str]:
    """The unescaped segments of a JSON Pointer: ``/a~1b/0`` -> ``["a/b", "0"]``.

    Raises:
        ConfigError: The pointer is neither ``""`` nor starts with ``/``.
    """
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ConfigError(
            f"expected a JSON Pointer starting with '/', got {pointer!r}", field="path"
        )
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: like ``==``, except that a boolean never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(json_equal(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def json_patch(before: Any, after: Any, *, array_key: str | None = DEFAULT_ARRAY_KEY) -> JsonPatch:
    """The RFC 6902 JSON Patch that turns ``before`` into ``after``.

    Args:
        before: A plain JSON value.
        after: A plain JSON value.
        array_key: The member that identifies the objects of an array (see the module
            docstring); ``None`` compares every array by position.

    Returns:
        The operations, empty when the two are equal. The values in them are ``after``'s
        own objects, not copies: copy them before changing them.
    """
    ops: JsonPatch = []
    _diff(before, after, "", ops, array_key)
    return ops


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _diff(before: Any, after: Any, path: str, ops: JsonPatch, key: str | None) -> None:
    kind = type(before)
    if kind is type(after) and kind in _SCALARS:
        # The common case, first: a member that kept its type (``==`` is exact then).
        if before != after:
            ops.append({"op": "replace", "path": path, "value": after})
    elif isinstance(before, dict) and isinstance(after, dict):
        _diff_objects(before, after, path, ops, key)
    elif isinstance(before, list) and isinstance(after, list):
        if key is not None and keyed_array(before, key) and keyed_array(after, key):
            _diff_keyed(before, after, path, ops, key)
        else:
            _diff_positional(before, after, path, ops, key)
    elif not json_equal(before, after):
        ops.append({"op": "replace", "path": path, "value": after})


def _diff_objects(
    before: dict[str, Any], after: dict[str, Any], path: str, ops: JsonPatch, key: str | None
) -> None:
    if before.keys() != after.keys():
        for name in sorted(before.keys() - after.keys()):
            ops.append({"op": "remove", "path": f"{path}/{escape_pointer(name)}"})
    for name in sorted(after):
        value = after[name]
        if name in before:
            old = before[name]
            if old is value:
                continue
            kind = type(old)
            if kind is type(value) and kind in _SCALARS:
                if old != value:
                    ops.append(
                        {"op": "replace", "path": f"{path}/{escape_pointer(name)}", "value": value}
                    )
                continue
            _diff(old, value, f"{path}/{escape_pointer(name)}", ops, key)
        else:
            ops.append({"op": "add", "path": f"{path}/{escape_pointer(name)}", "value": value})


def _diff_positional(
    before: list[Any], after: list[Any], path: str, ops: JsonPatch, key: str | None
) -> None:
    common = min(len(before), len(after))
    for index in range(common):
        _diff(before[index], after[index], f"{path}/{index}", ops, key)
    for index in range(common, len(after)):
        ops.append({"op": "add", "path": f"{path}/{index}", "value": after[index]})
    for index in range(len(before) - 1, common - 1, -1):
        ops.append({"op": "remove", "path": f"{path}/{index}"})


def element_identity(element: dict[str, Any], key: str) -> Any:
    """What identifies an element of a keyed array (``True`` and ``1`` stay apart)."""
    value = element[key]
    return (type(value).__name__, value) if isinstance(value, bool) else value


def keyed_array(items: list[Any], key: str) -> bool:
    """True when the array is diffed by ``key``: not empty, and every element an object with
    a scalar, distinct ``key``."""
    seen: set[Any] = set()
    for element in items:
        if not isinstance(element, dict) or key not in element:
            return False
        value = element[key]
        if isinstance(value, dict | list):
            return False
        identity = element_identity(element, key)
        if identity in seen:
            return False
        seen.add(identity)
    return bool(items)


def _diff_keyed(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    path: str,
    ops: JsonPatch,
    key: str,
) -> None:
    wanted = {element_identity(element, key) for element in after}
    current = [element_identity(element, key) for element in before]
    by_identity = {element_identity(element, key): element for element in before}
    # 1. Drop what went away, from the end so that the earlier indexes stay valid.
    for index in range(len(current) - 1, -1, -1):
        if current[index] not in wanted:
            ops.append({"op": "remove", "path": f"{path}/{index}"})
            del current[index]
    # 2. Build the new order from the front: everything before ``index`` is already final,
    #    so a kept element is found at ``index`` or after it and moved forward.
    for index, element in enumerate(after):
        identity = element_identity(element, key)
        target = f"{path}/{index}"
        if identity in by_identity:
            position = current.index(identity, index)
            if position != index:
                ops.append({"op": "move", "from": f"{path}/{position}", "path": target})
                current.insert(index, current.pop(position))
            _diff(by_identity[identity], element, target, ops, key)
        else:
            ops.append({"op": "add", "path": target, "value": element})
            current.insert(index, identity)


# --- applying -------------------------------------------------------------------------------


def apply_patch(document: Any, patch: Sequence[dict[str, Any]]) -> Any:
    """Apply an RFC 6902 patch to a copy of ``document`` and return the result.

    Supports every operation (``add``, ``remove``, ``replace``, ``move``, ``copy``,
    ``test``); ``document`` itself is left as it was.

    Raises:
        ValueError: An operation does not fit the document (a missing member, an index out
            of range, a failed ``test``).
    """
    result = copy.deepcopy(document)
    for op in patch:
        kind = op.get("op")
        path = split_pointer(op["path"])
        if kind == "add":
            result = _add(result, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            result, _ = _remove(result, path)
        elif kind == "replace":
            result, _ = _remove(result, path)
            result = _add(result, path, copy.deepcopy(op["value"]))
        elif kind == "move":
            result, value = _remove(result, split_pointer(op["from"]))
            result = _add(result, path, value)
        elif kind == "copy":
            value = copy.deepcopy(_get(result, split_pointer(op["from"])))
            result = _add(result, path, value)
        elif kind == "test":
            if not json_equal(_get(result, path), op["value"]):
                raise ValueError(f"test failed at {op['path']!r}")
        else:
            raise ValueError(f"unknown patch operation {kind!r}")
    return result


def _index(container: list[Any], segment: str, *, for_add: bool) -> int:
    if segment == "-" and for_add:
        return len(container)
    if not segment.isdigit() or (segment != "0" and segment.startswith("0")):
        raise ValueError(f"not an array index: {segment!r}")
    index = int(segment)
    if index > len(container) or (index == len(container) and not for_add):
        raise ValueError(f"array index {index} out of range")
    return index


def _get(document: Any, path: list[str]) -> Any:
    node = document
    for segment in path:
        if isinstance(node, dict):
            if segment not in node:
                raise ValueError(f"no member {segment!r}")
            node = node[segment]
        elif isinstance(node, list):
            node = node[_index(node, segment, for_add=False)]
        else:
            raise ValueError(f"cannot descend into {node!r}")
    return node


def _add(document: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(document, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise ValueError(f"cannot add into {parent!r}")
    return document


def _remove(document: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        return None, document
    parent = _get(document, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise ValueError(f"no member {last!r}")
        return document, parent.pop(last)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, last, for_add=False))
    raise ValueError(f"cannot remove from {parent!r}")
