"""FastAPI integration: run the engine with the app, and expose its health.

::

    from fastapi import FastAPI
    from watukuy.integrations.fastapi import health_router, watukuy_lifespan

    engine = wk.Engine(store=wk.SqliteStore("watukuy.db"), pollers=[orders])

    @engine.on("orders")
    async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None: ...

    app = FastAPI(lifespan=watukuy_lifespan(engine))
    app.include_router(health_router(engine, max_lag="10m"))
    app.include_router(inspect_router(engine), dependencies=[Depends(require_operator)])

``GET /watukuy/health`` answers 200 or 503 with the status and short reasons only (no
partition keys, no error text), fit for a public probe. ``GET /watukuy/inspect`` returns
``engine.inspect()`` (partitions, lease owners, errors and their stacks): it exists only
when you include :func:`inspect_router`, and belongs behind an authentication dependency.

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

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.runtime.engine import EngineCore

from ._health import HealthCheck

__all__ = ["LifespanMode", "health_router", "inspect_router", "watukuy_lifespan"]

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
    max_parked: int | None = 0,
    ignore_invalid: bool = False,
    max_outbox: int | None = None,
    allow_open_circuit: bool = False,
    require_running: bool = False,
    detail: bool = False,
    prefix: str = "/watukuy",
) -> APIRouter:
    """The health probe: ``GET {prefix}/health``, 200 when every key is healthy, else 503.

    The body is ``{"status": "ok" | "unhealthy", "reasons": [...]}`` with short reasons per
    poller (``"orders: circuit open (3 keys)"``): no partition keys, no error text, no
    instance or lease owner names, so the route can face a load balancer or a Kubernetes
    probe. What counts (see :class:`~watukuy.integrations.HealthCheck`): an open circuit, a
    lag over ``max_lag``, more than ``max_parked`` parked rows, more than ``max_outbox``
    pending events, an outbox larger than at the previous call, or a failing
    ``inspect()``.

    Args:
        engine: The engine to report on.
        max_lag: Longest acceptable cursor lag (``"10m"``); ``None`` disables the check.
        max_parked: Parked rows a key may hold and stay healthy (default ``0``); ``None``
            disables the check.
        ignore_invalid: Count only poison events toward ``max_parked`` (a quarantined
            vendor record then does not turn the probe red).
        max_outbox: Pending events a key may hold and stay healthy (default: no limit).
        allow_open_circuit: Stay healthy while a circuit is open.
        require_running: Also require the daemon to be running (set it when the app runs
            the engine with ``watukuy_lifespan(engine, mode="daemon")``).
        detail: Answer the detailed verdict instead (partition keys, lease owners, the
            last error of each key): mount such a router behind authentication only.
        prefix: Where the route lives; ``""`` or a path starting with ``/`` and not ending
            with one.

    Returns:
        An ``APIRouter`` for ``app.include_router(...)``.

    Raises:
        ConfigError: An option is invalid.
    """
    _check_prefix(prefix)
    if not isinstance(detail, bool):
        raise ConfigError(f"expected a bool, got {detail!r}", field="detail")
    check = HealthCheck(
        engine,
        max_lag=max_lag,
        max_parked=max_parked,
        ignore_invalid=ignore_invalid,
        max_outbox=max_outbox,
        allow_open_circuit=allow_open_circuit,
        require_running=require_running,
    )
    router = APIRouter(prefix=prefix, tags=["watukuy"])

    @router.get("/health", response_model=None, summary="Health of the watukuy engine")
    async def watukuy_health() -> JSONResponse:
        result = await check.check()
        return JSONResponse(
            result.to_dict(detail=detail), status_code=200 if result.healthy else 503
        )

    return router


def inspect_router(engine: EngineCore, *, prefix: str = "/watukuy") -> APIRouter:
    """The operators' route: ``GET {prefix}/inspect`` answers ``engine.inspect()``.

    The report names partitions (often tenant ids), lease owners (host names), cursors and
    each key's last error with its stack: never mount it without authentication::

        app.include_router(inspect_router(engine), dependencies=[Depends(require_operator)])

    Errors and stacks were cleaned of secrets when they were stored (see
    ``Engine(redact=...)``); a failing ``inspect()`` answers 503 with an ``error``.

    Args:
        engine: The engine to report on.
        prefix: Where the route lives (as for :func:`health_router`).

    Returns:
        An ``APIRouter`` for ``app.include_router(...)``.

    Raises:
        ConfigError: ``prefix`` is invalid.
    """
    _check_prefix(prefix)
    router = APIRouter(prefix=prefix, tags=["watukuy"])

    @router.get("/inspect", response_model=None, summary="State of every watukuy poller")
    async def watukuy_inspect() -> JSONResponse:
        try:
            report = await engine.inspect()
        except Exception as error:
            message = engine.redaction.text(str(error))
            return JSONResponse(
                {"error": f"inspect() failed: {type(error).__name__}: {message}"}, status_code=503
            )
        return JSONResponse(dict(report))

    return router


def _check_prefix(prefix: object) -> None:
    if not isinstance(prefix, str) or (prefix and (prefix[0] != "/" or prefix[-1] == "/")):
        raise ConfigError(
            f"expected '' or a path like '/watukuy' (leading '/', no trailing '/'), got {prefix!r}",
            field="prefix",
        )
