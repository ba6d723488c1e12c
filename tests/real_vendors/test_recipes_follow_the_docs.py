"""The tier's fetches are the docs' fetches: checked statement for statement, no vendor needed.

``real_vendor_tier/recipes.py`` copies each ``fetch`` it runs from a block of the README or
``docs/*.md`` marked ``<!-- recipe: NAME -->``; ``recipes.FROM_THE_DOCS`` names the block
and the expressions the vendor changes. Here both are parsed, the docs' function gets the
vendor's expressions in place of its own (syntax tree nodes, so ``100`` never matches
``1000``), and the two trees must be equal. Comments, docstrings and formatting are not
compared.

The pollers described in TOML (``real_vendor_tier/toml_recipes.py``) are not copies of docs
code: they are held to a rule of their own below (their fetch is the one ``watukuy.rest``
builds, every file of the folder is a recipe the tier runs, and the files that describe an
endpoint docs/rest.md shows use its paginator, changed only where the vendor differs).
"""

from __future__ import annotations

import ast
import difflib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from real_vendor_tier import recipes, toml_recipes

ROOT = Path(__file__).resolve().parents[2]
RECIPES_SOURCE = Path(recipes.__file__)
_MARKED = re.compile(
    r"^<!--\s*recipe:\s*(?P<name>[\w-]+)\s*-->[^\n]*\n```python\n(?P<code>.*?)^```", re.S | re.M
)

# Fetches of the docs that page a listing and do not run in the tier, each with why. A
# new paging fetch in the docs fails the last test until it is marked or listed here.
NOT_IN_THE_TIER = {
    ("docs/http.md", "fetch_orders"): "cursors.md's TimestampCursor fetch (timestamp-cursor) "
    "with an authorization header and a timeout: the paging is that block's",
    ("docs/http.md", "fetch_charges"): "a vendor SDK, not ctx.http: no SDK vendor in the tier",
    ("docs/multi-tenant.md", "fetch_invoices"): "a `next` *token* sent as ?cursor=; the "
    "tier's DRF answers `next` as a whole link (token-cursor runs that)",
    ("docs/recipes.md", "fetch_tenant_invoices"): "the same as multi-tenant.md's",
    ("docs/recipes.md", "fetch_gql_orders"): "GraphQL: neither vendor speaks it",
    ("docs/recipes.md", "fetch_changes"): "epoch-second stamps: both vendors stamp ISO text",
    ("docs/cursors.md", "fetch_rows"): "a keyset on id alone (`after_id`): neither vendor "
    "filters `id > x` on its own",
    ("docs/testing.md", "fetch_orders"): "the FakeApi's own listing (the README quickstart's "
    "fetch, which runs in the tier)",
    ("docs/index.md", "fetch_orders"): "the README quickstart, the same code "
    "(tests/docs/test_site.py holds them equal), which runs in the tier",
    ("docs/cursors.md", "fetch_catalog_pages"): "a full listing paged by `next` links "
    "(ctx.page_token); tests/integration/test_listing_tokens.py and watukuy.rest's "
    "LinkHeader tests resume such passes across engines",
}
# Fetches of recipes.py that are not the docs' on purpose.
NOT_FROM_THE_DOCS = {"drf_unhandled_end": "the wedge run: a fetch that ignores the end"}


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def marked_blocks() -> dict[str, tuple[str, str]]:
    """``{marker: (file, code)}`` for every ``<!-- recipe: NAME -->`` block."""
    found: dict[str, tuple[str, str]] = {}
    for path in doc_files():
        for match in _MARKED.finditer(path.read_text(encoding="utf-8")):
            name = match["name"]
            assert name not in found, f"two docs blocks are marked recipe: {name}"
            found[name] = (str(path.relative_to(ROOT)), match["code"])
    return found


def function(tree: ast.AST, name: str) -> ast.AsyncFunctionDef | ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(name)


def without_docstring(node: ast.AsyncFunctionDef | ast.FunctionDef) -> ast.AST:
    body = node.body
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        node.body = body[1:]
    return node


