"""The admin page over ASGI (no browser): auth, CSRF, escaping, paging, confirmations, and a
store alone. Requests go through ``httpx.ASGITransport``; the engine runs on a MemoryStore
and a VirtualClock (the browser tests in ``tests/browser`` drive a real one)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Mount

import watukuy as wk
from watukuy.budget import InMemoryBudgetStore
from watukuy.cli._operators import StoreOperator
from watukuy.integrations.admin import admin_app
from watukuy.model.late import LateArrivals, add_lateness
from watukuy.model.ports import BudgetPolicy
from watukuy.model.rows import HeldDeletes, PKey
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items

EVIL = '<script>alert("x")</script>'


def make_engine(
    partitions: list[Any] | None = None,
    store: wk.MemoryStore | None = None,
    budgets: dict[str, wk.Budget] | None = None,
    budget_store: InMemoryBudgetStore | None = None,
) -> wk.Engine:
    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(3, start=clock.now() - 60_000))

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page = api.list_since(ctx.cursor.value, ctx.cursor.tie_break, limit=10)
        return wk.Page(page.data, has_more=page.has_more)

    orders = wk.define_poller(
        name="orders",
        fetch=fetch,
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        partitions=(lambda: partitions) if partitions is not None else None,
        delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
        log=wk.EventLog(retention="1d"),
        budget=next(iter(budgets), None) if budgets else None,
    )
    engine = wk.Engine(
        store=store or wk.MemoryStore(),
        pollers=[orders],
        budgets=budgets,
        budget_store=budget_store,
        clock=clock,
        random=SeededRandom(1),
        instance_id="i-1",
    )
    return engine


@asynccontextmanager
async def client_for(app: Any, prefix: str = "") -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://localhost{prefix}") as c:
        yield c


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert match is not None
    return match.group(1)


def confirm_of(html: str) -> str:
    match = re.search(r'name="confirm" value="([^"]+)"', html)
    assert match is not None
    return match.group(1)


async def post(client: httpx.AsyncClient, page: str, **form: Any) -> httpx.Response:
    """Load ``page`` for its token, then post ``form`` with it."""
    token = csrf_of((await client.get(page)).text)
    return await client.post("action", data={"csrf": token, **form})


# --- auth ---------------------------------------------------------------------------------


def test_auth_must_be_given_and_callable() -> None:
    engine = make_engine()
    with pytest.raises(TypeError):
        admin_app(engine)  # type: ignore[call-arg]
    with pytest.raises(wk.ConfigError, match="auth"):
        admin_app(engine, auth="secret")  # type: ignore[arg-type]
    with pytest.raises(wk.ConfigError, match="page_size"):
        admin_app(engine, auth=None, page_size=5)


async def test_hosts_and_origins_are_options_checked_at_once() -> None:
    engine = make_engine()
    with pytest.raises(wk.ConfigError, match="allowed_hosts"):
        admin_app(engine, auth=None, allowed_hosts="localhost")  # type: ignore[arg-type]
    with pytest.raises(wk.ConfigError, match="allowed_hosts"):
        admin_app(engine, auth=None, allowed_hosts=["http://localhost/"])
    with pytest.raises(wk.ConfigError, match="allowed_origins"):
        admin_app(engine, auth=None, allowed_origins=["ops.example.com"])


async def test_without_auth_only_this_machines_names_are_answered() -> None:
    open_page = admin_app(make_engine(), auth=None)
    named = admin_app(make_engine(), auth=None, allowed_hosts=["ops.internal"])
    transport = httpx.ASGITransport(app=open_page)
    async with httpx.AsyncClient(transport=transport, base_url="http://ops.internal") as client:
        refused = await client.get("/")
        assert (await client.get("/", headers={"host": "127.0.0.1:9"})).status_code == 200
    assert refused.status_code == 400
    assert refused.text == "bad request: this page does not answer to host 'ops.internal'"
    async with client_for(named) as client:
        assert (await client.get("/")).status_code == 400  # localhost is not in the list
        assert (await client.get("/", headers={"host": "ops.internal"})).status_code == 200


async def test_without_auth_the_page_says_so(caplog: pytest.LogCaptureFixture) -> None:
    app = admin_app(make_engine(), auth=None)
    assert "without authentication" in caplog.text
    async with client_for(app) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert "No authentication." in page.text


async def test_the_auth_check_decides_every_request() -> None:
    async def check(request: Any) -> bool:
        token = request.headers.get("x-operator")
        if token == "raise":
            raise RuntimeError("the check itself is broken")
        if token is None:
            raise HTTPException(401, "who are you?", headers={"WWW-Authenticate": "Bearer"})
        return bool(token == "ok")

    app = admin_app(make_engine(), auth=check)
    async with client_for(app) as client:
        anonymous = await client.get("/static/admin.css")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        assert (await client.get("/", headers={"x-operator": "no"})).status_code == 403
        assert (await client.get("/", headers={"x-operator": "raise"})).status_code == 403
        page = await client.get("/", headers={"x-operator": "ok"})
    assert page.status_code == 200
    assert "No authentication." not in page.text
    assert page.headers["x-frame-options"] == "DENY"


# --- CSRF and confirmations ----------------------------------------------------------------


async def test_a_post_needs_the_token_of_its_own_session() -> None:
    engine = make_engine()
    app = admin_app(engine, auth=None)
    async with client_for(app) as first, client_for(app) as second:
        token = csrf_of((await first.get("/key?poller=orders")).text)
        await second.get("/key?poller=orders")
        form = {"action": "pause", "poller": "orders", "partition": ""}
        assert (await second.post("/action", data={**form, "csrf": token})).status_code == 403
        assert (await first.post("/action", data=form)).status_code == 403
        assert not await _paused(engine, "orders")
        done = await first.post("/action", data={**form, "csrf": token})
    assert done.status_code == 303
    assert await _paused(engine, "orders")


async def _paused(engine: wk.Engine, poller: str, partition: str = "") -> bool:
    state = await engine.store.load_state(PKey(poller, partition))
    return bool(state and state.paused)


async def test_destructive_actions_ask_first_and_a_secret_never_shows() -> None:
    engine = make_engine()

    def fail(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        raise RuntimeError("refused: Authorization: Bearer abc.def.ghi")

    engine.on("orders", fail)
    await engine.tick()
    parked = await engine.parked.list("orders")
    assert len(parked) == 3
    app = admin_app(engine, auth=None)
    async with client_for(app, "/") as client:
        key_page = await client.get("key", params={"poller": "orders"})
        assert "abc.def.ghi" not in key_page.text
        assert "refused: Authorization: ***" in key_page.text
        asked = await post(
            client, "key?poller=orders", action="discard", poller="orders", ids=[parked[0].id]
        )
        assert asked.status_code == 200
        assert len(await engine.parked.list("orders")) == 3
        token = csrf_of(asked.text)
        form = {"csrf": token, "action": "discard", "poller": "orders", "partition": ""}
        confirm = confirm_of(asked.text)
        done = await client.post("action", data={**form, "ids": parked[0].id, "confirm": confirm})
        assert done.status_code == 303
        assert len(await engine.parked.list("orders")) == 2
        again = await client.post("action", data={**form, "ids": parked[1].id, "confirm": confirm})
        assert again.status_code == 403  # spent, and for another row anyway
        assert len(await engine.parked.list("orders")) == 2
        retried = await client.post(
            "action", data={"csrf": token, "action": "retry", "poller": "orders", "scope": "all"}
        )
        assert retried.status_code == 303
        page = await client.get("key", params={"poller": "orders"})
    assert "Retried 2 parked event(s)" in page.text
    assert await engine.parked.list("orders") == []


async def test_a_named_consumers_parked_rows_show_its_name_and_retry_for_it_alone() -> None:
    engine = make_engine()
    fine: list[str] = []

    def fail(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        raise RuntimeError("the ledger is closed")

    engine.on("orders", lambda event, ctx: fine.append(event.subject))
    engine.on("orders", fail, consumer="ledger")
    await engine.tick()
    parked = await engine.parked.list("orders")
    assert [row.id.rsplit("@", 1)[1] for row in parked] == ["ledger"] * 3
    app = admin_app(engine, auth=None)
    async with client_for(app, "/") as client:
        page = await client.get("parked")
        assert page.text.count(">@ledger</span>") == 3
        token = csrf_of(page.text)
        retried = await client.post(
            "action", data={"csrf": token, "action": "retry", "poller": "orders", "scope": "all"}
        )
        assert retried.status_code == 303
    assert await engine.parked.list("orders") == []
    assert await engine.store.count_pending(PKey("orders")) == 3  # back, for "ledger" alone
    await engine.tick()
    assert len(await engine.parked.list("orders")) == 3  # it failed them again
    assert len(fine) == 3  # and the default consumer never saw them twice


# --- what the pages show ----------------------------------------------------------------


async def test_values_are_escaped_and_partition_data_is_never_shown() -> None:
    engine = make_engine(partitions=[wk.Partition(EVIL, data={"token": "tenant-credential"})])
    await engine.tick()
    app = admin_app(engine, auth=None)
    async with client_for(app) as client:
        overview = await client.get("/")
        key_page = await client.get("/key", params={"poller": "orders", "partition": EVIL})
        parked = await client.get("/parked")
    for page in (overview, key_page, parked):
        assert page.status_code == 200
        assert EVIL not in page.text
        assert "tenant-credential" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in key_page.text


async def test_the_overview_and_the_key_show_the_budget_in_use() -> None:
    budget_store = InMemoryBudgetStore()
    engine = make_engine(
        budgets={"erp": wk.Budget(requests=150, per="1s")}, budget_store=budget_store
    )
    await engine.tick()
    # Three requests' worth taken in this window, as ctx.http would have.
    await budget_store.try_take("erp", BudgetPolicy(150, 1_000), 3, engine.clock.now())
    assert (await engine.budget_usage())["erp"]["used"] == 3.0
    app = admin_app(engine, auth=None)
    async with client_for(app) as client:
        overview = await client.get("/")
        key_page = await client.get("/key", params={"poller": "orders", "partition": ""})
    text = "3 of 150 per 1.0s"
    assert text in overview.text
    assert text in key_page.text


async def test_the_overview_pages_sorts_and_filters_many_keys() -> None:
    store = wk.MemoryStore()
    names = [f"t{n:03d}" for n in range(120)]
    engine = make_engine(partitions=names, store=store)
    now = engine.clock.now()
    for index, name in enumerate(names):
        await store.save_state_unfenced(
            PKey("orders", name), {"paused": index % 40 == 0, "updated_at": now}, now
        )
    app = admin_app(engine, auth=None, page_size=50)
    async with client_for(app) as client:
        first = await client.get("/")
        last = await client.get("/", params={"page": "3"})
        found = await client.get("/", params={"q": "t11"})
        paused = await client.get("/", params={"status": "paused", "sort": "key", "desc": "1"})
    shown = re.compile(r'data-key="orders/(t\d+)"')
    assert shown.findall(first.text) == names[:50]
    assert "Page 1 of 3" in first.text
    assert shown.findall(last.text) == names[100:]
    assert shown.findall(found.text) == names[110:120]
    assert shown.findall(paused.text) == ["t080", "t040", "t000"]
    assert 'data-count="paused"><strong>3</strong>' in paused.text


async def test_mounted_under_a_prefix_every_link_and_cookie_stays_inside_it() -> None:
    engine = make_engine()
    app = Starlette(routes=[Mount("/ops/watukuy", admin_app(engine, auth=None))])
    async with client_for(app) as client:
        page = await client.get("/ops/watukuy/")
        assert page.status_code == 200
        assert 'href="/ops/watukuy/static/admin.css"' in page.text
        assert (
            'action="/ops/watukuy/action"'
            in (await client.get("/ops/watukuy/key", params={"poller": "orders"})).text
        )
        assert "Path=/ops/watukuy;" in page.headers["set-cookie"]
        key_page = await client.get("/ops/watukuy/key", params={"poller": "orders"})
        token = csrf_of(key_page.text)
        done = await client.post(
            "/ops/watukuy/action",
            data={"csrf": token, "action": "trigger", "poller": "orders", "partition": ""},
        )
    assert done.status_code == 303
    assert done.headers["location"] == "/ops/watukuy/key?poller=orders&partition="


async def test_an_unknown_key_is_not_found() -> None:
    app = admin_app(make_engine(), auth=None)
    async with client_for(app) as client:
        assert (await client.get("/key", params={"poller": "nope"})).status_code == 404
        assert (await client.get("/key")).status_code == 404
        refused = await post(client, "/key?poller=orders", action="pause", poller="nope")
    assert refused.status_code == 404


# --- a store alone --------------------------------------------------------------------------


async def test_a_store_alone_is_operated_with_the_cli_operations() -> None:
    store = wk.MemoryStore()
    engine = make_engine(store=store)
    await engine.tick()
    clock = VirtualClock()
    app = admin_app(StoreOperator(store, clock), auth=None, clock=clock)
    async with client_for(app) as client:
        overview = await client.get("/")
        assert "store only" in overview.text
        assert 'data-key="orders/"' in overview.text
        key_page = await client.get("/key", params={"poller": "orders"})
        assert "Start backfill" not in key_page.text
        paused = await post(client, "/key?poller=orders", action="pause", poller="orders")
        assert paused.status_code == 303
        assert await _paused(engine, "orders")
        refused = await post(
            client, "/key?poller=orders", action="backfill", poller="orders", **{"from": "null"}
        )
        page = await client.get(refused.headers["location"])
    assert "backfill needs the poller definitions" in page.text


async def test_held_deletes_are_confirmed_after_a_confirmation_or_discarded() -> None:
    engine = make_engine()
    await engine.tick()
    now = engine.clock.now()
    held = HeldDeletes(lane="reconcile", below=3, count=40, snapshot=50, held_at=now)
    key = PKey("orders")
    await engine.store.save_state_unfenced(key, {"held_deletes": held, "updated_at": now}, now)
    app = admin_app(engine, auth=None)
    async with client_for(app, "/") as client:
        page = await client.get("key", params={"poller": "orders"})
        assert "holds <strong>40</strong> deletes" in page.text
        asked = await post(client, "key?poller=orders", action="deletes_confirm", poller="orders")
        assert "emit the deletes" in asked.text
        assert not (await engine.deletes.held("orders") or held).confirmed
        token = csrf_of(asked.text)
        form = {"csrf": token, "poller": "orders", "partition": ""}
        await client.post(
            "action",
            data={**form, "action": "deletes_confirm", "confirm": confirm_of(asked.text)},
        )
        confirmed = await engine.deletes.held("orders")
        assert confirmed is not None
        assert confirmed.confirmed
        asked = await client.post("action", data={**form, "action": "deletes_discard"})
        assert "drop the held deletes" in asked.text
        assert await engine.deletes.held("orders") is not None  # nothing happened yet
        await client.post(
            "action",
            data={**form, "action": "deletes_discard", "confirm": confirm_of(asked.text)},
        )
        page = await client.get("key", params={"poller": "orders"})
    assert await engine.deletes.held("orders") is None
    assert "Discarded 40 held delete(s)" in page.text
    assert "Held deletes" not in page.text


async def test_the_key_shows_its_late_arrivals() -> None:
    engine = make_engine()
    await engine.tick()
    app = admin_app(engine, auth=None)
    async with client_for(app, "/") as client:
        quiet = await client.get("key", params={"poller": "orders"})
        assert "Late arrivals" in quiet.text
        assert "None found (lookback 10.0s)." in quiet.text
        now = engine.clock.now()
        late = add_lateness(
            LateArrivals(), [4_100, 61_000], lane="reconcile", window_ms=10_000, now=now
        )
        late = dataclasses.replace(late, missed=2, lost_at=now)
        await engine.store.save_state_unfenced(PKey("orders"), {"late": late}, now)
        page = await client.get("key", params={"poller": "orders"})
    text = re.sub(r"\s+", " ", page.text)
    assert '<th>late arrivals</th><td>2 <span class="muted">(reconcile 2)</span>' in text
    assert "<td>1.0m behind the watermark (p99 1.0m)</td>" in text
    assert "<th>lookback window</th><td>2.0m</td>" in text  # twice the latest, capped
    assert "<th>later than the lookback</th><td>1</td>" in text
    assert "<th>missed by the live lane</th><td>2 " in text
    assert "widen <code>overlap</code> or add <code>reconcile</code>" in text


async def test_a_backfill_starts_from_a_date() -> None:
    engine = make_engine()
    await engine.tick()
    app = admin_app(engine, auth=None)
    async with client_for(app, "/") as client:
        await post(
            client,
            "key?poller=orders",
            action="backfill",
            poller="orders",
            **{"from": "2025-12-01T00:00:00Z"},
        )
        page = await client.get("key", params={"poller": "orders"})
    assert "Backfill started from 2025-12-01T00:00:00Z." in page.text
    state = await engine.store.load_state(PKey("orders"))
    assert state is not None
    assert state.backfill is not None


class _FailingStore(wk.MemoryStore):
    """A store whose key list fails, with a secret in the driver's message."""

    fail = False

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        if self.fail:
            raise wk.StoreError("connection to postgresql://app:hunter2@db/app refused")
        return await super().list_keys(poller)


