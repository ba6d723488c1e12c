"""RedisStore warns once when its server persists nothing (private servers on own ports)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

redis_asyncio = pytest.importorskip("redis.asyncio")

from watukuy.stores._redis_durability import persistence_warning  # noqa: E402
from watukuy.stores.redis import RedisStore  # noqa: E402

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Starts private redis-server processes (``--port`` of their own); stops them after."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(*config: str) -> str:
        port = _free_port()
        directory = tmp_path / str(port)
        directory.mkdir()
        assert REDIS_SERVER is not None
        process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(directory),
                *config,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    return f"redis://127.0.0.1:{port}/0"
            except OSError:
                if process.poll() is not None:
                    break
                subprocess.run(["sleep", "0.05"], check=False)
        raise RuntimeError(f"redis-server on port {port} did not start")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
async def clients() -> AsyncIterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for client in opened:
        await client.aclose()


def _client(url: str, opened: list[Any], cls: Any = None) -> Any:
    client = (cls or redis_asyncio.Redis).from_url(url)
    opened.append(client)
    return client


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_a_server_without_aof_or_rdb_gets_one_warning(
    private_redis: Callable[..., str], clients: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    url = private_redis("--appendonly", "no", "--save", "")
    caplog.set_level(logging.WARNING, logger="watukuy")
    await RedisStore(_client(url, clients), prefix="a:").migrate()
    await RedisStore(_client(url, clients), prefix="b:").migrate()
    [warning] = _warnings(caplog)
    assert "persists nothing" in warning
    assert url.removeprefix("redis://").removesuffix("/0") in warning
    assert "appendonly yes" in warning


@pytest.mark.parametrize(
    "config",
    [("--appendonly", "yes", "--save", ""), ("--appendonly", "no", "--save", "60 1000")],
    ids=["aof", "rdb"],
)
async def test_a_persistent_server_gets_none(
    config: tuple[str, ...],
    private_redis: Callable[..., str],
    clients: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = private_redis(*config)
    caplog.set_level(logging.WARNING, logger="watukuy")
    await RedisStore(_client(url, clients), prefix="a:").migrate()
    assert _warnings(caplog) == []


class NoConfigRedis(redis_asyncio.Redis):  # type: ignore[misc, name-defined]
    """A client for a server that refuses CONFIG, as managed services do."""

    async def config_get(self, *args: Any, **kwargs: Any) -> Any:
        raise redis_asyncio.ResponseError("NOPERM this user has no permissions to run 'config|get'")


async def test_a_server_that_refuses_config_gets_none(
    private_redis: Callable[..., str], clients: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    url = private_redis("--appendonly", "no", "--save", "")
    caplog.set_level(logging.WARNING, logger="watukuy")
    client = _client(url, clients, NoConfigRedis)
    assert await persistence_warning(client) is None
    await RedisStore(client, prefix="a:").migrate()
    assert _warnings(caplog) == []


def test_the_reply_forms_are_read_as_text() -> None:
    class Stub:
        def __init__(self, replies: dict[str, Any]) -> None:
            self.replies = replies

        async def config_get(self, name: str) -> Any:
            return self.replies[name]

    quiet = Stub({"appendonly": {b"appendonly": b"no"}, "save": {b"save": b""}})
    assert asyncio.run(persistence_warning(quiet)) is not None
    odd = Stub({"appendonly": {}, "save": {}})
    assert asyncio.run(persistence_warning(odd)) is None
