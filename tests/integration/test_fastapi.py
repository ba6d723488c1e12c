"""The FastAPI integration on a real engine (MemoryStore, VirtualClock, FakeApi).

Requests go through ``httpx.ASGITransport``; the lifespan is driven with the ASGI lifespan
protocol, as a server would drive it. The API holds five items updated one second apart,
the last 56 s before the clock's start, and the poller follows them with a timestamp
cursor.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

import watukuy as wk
from watukuy.integrations import HealthCheck
from watukuy.integrations.fastapi import health_router, inspect_router, watukuy_lifespan
from watukuy.model.rows import PKey
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items

from .conftest import Deployed

T0 = 1_767_225_600_000  # the VirtualClock's default start, 2026-01-01T00:00:00Z


def deploy(
    *,
    handler: Callable[[wk.Event[Any], wk.HandlerContext], Any] | bool | None = True,
    store: wk.MemoryStore | None = None,
    **poller: Any,
) -> Deployed:
    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(5, start=T0 - 60_000))

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        position = ctx.cursor
        page = api.list_since(position.value, position.tie_break, limit=10)
        return wk.Page(page.data, has_more=page.has_more)

    orders = wk.define_poller(
        name="orders",
        fetch=fetch,
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        **poller,
    )
    engine = wk.Engine(
        store=store or wk.MemoryStore(),
        pollers=[orders],
        clock=clock,
        random=SeededRandom(3),
        instance_id="i-1",
    )
    deployed = Deployed(clock=clock, api=api, engine=engine)
    if handler is True:
        engine.on("orders", lambda event, ctx: deployed.delivered.append(event.subject))
    elif callable(handler):
        engine.on("orders", handler)
    return deployed


def app_for(engine: wk.Engine, **options: Any) -> FastAPI:
    """The detailed health route and the inspect route (what operators mount)."""
    app = FastAPI()
    app.include_router(health_router(engine, max_lag="10m", detail=True, **options))
    app.include_router(inspect_router(engine))
    return app


@asynccontextmanager
async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
        yield client


def healthy_key(**changes: Any) -> dict[str, Any]:
    return {
        "poller": "orders",
        "partition": "",
        "status": "ok",
        "reasons": [],
        "paused": False,
        "circuit": "closed",
        "lag_ms": 56_000,
        "outbox_pending": 0,
        "parked": 0,
        "lease_owner": None,
        **changes,
    }


# --- /health ----------------------------------------------------------------------------


async def test_health_is_200_with_one_row_per_key_after_a_clean_tick() -> None:
    deployed = deploy()
    await deployed.engine.tick()

    async with client_for(app_for(deployed.engine)) as client:
        response = await client.get("/watukuy/health")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "reasons": [],
        "engine_status": "idle",
        "instance_id": "i-1",
        "generated_at": T0,
        "pollers": [healthy_key()],
    }
    assert len(deployed.delivered) == 5


async def test_a_lag_over_max_lag_is_503_unless_the_key_is_paused() -> None:
    deployed = deploy()
    await deployed.engine.tick()
    await deployed.clock.advance("20m")
    await deployed.engine.tick()  # polled on time: nothing new, so the lag grew all the same

    async with client_for(app_for(deployed.engine)) as client:
        lagging = await client.get("/watukuy/health")
        await deployed.engine.pause("orders")
        paused = await client.get("/watukuy/health")

    assert lagging.status_code == 503
    body = lagging.json()
    assert body["status"] == "unhealthy"
    assert body["reasons"] == ["orders: lag 1256s is over max_lag 10m"]
    assert body["pollers"] == [
        healthy_key(status="unhealthy", reasons=["lag 1256s is over max_lag 10m"], lag_ms=1_256_000)
    ]
    assert paused.status_code == 200
    assert paused.json()["pollers"] == [healthy_key(paused=True, lag_ms=1_256_000)]


async def test_an_open_circuit_is_503_unless_allowed() -> None:
    deployed = deploy(circuit=wk.Circuit(failures=1))
    deployed.api.fail_next(500)
    result = await deployed.engine.tick()
    assert result.polled[0].error is not None
    app = app_for(deployed.engine)
    app.include_router(
        health_router(deployed.engine, allow_open_circuit=True, detail=True, prefix="/lenient")
    )

    async with client_for(app) as client:
        strict = await client.get("/watukuy/health")
        lenient = await client.get("/lenient/health")

    assert strict.status_code == 503
    (reason,) = strict.json()["reasons"]
    assert reason.startswith("orders: circuit open: ")
    assert "500" in reason
    assert strict.json()["pollers"][0]["circuit"] == "open"
    assert lenient.status_code == 200
    assert lenient.json()["pollers"][0]["circuit"] == "open"


async def test_anything_parked_is_503() -> None:
    def refuse_item_3(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.subject == "item-003":
            raise RuntimeError("cannot handle item 3")

    deployed = deploy(
        handler=refuse_item_3,
        delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
    )
    await deployed.engine.tick()

    async with client_for(app_for(deployed.engine)) as client:
        response = await client.get("/watukuy/health")

    assert response.status_code == 503
    assert response.json()["reasons"] == ["orders: 1 parked (poison events or invalid items)"]
    assert response.json()["pollers"][0]["parked"] == 1


async def test_a_growing_outbox_is_503_until_it_stops_growing() -> None:
    deployed = deploy(handler=None)  # nobody consumes: events wait in the outbox
    await deployed.engine.tick()

    async with client_for(app_for(deployed.engine)) as client:
        first = await client.get("/watukuy/health")
        deployed.api.add({"id": "item-006", "name": "Item 6", "status": "paid", "total": 600})
        deployed.api.add({"id": "item-007", "name": "Item 7", "status": "paid", "total": 700})
        await deployed.engine.trigger("orders")
        await deployed.engine.tick()
        grown = await client.get("/watukuy/health")
        steady = await client.get("/watukuy/health")

    assert first.status_code == 200
    assert first.json()["pollers"][0]["outbox_pending"] == 5
    assert grown.status_code == 503
    assert grown.json()["reasons"] == ["orders: outbox growing: 5 -> 7 pending"]
    assert steady.status_code == 200
    assert steady.json()["pollers"][0]["outbox_pending"] == 7


async def test_require_running_reports_an_engine_that_is_not_started() -> None:
    deployed = deploy()

    async with client_for(app_for(deployed.engine, require_running=True)) as client:
        response = await client.get("/watukuy/health")

    assert response.status_code == 503
    assert response.json()["reasons"] == ["engine is idle, not running"]
    assert response.json()["pollers"] == [healthy_key(lag_ms=None)]


class BrokenStore(wk.MemoryStore):
    """A store whose reads fail, as when the database is unreachable."""

    async def count_pending(self, key: PKey) -> int:
        raise wk.StoreError("the database is unreachable")


async def test_a_failing_store_is_503_on_both_routes() -> None:
    deployed = deploy(store=BrokenStore())

    async with client_for(app_for(deployed.engine)) as client:
        health = await client.get("/watukuy/health")
        inspect = await client.get("/watukuy/inspect")

    assert health.status_code == 503
    assert health.json() == {
        "status": "unhealthy",
        "reasons": ["inspect() failed: StoreError: the database is unreachable"],
        "engine_status": "idle",
        "instance_id": "i-1",
        "generated_at": None,
        "pollers": [],
    }
    assert inspect.status_code == 503
    assert inspect.json() == {"error": "inspect() failed: StoreError: the database is unreachable"}


# --- the public body and the thresholds ---------------------------------------------------

TENANT = "tenant-7f3a9"
ERROR_MARK = "V3ND0R-SAYS-NO"


def deploy_tenants(**poller: Any) -> Deployed:
    """Two partitions (tenant ids), whose API answers 500 with a distinctive body."""
    clock = VirtualClock()

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        raise RuntimeError(f"{ERROR_MARK} for {ctx.partition.key}")

    orders = wk.define_poller(
        name="orders",
        fetch=fetch,
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        partitions=lambda: [TENANT, f"{TENANT}-b"],
        circuit=wk.Circuit(failures=1),
        **poller,
    )
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[orders],
        clock=clock,
        random=SeededRandom(3),
        instance_id="host-secret-1",
    )
    return Deployed(clock=clock, api=FakeApi(clock), engine=engine)


async def test_the_default_health_body_names_no_tenant_and_quotes_no_error() -> None:
    deployed = deploy_tenants()
    await deployed.engine.tick()
    app = FastAPI()
    app.include_router(health_router(deployed.engine))

    async with client_for(app) as client:
        response = await client.get("/watukuy/health")

    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy", "reasons": ["orders: circuit open (2 keys)"]}
    for hidden in (TENANT, ERROR_MARK, "host-secret-1", "Traceback", ".py"):
        assert hidden not in response.text
    # The detailed verdict (for operators) has both.
    detail = HealthCheck(deployed.engine)
    result = await detail.check()
    assert any(TENANT in reason and ERROR_MARK in reason for reason in result.reasons)


async def test_a_failing_inspect_is_reported_without_its_message_by_default() -> None:
    deployed = deploy(store=BrokenStore())
    app = FastAPI()
    app.include_router(health_router(deployed.engine))

    async with client_for(app) as client:
        response = await client.get("/watukuy/health")

    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy", "reasons": ["inspect() failed"]}


async def _deploy_parked(invalid: int, poison: int) -> Deployed:
    """One key whose first ``invalid`` items fail the schema (quarantined) and whose next
    ``poison`` items fail the handler once (parked, with ``retry.attempts=1``)."""
    ids = [f"item-00{n}" for n in range(1, 6)]
    bad, refused = set(ids[:invalid]), set(ids[invalid : invalid + poison])

    def schema(raw: Any) -> Any:
        if raw["id"] in bad:
            raise ValueError("not an order")
        return raw

    def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.subject in refused:
            raise RuntimeError("cannot handle it")

    deployed = deploy(
        handler=handler, schema=schema, delivery=wk.Delivery(retry=wk.Retry(attempts=1))
    )
    await deployed.engine.tick()
    parked = await deployed.engine.parked.list("orders")
    assert sorted(row.kind for row in parked) == ["invalid"] * invalid + ["poison"] * poison
    return deployed


@pytest.mark.parametrize(
    ("invalid", "poison", "options", "healthy"),
    [
        (1, 0, {}, False),
        (1, 0, {"ignore_invalid": True}, True),
        (2, 1, {"ignore_invalid": True}, False),
        (2, 1, {"ignore_invalid": True, "max_parked": 1}, True),
        (2, 2, {"ignore_invalid": True, "max_parked": 1}, False),
        (2, 0, {"max_parked": 2}, True),
        (3, 0, {"max_parked": 2}, False),
        (2, 3, {"max_parked": None}, True),
    ],
)
async def test_parked_thresholds(
    invalid: int, poison: int, options: dict[str, Any], healthy: bool
) -> None:
    deployed = await _deploy_parked(invalid, poison)
    result = await HealthCheck(deployed.engine, **options).check()
    assert result.healthy is healthy, result.reasons
    if not healthy:
        assert result.summary == ["orders: parked events"]


async def test_max_outbox_and_max_lag_thresholds() -> None:
    deployed = deploy(handler=None)  # nobody consumes: 5 events wait
    await deployed.engine.tick()
    assert (await HealthCheck(deployed.engine, max_outbox=5).check()).healthy
    over = await HealthCheck(deployed.engine, max_outbox=4).check()
    assert over.reasons == ["orders: outbox holds 5 pending, over max_outbox 4"]
    assert over.summary == ["orders: outbox over max_outbox"]
    assert (await HealthCheck(deployed.engine, max_lag="57s").check()).healthy
    lagging = await HealthCheck(deployed.engine, max_lag="55s").check()
    assert lagging.summary == ["orders: lag over max_lag"]


def test_bad_thresholds_are_config_errors() -> None:
    engine = deploy().engine
    for options, field_name in (
        ({"max_parked": -1}, "max_parked"),
        ({"max_outbox": 1.5}, "max_outbox"),
        ({"ignore_invalid": "yes"}, "ignore_invalid"),
    ):
        with pytest.raises(wk.ConfigError, match=field_name):
            HealthCheck(engine, **options)
    with pytest.raises(wk.ConfigError, match="detail"):
        health_router(engine, detail="yes")  # type: ignore[arg-type]


# --- /inspect ---------------------------------------------------------------------------


async def test_inspect_returns_the_engine_report() -> None:
    deployed = deploy()
    await deployed.engine.tick()

    async with client_for(app_for(deployed.engine)) as client:
        response = await client.get("/watukuy/inspect")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    report = response.json()
    assert report == await deployed.engine.inspect()
    assert report["pollers"][0]["items"] == 5
    assert report["pollers"][0]["cursors"]["live"] == {
        "value": "2025-12-31T23:59:04.000Z",
        "tie_break": "item-005",
    }


async def test_routes_follow_the_prefix() -> None:
    deployed = deploy()
    app = FastAPI()
    app.include_router(health_router(deployed.engine, prefix="/ops/sync"))
    app.include_router(inspect_router(deployed.engine, prefix="/ops/sync"))

    async with client_for(app) as client:
        health = await client.get("/ops/sync/health")
        inspect = await client.get("/ops/sync/inspect")
        default = await client.get("/watukuy/health")

    assert health.status_code == 200
    assert inspect.status_code == 200
    assert default.status_code == 404


async def test_the_inspect_route_exists_only_when_included() -> None:
    deployed = deploy()
    app = FastAPI()
    app.include_router(health_router(deployed.engine))

    async with client_for(app) as client:
        assert (await client.get("/watukuy/inspect")).status_code == 404


# --- the lifespan -------------------------------------------------------------------------


class LifespanDriver:
    """Runs an app's lifespan the way an ASGI server does."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self.sent: list[str] = []
        self._inbox: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue()
        self._replied = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _receive(self) -> Mapping[str, Any]:
        return await self._inbox.get()

    async def _send(self, message: Mapping[str, Any]) -> None:
        self.sent.append(message["type"])
        self._replied.set()

    async def _exchange(self, message: str) -> None:
        self._replied.clear()
        await self._inbox.put({"type": message})
        await self._replied.wait()

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": self.state}
        self._task = asyncio.create_task(self.app(scope, self._receive, self._send))
        await self._exchange("lifespan.startup")

    async def shutdown(self) -> None:
        await self._exchange("lifespan.shutdown")
        assert self._task is not None
        await self._task