async def test_a_failing_store_answers_503_with_one_clean_line() -> None:
    store = _FailingStore()
    engine = make_engine(store=store)
    await engine.tick()
    app = admin_app(engine, auth=None)
    store.fail = True
    async with client_for(app) as client:
        for params in ({}, {"sort": "lag"}):
            page = await client.get("/", params=params)
            assert page.status_code == 503
            assert "The store did not answer" in page.text
            assert "hunter2" not in page.text


async def test_a_rows_own_button_acts_on_that_row_alone() -> None:
    engine = make_engine()

    def fail(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        raise RuntimeError("not yet")

    engine.on("orders", fail)
    await engine.tick()
    first, second, _ = await engine.parked.list("orders")
    app = admin_app(engine, auth=None)
    async with client_for(app, "/") as client:
        page = await client.get("key", params={"poller": "orders"})
        assert f'value="retry {first.id}"' in page.text
        done = await client.post(
            "action",
            data={
                "csrf": csrf_of(page.text),
                "poller": "orders",
                "partition": "",
                "ids": second.id,  # ticked, but the button of the first row was pressed
                "one": f"retry {first.id}",
            },
        )
        assert done.status_code == 303
        left = [row.id for row in await engine.parked.list("orders")]
        assert first.id not in left
        assert second.id in left
        asked = await client.post(
            "action",
            data={
                "csrf": csrf_of(page.text),
                "poller": "orders",
                "partition": "",
                "one": f"discard {second.id}",
            },
        )
    assert "Discard <strong>1</strong> parked row" in asked.text
    assert f'name="ids" value="{second.id}"' in asked.text


async def test_a_key_no_engine_polls_shows_overdue_not_ok() -> None:
    engine = make_engine()
    await engine.tick()  # polled once; due again in 30 s, and then nobody polls it
    async with client_for(admin_app(engine, auth=None), "/") as client:
        before = await client.get("")
    await engine.clock.advance("5m")  # type: ignore[attr-defined]
    # A page of its own: the first snapshot behind the filtered view is taken now.
    async with client_for(admin_app(engine, auth=None), "/") as client:
        overview = await client.get("")
        key_page = await client.get("key", params={"poller": "orders"})
        listed = await client.get("", params={"status": "overdue"})
    assert 'data-status="ok"' in before.text
    assert 'data-key="orders/" data-status="overdue"' in overview.text
    assert "overdue 4.5m" in overview.text
    assert 'class="badge s-overdue">overdue' in key_page.text
    assert "due 4.5m ago and no engine is polling it (grace 1.0m)" in key_page.text
    assert 'data-key="orders/"' in listed.text


async def test_the_key_page_says_a_token_cursor_is_caught_up() -> None:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[{"id": 1}], cursor=None)  # one page: the listing is done

    invoices = wk.define_poller(
        name="invoices", identity=lambda item: item["id"], cursor=wk.TokenCursor(), fetch=fetch
    )
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[invoices], clock=VirtualClock())
    engine.on("invoices", lambda event, ctx: None)
    async with client_for(admin_app(engine, auth=None)) as client:
        before = await client.get("/key?poller=invoices")
        await engine.tick()
        after = await client.get("/key?poller=invoices")
    assert "No cursor stored yet." in before.text
    assert re.search(r"<th>live</th><td><code[^>]*>\(caught up\)</code>", after.text)
