"""A live admin page in a real headless Chromium: the fixtures.

The site is a Starlette app mounting ``admin_app(engine, auth=...)`` at ``/watukuy``, served
by uvicorn on a free port of 127.0.0.1 from a thread with its own event loop, in which the
engine runs its daemon on a SqliteStore in ``tmp_path`` and the system clock. Two pollers
read a ``FakeApi``:

- ``orders``, partitioned (``acme``, ``globex``, ``initech``), keeps an event log, polls
  once an hour (so a trigger is visible), and its handler fails on one item of ``acme``
  until the test fixes it: one attempt, so the event parks at once;
- ``vendor`` reads an API that answers 503 to everything: its circuit opens after two
  failures and waits an hour for a probe.

Access needs the cookie ``operator=let-me-in``. The browser is Debian's: ``/usr/bin/chromium``
with ``/usr/bin/chromedriver`` (``make test`` installs them when missing and it can, with
``scripts/ensure-browser``); without them the tests fail with the command that installs them:
a browser test that skips would be counted as passing. ``WATUKUY_TEST_CHROMIUM`` and
``WATUKUY_TEST_CHROMEDRIVER`` point at a browser installed elsewhere. Screenshots go to
``.artifacts/screenshots/`` (ignored by git).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

import watukuy as wk
from watukuy._system import SystemClock
from watukuy.model.rows import PKey
from watukuy.testing import FakeApi, fake_items

T = TypeVar("T")

CHROMIUM = Path(os.environ.get("WATUKUY_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("WATUKUY_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / ".artifacts" / "screenshots"
AUTH_COOKIE = ("operator", "let-me-in")
TENANTS = ["acme", "globex", "initech"]


def _unavailable(reason: str) -> NoReturn:
    pytest.fail(f"{reason}: the browser tests must run, never skip", pytrace=False)


@dataclass
class Site:
    """The running site and the engine behind it."""

    url: str
    engine: wk.Engine
    api: FakeApi
    loop: asyncio.AbstractEventLoop
    bad_subject: str
    fixed: threading.Event = field(default_factory=threading.Event)
    delivered: list[tuple[str, str]] = field(default_factory=list)

    @property
    def admin(self) -> str:
        """The admin page's root URL (with a trailing slash)."""
        return f"{self.url}/watukuy/"

    def call(self, work: Callable[[], Coroutine[Any, Any, T]], timeout: float = 10) -> T:
        """Run a coroutine in the site's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work(), self.loop).result(timeout)

    def state(self, poller: str, partition: str = "") -> Any:
        """The stored state of a key."""
        return self.call(lambda: self.engine.store.load_state(PKey(poller, partition)))


def _build(db: Path) -> tuple[wk.Engine, FakeApi, str, list[tuple[str, str]], threading.Event]:
    clock = SystemClock()
    items = fake_items(4, start=clock.now() - 3_600_000)
    api = FakeApi(clock, items=items)
    broken = FakeApi(clock, items=fake_items(2))
    broken.fail_next(503, times=1_000_000)
    bad = items[1]["id"]
    delivered: list[tuple[str, str]] = []
    fixed = threading.Event()

    async def fetch_orders(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page = api.list_since(ctx.cursor.value, ctx.cursor.tie_break, limit=50)
        return wk.Page(page.data, has_more=page.has_more)

    async def fetch_vendor(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page = broken.list_since(ctx.cursor.value, ctx.cursor.tie_break, limit=50)
        return wk.Page(page.data, has_more=page.has_more)

    orders = wk.define_poller(
        name="orders",
        fetch=fetch_orders,
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        partitions=lambda: TENANTS,
        schedule=wk.Schedule(min="1h", max="1h", adaptive=False, jitter=0),
        delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
        log=wk.EventLog(retention="1d"),
    )
    vendor = wk.define_poller(
        name="vendor",
        fetch=fetch_vendor,
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        schedule=wk.Schedule(
            min="100ms", max="200ms", jitter=0, backoff=wk.Backoff(base="50ms", max="100ms")
        ),
        circuit=wk.Circuit(failures=2, probe_every="1h"),
    )
    engine = wk.Engine(store=wk.SqliteStore(str(db)), pollers=[orders, vendor], instance_id="web-1")

    def on_order(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.partition == "acme" and event.subject == bad and not fixed.is_set():
            raise RuntimeError("the warehouse rejected the order (api_key=sk_live_not_shown)")
        delivered.append((event.partition, event.subject))

    engine.on("orders", on_order)
    engine.on("vendor", lambda event, ctx: None)
    return engine, api, bad, delivered, fixed


async def serve(app: Any) -> tuple[Any, asyncio.Future[None], int]:
    """``app`` served by uvicorn on a free port of 127.0.0.1, in the running loop: the
    server (set ``should_exit`` to stop it), the future of its serving, and the port."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    server = uvicorn.Server(
        uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
    )
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return server, serving, sock.getsockname()[1]