def _expression(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


class _Replace(ast.NodeTransformer):
    """Replaces every expression equal to ``old`` by a fresh copy of ``new``."""

    def __init__(self, old: str, new: str) -> None:
        self.old = ast.dump(_expression(old))
        self.new = new
        self.count = 0

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.expr) and ast.dump(node) == self.old:
            self.count += 1
            return _expression(self.new)
        return self.generic_visit(node)


def vendor_version(docs_code: str, entry: recipes.FromDocs) -> ast.AST:
    """The docs' function with the vendor's expressions in place of its own."""
    tree: ast.AST = without_docstring(function(ast.parse(docs_code), entry.function))
    for old, new in entry.vendor:
        replace = _Replace(old, new)
        tree = replace.visit(tree)
        assert replace.count > 0, f"{entry.marker}: the docs' code has no {old} to replace"
    return ast.fix_missing_locations(tree)


def tier_version(factory: str, name: str) -> ast.AST:
    tree = ast.parse(RECIPES_SOURCE.read_text(encoding="utf-8"))
    outer = next(
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == factory
    )
    return without_docstring(function(outer, name))


def test_every_marked_docs_block_has_one_copy_in_the_tier() -> None:
    markers = [entry.marker for entry in recipes.FROM_THE_DOCS.values()]
    assert sorted(markers) == sorted(marked_blocks())


@pytest.mark.parametrize("factory", sorted(recipes.FROM_THE_DOCS))
def test_the_tier_fetch_is_the_docs_fetch_with_the_vendors_names(factory: str) -> None:
    entry = recipes.FROM_THE_DOCS[factory]
    file, code = marked_blocks()[entry.marker]
    expected = ast.unparse(vendor_version(code, entry))
    got = ast.unparse(tier_version(factory, entry.function))
    diff = "\n".join(
        difflib.unified_diff(
            expected.splitlines(),
            got.splitlines(),
            f"{file} ({entry.marker}) with the vendor's expressions",
            f"recipes.py {factory}",
            lineterm="",
        )
    )
    assert expected == got, diff


def test_a_replacement_the_docs_do_not_need_is_caught() -> None:
    _, code = marked_blocks()["gone-page"]
    stale = recipes.FromDocs("gone-page", "fetch_shop_orders", (("body['items']", "body"),))
    with pytest.raises(AssertionError, match="has no body"):
        vendor_version(code, stale)


def test_a_docs_change_not_made_in_the_tier_is_caught() -> None:
    entry = recipes.FROM_THE_DOCS["drf_gone_page"]
    _, code = marked_blocks()[entry.marker]
    # A reader's version that forgot the end of the listing.
    changed = code.replace("        return wk.Page(gone=True)\n", "        raise RuntimeError\n")
    assert changed != code
    got = ast.unparse(tier_version("drf_gone_page", entry.function))
    assert ast.unparse(vendor_version(changed, entry)) != got


def _fetches(definition: Any) -> list[Any]:
    found = [definition.fetch]
    if definition.reconcile is not None:
        found.append(definition.reconcile.fetch)
    return found


@pytest.mark.parametrize(
    ("vendor", "recipe"),
    [
        *((vendor, name) for vendor, names in recipes.RECIPES.items() for name in names),
        ("drf", "wedge"),
        ("drf", "wedge-gone"),
        ("json", "ties"),
    ],
)
def test_every_poller_of_the_tier_runs_the_docs_fetches(vendor: str, recipe: str) -> None:
    definition = recipes.build(vendor, recipe, "http://vendor.invalid")
    for fetch in _fetches(definition):
        factory, _, name = fetch.__qualname__.partition(".<locals>.")
        assert factory in recipes.FROM_THE_DOCS or factory in NOT_FROM_THE_DOCS, factory
        if factory in recipes.FROM_THE_DOCS:
            assert name == recipes.FROM_THE_DOCS[factory].function


def _pages_a_listing(node: ast.AsyncFunctionDef | ast.FunctionDef, block: str) -> bool:
    """A fetch that says where a listing goes on: ``has_more``, a next cursor, a page
    number, or a ``CustomCursor`` whose ``advance`` does."""
    source = ast.unparse(node)
    if "wk.Page(" not in source:
        return False
    if "wk.CustomCursor(" in block:
        return True
    return any(part in source for part in ("has_more=", "cursor=", "ctx.page", "cursor.page"))


