"""docs/stability.md says what is public: every name of ``watukuy.__all__`` is in it."""

from __future__ import annotations

import re
from pathlib import Path

import watukuy as wk

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_public_name_is_documented_in_the_stability_index() -> None:
    text = (DOCS / "stability.md").read_text(encoding="utf-8")
    index = text.split("## The names of `watukuy`", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([A-Za-z_][\w]*)`", index))
    assert sorted(set(wk.__all__) - listed) == []
    assert sorted(listed & {n for n in dir(wk) if not n.startswith("_")} - set(wk.__all__)) == []


def test_the_stability_promise_covers_what_the_issue_lists() -> None:
    text = (DOCS / "stability.md").read_text(encoding="utf-8")
    for needle in [
        "Semantic Versioning",
        "at least one minor release",
        "forward only",
        "security.md",
        "--json",
        "Error codes",
        "Event ids",
    ]:
        assert needle in text, needle
