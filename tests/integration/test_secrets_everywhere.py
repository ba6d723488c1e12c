"""Secrets stay home: distinct markers planted in every kind of secret, failures driven
through every lane, then every surface searched.

Planted: URL user info, query parameters (``api_key``, ``access_token``), a default
sensitive header (``X-Auth-Token``), a custom header the application declares sensitive
(``X-Customer``, through ``Engine(redact=...)``), a partition's data (a per-tenant token
sent as ``Api-Key``), and the password of a store URL. Driven: live, reconcile and
backfill fetches answering 500/503/404, a fetch that raises with the full URL in its
message, a connection refused, handler failures retried and parked (their messages quote
the URL and the headers), an invalid item quarantined, a redirect to another origin.
Searched: every log record at DEBUG (message, traceback, ``extra``), every hook record,
every OpenTelemetry span (attributes, events, status) and metric, ``tick()`` results,
``inspect()``, parked rows, both FastAPI routes (default and detailed health, inspect),
``watukuy inspect --json`` and the CLI's error for the store URL, every row of every
table of the SQLite file, and the requests the other origin received.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import watukuy as wk
from watukuy.cli import main
from watukuy.integrations.fastapi import health_router, inspect_router
from watukuy.otel import OtelHooks
from watukuy.runtime.hooks import HOOK_NAMES
from watukuy.testing import SeededRandom, VirtualClock

MARKERS = {
    "userinfo": "UsErInFo-7Q2",
    "query": "QuErY-9K4",
    "query2": "AcCeSs-3M8",
    "header": "HeAdEr-5T1",
    "custom": "CuStOm-6W0",
    "partition": "PaRtItIoN-2Z7",
    "store": "StOrEpW-8X3",
}
API = "https://api.vendor.test"
OTHER = "https://elsewhere.test"
T0 = 1_767_225_600_000


class TwoOriginVendor:
    """The vendor API behind ``httpx.MockTransport``, and a second origin it redirects to."""

    def __init__(self) -> None:
        self.elsewhere: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "elsewhere.test":
            self.elsewhere.append(request)
            # One valid payment (its handler fails until it is parked), one invalid item.
            items = [{"id": "p1", "amount": 1}, {"id": "p2", "amount": -5}]
            return httpx.Response(200, json={"items": items})
        if request.url.host == "127.0.0.1":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        path = request.url.path
        if path == "/live":
            return httpx.Response(
                500,
                json={"title": "upstream down", "detail": f"see {request.url}"},
                headers={"content-type": "application/problem+json"},
            )
        if path == "/reconcile":
            return httpx.Response(503, text="maintenance")
        if path == "/backfill":
            return httpx.Response(404)
        if path == "/payments":
            # The real listing moved to another origin; the redirect keeps the query.
            return httpx.Response(
                302, headers={"location": f"{OTHER}/payments?{request.url.query.decode()}"}
            )
        return httpx.Response(404)


def secret_url(path: str, base: str = API) -> str:
    host = base.removeprefix("https://")
    return f"https://svc:{MARKERS['userinfo']}@{host}{path}"


def secret_params() -> dict[str, Any]:
    return {"api_key": MARKERS["query"], "access_token": MARKERS["query2"], "page": 1}


def secret_headers(partition: wk.Partition) -> dict[str, str]:
    headers = {"X-Auth-Token": MARKERS["header"], "X-Customer": MARKERS["custom"]}
    if partition.data:
        headers["Api-Key"] = partition.data["token"]
    return headers


def lane_fetch(path: str) -> Any:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        res = await ctx.http.get(
            secret_url(path), params=secret_params(), headers=secret_headers(ctx.partition)
        )
        return wk.Page(items=res.json()["items"])

    return fetch


async def reconcile_fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    headers = secret_headers(ctx.partition)
    ctx.logger.debug("reconciling with %s", headers)
    res = await ctx.http.get(
        secret_url("/reconcile"), params=secret_params(), headers=headers, raise_for_status=False
    )
    # User code that quotes the URL and its headers in its own error.
    raise RuntimeError(f"unexpected {res.status} from {res.url} with headers {headers}")


async def refused_fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    await ctx.http.get(secret_url("/x", "https://127.0.0.1:9"), params=secret_params())
    return wk.Page(items=[])


def payment_schema(raw: Any) -> Any:
    if raw["amount"] < 0:
        raise ValueError(f"negative amount (fetched with api_key={MARKERS['query']})")
    return raw


def failing_handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
    url = f"{secret_url('/hooks')}?token={MARKERS['query']}"
    raise RuntimeError(f"POST {url} refused: {{'X-Auth-Token': '{MARKERS['header']}'}}")


class Everything:
    """A hook set that keeps every record it is given."""

    def __init__(self) -> None:
        self.records: list[tuple[str, Any]] = []
        for name in HOOK_NAMES:
            setattr(self, name, lambda details, name=name: self.records.append((name, details)))


def cli(argv: list[str]) -> int:
    """Run the ``watukuy`` command in process; its exit status."""
    return main(argv)


def assert_clean_files(directory: Path, db: Path) -> None:
    """Every row of every table of the SQLite store, and the raw bytes of its files."""
    with sqlite3.connect(db) as conn:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        assert len(tables) >= 6
        for table in tables:
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            assert_clean(f"SQLite table {table}", repr(rows))
    for path in directory.glob("watukuy.db*"):  # the database, its WAL and shared memory
        assert_clean(f"file {path.name}", path.read_bytes().decode("utf-8", "replace"))


def assert_clean(surface: str, text: str) -> None:
    found = [name for name, marker in MARKERS.items() if marker in text]
    where = [
        text[max(0, text.find(MARKERS[name]) - 300) : text.find(MARKERS[name]) + 50]
        for name in found
    ]
    assert not found, f"{surface} shows {found}: {where}"


async def test_no_secret_reaches_any_surface(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = VirtualClock(start=T0)
    vendor = TwoOriginVendor()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    everything = Everything()
    otel = OtelHooks(
        tracer=tracer_provider.get_tracer("t"), meter=meter_provider.get_meter("t"), clock=clock
    )

    orders = wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(
            field="updated_at", tie_break="id", initial="2026-01-01T00:00:00Z"
        ),
        fetch=lane_fetch("/live"),
        partitions=lambda: [wk.Partition("acme", data={"token": MARKERS["partition"]})],
        reconcile=wk.Reconcile(every="1h", fetch=reconcile_fetch),
        circuit=wk.Circuit(failures=1),
    )
    backfills = wk.define_poller(
        name="history",
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(
            field="updated_at", tie_break="id", initial="2026-01-01T00:00:00Z"
        ),
        fetch=lane_fetch("/backfill"),
    )
    payments = wk.define_poller(
        name="payments",
        identity=lambda item: item["id"],
        schema=payment_schema,
        cursor=wk.SnapshotDiff(),
        fetch=lane_fetch("/payments"),
        delivery=wk.Delivery(retry=wk.Retry(attempts=2, backoff=wk.Backoff(base="1s", max="1s"))),
    )
    refused = wk.define_poller(
        name="refused",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=refused_fetch,
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(vendor), follow_redirects=True)
    db = tmp_path / "watukuy.db"
    engine = wk.Engine(
        store=wk.SqliteStore(db),
        pollers=[orders, backfills, payments, refused],
        clock=clock,
        random=SeededRandom(7),
        instance_id="replica-1",
        hooks=[everything, otel],
        http_client=client,
        redact=wk.Redaction(names=["x-customer"]),
    )
    engine.on("payments", failing_handler)
    engine.on("orders", lambda event, ctx: None)
    engine.on("history", lambda event, ctx: None)
    await engine.migrate()
    await engine.backfill("history", from_="2026-01-01T00:00:00Z")

    results = [await engine.tick()]
    for _ in range(3):
        await clock.advance("2m")
        await engine.trigger("orders", partition="acme")
        results.append(await engine.tick())
    await client.aclose()

    # --- what happened, so the search below is searching something ---------------------
    polled = [r for result in results for r in result.polled]
    failed_lanes = {(r.poller, r.lane) for r in polled if r.error is not None}
    assert {
        ("orders", "live"),
        ("orders", "reconcile"),
        ("history", "backfill"),
        ("refused", "live"),
    } <= failed_lanes
    report = await engine.inspect()
    parked = await engine.parked.list("payments")
    assert sorted(row.kind for row in parked) == ["invalid", "poison"]
    assert {name for name, _ in everything.records} >= {
        "on_error",
        "on_retry",
        "on_parked",
        "on_circuit_open",
    }
    assert vendor.elsewhere, "the redirect was followed"
    assert any(r.levelno == logging.DEBUG and "/live" in r.getMessage() for r in caplog.records)

    # --- the surfaces ------------------------------------------------------------------------
    for record in caplog.records:
        assert_clean(f"log record {record.levelname}", record.getMessage() + repr(vars(record)))
    assert_clean("formatted logs", caplog.text)
    assert_clean("hook records", repr(everything.records))
    spans = exporter.get_finished_spans()
    assert any(event.name == "exception" for span in spans for event in span.events)
    assert_clean("OTel spans", "".join(span.to_json() for span in spans))
    metrics = reader.get_metrics_data()
    assert_clean("OTel metrics", metrics.to_json() if metrics is not None else "")
    assert_clean(
        "tick results", json.dumps([r.to_dict() for result in results for r in result.polled])
    )
    assert_clean("inspect()", json.dumps(report))
    # Stored stacks name files relative to their import path, never where they live.
    stacks = json.dumps(report) + repr(parked)
    assert 'File \\"watukuy/' in stacks
    for place in (
        str(Path(wk.__file__).parent.parent),
        str(Path(__file__).parent),
        "site-packages",
    ):
        assert place not in stacks
    assert_clean("parked rows", repr(parked))
    assert_clean(
        "the other origin", repr([(str(r.url), dict(r.headers)) for r in vendor.elsewhere])
    )
    elsewhere_headers = {name.lower() for r in vendor.elsewhere for name in r.headers}
    assert not elsewhere_headers & {"x-auth-token", "api-key", "x-customer"}

    app = FastAPI()
    app.include_router(health_router(engine))
    app.include_router(health_router(engine, detail=True, prefix="/ops"))
    app.include_router(inspect_router(engine))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as web:
        public = await web.get("/watukuy/health")
        detailed = await web.get("/ops/health")
        inspected = await web.get("/watukuy/inspect")
    assert public.status_code == detailed.status_code == 503
    assert inspected.status_code == 200
    for name, response in (("/health", public), ("/ops/health", detailed), ("/inspect", inspected)):
        assert_clean(f"route {name}", response.text)
    assert "acme" not in public.text  # no tenant key in the public body
    assert "responded" not in public.text  # no error text either

    await engine.stop()
    assert await asyncio.to_thread(cli, ["inspect", "--store", f"sqlite:///{db}", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["pollers"]
    assert_clean("watukuy inspect --json", out + err)
    for argv in (
        ["parked", "ls", "--store", f"sqlite:///{db}", "--poller", "payments", "--json"],
        ["parked", "ls", "--store", f"sqlite:///{db}", "--poller", "payments"],
        ["inspect", "--store", f"sqlite:///{db}"],
    ):
        assert await asyncio.to_thread(cli, argv) == 0
        out, err = capsys.readouterr()
        assert out
        assert_clean(" ".join(argv[:2]), out + err)
    monkeypatch.setenv("WATUKUY_CONNECT_TIMEOUT", "300ms")
    for store_url in (
        f"postgresql://app:{MARKERS['store']}@127.0.0.1:9/watukuy",
        f"redis://:{MARKERS['store']}@127.0.0.1:9/0",
    ):
        assert await asyncio.to_thread(cli, ["inspect", "--store", store_url, "--json"]) != 0
        out, err = capsys.readouterr()
        assert json.loads(out)["error"]["message"]  # --json: the error is JSON too
        assert_clean(f"CLI error for {store_url.split(':')[0]}", out + err)

    assert_clean_files(tmp_path, db)
    for log in caplog.records:  # the CLI and the store logged too
        assert_clean("late log record", log.getMessage())
