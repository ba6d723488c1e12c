"""The Python blocks of README.md and docs/*.md, and the modules the tests make of them.

Every ```` ```python ```` block runs in the test suite unless an HTML comment on the line
just before it says otherwise:

- ``<!-- fragment: why -->``: not run on its own (the reason is required: a file of your
  own package, a real cloud account...). It is still type-checked.
- ``<!-- tested: name -->``: run by a test of its own, which checks more than that it
  runs: what the quickstart prints (``tests/e2e/test_docs.py``), that the store contract
  example certifies a store (``test_docs_blocks.py``).
- ``<!-- needs: postgres redis nats rabbitmq sqs -->``: runs against those local servers.

A block may use names it does not define; they come from :mod:`docs_prelude` (an engine
on a fake vendor, a SQLite store in the working directory, the pollers the docs use).
:func:`module_source` turns a block into a module: the prelude names it uses, imported;
then the block (wrapped in ``async def`` when it awaits at the top level, as the docs
write operator snippets); then a call of each ``test_*`` function it defines.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PRELUDE = Path(__file__).with_name("docs_prelude.py")
SERVICES = ("postgres", "redis", "nats", "rabbitmq", "sqs")

_BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!--\s*(?P<kind>fragment|tested|needs):\s*(?P<text>.*?)\s*-->\s*\Z", re.S)


@dataclass(frozen=True)
class Block:
    """One Python block of the docs."""

    file: str  # "README.md", "docs/cursors.md"
    line: int  # 1-based line of the opening fence
    code: str
    kind: str  # "run", "fragment" or "tested"
    note: str = ""  # the fragment's reason or the tested block's name
    needs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """A stable, readable id: ``cursors_md_L60``."""
        stem = Path(self.file).name.replace(".", "_").replace("-", "_")
        return f"{stem}_L{self.line}"


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def blocks() -> list[Block]:
    """Every Python block of README.md and docs/*.md, in file order."""
    found: list[Block] = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
            line = text.count("\n", 0, match.start()) + 1
            kind, note, needs = "run", "", ()
            marker = _MARKER.search(before)
            if marker is not None:
                if marker["kind"] == "needs":
                    needs = tuple(marker["text"].split())
                else:
                    kind, note = marker["kind"], marker["text"]
            found.append(Block(str(path.relative_to(ROOT)), line, match["code"], kind, note, needs))
    return found


# --- modules made of blocks ---------------------------------------------------------------


def _bound(tree: ast.Module) -> set[str]:
    """Every name the block binds anywhere (assignments, defs, imports, arguments)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def free_names(code: str) -> list[str]:
    """The names a block reads but never binds, builtins aside."""
    tree = ast.parse(code)
    loaded = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    return sorted(loaded - _bound(tree) - set(dir(builtins)))


def _awaits_at_top_level(tree: ast.Module) -> bool:
    def walk(node: ast.AST) -> bool:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            return False
        if isinstance(node, ast.Await | ast.AsyncFor | ast.AsyncWith):
            return True
        return any(walk(child) for child in ast.iter_child_nodes(node))

    return any(walk(statement) for statement in tree.body)


def _tests_defined(tree: ast.Module) -> list[tuple[str, bool]]:
    return [
        (node.name, isinstance(node, ast.AsyncFunctionDef))
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    ]


# Names a block may use without importing them: the reader's imports are obvious.
_IMPORTS = {
    "Any": "from typing import Any",
    "UTC": "from datetime import UTC",
    "asyncio": "import asyncio",
    "datetime": "from datetime import datetime",
    "httpx": "import httpx",
    "json": "import json",
    "os": "import os",
    "redis": "import redis.asyncio",
    "rest": "from watukuy import rest",
    "wk": "import watukuy as wk",
}


# Libraries whose own type information is missing or partial (celery and aiokafka ship
# none; redis-py, nats-py and aiobotocore leave ``**kwargs`` or results unknown). A block
# importing one is still checked in full, except for the rules that only report those gaps.
_PARTLY_TYPED = ("aiobotocore", "aiokafka", "celery", "nats", "redis")
_PYRIGHT_GAPS = (
    "# pyright: reportMissingTypeStubs=false, reportUnknownMemberType=false, "
    "reportUnknownVariableType=false, reportUnknownArgumentType=false, "
    "reportUntypedFunctionDecorator=false"
)
_MYPY_GAPS = '# mypy: disable-error-code="untyped-decorator"'


def _imports_partly_typed(tree: ast.Module) -> bool:
    modules = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    modules += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return any(module.split(".")[0] in _PARTLY_TYPED for module in modules)


def module_source(block: Block) -> str:
    """The block as a module that runs (and type-checks) on its own next to the prelude."""
    tree = ast.parse(block.code)
    wrapped = _awaits_at_top_level(tree)
    free = free_names(block.code)
    if wrapped and "asyncio" not in _bound(tree):
        free = sorted({*free, "asyncio"})
    lines = [f"# {block.file}, the block at line {block.line}"]
    if wrapped:
        # At the top of a module these would be module variables, never "unused".
        lines.append("# pyright: reportUnusedVariable=false")
    if _imports_partly_typed(tree) or "redis" in free:
        lines += [_PYRIGHT_GAPS, _MYPY_GAPS]
    lines += ["from __future__ import annotations", ""]
    lines += [_IMPORTS[name] for name in free if name in _IMPORTS]
    from_prelude = [name for name in free if name not in _IMPORTS]
    if from_prelude:
        lines.append(f"from docs_prelude import {', '.join(from_prelude)}")
    lines.append("")
    if wrapped:
        lines += ["", "async def _block() -> None:", textwrap.indent(block.code, "    ").rstrip()]
        lines += ["", "", "asyncio.run(_block())"]
    else:
        lines.append(block.code.rstrip())
    tests = _tests_defined(tree)
    if tests:
        lines += ["", "", 'if __name__ == "__main__":', "    import asyncio as _asyncio", ""]
        for name, is_async in tests:
            lines.append(f"    _asyncio.run({name}())" if is_async else f"    {name}()")
    return "\n".join(lines) + "\n"


# The reader's poller module. A script like ``myapp/tick.py`` builds its engine without an
# HTTP client, so this ``orders`` reads the prelude's fake vendor directly, not over HTTP.
_MYAPP_POLLERS = """from __future__ import annotations

from typing import Any

import watukuy as wk
from docs_prelude import api, on_order

__all__ = ["on_order", "orders"]


async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    since, after = ctx.cursor.value, ctx.cursor.tie_break
    listed = api.list_since(
        None if since is None else str(since), None if after is None else str(after), limit=100
    )
    return wk.Page(items=listed.data, has_more=listed.has_more)


orders = wk.define_poller(
    name="orders",
    identity=lambda order: order["id"],
    version=lambda order: order["version"],
    cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
    fetch=fetch_orders,
)
"""

_MY_STORE = """from watukuy.stores import MemoryStore


class MyStore(MemoryStore):
    def __init__(self, dsn: str) -> None:
        super().__init__()

    async def drop_everything(self) -> None:
        self.reset()
"""


def write_modules(directory: Path, chosen: list[Block]) -> dict[str, Path]:
    """Write the prelude and one module per block into ``directory``: ``{name: path}``."""
    (directory / PRELUDE.name).write_text(PRELUDE.read_text(encoding="utf-8"), encoding="utf-8")
    # ``from myapp.pollers import orders``: the reader's package, here the prelude's names.
    (directory / "myapp").mkdir(exist_ok=True)
    (directory / "myapp" / "__init__.py").write_text("", encoding="utf-8")
    (directory / "myapp" / "pollers.py").write_text(_MYAPP_POLLERS, encoding="utf-8")
    # ``from my_package.store import MyStore``: a store of the reader's own.
    (directory / "my_package").mkdir(exist_ok=True)
    (directory / "my_package" / "__init__.py").write_text("", encoding="utf-8")
    (directory / "my_package" / "store.py").write_text(_MY_STORE, encoding="utf-8")
    written: dict[str, Path] = {}
    for block in chosen:
        path = directory / f"{block.name}.py"
        path.write_text(module_source(block), encoding="utf-8")
        written[block.name] = path
    return written
