"""One snapshot diff cycle in a process of its own, for the snapshot scenario.

Usage (the harness starts it)::

    python -m bench.scale.snapshot_child --store sqlite --store-url /tmp/x/snapshot.db \\
        --api http://127.0.0.1:PORT --page-size 1000 --phase initial

``--phase initial`` runs the first cycle over an empty store (every item is created and
delivered to a no-op handler); ``--phase again`` triggers the key and runs the next cycle.
The cycle is one ``engine.tick()``. The last line on stdout is a JSON object: ``phase``,
``seconds`` (wall time of the tick), ``items``, ``events``, ``delivered``, ``pages``,
``error``, and ``vm_hwm_kb`` / ``vm_rss_kb`` read from ``/proc/self/status`` at the end
(``VmHWM`` is the peak resident set of the process's whole life).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import watukuy as wk

__all__ = ["main", "proc_status_kb"]


def proc_status_kb(pid: int | str = "self") -> dict[str, int]:
    """``VmHWM`` and ``VmRSS`` (kB) of a process, from ``/proc/<pid>/status``."""
    values: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return values
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            values[name] = int(rest.split()[0])
    return values


def _store(kind: str, url: str, namespace: str) -> wk.SqliteStore | wk.PostgresStore:
    if kind == "sqlite":
        return wk.SqliteStore(url)
    return wk.PostgresStore(url, schema=namespace)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale.snapshot_child", description=__doc__
    )
    parser.add_argument("--store", choices=("sqlite", "postgres"), required=True)
    parser.add_argument("--store-url", required=True, help="SQLite path or PostgreSQL URL")
    parser.add_argument("--namespace", default="public", help="PostgreSQL schema")
    parser.add_argument("--api", required=True)
    parser.add_argument("--page-size", type=int, default=1_000)
    parser.add_argument("--phase", choices=("initial", "again"), required=True)
    return parser


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    api = args.api.rstrip("/")
    size = args.page_size
    pages = 0

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        nonlocal pages
        pages += 1
        response = await ctx.http.get(
            f"{api}/items/page", params={"page": ctx.page, "page_size": size}
        )
        body = response.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    poller: wk.PollerDefinition[dict[str, Any]] = wk.define_poller(
        name="catalog",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="1h", max="2h"),
        max_pages_per_cycle=1_000_000,
    )
    store = _store(args.store, args.store_url, args.namespace)
    engine = wk.Engine(store=store, pollers=[poller], instance_id=f"snapshot-{args.phase}")
    delivered = 0

    @engine.on(poller)
    async def count(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        nonlocal delivered
        delivered += 1

    await engine.migrate()
    if args.phase == "again":
        await engine.trigger(poller.name)
    started = time.perf_counter()
    result = await engine.tick()
    seconds = time.perf_counter() - started
    await engine.stop()
    await store.close()
    cycles = [r for r in result.polled if r.lane == "live"]
    cycle = cycles[0] if cycles else None
    return {
        "phase": args.phase,
        "seconds": seconds,
        "items": cycle.items if cycle else 0,
        "events": cycle.events if cycle else 0,
        "delivered": delivered,
        "pages": pages,
        "error": cycle.error if cycle else "the key did not run",
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run one cycle and print its JSON summary; returns the exit status."""
    args = _parser().parse_args(argv)
    summary = asyncio.run(_run(args))
    status = proc_status_kb()
    summary["vm_hwm_kb"] = status.get("VmHWM", 0)
    summary["vm_rss_kb"] = status.get("VmRSS", 0)
    print(json.dumps(summary), flush=True)
    return 0 if summary["error"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
