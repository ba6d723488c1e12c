"""The documentation site as the tests see it: its pages, its reference directives, its build.

``mkdocs.yml`` builds the site from ``docs/``; the reference pages under ``docs/reference/``
render the public names with ``::: path`` directives (mkdocstrings), optionally followed by
an indented YAML block of options whose ``members:`` lists the names of a module to render.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import griffe
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
SITE_URL = "https://watukuy.readthedocs.io/en/latest/"

# The public modules the reference covers, besides ``watukuy`` itself: every name in each
# one's ``__all__`` must be rendered and documented.
PUBLIC_MODULES = (
    "watukuy",
    "watukuy.stores",
    "watukuy.sinks",
    "watukuy.integrations",
    "watukuy.integrations.fastapi",
    "watukuy.integrations.admin",
    "watukuy.otel",
    "watukuy.inbox",
    "watukuy.testing",
    "watukuy.testing.store_contract",
    "watukuy.cursor",
    "watukuy.diff",
    "watukuy.budget",
    "watukuy.scheduler",
    "watukuy.validate",
    "watukuy.http",
    "watukuy.rest",
    "watukuy.runtime.hooks",
)


@dataclass(frozen=True)
class Directive:
    """One ``::: path`` of a reference page, with the ``members:`` it lists (if any)."""

    page: str  # "reference/engine.md"
    path: str  # "watukuy.Engine", "watukuy.sinks"
    members: tuple[str, ...] | None


def directives() -> list[Directive]:
    """Every ``:::`` directive of the reference pages, in page order."""
    found: list[Directive] = []
    for page in sorted(REFERENCE.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if not line.startswith("::: "):
                continue
            block: list[str] = []
            for following in lines[number + 1 :]:
                if following.strip() and not following.startswith(" "):
                    break
                block.append(following)
            options: dict[str, Any] = yaml.safe_load(textwrap.dedent("\n".join(block))) or {}
            members = options.get("options", {}).get("members")
            found.append(
                Directive(
                    str(page.relative_to(DOCS)),
                    line.removeprefix("::: ").strip(),
                    None if members is None else tuple(members),
                )
            )
    return found


def load_package() -> griffe.Module:
    """The package as mkdocstrings reads it: from the source, with the site's extension."""
    script = ROOT / "scripts" / "griffe_extensions.py"
    extensions = griffe.load_extensions(
        f"{script}:RecordsAreDataclasses", f"{script}:ReadableRestMarkup"
    )
    package = griffe.load(
        "watukuy",
        search_paths=[str(ROOT / "src")],
        extensions=extensions,
        resolve_aliases=True,
        resolve_external=False,
    )
    assert isinstance(package, griffe.Module)
    return package


def lookup(package: griffe.Module, path: str) -> griffe.Object | griffe.Alias:
    """``watukuy.a.b`` in the loaded package."""
    relative = path.removeprefix("watukuy").removeprefix(".")
    return package[relative] if relative else package


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for name, value in attrs if name == "id" and value)


def html_ids(page: Path) -> set[str]:
    """Every ``id`` of a built HTML page: the anchors a link may point at."""
    parser = _Ids()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.ids


def build_site(site_dir: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` into ``site_dir``, as ``make docs-build`` runs it."""
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "mkdocs"),
            "build",
            "--strict",
            "--quiet",
            "--site-dir",
            str(site_dir),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
