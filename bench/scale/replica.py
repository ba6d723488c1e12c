"""One replica of the scale harness: a daemon on a shared store, polling a served FakeApi.

Usage (the harness starts it; see ``--help``)::

    python -m bench.scale.replica --store postgres --store-url URL --namespace wk_scale_x \\
        --api http://127.0.0.1:PORT --instance r1 --partitions 300 --events r1.jsonl

The protocol with the harness: the replica prints ``ready`` once its store answers, waits
for a line on stdin, then runs ``engine.serve()`` until SIGTERM (it drains and exits 0) or
until it is killed.

Every fetch sends ``x-client-id`` (the instance id), ``x-scale-run`` (one id per lane cycle
of a key) and ``x-scale-sent`` (epoch ms when the request left), so the API's request log
shows which process polled which key, and when. Every delivered event is appended to the
``--events`` file as a JSON line ``[partition, subject, version, type]`` before the handler
returns, so the record survives a SIGKILL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Sequence
from typing import IO, Any

import watukuy as wk

__all__ = ["main", "make_store"]


def make_store(kind: str, url: str, namespace: str) -> wk.PostgresStore | wk.RedisStore:
    """The shared store: a PostgreSQL schema or a Redis key prefix of this run."""
    if kind == "postgres":
        return wk.PostgresStore(url, schema=namespace)
    if kind == "redis":
        return wk.RedisStore.from_url(url, prefix=namespace)
    raise ValueError(f"unknown store kind {kind!r}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.scale.replica", description=__doc__)
    parser.add_argument("--store", choices=("postgres", "redis"), required=True)
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--namespace", required=True, help="schema (postgres) or key prefix")
    parser.add_argument("--api", required=True, help="base URL of the served FakeApi")
    parser.add_argument("--instance", required=True, help="instance id (and x-client-id)")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--events", required=True, help="file receiving delivered events")
    parser.add_argument("--schedule-min", default="5s")
    parser.add_argument("--schedule-max", default="5s")
    parser.add_argument("--lease-ttl", default="10s")
    parser.add_argument("--resync", default="5s")
    parser.add_argument("--max-concurrent", type=int, default=0, help="0: no limit")
    parser.add_argument("--page-size", type=int, default=100)
    return parser


def tenant_name(index: int) -> str:
    """The FakeApi tenant (and partition key) number ``index``."""
    return f"p{index:04d}"


def _poller(args: argparse.Namespace) -> wk.PollerDefinition[Any]:
    api = args.api.rstrip("/")
    instance = args.instance
    limit = args.page_size
    names = [tenant_name(i) for i in range(args.partitions)]
    runs: dict[str, str] = {}

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        key = ctx.partition.key
        if ctx.page == 1 or key not in runs:
            runs[key] = uuid.uuid4().hex[:16]
        headers = {
            "x-client-id": instance,
            "x-scale-run": runs[key],
            "x-scale-sent": str(time.time_ns() // 1_000_000),
        }
        response = await ctx.http.get(
            f"{api}/t/{key}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": limit},
            headers=headers,
        )
        body = response.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return wk.define_poller(
        name="accounts",
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch,
        partitions=lambda: names,
        # A fixed interval when min == max, so every replica sees the same steady load.
        schedule=wk.Schedule(
            min=args.schedule_min,
            max=args.schedule_max,
            adaptive=args.schedule_min != args.schedule_max,
        ),
        max_pages_per_cycle=1_000,
    )


async def _run(args: argparse.Namespace, out: IO[str]) -> None:
    store = make_store(args.store, args.store_url, args.namespace)
    poller = _poller(args)
    engine = wk.Engine(
        store=store,
        pollers=[poller],
        instance_id=args.instance,
        lease=wk.LeaseOptions(ttl=args.lease_ttl),
        resync_every=args.resync,
        max_concurrent_keys=args.max_concurrent or None,
    )

    @engine.on(poller)
    async def record(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        version = event.data.get("version") if isinstance(event.data, dict) else None
        out.write(json.dumps([event.partition, event.subject, version, event.type]) + "\n")
        out.flush()

    await engine.migrate()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    try:
        await engine.serve(stop_timeout="10s")
    finally:
        await store.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one replica until SIGTERM; returns the exit status."""
    args = _parser().parse_args(argv)
    with open(args.events, "a", encoding="utf-8") as out:
        asyncio.run(_run(args, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
