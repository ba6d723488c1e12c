"""Calling a poller's ``fetch``: one page at a time, each call in a task of its own.

A lane cycle asks :class:`PageSource` for its pages whatever shape ``fetch`` has (a
coroutine function, an async generator, a plain function), and starts each request as a
:class:`Fetch`, so the request of the next page can travel while the page before it
commits (see :meth:`watukuy.runtime.lane.LaneCycle.run`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from watukuy.model.errors import NotModifiedError
from watukuy.model.http_port import HttpObservations
from watukuy.model.page import Page, coerce_page
from watukuy.model.ports import Clock, Offload

from .context import FetchContext

__all__ = ["UNCHANGED", "Fetch", "PageSource"]

UNCHANGED: Page[Any] = Page(items=(), has_more=False)
"""The page a ``304 Not Modified`` stands for: nothing new, the cursor keeps its place."""


class PageSource:
    """Calls ``fetch`` in whichever shape it has: coroutine, async generator, or plain.

    Args:
        fetch: The poller's (or its reconcile lane's) ``fetch``.
        offload: Runs a plain ``def fetch`` off the event loop (the engine's ``Offload``).
    """

    def __init__(self, fetch: Callable[[Any], Any], offload: Offload) -> None:
        self._fetch = fetch
        self._offload = offload
        self._native = inspect.iscoroutinefunction(fetch) or inspect.isasyncgenfunction(fetch)
        self._generator: AsyncIterator[Any] | None = None
        self.is_generator = False
        """``fetch`` turned out to be an async generator: its pages come from its first
        call, and the cycle ends when it is exhausted."""

    async def next(self, ctx: FetchContext[Any]) -> Page[Any] | None:
        """The next page, or ``None`` once a generator is exhausted."""
        if self._generator is not None:
            try:
                return coerce_page(await anext(self._generator))
            except StopAsyncIteration:
                return None
        if self._native:
            result = self._fetch(ctx)
        else:
            result = await self._offload.run(self._fetch, ctx)
        if hasattr(result, "__anext__"):
            self._generator = result
            self.is_generator = True
            return await self.next(ctx)
        if inspect.isawaitable(result):
            result = await result
        return coerce_page(result)

    async def aclose(self) -> None:
        """Close the generator, if ``fetch`` is one and it was started."""
        generator, self._generator = self._generator, None
        if generator is not None:
            aclose = getattr(generator, "aclose", None)
            if aclose is not None:
                await aclose()


SENDING_PATIENCE_MS = 100
"""How long a lane waits for the request asked ahead to go out before it works on the page
before anyway (a request's own hops take a few milliseconds)."""


class Fetch:
    """One call of ``fetch``, running in a task of its own from the moment it is made.

    Args:
        ctx: What ``fetch`` receives.
        observations: What the page's HTTP responses recorded (validators, ``304``).
        source: Where the page comes from.
        clock: The engine's clock (the call's duration).
        sent: Resolved by ``ctx.http`` when its request goes out (see :meth:`sending`);
            ``None`` when nothing will resolve it.
    """

    def __init__(
        self,
        ctx: FetchContext[Any],
        observations: HttpObservations,
        source: PageSource,
        clock: Clock,
        sent: asyncio.Future[None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.observations = observations
        self._clock = clock
        self._started = clock.now()
        self._sent = sent
        self.duration_ms = 0
        self.task: asyncio.Future[Page[Any] | None] = asyncio.ensure_future(self._run(source))

    async def sending(self) -> None:
        """Wait until the call's request is on its way, then leave it to travel.

        Until then the request is CPU work and store reads of its own (building the URL,
        reading stored validators, opening a connection), each a hop through the event loop:
        a lane that went straight back to a long stretch of work on the page before would
        delay every hop by a stretch, and so the whole request. Returns at once when nothing
        tells when the request goes out (``fetch`` does not use ``ctx.http``, or the
        previous page's did not), and when the call ends first (a failure, a page that
        needed no request).
        """
        sent = self._sent
        if sent is None or sent.done() or self.task.done():
            return
        # Bounded: a ``fetch`` that waits, before its request, for something the page before
        # brings about (its commit, its delivery) would otherwise wait for the lane, and the
        # lane for it. After the patience the lane goes on and the request travels late.
        patience = asyncio.ensure_future(self._clock.sleep(SENDING_PATIENCE_MS))
        try:
            await asyncio.wait((sent, self.task, patience), return_when=asyncio.FIRST_COMPLETED)
        finally:
            patience.cancel()

    async def _run(self, source: PageSource) -> Page[Any] | None:
        try:
            return await source.next(self.ctx)
        except NotModifiedError:
            if not self.observations.not_modified:
                raise  # not this page's own 304: a failure like any other
            # `fetch` read the body of this page's 304: the page is as it was, which is
            # what a fetch that checks `response.not_modified` says.
            return UNCHANGED
        finally:
            self.duration_ms = self._clock.now() - self._started

    async def drop(self) -> None:
        """Cancel the call if it still runs; whatever it returns or raises is ignored."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
