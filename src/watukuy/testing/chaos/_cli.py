"""``python -m watukuy.testing.chaos``: replay one seed, or sweep many and summarise."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Final, Literal

from watukuy.model.errors import ConfigError
from watukuy.testing._fresh_store import fresh_store
from watukuy.testing.faulty import KILL_POINTS, KillPoint

from . import run_chaos
from ._pollers import STRATEGIES, ChaosStrategy
from ._report import ChaosReport, assert_chaos_report, describe_chaos, replay_command

__all__ = ["main"]

_STORES: Final = ("memory", "sqlite", "postgres", "redis")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m watukuy.testing.chaos",
        description="Crash the engine at every store boundary under seeded chaos and check "
        "the guarantees. --seed N replays one run; --seeds N sweeps seeds 1..N.",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seed", type=int, help="run this one seed")
    which.add_argument("--seeds", type=int, help="sweep seeds 1..N (default 20)")
    parser.add_argument("--first-seed", type=int, default=1, help="first seed of a sweep")
    parser.add_argument(
        "--strategy",
        choices=[*STRATEGIES, "all"],
        default=None,
        help="cursor strategy (default: timestamp for --seed, all for --seeds)",
    )
    parser.add_argument("--steps", type=int, default=150, help="steps per run (default 150)")
    parser.add_argument(
        "--kill-points",
        default="all",
        help="comma-separated kill points, 'all' (default) or 'none': " + ", ".join(KILL_POINTS),
    )
    parser.add_argument("--kill-probability", type=float, default=0.3)
    parser.add_argument("--max-mutations", type=int, default=3, help="per step (default 3)")
    parser.add_argument("--initial-items", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=3, help="delivery.concurrency")
    parser.add_argument("--retain-payload", action="store_true", help='retain="payload"')
    parser.add_argument(
        "--reconcile",
        choices=("auto", "on", "off"),
        default="auto",
        help="reconcile listing for incremental strategies (auto: on for odd seeds)",
    )
    parser.add_argument(
        "--store",
        choices=_STORES,
        default="memory",
        help="memory (default), sqlite (a temporary file per run), postgres "
        "(WATUKUY_TEST_POSTGRES_URL, a schema per run) or redis (WATUKUY_TEST_REDIS_URL, "
        "a key prefix per run)",
    )
    parser.add_argument("--trace", action="store_true", help="print the timeline of each run")
    parser.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    return parser


def _kill_points(raw: str) -> Literal["all"] | list[KillPoint]:
    if raw == "all":
        return "all"
    if raw == "none":
        return []
    points: list[KillPoint] = []
    for name in raw.split(","):
        point = name.strip()
        if point not in KILL_POINTS:
            raise ConfigError(
                f"unknown kill point {point!r}; expected some of {', '.join(KILL_POINTS)}",
                field="--kill-points",
            )
        points.append(point)
    return points


async def _sweep(args: argparse.Namespace) -> int:
    kill_points = _kill_points(args.kill_points)
    if args.seed is not None:
        seeds = [args.seed]
        strategies: Sequence[ChaosStrategy] = [args.strategy or "timestamp"]
    else:
        count = 20 if args.seeds is None else args.seeds
        seeds = list(range(args.first_seed, args.first_seed + count))
        strategies = [args.strategy] if args.strategy not in (None, "all") else STRATEGIES
    if args.strategy == "all":
        strategies = STRATEGIES
    started = time.perf_counter()
    failed: list[ChaosReport] = []
    runs = kills = restarts = delivered = duplicates = lost = held = 0
    for strategy in strategies:
        for seed in seeds:
            async with fresh_store(args.store, "chaos") as store:
                report = await run_chaos(
                    seed=seed,
                    steps=args.steps,
                    strategy=strategy,
                    kill_points=kill_points,
                    kill_probability=args.kill_probability,
                    max_mutations_per_step=args.max_mutations,
                    initial_items=args.initial_items,
                    concurrency=args.concurrency,
                    retain_payload=args.retain_payload,
                    reconcile={"auto": None, "on": True, "off": False}[args.reconcile],
                    store=store,
                    trace=args.trace,
                )
            runs += 1
            kills += report.total_kills
            restarts += report.restarts
            delivered += report.delivered
            duplicates += report.duplicates
            lost += report.lost
            held += report.held
            if not report.ok:
                failed.append(report)
                print(f"FAIL {describe_chaos(report)}", flush=True)
                if len(seeds) * len(strategies) == 1:
                    try:
                        assert_chaos_report(report)
                    except AssertionError as error:
                        print(error, flush=True)
            elif not args.quiet:
                print(f"ok   {describe_chaos(report)}", flush=True)
    elapsed = time.perf_counter() - started
    print(
        f"chaos: {runs} run(s) ({len(seeds)} seed(s) x {len(strategies)} strategy(ies) x "
        f"{args.steps} steps, store {args.store}), {kills} kills, {restarts} restarts, "
        f"{delivered} deliveries ({duplicates} duplicates), {lost} lost, {held} held, "
        f"{len(failed)} failing run(s), "
        f"{elapsed:.1f}s",
        flush=True,
    )
    for report in failed:
        print(f"  replay: {replay_command(report)}")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run, print, and return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return asyncio.run(_sweep(args))
    except ConfigError as error:
        parser.error(str(error))
    except KeyboardInterrupt:
        print("chaos: interrupted", file=sys.stderr)
        return 130
