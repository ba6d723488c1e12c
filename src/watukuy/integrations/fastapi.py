"""FastAPI integration: run the engine with the app, and expose its health.

::

    from fastapi import FastAPI
    from watukuy.integrations.fastapi import health_router, watukuy_lifespan

    engine = wk.Engine(store=wk.SqliteStore("watukuy.db"), pollers=[orders])

    @engine.on("orders")
    async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None: ...

    app = FastAPI(lifespan=watukuy_lifespan(engine))
    app.include_router(health_router(engine, max_lag="10m", require_running=True))
    app.include_router(inspect_router(engine), dependencies=[Depends(require_operator)])

``GET /watukuy/live`` (the engine's own progress: a liveness probe), ``GET /watukuy/ready``
(progress, and what needs an operator) and ``GET /watukuy/health`` (everything, lag
included: for monitoring, never a liveness probe) answer 200 or 503 with the status and
short reasons only (no partition keys, no error text), fit for a public probe.
``GET /watukuy/inspect`` returns
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

from ._health import HealthCheck, HealthResult

__all__ = ["LifespanMode", "health_router", "inspect_router", "watukuy_lifespan"]

LifespanMode = Literal["daemon", "none"]
"""How ``watukuy_lifespan`` runs the engine: as a daemon with the app, or not at all."""

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
    overdue_grace: Duration | None = None,
    detail: bool = False,
    prefix: str = "/watukuy",
) -> APIRouter:
    """The health probes: ``GET {prefix}/live``, ``{prefix}/ready`` and ``{prefix}/health``,
    each 200 when healthy, else 503.

    - ``/live`` judges the engine's own progress (see
      :meth:`~watukuy.integrations.HealthCheck.liveness`): its daemon loop stalled or
      ended, a key overdue with nobody working on it, a failing ``inspect()``, and with
      ``require_running`` a daemon that is not running. Point a Kubernetes
      ``livenessProbe`` here: a quiet vendor, an open circuit or lag never fail it.
    - ``/ready`` adds what needs an operator: an open circuit, more than ``max_parked``
      parked rows, more than ``max_outbox`` pending events, an outbox larger than at the
      previous call, held deletes, keys behind because their budget cannot keep up.
    - ``/health`` adds freshness: a lag over ``max_lag``. For monitoring and alerts.

    The body is ``{"status": "ok" | "unhealthy", "reasons": [...]}`` with short reasons per
    poller (``"orders: circuit open (3 keys)"``): no partition keys, no error text, no
    instance or lease owner names, so the routes can face a load balancer or a Kubernetes
    probe.

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
        overdue_grace: How long a key may be due with nobody working on it before it is
            overdue (default: the engine's grace, at least a minute).
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

    def checker() -> HealthCheck:
        # One per route: each keeps the outbox sizes of its own previous call.
        return HealthCheck(
            engine,
            max_lag=max_lag,
            max_parked=max_parked,
            ignore_invalid=ignore_invalid,
            max_outbox=max_outbox,
            allow_open_circuit=allow_open_circuit,
            require_running=require_running,
            overdue_grace=overdue_grace,
        )

    report, live, ready = checker(), checker(), checker()
    router = APIRouter(prefix=prefix, tags=["watukuy"])

    def answer(result: HealthResult) -> JSONResponse:
        return JSONResponse(
            result.to_dict(detail=detail), status_code=200 if result.healthy else 503
        )

    @router.get("/health", response_model=None, summary="Health of the watukuy engine")
    async def watukuy_health() -> JSONResponse:
        return answer(await report.check())

    @router.get("/live", response_model=None, summary="Whether the watukuy engine progresses")
    async def watukuy_live() -> JSONResponse:
        return answer(await live.liveness())

    @router.get("/ready", response_model=None, summary="Whether the watukuy engine is ready")
    async def watukuy_ready() -> JSONResponse:
        return answer(await ready.readiness())

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
