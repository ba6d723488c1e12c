"""The engine's side: one ``tick()`` in a fresh process, the way cron or a serverless
function runs it.

``sync``: a ``TimestampCursor`` poller over the vendor's keyset listing (that of
``--shape``, read as the floor reads it) through ``ctx.http`` (the engine's default
client), a no-op handler, ``trigger()`` then one ``tick()``: the lane walks the listing
from the stored cursor and the handler gets every new event in the same pass.
``--no-handler`` leaves the events pending (for ``dispatch``); ``--no-prefetch`` asks for
each page only once the page before it is committed.

``dispatch``: the same engine with a no-op handler and nothing due: one ``tick()`` delivers
what the outbox holds; the in-process seconds of that tick are reported.

It prints one JSON line: items, events, pending events left, the tick's seconds.

Run: ``python -m bench.http.engine_child sync --url http://127.0.0.1:PORT --sqlite e.db``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

import orjson

import watukuy as wk

from ._workload import PAGE_SIZE, SHAPES, Shape

POLLER = "orders"


def poller(
    url: str, shape: Shape, *, prefetch: bool = True, overlap: str | None = None
) -> wk.PollerDefinition[Any]:
    """The poller every run uses, over the listing of ``shape`` (``overlap``: the cursor's,
    ``None`` for the default late-commit lookback)."""

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        params: dict[str, Any] = {"limit": PAGE_SIZE}
        if ctx.cursor.value is not None:
            params[shape.since] = ctx.cursor.value
        if ctx.cursor.tie_break is not None:
            params[shape.after] = ctx.cursor.tie_break
        body = (await ctx.http.get(f"{url}/orders", params=params)).json()
        return wk.Page(items=body[shape.items], has_more=body["has_more"])

    return wk.define_poller(
        name=POLLER,
        identity=lambda order: order["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=overlap),
        fetch=fetch,
        # Never due on its own: ``sync`` triggers it, ``dispatch`` leaves it alone.
        schedule=wk.Schedule(min="1h", max="2h"),
        max_pages_per_cycle=10_000,
        prefetch=prefetch,
    )


def store(args: Any) -> Any:
    if args.sqlite:
        return wk.SqliteStore(args.sqlite)
    return wk.PostgresStore(args.postgres, schema=args.schema)


async def run(args: Any) -> dict[str, Any]:
    definition = poller(
        args.url, SHAPES[args.shape], prefetch=not args.no_prefetch, overlap=args.overlap
    )
    the_store = store(args)
    engine = wk.Engine(
        store=the_store,
        pollers=[definition],
        instance_id="bench",
        # The engine's own default unless the run asks for another batch size.
        **({} if args.dispatch_batch is None else {"dispatch_batch_size": args.dispatch_batch}),
    )
    delivered = 0

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        nonlocal delivered
        delivered += 1

    if args.mode == "dispatch" or not args.no_handler:
        engine.on(POLLER, handler)
    try:
        if args.mode == "sync":
            await engine.trigger(POLLER)
        started = time.perf_counter()
        result = await engine.tick()
        seconds = time.perf_counter() - started
        errors = [str(r.error) for r in result.polled if r.error is not None]
        if errors:
            raise RuntimeError(f"tick failed: {errors}")
        pending = await engine.store.count_pending(wk_key())
    finally:
        await engine.stop()
        await the_store.close()
    return {
        "items": sum(r.items for r in result.polled),
        "events": sum(r.events for r in result.polled),
        "delivered": delivered,
        "pending": pending,
        "tick_s": seconds,
    }


def wk_key() -> Any:
    from watukuy.model.rows import PKey

    return PKey(POLLER)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options, as :func:`run` takes them."""
    parser = argparse.ArgumentParser(prog="python -m bench.http.engine_child")
    parser.add_argument("mode", choices=("sync", "dispatch"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--sqlite")
    parser.add_argument("--postgres")
    parser.add_argument("--schema", default="bench_http_engine")
    parser.add_argument("--no-handler", action="store_true")
    parser.add_argument("--no-prefetch", action="store_true", help="poll with prefetch=False")
    parser.add_argument("--dispatch-batch", type=int)
    parser.add_argument(
        "--overlap",
        help="the cursor's overlap, e.g. 0 for no lookback (default: the late-commit lookback)",
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default="asyncio")
    args = parser.parse_args(argv)
    # Without a handler the engine warns once; the table does not need it.
    logging.getLogger("watukuy").setLevel(logging.ERROR)
    return args


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run one tick, print the figures."""
    sys.stdout.write(orjson.dumps(asyncio.run(run(parse(argv)))).decode() + "\n")


if __name__ == "__main__":
    main()
