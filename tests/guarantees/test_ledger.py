"""The ledger itself: every mutant still applies, and every name in it exists.

Running the mutants is ``make mutants``; these checks are cheap, so they run with the rest
of the suite and catch a mutant whose code moved before anyone runs the long check.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ledger import GUARANTEES, MUTANTS
from mutants import ROOT, check_all_apply

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# The store contract suite: a package of one module per concern, read as one text.
_SUITE = "\n".join(
    path.read_text("utf-8")
    for path in sorted((ROOT / "src/watukuy/testing/store_contract").glob("*.py"))
)


def _exists(node: str) -> bool:
    path, _, rest = node.partition("::")
    file = ROOT / path
    if not file.exists():
        return False
    if not rest:
        return True
    text = file.read_text("utf-8")
    for part in rest.split("::"):
        name = part.split("[", 1)[0]
        defined = re.search(rf"^\s*(?:async def|def|class) {re.escape(name)}\b", text, re.MULTILINE)
        # Contract tests are defined once, in the suite the store test classes inherit.
        inherited = re.search(rf"^\s*async def {re.escape(name)}\b", _SUITE, re.MULTILINE)
        if not (defined or inherited):
            return False
    return True


def test_every_mutant_still_applies_to_the_tree() -> None:
    assert check_all_apply(ROOT) == []


def test_there_are_enough_mutants_with_unique_names() -> None:
    names = [mutant.name for mutant in MUTANTS]
    assert len(names) >= 30
    assert len(set(names)) == len(names)
    assert all(_NAME.match(name) for name in names)


@pytest.mark.parametrize("guarantee", [f"G{n}" for n in range(1, 11)])
def test_every_guarantee_has_tests_and_a_mutant(guarantee: str) -> None:
    assert GUARANTEES[guarantee].tests
    assert any(mutant.guarantee == guarantee for mutant in MUTANTS)


def test_every_mutant_names_tests_that_exist() -> None:
    missing = [
        f"{mutant.name}: {node}" for mutant in MUTANTS for node in mutant.tests if not _exists(node)
    ]
    assert missing == []
    assert all(mutant.tests and mutant.bug for mutant in MUTANTS)


def test_every_ledger_test_exists() -> None:
    missing = [node for g in GUARANTEES.values() for node in g.tests if not _exists(node)]
    assert missing == []


def test_mutants_point_at_files_of_the_tree() -> None:
    assert all((ROOT / mutant.path).is_file() for mutant in MUTANTS)
    assert Path(__file__).resolve().parent == ROOT / "tests" / "guarantees"