def test_every_docs_fetch_that_pages_a_listing_runs_in_the_tier_or_says_why_not() -> None:
    blocks = marked_blocks()
    marked = {(blocks[entry.marker][0], entry.function) for entry in recipes.FROM_THE_DOCS.values()}
    fence = re.compile(r"^```python\n(?P<code>.*?)^```", re.S | re.M)
    paging: set[tuple[str, str]] = set()
    for path in doc_files():
        file = str(path.relative_to(ROOT))
        for match in fence.finditer(path.read_text(encoding="utf-8")):
            code = match["code"]
            for node in ast.walk(ast.parse(code)):
                if not isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
                    continue
                if _pages_a_listing(node, code):
                    paging.add((file, node.name))
    assert paging - marked - set(NOT_IN_THE_TIER) == set()
    assert set(NOT_IN_THE_TIER) - paging == set(), "a listed fetch is gone from the docs"
    assert len(marked) >= 7


# --- the TOML recipes: no docs copy, the fetch watukuy.rest builds ---------------------------


def test_every_toml_file_of_the_tier_is_a_recipe() -> None:
    files = {path.name for path in toml_recipes.FOLDER.glob("*.toml")}
    named = {name for names in toml_recipes.TOML_RECIPES.values() for name in names.values()}
    assert files == named


@pytest.mark.parametrize(
    ("vendor", "recipe"),
    [(vendor, name) for vendor, names in toml_recipes.TOML_RECIPES.items() for name in names],
)
def test_every_toml_recipe_runs_the_fetch_watukuy_rest_builds(vendor: str, recipe: str) -> None:
    # Not a docs copy, so outside the rule above: nothing of the poller is written in Python.
    definition = toml_recipes.build(vendor, recipe, "http://vendor.invalid")
    for fetch in _fetches(definition):
        assert fetch.__module__.startswith("watukuy.rest."), fetch.__module__
        factory = fetch.__qualname__.partition(".<locals>.")[0]
        assert factory not in recipes.FROM_THE_DOCS
        assert factory not in NOT_FROM_THE_DOCS


# Tier files whose paginator is the one a docs/rest.md example gives (the section it is in,
# the paginator type), with the keys the vendor changes: DRF's filter is `updated_at__gte`
# and its limit/offset page size `limit`; json-server sends GitHub's kind of `Link` header.
DOCS_TWINS: dict[str, tuple[str, str, dict[str, object]]] = {
    "drf-pages.toml": ("Django REST Framework", "page_number", {}),
    "drf-keyset.toml": (
        "Django REST Framework",
        "keyset",
        {"since_param": "updated_at__gte", "limit_param": "limit"},
    ),
    "json-link.toml": ("GitHub issues", "link_header", {}),
}


def docs_paginators(section: str) -> list[dict[str, object]]:
    """The paginator tables of the TOML blocks of docs/rest.md's ``### section...``."""
    text = (ROOT / "docs" / "rest.md").read_text(encoding="utf-8")
    start = text.index(f"\n### {section}")
    end = text.find("\n### ", start + 1)
    found = []
    for match in re.finditer(r"^```toml\n(?P<code>.*?)^```", text[start:end], re.S | re.M):
        for poller in tomllib.loads(match["code"]).get("pollers", {}).values():
            paginator = poller.get("paginator")
            found.append({"type": paginator} if isinstance(paginator, str) else paginator)
    return found


@pytest.mark.parametrize("file", sorted(DOCS_TWINS))
def test_a_toml_file_uses_the_paginator_of_its_docs_example(file: str) -> None:
    section, kind, vendor = DOCS_TWINS[file]
    docs = [table for table in docs_paginators(section) if table["type"] == kind]
    assert len(docs) == 1, f"docs/rest.md ### {section} has {len(docs)} {kind} paginators"
    for key, value in vendor.items():
        assert docs[0].get(key) != value, f"{file}: the docs already say {key} = {value!r}"
    tier = tomllib.loads((toml_recipes.FOLDER / file).read_text(encoding="utf-8"))
    (poller,) = tier["pollers"].values()
    assert poller["paginator"] == {**docs[0], **vendor}
