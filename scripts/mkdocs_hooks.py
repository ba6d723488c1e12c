"""MkDocs hooks for the documentation site (``mkdocs.yml`` names this file).

The changelog lives at the root of the repository, where its links point into ``docs/``
(``docs/cursors.md#...``). ``docs/changelog.md`` is its page on the site: this hook fills
that page with the root file, its links rewritten to be relative to ``docs/``, so
``mkdocs build --strict`` checks them like any other page's links.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"
_DOCS_LINK = re.compile(r"\]\(docs/")


def changelog_for_the_site(text: str) -> str:
    """The root CHANGELOG.md with its ``docs/`` links made relative to ``docs/``."""
    return _DOCS_LINK.sub("](", text)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the changelog page's placeholder with the root CHANGELOG.md."""
    if page.file.src_uri == "changelog.md":
        return changelog_for_the_site(CHANGELOG.read_text(encoding="utf-8"))
    return markdown