async def test_the_daemon_runs_between_startup_and_shutdown() -> None:
    deployed = deploy()
    engine = deployed.engine
    app = FastAPI(lifespan=watukuy_lifespan(engine))
    app.include_router(health_router(engine, require_running=True))
    driver = LifespanDriver(app)

    await driver.startup()
    assert engine.status is wk.EngineStatus.RUNNING
    await deployed.clock.flush()  # the first cycle is due at once
    async with client_for(app) as client:
        response = await client.get("/watukuy/health")
    await driver.shutdown()

    assert driver.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "reasons": []}
    assert len(deployed.delivered) == 5
    assert engine.status is wk.EngineStatus.STOPPED


async def test_a_users_lifespan_wraps_the_engine_and_keeps_its_state() -> None:
    deployed = deploy()
    engine = deployed.engine
    seen: list[tuple[str, str]] = []

    @asynccontextmanager
    async def mine(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        seen.append(("user startup", engine.status.value))
        yield {"pool": "db-pool"}
        seen.append(("user shutdown", engine.status.value))

    driver = LifespanDriver(FastAPI(lifespan=watukuy_lifespan(engine, lifespan=mine)))

    await driver.startup()
    seen.append(("serving", engine.status.value))
    await driver.shutdown()

    assert seen == [
        ("user startup", "idle"),
        ("serving", "running"),
        ("user shutdown", "stopped"),
    ]
    assert driver.state == {"pool": "db-pool"}


async def test_the_lifespan_nests_inside_a_hand_written_one() -> None:
    deployed = deploy()
    engine = deployed.engine
    seen: list[str] = []

    @asynccontextmanager
    async def mine(app: FastAPI) -> AsyncIterator[None]:
        async with watukuy_lifespan(engine, stop_timeout="5s")(app):
            seen.append(engine.status.value)
            yield
        seen.append(engine.status.value)

    driver = LifespanDriver(FastAPI(lifespan=mine))
    await driver.startup()
    await driver.shutdown()

    assert seen == ["running", "stopped"]


async def test_mode_none_leaves_the_engine_to_the_app() -> None:
    deployed = deploy()
    engine = deployed.engine
    app = FastAPI(lifespan=watukuy_lifespan(engine, mode="none"))
    driver = LifespanDriver(app)

    await driver.startup()
    during = engine.status
    result = await engine.tick()
    await driver.shutdown()

    assert during is wk.EngineStatus.IDLE
    assert result.polled[0].delivered == 5
    assert engine.status is wk.EngineStatus.IDLE


# --- configuration and packaging -------------------------------------------------------------


def test_bad_options_are_config_errors() -> None:
    engine = deploy().engine
    with pytest.raises(wk.ConfigError, match=r"^mode: expected 'daemon' or 'none', got 'cron'$"):
        watukuy_lifespan(engine, mode="cron")  # type: ignore[call-overload]
    with pytest.raises(wk.ConfigError, match=r"^stop_timeout: .*'soon'"):
        watukuy_lifespan(engine, stop_timeout="soon")
    with pytest.raises(wk.ConfigError, match=r"^prefix: .*got 'watukuy/'$"):
        health_router(engine, prefix="watukuy/")
    with pytest.raises(wk.ConfigError, match=r"^prefix: .*got '/watukuy/'$"):
        health_router(engine, prefix="/watukuy/")
    with pytest.raises(wk.ConfigError, match=r"^max_lag: .*'ten minutes'"):
        health_router(engine, max_lag="ten minutes")
    with pytest.raises(wk.ConfigError, match=r"^allow_open_circuit: expected a bool, got 'no'$"):
        HealthCheck(engine, allow_open_circuit="no")  # type: ignore[arg-type]


def test_without_fastapi_the_module_asks_for_the_extra() -> None:
    code = """
        import sys
        sys.modules["fastapi"] = None  # as if FastAPI were not installed
        from watukuy.integrations import HealthCheck  # needs no framework
        try:
            import watukuy.integrations.fastapi
        except ImportError as error:
            print(error)
        else:
            raise SystemExit("no ImportError")
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'watukuy[fastapi]'" in done.stdout
