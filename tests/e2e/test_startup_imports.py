"""What a fresh process imports: ``import watukuy`` and ``watukuy --help`` stay lean.

No timings here (``python -m bench http startup`` measures them); these tests pin the
modules that made start-up slow, so that a new top-level import of one shows up as a
failure rather than as a slower benchmark months later.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("httpx", "httpx._main", "rich", "click", "importlib.metadata", "importlib.resources")


def _loaded_after(code: str) -> set[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_import_watukuy_loads_none_of_its_modules_until_a_name_is_used() -> None:
    loaded = _loaded_after("import watukuy")
    assert sorted(name for name in loaded if name.startswith("watukuy.")) == []
    assert sorted(loaded & set(HEAVY)) == []


def test_the_names_a_script_uses_load_no_http_client_cli_or_metadata() -> None:
    loaded = _loaded_after(
        "import watukuy as wk\n"
        "wk.Engine, wk.SqliteStore, wk.define_poller, wk.TimestampCursor, wk.Page, wk.Event"
    )
    assert "watukuy.engine" in loaded
    assert sorted(loaded & set(HEAVY)) == []
    assert "watukuy.stores.memory" not in loaded  # one store's module, not every store's


def test_a_store_loads_only_its_own_module() -> None:
    loaded = _loaded_after("import watukuy as wk\nwk.SqliteStore(':memory:')")
    assert "watukuy.stores.memory" not in loaded
    loaded = _loaded_after("import watukuy as wk\nwk.MemoryStore()")
    assert "watukuy.stores.sqlite" not in loaded


def test_every_public_name_resolves_and_star_import_matches_all() -> None:
    code = (
        "import watukuy as wk\n"
        "names = {}\n"
        "exec('from watukuy import *', names)\n"
        "assert sorted(n for n in names if n != '__builtins__') == sorted(wk.__all__)\n"
        "assert set(wk.__all__) <= set(dir(wk))\n"
        "assert all(getattr(wk, n) is names[n] for n in wk.__all__)\n"
        "try:\n"
        "    wk.NoSuchName\n"
        "except AttributeError as error:\n"
        "    assert 'NoSuchName' in str(error)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')"
    )
    _loaded_after(code)


def test_the_help_of_the_command_loads_click_but_not_rich_or_httpx() -> None:
    code = (
        "import contextlib, io\n"
        "from watukuy.cli import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'], prog_name='watukuy', standalone_mode=False)"
    )
    loaded = _loaded_after(code)
    assert "click" in loaded
    assert sorted(loaded & {"rich", "httpx", "importlib.metadata"}) == []


def test_an_engine_imports_httpx_without_its_command_line_client() -> None:
    code = (
        "import watukuy as wk\n"
        "poller = wk.define_poller(name='p', identity=lambda o: o, cursor=wk.SnapshotDiff(),"
        " fetch=lambda ctx: [])\n"
        "wk.Engine(store=wk.MemoryStore(), pollers=[poller])\n"
        "import httpx\n"
        "assert 'rich' not in sys.modules and 'click' not in sys.modules\n"
        "import httpx._main\n"
        "assert httpx._main.main is not None"
    )
    loaded = _loaded_after(code)
    assert {"httpx", "httpx._main"} <= loaded


def test_an_engine_without_budgets_loads_no_budget_machinery() -> None:
    code = (
        "import watukuy as wk\n"
        "poller = wk.define_poller(name='p', identity=lambda o: o, cursor=wk.SnapshotDiff(),"
        " fetch=lambda ctx: [])\n"
        "wk.Engine(store=wk.SqliteStore(':memory:'), pollers=[poller])\n"
    )
    loaded = _loaded_after(code)
    assert sorted(name for name in loaded if name.startswith("watukuy.budget")) == []
    budgeted = code.replace(
        "pollers=[poller]", "pollers=[poller], budgets={'api': wk.Budget(10, '1s')}"
    )
    assert "watukuy.budget.manager" in _loaded_after(budgeted)


def test_an_engine_without_hooks_builds_no_hook_records() -> None:
    code = (
        "import watukuy as wk\n"
        "poller = wk.define_poller(name='p', identity=lambda o: o, cursor=wk.SnapshotDiff(),"
        " fetch=lambda ctx: [])\n"
        "wk.Engine(store=wk.SqliteStore(':memory:'), pollers=[poller])\n"
    )
    assert "watukuy.runtime.hooks" not in _loaded_after(code)


def test_firing_hooks_nobody_listens_to_builds_no_hook_records() -> None:
    code = (
        "import asyncio, logging\n"
        "from watukuy.runtime._hookbus import HookBus, HookContext\n"
        "emitter = HookBus([], logging.getLogger()).emitter("
        "HookContext(poller='p', partition='', lane='live', instance_id='i'))\n"
        "asyncio.run(emitter.on_fetch(page=1, duration_ms=0, items=0, not_modified=False))\n"
    )
    assert "watukuy.runtime.hooks" not in _loaded_after(code)


def test_the_help_of_the_command_loads_no_engine_store_or_event_loop() -> None:
    code = (
        "import contextlib, io\n"
        "from watukuy.cli import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'], prog_name='watukuy', standalone_mode=False)"
    )
    loaded = _loaded_after(code)
    assert "asyncio" not in loaded
    assert (
        sorted(name for name in loaded if name.startswith(("watukuy.runtime", "watukuy.stores")))
        == []
    )
    assert "watukuy.model.rows" not in loaded


def test_one_module_of_the_model_loads_alone_and_every_model_name_resolves() -> None:
    loaded = _loaded_after("import watukuy.model.errors")
    assert sorted(name for name in loaded if name.startswith("watukuy.model.")) == [
        "watukuy.model.errors"
    ]
    code = (
        "import watukuy.model as m\n"
        "names = {}\n"
        "exec('from watukuy.model import *', names)\n"
        "assert sorted(n for n in names if n != '__builtins__') == sorted(m.__all__)\n"
        "assert set(m.__all__) <= set(dir(m))\n"
        "from watukuy.model.rows import PKey\n"
        "from watukuy.model.events import Event\n"
        "assert m.PKey is PKey and m.Event is Event\n"
        "import pkgutil\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    assert getattr(m, info.name).__name__ == 'watukuy.model.' + info.name\n"
        "try:\n"
        "    m.NoSuchName\n"
        "except AttributeError as error:\n"
        "    assert 'NoSuchName' in str(error)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')"
    )
    _loaded_after(code)


def test_the_default_client_loads_no_certificate_bundle_until_a_tls_connection() -> None:
    # httpcore imports certifi itself; what the default client defers is reading the bundle.
    code = (
        "import ssl\n"
        "loads = []\n"
        "original = ssl.SSLContext.load_verify_locations\n"
        "def recording(self, *args, **kwargs):\n"
        "    loads.append(args or kwargs)\n"
        "    return original(self, *args, **kwargs)\n"
        "ssl.SSLContext.load_verify_locations = recording\n"
        "from watukuy.http import HttpxFactory\n"
        "client = HttpxFactory().client\n"
        "assert loads == [], loads\n"
        "import httpx\n"
        "httpx.AsyncClient()\n"
        "assert len(loads) == 1, loads  # httpx's own client loads it when it is made\n"
    )
    assert "httpx" in _loaded_after(code)
