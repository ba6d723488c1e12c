"""The API reference covers every public name, and every public name is documented.

"Public" is each ``__all__`` of :data:`docs_site.PUBLIC_MODULES`. A name counts as rendered
when a ``:::`` directive of a reference page renders the object it stands for, under
whichever public path (``watukuy.MemoryStore`` renders ``watukuy.stores.MemoryStore``).
The package is read as mkdocstrings reads it (griffe, from the source), so what these
tests check is what the site shows.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import griffe
import pytest
from docs_site import PUBLIC_MODULES, Directive, directives, load_package, lookup


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    return load_package()


def _exports(package: griffe.Module, module: str) -> list[str]:
    found = lookup(package, module)
    assert isinstance(found, griffe.Module), module
    return [str(name) for name in found.exports or ()]


def _rendered(package: griffe.Module, directive: Directive) -> set[str]:
    """The canonical paths of what one directive renders."""
    target = lookup(package, directive.path)
    if not target.is_module:
        return {target.canonical_path}
    names = directive.members
    if names is None:
        names = tuple(_exports(package, directive.path))
    return {target.canonical_path} | {target[name].canonical_path for name in names}


def _public_objects(package: griffe.Module) -> list[tuple[str, griffe.Object | griffe.Alias]]:
    return [
        (f"{module}.{name}", lookup(package, module)[name])
        for module in PUBLIC_MODULES
        for name in _exports(package, module)
    ]


def test_the_static_reading_agrees_with_the_running_package(package: griffe.Module) -> None:
    for module in PUBLIC_MODULES:
        assert _exports(package, module) == list(importlib.import_module(module).__all__)


def test_every_public_name_is_rendered_by_a_reference_page(package: griffe.Module) -> None:
    rendered: set[str] = set()
    for directive in directives():
        rendered |= _rendered(package, directive)
    public = _public_objects(package)
    assert len(public) > 250  # every module's names, not an empty list
    missing = [name for name, obj in public if obj.canonical_path not in rendered]
    assert missing == [], f"add these to a page under docs/reference/: {missing}"


def test_a_directive_names_only_what_exists(package: griffe.Module) -> None:
    for directive in directives():
        target = lookup(package, directive.path)
        for name in directive.members or ():
            assert name in target.members, f"{directive.page}: {directive.path}.{name}"


def test_no_object_is_rendered_twice(package: griffe.Module) -> None:
    seen: dict[str, str] = {}
    twice = []
    for directive in directives():
        for path in _rendered(package, directive) - {
            lookup(package, directive.path).canonical_path
        }:
            if path in seen:
                twice.append((path, seen[path], directive.page))
            seen[path] = directive.page
        if not lookup(package, directive.path).is_module:
            seen[lookup(package, directive.path).canonical_path] = directive.page
    assert twice == []


def test_every_public_name_has_a_docstring(package: griffe.Module) -> None:
    bare = [name for name, obj in _public_objects(package) if not obj.docstring]
    assert bare == [], f"these public names have no docstring: {bare}"


def test_every_public_method_of_a_public_class_has_a_docstring(package: griffe.Module) -> None:
    bare = []
    for name, obj in _public_objects(package):
        if not obj.is_class:
            continue
        assert isinstance(obj, griffe.Class | griffe.Alias)
        for member_name, member in obj.all_members.items():  # inherited ones are rendered too
            if member_name.startswith(("_", "test_")):  # a contract test's name is its doc
                continue
            # An alias is an import (not rendered) or an inherited member (rendered), whose
            # base may lie outside watukuy, where its own docs cover it.
            if isinstance(member, griffe.Alias) and not (member.inherited and member.resolved):
                continue
            if (member.is_function or member.has_labels("property")) and not member.docstring:
                bare.append(f"{name}.{member_name}")
    assert bare == [], f"these public methods have no docstring: {sorted(set(bare))}"


def test_the_checks_see_a_missing_docstring(tmp_path: Path) -> None:
    """The docstring checks read what griffe reads: a bare name is seen as bare."""
    (tmp_path / "sample.py").write_text(
        '__all__ = ["Documented", "bare"]\n\n\n'
        'class Documented:\n    """Here."""\n\n    def method(self) -> None:\n        pass\n\n\n'
        "def bare() -> None:\n    pass\n",
        encoding="utf-8",
    )
    sample = griffe.load("sample", search_paths=[str(tmp_path)])
    assert isinstance(sample, griffe.Module)
    assert sample["Documented"].docstring is not None
    assert sample["Documented"]["method"].docstring is None
    assert sample["bare"].docstring is None
