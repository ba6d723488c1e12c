"""``python -m watukuy.testing.fake_api``: serve a fake API until the process is stopped."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Sequence

from watukuy.model.durations import parse_duration
from watukuy.model.errors import ConfigError

from ._api import FakeApi
from ._items import fake_items

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m watukuy.testing.fake_api",
        description="Serve a scriptable fake vendor API over HTTP until stopped. The first "
        "line on stdout is its URL; drive it with watukuy.testing.FakeApiClient.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--items", type=int, default=20, help="items per tenant (default 20)")
    parser.add_argument(
        "--tenants", type=int, default=0, help="extra tenants t1..tK, each with --items items"
    )
    parser.add_argument("--latency", default="0ms", help="delay per request, e.g. 50ms")
    parser.add_argument("--page-size", type=int, default=100, help="default page size")
    parser.add_argument("--etags", action="store_true", help="send ETags and answer 304")
    return parser


async def _serve(api: FakeApi, host: str, port: int) -> None:
    server = await api.serve(host, port)
    print(server.url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, serve, and return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("items", "tenants", "port"):
        if getattr(args, name) < 0:
            parser.error(f"--{name}: expected a non-negative integer, got {getattr(args, name)}")
    try:
        latency = parse_duration(args.latency, "--latency")
        items = fake_items(args.items)
        api = FakeApi(
            items=items,
            page_size=args.page_size,
            tenants={f"t{i}": items for i in range(1, args.tenants + 1)},
        )
    except ConfigError as error:
        parser.error(str(error))
    api.set_latency(f"{latency}ms")
    api.set_etags(args.etags)
    try:
        asyncio.run(_serve(api, args.host, args.port))
    except OSError as error:
        parser.exit(1, f"fake_api: cannot serve on {args.host}:{args.port}: {error}\n")
    return 0
