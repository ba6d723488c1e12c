"""Finding the application (``--app``) and the store (``--store``)."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import watukuy as wk
from watukuy.cli._errors import CliError
from watukuy.cli._target import (
    build_store,
    connect_timeout_s,
    load_engine,
    open_target,
    redact_url,
)
from watukuy.model.errors import ConfigError

MODULE = textwrap.dedent(
    """
    import watukuy as wk

    def fetch(ctx):
        return []

    poller = wk.define_poller(
        name="things", identity=lambda t: t["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[poller])

    class Holder:
        inner = engine

    def factory():
        return engine

    async def async_factory():
        return engine

    def failing_factory():
        raise ValueError("no config here")

    def wrong_factory():
        return "engine?"

    number = 3
    """
)


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A uniquely named application module in the current directory."""
    name = f"cliapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / f"{name}_broken.py").write_text("import nowhere_to_be_found\n", "utf-8")
    (tmp_path / f"{name}_raises.py").write_text("raise KeyError('DATABASE_URL')\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    yield name
    for suffix in ("", "_broken", "_raises"):
        sys.modules.pop(f"{name}{suffix}", None)


@pytest.mark.parametrize("attribute", ["engine", "Holder.inner", "factory", "async_factory"])
async def test_load_engine_accepts_engines_and_factories(app_module: str, attribute: str) -> None:
    engine = await load_engine(f"{app_module}:{attribute}")
    assert isinstance(engine, wk.Engine)
    assert list(engine.pollers) == ["things"]


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("missing", "has no attribute 'missing'"),
        ("Holder.gone", "has no attribute 'Holder.gone'"),
        ("number", "is a int, not a watukuy Engine"),
        ("wrong_factory", "is a str, not a watukuy Engine"),
        ("failing_factory", "failed: ValueError: no config here"),
    ],
)
async def test_load_engine_explains_what_is_wrong(
    app_module: str, attribute: str, message: str
) -> None:
    with pytest.raises(CliError, match=message):
        await load_engine(f"{app_module}:{attribute}")


async def test_load_engine_import_failures(app_module: str) -> None:
    with pytest.raises(CliError, match=r"--app: expected 'package.module:attribute', got 'x'"):
        await load_engine("x")
    with pytest.raises(CliError, match=r"--app: expected .* got ':engine'"):
        await load_engine(":engine")
    with pytest.raises(CliError, match=r"cannot import module 'no_such_mod_xyz'"):
        await load_engine("no_such_mod_xyz:engine")
    with pytest.raises(CliError, match=r"cannot import module 'no_such_mod_xyz.sub'"):
        await load_engine("no_such_mod_xyz.sub:engine")
    with pytest.raises(
        CliError, match=rf"importing '{app_module}_broken' failed: No module named 'nowhere"
    ):
        await load_engine(f"{app_module}_broken:engine")
    with pytest.raises(
        CliError, match=rf"importing '{app_module}_raises' failed: KeyError: 'DATABASE_URL'"
    ):
        await load_engine(f"{app_module}_raises:engine")


def test_redact_url_hides_passwords() -> None:
    assert redact_url("postgresql://app:s3cret@db:5432/app") == "postgresql://app:***@db:5432/app"
    # A database role is shown; a lone user name in a web URL is often a token.
    assert redact_url("postgresql://app@db/app") == "postgresql://app@db/app"
    assert redact_url("https://ghp_t0k3n@github.com/x") == "https://***@github.com/x"
    assert redact_url("postgresql://db/app?password=s3cret&sslmode=require") == (
        "postgresql://db/app?password=***&sslmode=require"
    )
    assert redact_url("sqlite:///wk.db") == "sqlite:///wk.db"
    assert redact_url("redis://:pw@cache:6379/0") == "redis://:***@cache:6379/0"


def test_build_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CliError, match=r"no SQLite database at 'missing.db'"):
        build_store("sqlite:///missing.db", must_exist=True)
    with pytest.raises(CliError, match=r"no SQLite database at '/nowhere/x.db'"):
        build_store("sqlite:////nowhere/x.db", must_exist=True)
    assert isinstance(build_store("sqlite:///missing.db", must_exist=False), wk.SqliteStore)
    assert isinstance(build_store("sqlite://:memory:", must_exist=True), wk.SqliteStore)
    assert isinstance(build_store("memory://", must_exist=True), wk.MemoryStore)
    with pytest.raises(ConfigError, match="store"):
        build_store("ftp://example.com/x", must_exist=True)


def test_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATUKUY_CONNECT_TIMEOUT", raising=False)
    assert connect_timeout_s() == 10
    monkeypatch.setenv("WATUKUY_CONNECT_TIMEOUT", "1500ms")
    assert connect_timeout_s() == 1.5
    monkeypatch.setenv("WATUKUY_CONNECT_TIMEOUT", "soon")
    with pytest.raises(CliError, match="WATUKUY_CONNECT_TIMEOUT"):
        connect_timeout_s()


async def test_open_target_chooses_and_refuses(app_module: str) -> None:
    with pytest.raises(CliError, match=r"inspect needs --app .* or --store URL"):
        await open_target(command="inspect", app=None, store_url=None)
    with pytest.raises(CliError, match=r"tick needs the application's poller definitions"):
        await open_target(command="tick", app=None, store_url="memory://", need_engine=True)
    by_store = await open_target(command="inspect", app=None, store_url="memory://")
    assert by_store.engine is None
    assert by_store.label == "memory://"
    await by_store.close()
    # The application wins over a store URL: its engine already has its store.
    by_app = await open_target(command="inspect", app=f"{app_module}:engine", store_url="memory://")
    assert by_app.engine is not None
    assert by_app.store is by_app.engine.store
    await by_app.close()
