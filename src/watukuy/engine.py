"""``watukuy.Engine``: the engine with real-world defaults.

:class:`~watukuy.runtime.engine.EngineCore` takes every dependency explicitly; this subclass
fills in the system clock, process randomness, an httpx-based ``ctx.http`` and an instance
id made of host name and process id, and adds :meth:`Engine.run`, the blocking daemon with
SIGINT/SIGTERM handling.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._system import SystemClock, SystemRandom, ThreadOffload
from .model.durations import Duration
from .model.errors import ConfigError
from .model.logs import Logger
from .model.options import Budget, _positive_int
from .model.ports import BudgetStore, Clock, Random, StateStore
from .model.redact import Redaction
from .runtime.engine import EngineCore
from .runtime.poller import PollerDefinition
from .runtime.results import LeaseOptions

if TYPE_CHECKING:
    import httpx

    from .http import HttpxFactory

__all__ = ["Engine"]


def default_instance_id() -> str:
    """``<host>-<pid>-<random>``: unique per process, readable in ``inspect()``."""
    # os.urandom is what secrets.token_hex reads; importing secrets (hmac, base64 and
    # random with it) would add milliseconds to every start for three bytes.
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"


def _http_factory(
    factory: type[HttpxFactory],
    client: httpx.AsyncClient | None,
    redaction: Redaction,
    max_in_flight: int,
) -> HttpxFactory:
    """The engine's HTTP factory, its bound checked under the engine's own option name."""
    bound = _positive_int(max_in_flight, "http_max_in_flight")
    return factory(client, redaction=redaction, max_in_flight=bound)


class Engine(EngineCore):
    """The watukuy engine: pollers, a store, and the loop that runs whatever is due.

    The arguments below are documented here only: :class:`~watukuy.runtime.engine.EngineCore`
    takes the same ones with every dependency explicit, and documents what differs.

    Example::

        engine = wk.Engine(store=wk.SqliteStore("watukuy.db"), pollers=[orders])

        @engine.on("orders")
        async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None: ...

        async with engine:          # start() ... stop(drain=True)
            ...
        engine.run()                # or: a blocking daemon that stops on SIGINT/SIGTERM
        await engine.tick()         # or: one pass, for cron and serverless

    Args:
        store: Where all state lives (``MemoryStore``, ``SqliteStore``, ``PostgresStore``,
            ``RedisStore``, or any ``StateStore``).
        pollers: Definitions from ``define_poller`` (a list, or a mapping whose keys equal
            the names).
        budgets: Named rate budgets, ``{"erp": Budget(requests=100, per="1m")}``.
        budget_store: Where budget windows live; ``RedisBudgetStore`` shares them across
            processes (default: in this process).
        instance_id: This process's id in leases and ``inspect()`` (default
            ``<host>-<pid>-<random>``).
        clock: Time (default the system clock; ``VirtualClock`` in tests).
        random: Randomness for jitter (default process randomness; ``SeededRandom`` in tests).
        hooks: A hook set (an object with any ``on_*`` methods) or a list of them.
        lease: Lease TTL and renewal (``LeaseOptions(ttl="30s")`` or a dict).
        http_client: The ``httpx.AsyncClient`` behind ``ctx.http`` (default: one created
            lazily and closed by ``stop()``).
        http_max_in_flight: The engine's requests in the client's pool at once, the
            others waiting in the order they were granted their budget (default 20:
            200 requests a second from a vendor answering in 100 ms). Raise it for a slow
            vendor: a budget can only be used as fast as answers come back.
        dispatch_batch_size: Outbox rows loaded per dispatcher batch (1,000, about a
            page: delivering a batch then takes long enough to hide the next read).
        max_concurrent_keys: Keys the daemon runs at once (default: no limit).
        tick_concurrency: Keys ``tick()`` runs at once.
        resync_every: How often the daemon asks the store's due index which keys wake
            soon, to notice changes made by other processes (each resync also re-reads a
            few keys' state in turn, a rolling audit).
        auto_migrate: Run ``store.migrate()`` once before the first pass.
        fair_share_spread: Upper bound of a random delay the daemon adds before it looks at
            a key again, so that replicas on one store share keys evenly (default: a tenth
            of ``schedule.min``, at most 500 ms; ``0`` turns it off). A poll's delay is drawn
            under the top of its jitter band, ``interval * (1 + schedule.jitter)`` after the
            last run's start less a 200 ms planning allowance, never past it.
        redact: What counts as a secret in errors, logs, hook records and routes: a
            :class:`~watukuy.Redaction` (extra names, allowed names, literal values,
            patterns) or a list of extra header / parameter names. User info in URLs and
            the built-in names (``authorization``, ``api_key``, ``*token*``, ...) are
            always masked; see
            https://watukuy.readthedocs.io/en/latest/security/#what-is-cleaned-and-where.
        logger: Where the engine logs: a ``logging.Logger`` or ``LoggerAdapter`` (default
            the ``"watukuy"`` logger). Whatever it is, the engine's lines reach it cleaned of
            secrets; every line about one key starts with ``[poller]`` (``[poller/partition]``
            for a partition) and carries ``poller`` and ``partition`` fields.
            :func:`~watukuy.silent_logger` drops everything; see
            https://watukuy.readthedocs.io/en/latest/observability/.
        source_prefix: The start of every event's ``source`` for pollers that do not set
            their own: ``source_prefix="urn:acme:crm:"`` makes the poller ``orders`` emit
            ``source="urn:acme:crm:orders"`` (default ``urn:watukuy:``). The source is part
            of every event id, so changing it on a running deployment changes the ids of
            what is observed from then on (see
            https://watukuy.readthedocs.io/en/latest/delivery/).

    Raises:
        ConfigError: Invalid configuration, naming the field and value.
    """

    def __init__(
        self,
        *,
        store: StateStore,
        pollers: Sequence[PollerDefinition[Any]] | Mapping[str, PollerDefinition[Any]],
        budgets: Mapping[str, Budget] | None = None,
        budget_store: BudgetStore | None = None,
        instance_id: str | None = None,
        clock: Clock | None = None,
        random: Random | None = None,
        hooks: object | Sequence[object] | None = None,
        lease: LeaseOptions | Mapping[str, Any] | None = None,
        http_client: httpx.AsyncClient | None = None,
        http_max_in_flight: int = 20,
        dispatch_batch_size: int = 1000,
        max_concurrent_keys: int | None = None,
        tick_concurrency: int = 4,
        resync_every: Duration = "15s",
        auto_migrate: bool = True,
        fair_share_spread: Duration | None = None,
        redact: Redaction | Sequence[str] | None = None,
        logger: Logger | None = None,
        source_prefix: str | None = None,
    ) -> None:
        if isinstance(lease, Mapping):
            try:
                lease = LeaseOptions(**lease)
            except TypeError as error:
                raise ConfigError(str(error), field="lease") from error
        if lease is not None and not isinstance(lease, LeaseOptions):
            raise ConfigError(f"expected LeaseOptions or a dict, got {lease!r}", field="lease")
        redaction = Redaction.coerce(redact)
        # httpx (and with it ``ctx.http``) is imported by the first engine, not by ``import
        # watukuy``: a process that only inspects a store or prints --help never needs it.
        from .http import HttpxFactory

        check_skew = clock is None or isinstance(clock, SystemClock)
        super().__init__(
            store=store,
            pollers=pollers,
            clock=clock or SystemClock(),
            random=random or SystemRandom(),
            offload=ThreadOffload(),
            budgets=budgets,
            budget_store=budget_store,
            instance_id=instance_id or default_instance_id(),
            hooks=hooks,
            lease=lease,
            http=_http_factory(HttpxFactory, http_client, redaction, http_max_in_flight),
            dispatch_batch_size=dispatch_batch_size,
            max_concurrent_keys=max_concurrent_keys,
            tick_concurrency=tick_concurrency,
            resync_every=resync_every,
            auto_migrate=auto_migrate,
            fair_share_spread=fair_share_spread,
            redact=redaction,
            logger=logger,
            source_prefix=source_prefix,
        )
        self._check_skew = check_skew

    async def serve(self, stop_timeout: Duration = "30s") -> None:
        """Start, run until SIGINT or SIGTERM, then ``stop(drain=True)``."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):  # not the main thread, or Windows
                pass
        await self.start()
        try:
            await stop.wait()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self.stop(drain=True, timeout=stop_timeout)

    def run(self, stop_timeout: Duration = "30s") -> None:
        """Blocking daemon (like ``uvicorn.run``): polls until SIGINT/SIGTERM, then drains
        in-flight work for up to ``stop_timeout`` and returns."""
        asyncio.run(self.serve(stop_timeout))
