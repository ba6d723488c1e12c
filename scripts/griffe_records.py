"""A griffe extension for the reference pages: watukuy's records are dataclasses.

The records of watukuy are decorated with ``watukuy.model.records.dataclass``, which type
checkers read as :func:`dataclasses.dataclass` and which makes real dataclasses at run time.
Griffe reads the source without running it and only knows the standard decorator, so
without this it would give each record no ``__init__`` signature, and every ``Args:``
section would name parameters that "do not appear in the signature". This extension points
each record's decorator at :func:`dataclasses.dataclass` before griffe's own dataclasses
extension builds the signatures.
"""

from __future__ import annotations

from typing import Any

import griffe

RECORDS_DATACLASS = "watukuy.model.records.dataclass"


class RecordsAreDataclasses(griffe.Extension):
    """Read ``watukuy.model.records.dataclass`` as :func:`dataclasses.dataclass`."""

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Point a record's decorator at :func:`dataclasses.dataclass`."""
        for decorator in cls.decorators:
            value = decorator.value
            name = value.function if isinstance(value, griffe.ExprCall) else value
            if isinstance(name, griffe.ExprName) and name.canonical_path == RECORDS_DATACLASS:
                name.parent = "dataclasses"