@contextlib.contextmanager
def in_a_thread(
    name: str,
    start: Callable[[], Coroutine[Any, Any, T]],
    stop: Callable[[T], Coroutine[Any, Any, None]],
) -> Iterator[T]:
    """``start()`` in the event loop of a thread of its own; yields what it returned, and
    runs ``stop(it)`` in that loop on the way out. A failing start is raised here."""
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        started = await start()
        done = asyncio.Event()
        holder.update(started=started, done=done, loop=asyncio.get_running_loop())
        ready.set()
        await done.wait()
        await stop(started)

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as error:  # surfaced below
            holder["error"] = error
            ready.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    assert ready.wait(30), f"{name} did not start"
    if "error" in holder:
        raise holder["error"]
    try:
        yield holder["started"]
    finally:
        holder["loop"].call_soon_threadsafe(holder["done"].set)
        thread.join(15)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The admin page of a running engine, on a free port of 127.0.0.1."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from watukuy.integrations.admin import admin_app

    db = tmp_path_factory.mktemp("admin") / "watukuy.db"

    def authorised(request: Any) -> bool:
        return bool(request.cookies.get(AUTH_COOKIE[0]) == AUTH_COOKIE[1])

    async def start() -> tuple[Site, Any, asyncio.Future[None]]:
        engine, api, bad, delivered, fixed = _build(db)
        app = Starlette(
            routes=[Mount("/watukuy", admin_app(engine, auth=authorised, refresh="1s"))]
        )
        await engine.start()
        server, serving, port = await serve(app)
        site = Site(
            url=f"http://127.0.0.1:{port}",
            engine=engine,
            api=api,
            loop=asyncio.get_running_loop(),
            bad_subject=bad,
            fixed=fixed,
            delivered=delivered,
        )
        return site, server, serving

    async def stop(started: tuple[Site, Any, asyncio.Future[None]]) -> None:
        site, server, serving = started
        server.should_exit = True
        await serving
        await site.engine.stop(drain=False)
        await site.engine.store.close()

    with in_a_thread("admin-site", start, stop) as (site, _, _):
        yield site


def chromium(*arguments: str) -> Any:
    """A headless Chromium driver with extra command-line ``arguments`` (skips, or fails
    under ``CI=true``, when Chromium, chromedriver or selenium is missing)."""
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        _unavailable(
            f"no Chromium at {CHROMIUM} with its driver at {CHROMEDRIVER}: run "
            "scripts/ensure-browser (as root: apt-get install -y chromium chromium-driver), "
            "or set WATUKUY_TEST_CHROMIUM and WATUKUY_TEST_CHROMEDRIVER"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed (it is in the dev dependency group)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        *arguments,
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(20)
    return driver


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Any]:
    """Headless Chromium at 1280x800, already holding the auth cookie."""
    driver = chromium("--window-size=1280,800", "--hide-scrollbars")
    try:
        # A cookie can be set only on a page of its site: the refused page is one.
        driver.get(site.admin)
        driver.add_cookie({"name": AUTH_COOKIE[0], "value": AUTH_COOKIE[1], "path": "/"})
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """Where the tests save their screenshots."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
