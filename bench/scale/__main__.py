"""``python -m bench.scale``: run the scale scenarios and print every figure against its target.

Usage::

    python -m bench.scale                          # everything, full size (about 20 minutes)
    python -m bench.scale partitions snapshot      # some scenarios
    python -m bench.scale --smoke --json out.json  # tiny sizes, seconds (the e2e smoke test)

Scenarios: ``partitions`` (1,000 vs 10,000 partitions on SQLite, virtual clock),
``replicas`` (three processes on PostgreSQL and on Redis: exclusivity, shares, SIGKILL
takeover), ``throughput`` (three replicas against one on the same backlog), ``snapshot``
(a million-item snapshot diff on SQLite; ``--snapshot-stores sqlite,postgres`` adds
PostgreSQL). A store whose server cannot be reached is skipped with the reason.

Exit status: 0 when every target is met, 1 when one is missed, 2 when a scenario failed
to run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import watukuy as wk

from . import partitions as partitions_scenario
from . import replicas as replicas_scenario
from . import snapshot as snapshot_scenario
from . import throughput as throughput_scenario
from ._report import Report
from ._services import reachable
from .partitions import PartitionsConfig
from .replicas import ReplicasConfig
from .snapshot import SnapshotConfig
from .throughput import ThroughputConfig

SCENARIOS = ("partitions", "replicas", "throughput", "snapshot")

SMOKE_PARTITIONS = PartitionsConfig(
    sizes=(20, 100), minutes=1, schedule=wk.Schedule(min="10s", max="30s")
)
SMOKE_REPLICAS = ReplicasConfig(
    partitions=24,
    items=3,
    interval="1s",
    lease_ttl="1500ms",
    resync="1s",
    latency="50ms",
    warmup_s=1.0,
    before_kill_s=3.0,
    after_kill_s=4.0,
    quiet_s=2.5,
    changes_per_s=0.05,
)
SMOKE_THROUGHPUT = ThroughputConfig(partitions=12, items=4, page_size=2, latency="50ms")
SMOKE_SNAPSHOT = SnapshotConfig(items=2_000, page_size=500)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description="The scale harness: every figure next to its target, pass or fail.",
    )
    parser.add_argument(
        "scenarios", nargs="*", metavar="scenario", help=f"{', '.join(SCENARIOS)} (default: all)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--stores", default="postgres,redis", help="stores of replicas/throughput")
    parser.add_argument("--snapshot-stores", default="sqlite", help="sqlite and/or postgres")
    parser.add_argument("--partitions", help="partition counts, e.g. 1000,10000")
    parser.add_argument("--minutes", type=int, help="virtual minutes with changes")
    parser.add_argument("--snapshot-items", type=int, help="items of the snapshot scenario")
    parser.add_argument("--profile", type=Path, help="cProfile stats of the partitions passes")
    return parser


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


async def _scenario(report: Report, name: str, body: Callable[[], Awaitable[None]]) -> None:
    print(f"== {name}", flush=True)
    started = time.perf_counter()
    try:
        await body()
    except Exception as error:
        report.errors[name] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
    print(f"== {name}: {time.perf_counter() - started:.0f} s", flush=True)


async def _available(report: Report, scenario: str, kinds: Sequence[str]) -> list[str]:
    usable = []
    for kind in kinds:
        reason = await reachable(kind)
        if reason is None:
            usable.append(kind)
        else:
            report.details.setdefault("skipped", {})[f"{scenario}/{kind}"] = reason
            print(f"   {scenario}/{kind} skipped: {reason}", flush=True)
    return usable


async def run(args: argparse.Namespace) -> Report:
    """Run the chosen scenarios; returns the report."""
    report = Report()
    chosen = args.scenarios or list(SCENARIOS)
    stores = _names(args.stores)
    partitions = SMOKE_PARTITIONS if args.smoke else PartitionsConfig()
    if args.partitions:
        sizes = tuple(int(n) for n in _names(args.partitions))
        partitions = dataclasses.replace(partitions, sizes=sizes)
    if args.minutes:
        partitions = dataclasses.replace(partitions, minutes=args.minutes)
    if args.profile:
        partitions = dataclasses.replace(partitions, profile_dir=args.profile)
    snapshot = SMOKE_SNAPSHOT if args.smoke else SnapshotConfig()
    if args.snapshot_items:
        snapshot = dataclasses.replace(snapshot, items=args.snapshot_items)
    replicas = SMOKE_REPLICAS if args.smoke else ReplicasConfig()
    throughput = SMOKE_THROUGHPUT if args.smoke else ThroughputConfig()

    with tempfile.TemporaryDirectory(prefix="wk-scale-") as tmp:
        folder = Path(tmp)
        if "partitions" in chosen:

            async def partitions_body() -> None:
                results = await partitions_scenario.run(partitions)
                figures = partitions_scenario.figures(results)
                report.add(figures, partitions_scenario.DEFINITIONS)
                report.details["partitions"] = [r.summary() for r in results]

            await _scenario(report, "partitions", partitions_body)
        if "replicas" in chosen:
            for kind in await _available(report, "replicas", stores):

                async def replicas_body(kind: str = kind) -> None:
                    result = await replicas_scenario.run_replicas(kind, replicas, folder)
                    figures = replicas_scenario.replicas_figures(result)
                    report.add(figures, replicas_scenario.DEFINITIONS)
                    report.details[f"replicas/{kind}"] = result.summary()

                await _scenario(report, f"replicas/{kind}", replicas_body)
        if "throughput" in chosen:
            for kind in await _available(report, "throughput", stores):

                async def throughput_body(kind: str = kind) -> None:
                    runs = await throughput_scenario.run_throughput(kind, throughput, folder)
                    figures = throughput_scenario.throughput_figures(runs, throughput)
                    report.add(figures, throughput_scenario.DEFINITIONS)
                    report.details[f"throughput/{kind}"] = [vars(r) for r in runs]

                await _scenario(report, f"throughput/{kind}", throughput_body)
        if "snapshot" in chosen:
            kinds = _names(args.snapshot_stores)
            usable = ["sqlite"] if "sqlite" in kinds else []
            usable += await _available(report, "snapshot", [k for k in kinds if k != "sqlite"])

            async def snapshot_body() -> None:
                results = await snapshot_scenario.run_snapshot(tuple(usable), snapshot, folder)
                for result in results:
                    figures = snapshot_scenario.snapshot_figures(result)
                    report.add(figures, snapshot_scenario.DEFINITIONS)
                    report.details[f"snapshot/{result.kind}"] = {
                        "initial": result.initial,
                        "again": result.again,
                    }

            if usable:
                await _scenario(report, "snapshot", snapshot_body)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run, print the table; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown:
        parser.error(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    report = asyncio.run(run(args))
    print()
    print(report.table())
    for where, reason in report.details.get("skipped", {}).items():
        print(f"{where}: SKIPPED ({reason})")
    if args.json:
        report.write_json(args.json)
    if report.errors:
        return 2
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
