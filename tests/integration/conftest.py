"""Factories for engine integration tests: a world of clock, API, store and engine, and a
single engine deployed on a clock and an API."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.model.ports import StateStore
from watukuy.testing import FakeApi, SeededRandom, VirtualClock

BASE = "https://fake.api"


def timestamp_fetch(limit: int = 10, path: str = "/items") -> Callable[..., Any]:
    """A fetch for the FakeApi keyset listing (`updated_at`, `id`)."""

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        prefix = f"/t/{ctx.partition.key}" if ctx.partition.key else ""
        res = await ctx.http.get(
            f"{BASE}{prefix}{path}",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": limit},
        )
        if res.not_modified:
            return wk.Page(items=[])
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return fetch


def page_fetch(page_size: int = 10) -> Callable[..., Any]:
    """A fetch for the page-numbered listing, paged by `ctx.page` (full scans)."""

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        prefix = f"/t/{ctx.partition.key}" if ctx.partition.key else ""
        res = await ctx.http.get(
            f"{BASE}{prefix}/items/page", params={"page": ctx.page, "page_size": page_size}
        )
        if res.not_modified:
            return wk.Page(items=[])
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return fetch


def token_fetch(limit: int = 10) -> Callable[..., Any]:
    """A fetch for the opaque-token listing."""

    async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        prefix = f"/t/{ctx.partition.key}" if ctx.partition.key else ""
        res = await ctx.http.get(
            f"{BASE}{prefix}/items/token", params={"cursor": ctx.cursor.value, "limit": limit}
        )
        body = res.json()
        return wk.Page(items=body["data"], cursor=body["next"])

    return fetch


@dataclass
class Recorder:
    """A handler that records what it saw, and can be told to fail."""

    events: list[wk.Event[Any]] = field(default_factory=list)
    fail: Callable[[wk.Event[Any]], bool] = lambda event: False
    attempts: list[tuple[str, int]] = field(default_factory=list)

    async def __call__(self, event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        self.attempts.append((event.id, event.attempt))
        if self.fail(event):
            raise RuntimeError(f"handler refuses {event.subject}")
        self.events.append(event)

    @property
    def ids(self) -> list[str]:
        return [event.id for event in self.events]

    def by_subject(self, subject: str) -> list[str]:
        return [event.type for event in self.events if event.subject == subject]


@dataclass
class World:
    """Clock, API and store shared by the engines of one test."""

    clock: VirtualClock
    api: FakeApi
    store: StateStore

    def engine(self, *pollers: wk.PollerDefinition[Any], **options: Any) -> wk.Engine:
        options.setdefault("random", SeededRandom(7))
        options.setdefault("instance_id", f"engine-{id(options)}")
        return wk.Engine(
            store=self.store,
            pollers=list(pollers),
            clock=self.clock,
            http_client=httpx.AsyncClient(transport=self.api.transport()),
            **options,
        )


@dataclass
class Deployed:
    """One engine, the clock and API it runs on, and what its handler delivered.

    Where a :class:`World` is the place several engines of a test share, this is a single
    engine already built (by the test module's own factory), with its hooks if it has any.
    """

    clock: VirtualClock
    api: FakeApi
    engine: wk.Engine
    hooks: Any = None
    delivered: list[Any] = field(default_factory=list)

    async def tick(self) -> wk.TickResult:
        """One pass; virtual time moves while the pass waits (API latency, backoff)."""
        task = asyncio.create_task(self.engine.tick())
        while not task.done():
            if not await self.clock.run_next():
                await self.clock.flush()
        return task.result()

    async def poll_now(self, poller: str = "orders") -> wk.TickResult:
        """Trigger ``poller``, then run one pass as :meth:`tick` does."""
        await self.engine.trigger(poller)
        return await self.tick()


@pytest.fixture(params=["memory", "sqlite"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def open_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StateStore:
    """A migrated store of ``kind``: ``memory``, ``sqlite``, or ``postgres`` and ``redis``
    on the real servers (in a schema or key prefix of the test's own)."""
    created: StateStore
    if kind == "memory":
        created = wk.MemoryStore()
    elif kind == "sqlite":
        created = wk.SqliteStore(tmp_path / "w.db")
    elif kind == "postgres":
        from watukuy.stores.postgres import PostgresStore

        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("pg_schema")
        created = PostgresStore(url, schema=schema)
    else:
        from watukuy.stores.redis import RedisStore

        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        created = RedisStore.from_url(url, prefix=prefix)
    await created.migrate()
    return created


@pytest.fixture
async def store(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StateStore]:
    """A store of ``store_kind``: a module that overrides ``store_kind`` with
    ``"postgres"`` or ``"redis"`` runs on the real servers too."""
    created = await open_store(store_kind, tmp_path, request)
    yield created
    await created.close()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def world(clock: VirtualClock, store: StateStore) -> World:
    return World(clock=clock, api=FakeApi(clock), store=store)


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    """The ``orders`` poller over the keyset listing, 50 a page unless ``fetch`` is given."""
    options.setdefault("fetch", timestamp_fetch(limit=50))
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        **options,
    )


def seed(world: World, n: int, at: str = "2025-12-31T12:00:00.000Z") -> None:
    """``n`` items, ``item-001`` onwards, all stamped ``at``."""
    for i in range(1, n + 1):
        world.api.add(item(i, at))


def item(n: int, at: str, **extra: Any) -> dict[str, Any]:
    """An API item `item-NNN` stamped `at`."""
    return {"id": f"item-{n:03d}", "updated_at": at, "version": 1, "status": "new", **extra}


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made with the openssl command)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def listing_poller(schedule: wk.Schedule) -> wk.PollerDefinition[Any]:
    """The ``orders`` full listing of a ``support.vendors.ArrivalsVendor``, on ``schedule``."""

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get("https://vendor.test/items")
        return wk.Page(items=response.json()["data"])

    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=schedule,
    )
