"""``python -m bench.http``: see :mod:`bench.http`."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ._run import QUICK, SCENARIOS, Options, run
from ._workload import SHAPES


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run; the exit status is 1 when a target is missed."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.http", description="watukuy over real HTTP, next to a bare script."
    )
    parser.add_argument("scenarios", nargs="*", help=f"{', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, about two minutes")
    parser.add_argument("--rounds", type=int, help="rounds of the sync scenario (default 3)")
    parser.add_argument(
        "--repeats", type=int, help="pairs of each short sync phase per round (default 5)"
    )
    parser.add_argument("--items", type=int, help="orders of the sync scenario")
    parser.add_argument("--partitions", help="partition counts, e.g. 2000,10000")
    parser.add_argument("--seconds", type=float, help="seconds of each partitions run")
    parser.add_argument("--stores", help="sqlite and/or postgres (sync scenario)")
    parser.add_argument(
        "--shapes", help=f"vendor shapes of the sync scenario: {', '.join(SHAPES)} (default: all)"
    )
    parser.add_argument(
        "--latency-ms",
        help="the vendor's delay before each page of the sync scenario, e.g. 0,20,50,100",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    options = QUICK if args.quick else Options()
    if args.rounds:
        options = dataclasses.replace(options, rounds=args.rounds)
    if args.repeats:
        options = dataclasses.replace(options, repeats=args.repeats)
    if args.items:
        options = dataclasses.replace(options, items=args.items, dispatch_items=args.items)
    if args.partitions:
        counts = tuple(int(part) for part in args.partitions.split(",") if part.strip())
        options = dataclasses.replace(options, partitions=counts)
    if args.seconds:
        options = dataclasses.replace(options, partitions_seconds=args.seconds)
    if args.stores:
        stores = tuple(part.strip() for part in args.stores.split(",") if part.strip())
        options = dataclasses.replace(options, stores=stores)
    if args.shapes:
        shapes = tuple(part.strip() for part in args.shapes.split(",") if part.strip())
        wrong = [shape for shape in shapes if shape not in SHAPES]
        if wrong:
            parser.error(f"unknown shape(s) {', '.join(wrong)}; choose from {', '.join(SHAPES)}")
        options = dataclasses.replace(options, shapes=shapes)
    if args.latency_ms:
        try:
            delays = tuple(float(part) for part in args.latency_ms.split(",") if part.strip())
        except ValueError:
            parser.error(f"--latency-ms: expected numbers separated by commas: {args.latency_ms}")
        if not delays or any(delay < 0 for delay in delays):
            parser.error(f"--latency-ms: expected milliseconds >= 0: {args.latency_ms}")
        options = dataclasses.replace(options, page_latencies_ms=delays)
    return run(args.scenarios or list(SCENARIOS), options)


if __name__ == "__main__":
    sys.exit(main())
