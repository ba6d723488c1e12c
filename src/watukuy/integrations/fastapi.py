"""FastAPI integration: run the engine with the app, and expose its health.

::

    from fastapi import FastAPI
    from watukuy.integrations.fastapi import health_router, watukuy_lifespan

    engine = wk.Engine(store=wk.SqliteStore("watukuy.db"), pollers=[orders])

    @engine.on("orders")
    async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None: ...

    app = FastAPI(lifespan=watukuy_lifespan(engine))
    app.include_router(health_router(engine, max_lag="10m"))

``GET /watukuy/health`` answers 200 or 503 with a reason per (poller, partition);
``GET /watukuy/inspect`` returns ``engine.inspect()``. Both expose operational details
(cursors, errors, lease owners): mount them where only operators can reach them.

Handlers are attached with ``@engine.on(...)`` where the engine is defined, before the app
starts; FastAPI's dependency injection is request-scoped, so there is nothing for a
decorator of its own to add. Needs ``pip install 'watukuy[fastapi]'``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

try:
    from fastapi import APIRouter
    from fastapi.responses import JSONResponse
except ImportError as _error:  # pragma: no cover - exercised in a child process
    raise ImportError(
        "watukuy.integrations.fastapi needs FastAPI: pip install 'watukuy[fastapi]'"
    ) from _error

from watukuy.core.durations import Duration, parse_duration
from watukuy.core.engine import EngineCore
from watukuy.core.errors import ConfigError

from ._health import HealthCheck

__all__ = ["LifespanMode", "health_router", "watukuy_lifespan"]

LifespanMode = Literal["daemon", "none"]

AppT = TypeVar("AppT")
StateT = TypeVar("StateT")

_MODES: tuple[LifespanMode, ...] = ("daemon", "none")


@overload
def watukuy_lifespan(
    engine: EngineCore,
    mode: LifespanMode = "daemon",
    *,
    lifespan: None = None,
    drain: bool = True,
    stop_timeout: Duration = "30s",
) -> Callable[[AppT], AbstractAsyncContextManager[None]]: ...


@overload
def watukuy_lifespan(
    engine: EngineCore,
    mode: LifespanMode = "daemon",
    *,
    lifespan: Callable[[AppT], AbstractAsyncContextManager[StateT]],
    drain: bool = True,
    stop_timeout: Duration = "30s",
) -> Callable[[AppT], AbstractAsyncContextManager[StateT]]: ...


def watukuy_lifespan(
    engine: EngineCore,
    mode: LifespanMode = "daemon",
    *,
    lifespan: Callable[[Any], AbstractAsyncContextManager[Any]] | None = None,
    drain: bool = True,
    stop_timeout: Duration = "30s",
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    """A lifespan that starts the engine with the app and stops it on shutdown.

    Use it as ``FastAPI(lifespan=watukuy_lifespan(engine))``. To keep a lifespan of your
    own, pass it as ``lifespan=``: it is entered first and left last, so whatever it sets up
    (database pools, clients your handlers use) outlives the engine. Whatever it yields is
    passed through as the lifespan state. The returned factory is also an ordinary async
    context manager factory: ``async with watukuy_lifespan(engine)(app): ...`` inside a
    lifespan you write yourself works as well.

    Args:
        engine: The engine to run.
        mode: ``"daemon"`` calls ``engine.start()`` at startup and ``engine.stop()`` at
            shutdown. ``"none"`` leaves the engine alone, for apps that drive it with
            ``engine.tick()`` (a cron endpoint, a serverless deployment) but still want
            the health routes.
        lifespan: Your own lifespan, wrapped around the engine's.
        drain: Let in-flight work finish on shutdown (up to ``stop_timeout``). Shutdown
            caused by an error never drains.
        stop_timeout: Longest wait for in-flight work at shutdown.

    Returns:
        ``(app) -> async context manager``, what ``FastAPI(lifespan=...)`` expects.

    Raises:
        ConfigError: ``mode`` or ``stop_timeout`` is invalid.
    """
    if mode not in _MODES:
        raise ConfigError(f"expected 'daemon' or 'none', got {mode!r}", field="mode")
    parse_duration(stop_timeout, "stop_timeout")
    if not isinstance(drain, bool):
        raise ConfigError(f"expected a bool, got {drain!r}", field="drain")

    async def stop(
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        await engine.stop(drain=drain and exc_type is None, timeout=stop_timeout)
        return False

    @asynccontextmanager
    async def run(app: Any) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            state = None
            if lifespan is not None:
                state = await stack.enter_async_context(lifespan(app))
            if mode == "daemon":
                await engine.start()
                stack.push_async_exit(stop)
            yield state

    return run


def health_router(
    engine: EngineCore,
    *,
    max_lag: Duration | None = None,
    allow_open_circuit: bool = False,
    require_running: bool = False,
    prefix: str = "/watukuy",
) -> APIRouter:
    """Routes that report on the engine: ``GET {prefix}/health`` and ``GET {prefix}/inspect``.

    ``/health`` answers 200 when every key is healthy and 503 otherwise, with a JSON body
    listing the reasons (see :class:`~watukuy.integrations.HealthCheck`): an open circuit,
    a lag over ``max_lag``, anything parked, an outbox larger than at the previous call, or
    a failing ``inspect()``. ``/inspect`` answers the ``inspect()`` report (503 with an
    ``error`` when the store cannot be read).

    Args:
        engine: The engine to report on.
        max_lag: Longest acceptable cursor lag (``"10m"``); ``None`` disables the check.
        allow_open_circuit: Stay healthy while a circuit is open.
        require_running: Also require the daemon to be running (set it when the app runs
            the engine with ``watukuy_lifespan(engine, mode="daemon")``).
        prefix: Where the routes live; ``""`` or a path starting with ``/`` and not ending
            with one.

    Returns:
        An ``APIRouter`` for ``app.include_router(...)``.

    Raises:
        ConfigError: An option is invalid.
    """
    if not isinstance(prefix, str) or (prefix and (prefix[0] != "/" or prefix[-1] == "/")):
        raise ConfigError(
            f"expected '' or a path like '/watukuy' (leading '/', no trailing '/'), got {prefix!r}",
            field="prefix",
        )
    check = HealthCheck(
        engine,
        max_lag=max_lag,
        allow_open_circuit=allow_open_circuit,
        require_running=require_running,
    )
    router = APIRouter(prefix=prefix, tags=["watukuy"])

    @router.get("/health", response_model=None, summary="Health of the watukuy engine")
    async def watukuy_health() -> JSONResponse:
        result = await check.check()
        return JSONResponse(result.to_dict(), status_code=200 if result.healthy else 503)

    @router.get("/inspect", response_model=None, summary="State of every watukuy poller")
    async def watukuy_inspect() -> JSONResponse:
        try:
            report = await engine.inspect()
        except Exception as error:
            return JSONResponse(
                {"error": f"inspect() failed: {type(error).__name__}: {error}"}, status_code=503
            )
        return JSONResponse(dict(report))

    return router
