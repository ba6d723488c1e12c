"""The site builds strictly, and every link to it from outside resolves.

A pip user reads the README on PyPI and error messages in a terminal, where a link into
``docs/`` means nothing: those links are absolute URLs under :data:`docs_site.SITE_URL`.
These tests build the site as ``make docs-build`` does and check that each such URL in the
README, the changelog and the package's source names a page the build produced and, when it
has one, an anchor on that page; so a renamed page or heading fails here.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from docs_site import ROOT, SITE_URL, build_site, html_ids

README = ROOT / "README.md"
_URL = re.compile(re.escape(SITE_URL) + r"(?P<path>[\w./-]*)(?:#(?P<anchor>[\w.-]+))?")
_QUICKSTART = re.compile(r"<!-- tested: quickstart -->\s*```python\n(?P<code>.*?)```", re.S)
_FIRST_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```", re.S | re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("site")
    result = build_site(directory)
    assert result.returncode == 0, result.stdout + result.stderr
    return directory


def _links() -> list[tuple[str, str]]:
    """``(where, url)`` for every site URL in the README, the changelog and src/."""
    files = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "src").rglob("*.py"))]
    return [
        (f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}", match[0])
        for path in files
        for text in [path.read_text(encoding="utf-8")]
        for match in _URL.finditer(text)
    ]


def _target(site: Path, url: str) -> tuple[Path, str | None]:
    match = _URL.fullmatch(url.rstrip(".,;:"))
    assert match is not None, url
    return site / match["path"] / "index.html", match["anchor"]


def test_every_site_url_names_a_built_page_and_anchor(site: Path) -> None:
    links = _links()
    assert len({where.split(":")[0] for where, _ in links}) > 10  # the README and src/ both
    broken = []
    for where, url in links:
        page, anchor = _target(site, url)
        if not page.is_file():
            broken.append(f"{where}: {url} (no such page)")
        elif anchor is not None and anchor not in html_ids(page):
            broken.append(f"{where}: {url} (no such anchor)")
    assert broken == []


def test_the_package_points_at_the_site_not_at_the_repository() -> None:
    """A pip user has no ``docs/`` folder: messages and docstrings link to the site."""
    relative = [
        f"{path.relative_to(ROOT)}: {match[0]}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for match in re.finditer(r"\bdocs/[\w-]+\.md\b", path.read_text(encoding="utf-8"))
    ]
    assert relative == [], f"use {SITE_URL}<page>/#<section> instead"


def test_a_renamed_heading_is_caught(site: Path) -> None:
    page, anchor = _target(site, f"{SITE_URL}cursors/#how-the-watermark-moves")
    assert anchor in html_ids(page)
    page, anchor = _target(site, f"{SITE_URL}cursors/#how-the-watermark-moved")
    assert anchor not in html_ids(page)
    assert not _target(site, f"{SITE_URL}cursor/")[0].is_file()


def test_the_site_has_the_pages_a_reader_looks_for(site: Path) -> None:
    for page in ("", "proven/", "performance/", "changelog/", "reference/", "reference/engine/"):
        assert (site / page / "index.html").is_file(), page
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Unreleased" in changelog  # the root CHANGELOG.md, not the placeholder
    engine = html_ids(site / "reference" / "engine" / "index.html")
    assert {"watukuy.Engine", "watukuy.define_poller", "watukuy.Engine.tick"} <= engine


def test_reference_pages_show_no_restructuredtext_markup(site: Path) -> None:
    """The docstrings' ``:class:`X``` roles and ``Example::`` markers read as Markdown."""
    pages = sorted((site / "reference").glob("*/index.html"))
    assert len(pages) >= 10
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert re.search(r":(class|func|meth|data|attr|mod|exc):`", text) is None, page
        assert "::</p>" not in text, page


def test_the_readme_is_short_and_links_only_to_the_site() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    relative = re.findall(r"\]\((?!https?://)([^)]+)\)", text)
    assert relative == [], "README links must work on PyPI: use the site's absolute URLs"
    assert "x-operator-token" not in text  # a browser cannot send it: docs/security.md says how


def test_the_home_page_quickstart_is_the_readme_quickstart() -> None:
    readme = _QUICKSTART.search(README.read_text(encoding="utf-8"))
    home = _FIRST_BLOCK.search((ROOT / "docs" / "index.md").read_text(encoding="utf-8"))
    assert readme is not None
    assert home is not None
    assert home["code"] == readme["code"]


def _ledger() -> ModuleType:
    path = ROOT / "tests" / "guarantees" / "ledger.py"
    spec = importlib.util.spec_from_file_location("_proven_ledger", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_the_proven_page_lists_every_mutant_of_the_ledger() -> None:
    """docs/proven.md's mutant table and its count follow tests/guarantees/ledger.py."""
    text = (ROOT / "docs" / "proven.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([\w-]+)` \| ([^|]+?) \| ", text, re.M))
    mutants = {mutant.name: mutant.guarantee for mutant in _ledger().MUTANTS}
    assert rows == mutants
    assert f"{len(mutants)} of {len(mutants)} are killed" in text
