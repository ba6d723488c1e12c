"""Griffe extensions for the reference pages (``mkdocs.yml`` loads both).

:class:`RecordsAreDataclasses`: the records of watukuy are decorated with
``watukuy.model.records.dataclass``, which type checkers read as
:func:`dataclasses.dataclass` and which makes real dataclasses at run time. Griffe reads
the source without running it and only knows the standard decorator, so without this it
would give each record no ``__init__`` signature, and every ``Args:`` section would name
parameters that "do not appear in the signature". The extension points each record's
decorator at :func:`dataclasses.dataclass` before griffe's own dataclasses extension
builds the signatures.

:class:`ReadableRestMarkup`: the docstrings cross-reference with reStructuredText roles
(``:class:`Page```) and open literal blocks with ``::``, which ``help()`` and editors show
as they are. On the site, which renders docstrings as Markdown, a role becomes inline code
and ``Example::`` becomes ``Example:`` (the indented block under it is already code).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

RECORDS_DATACLASS = "watukuy.model.records.dataclass"
_ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|exc|obj|const):`~?(?P<target>[^`]+)`")
_LITERAL_BLOCK = re.compile(r"(?<=\S)::$", re.M)
_LONE_LITERAL_BLOCK = re.compile(r"^(?P<indent>[ \t]*)::$", re.M)


class RecordsAreDataclasses(griffe.Extension):
    """Read ``watukuy.model.records.dataclass`` as :func:`dataclasses.dataclass`."""

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        """Point a record's decorator at :func:`dataclasses.dataclass`."""
        for decorator in cls.decorators:
            value = decorator.value
            name = value.function if isinstance(value, griffe.ExprCall) else value
            if isinstance(name, griffe.ExprName) and name.canonical_path == RECORDS_DATACLASS:
                name.parent = "dataclasses"


def readable(text: str) -> str:
    """A docstring's reStructuredText roles and ``::`` markers, as Markdown reads well."""
    text = _ROLE.sub(lambda match: f"`{match['target'].split('.')[-1]}`", text)
    text = _LONE_LITERAL_BLOCK.sub("", text)
    return _LITERAL_BLOCK.sub(":", text)


class ReadableRestMarkup(griffe.Extension):
    """Render reStructuredText roles and literal-block markers of docstrings as Markdown."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the object's docstring, if it has one."""
        if obj.docstring is not None:
            obj.docstring.value = readable(obj.docstring.value)
