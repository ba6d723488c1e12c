"""``python -m watukuy.testing.conformance``: replay one example, or sweep and summarise."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Final

from watukuy.testing._fresh_store import fresh_store

from . import DEFAULT_ROUNDS, run_conformance
from ._config import (
    CONFIGS,
    KNOWN_OPEN,
    OPEN_DEFECTS,
    ConformanceConfig,
    config_named,
    known_open,
)
from ._regressions import REGRESSIONS
from ._report import ConformanceReport, assert_conformance, describe, replay_command

__all__ = ["main"]

_STORES: Final = ("memory", "sqlite", "postgres", "redis")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m watukuy.testing.conformance",
        description="Run pollers against a vendor that changes while it is read, and hold "
        "what the handler heard against the vendor's history.",
    )
    parser.add_argument("--list", action="store_true", help="list the configurations")
    parser.add_argument("--regressions", action="store_true", help="run the named regression cases")
    parser.add_argument(
        "--config",
        action="append",
        help="a configuration name (repeatable, or comma-separated; default: all)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seed", type=int, help="run the plan of this seed")
    which.add_argument("--plan", help="run this plan (its text form, as printed by a failure)")
    which.add_argument(
        "--examples", type=int, help="seeds per configuration, from --first-seed (default 10)"
    )
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help=f"ticks per plan ({DEFAULT_ROUNDS})"
    )
    parser.add_argument("--store", choices=_STORES, default="memory")
    parser.add_argument(
        "--stores", help="comma-separated stores for a sweep (overrides --store), e.g. all"
    )
    parser.add_argument("--known-open", action="store_true", help="only the known-open configs")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink failures")
    parser.add_argument("--trace", action="store_true", help="print the timeline")
    parser.add_argument("--quiet", action="store_true", help="failures and the summary only")
    return parser


def _configs(args: argparse.Namespace) -> list[ConformanceConfig]:
    if args.config:
        names = [name.strip() for raw in args.config for name in raw.split(",") if name.strip()]
        return [config_named(name) for name in names]
    if args.known_open:
        return [config for config in CONFIGS if config.name in KNOWN_OPEN]
    return list(CONFIGS)


def _list() -> int:
    for config in CONFIGS:
        entry = KNOWN_OPEN.get(config.name)
        defect = entry.partition("@")[0] if entry else None
        open_ = f"  (known open: {entry}, {OPEN_DEFECTS[defect]})" if defect else ""
        print(f"{config.name:<20} {config.strategy:<14}{open_}")
    return 0


async def _one(args: argparse.Namespace, config: ConformanceConfig, store_kind: str) -> int:
    async with fresh_store(store_kind, "conf") as store:
        report = await run_conformance(
            config,
            seed=args.seed,
            plan=args.plan,
            rounds=args.rounds,
            store=store,
            shrink=not args.no_shrink,
            trace=args.trace,
        )
    try:
        assert_conformance(report)
    except AssertionError as failure:
        print(failure)
        return 1
    print(describe(report))
    return 0


async def _sweep(args: argparse.Namespace, configs: Sequence[ConformanceConfig]) -> int:
    stores = (
        list(_STORES)
        if args.stores == "all"
        else [s.strip() for s in (args.stores or args.store).split(",")]
    )
    count = args.examples if args.examples is not None else 10
    seeds = range(args.first_seed, args.first_seed + count)
    started = time.perf_counter()
    totals: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    failures: dict[tuple[str, str], ConformanceReport] = {}
    open_results: dict[tuple[str, str], int] = {}
    for store_kind in stores:
        for config in configs:
            failed = 0
            for seed in seeds:
                async with fresh_store(store_kind, "conf") as store:
                    report = await run_conformance(
                        config, seed=seed, rounds=args.rounds, store=store
                    )
                totals["examples"] += 1
                totals["steps"] += report.steps
                totals["requests"] += report.requests
                totals["kills"] += report.total_kills
                totals["restarts"] += report.restarts
                totals["delivered"] += report.delivered
                totals["obligations"] += report.obligations
                totals["duplicates"] += report.delivered - report.unique
                if not args.quiet:
                    print(describe(report), flush=True)
                if not report.ok:
                    failed += 1
                    kinds[f"{config.name}: {report.kind}"] += 1
                    failures.setdefault((store_kind, config.name), report)
            if known_open(config.name, store_kind):
                open_results[(config.name, store_kind)] = failed
    elapsed = time.perf_counter() - started
    unexpected = 0
    for (store_kind, name), report in failures.items():
        if known_open(name, store_kind):
            continue
        unexpected += 1
        if not args.no_shrink:
            shrunk = await run_conformance(name, seed=report.seed, rounds=args.rounds, shrink=True)
            report.shrunk = shrunk.shrunk
        print(f"\nFAILED {name} on {store_kind}: {report.kind}")
        for violation in report.violations[:5]:
            print(f"  {violation}")
        print(f"  seed:   --config {name} --seed {report.seed} --rounds {args.rounds}")
        print(f"  replay: {replay_command(report)}")
    for (name, store_kind), failed in sorted(open_results.items()):
        verdict = f"{failed} failing example(s)" if failed else "PASSES now: enable it"
        print(f"known open {name} on {store_kind} ({KNOWN_OPEN[name]}): {verdict}")
    print(
        f"\nconformance: {totals['examples']} examples on {', '.join(stores)}, "
        f"{totals['steps']:,} steps, {totals['requests']:,} requests, {totals['kills']:,} "
        f"kills, {totals['restarts']:,} restarts, {totals['delivered']:,} deliveries "
        f"({totals['duplicates']:,} duplicates), {totals['obligations']:,} versions held to "
        f"[seen], {sum(kinds.values())} failing example(s), "
        f"{unexpected} unexpected; {elapsed:.1f}s"
    )
    for label, number in sorted(kinds.items()):
        print(f"  {number:4d} x {label}")
    return 1 if unexpected else 0


async def _regressions(args: argparse.Namespace) -> int:
    status = 0
    for case in REGRESSIONS:
        async with fresh_store(
            case.store if args.store == "memory" else args.store, "conf"
        ) as store:
            report = await run_conformance(case.config, plan=case.plan, store=store)
        if report.ok:
            verdict = "ok" if case.defect not in OPEN_DEFECTS else "ok (still listed as open)"
        elif case.defect in OPEN_DEFECTS:
            verdict = f"open: {report.kind}"
        else:
            verdict = f"REGRESSED: {report.kind}"
            status = 1
        print(f"{case.name:<40} {case.defect:<18} {verdict}")
        if not report.ok and (args.trace or case.defect not in OPEN_DEFECTS):
            for violation in report.violations[:5]:
                print(f"    {violation}")
    return status


async def _main(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    if args.regressions:
        return await _regressions(args)
    configs = _configs(args)
    if args.seed is not None or args.plan is not None:
        status = 0
        for config in configs[:1] if args.plan is not None else configs:
            status |= await _one(args, config, args.store)
        return status
    return await _sweep(args, configs)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m watukuy.testing.conformance``."""
    args = _parser().parse_args(argv)
    # The engine's own warnings (throttles, failed pages the vendor model provokes on
    # purpose) would drown the report; the level is put back so that a caller running
    # this in-process keeps its logging as it was.
    logger = logging.getLogger("watukuy")
    previous = logger.level
    logger.setLevel(logging.CRITICAL if not args.trace else logging.INFO)
    try:
        return asyncio.run(_main(args))
    except (KeyError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        logger.setLevel(previous)
