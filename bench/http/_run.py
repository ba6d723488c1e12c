"""The scenarios of ``python -m bench.http`` and their figures against the targets."""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._proc import Measured, VendorProcess, child_env, compile_package, measure
from ._venv import child_python
from ._workload import SHAPES

POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
# One pair of schemas per run (dropped at its end): two runs at once on one server, from
# two work trees, would otherwise drop each other's tables halfway through a round.
FLOOR_SCHEMA = f"bench_http_floor_{os.getpid()}"
ENGINE_SCHEMA = f"bench_http_engine_{os.getpid()}"
PHASES = ("initial", "1% changed", "nothing changed")

# Targets of the sync runs: (store, phase) -> what the engine must reach against the floor.
THROUGHPUT_TARGET = {"sqlite": 0.8, "postgres": 0.7}  # share of the floor's items/s, initial
WALL_TARGET = {"1% changed": 1.2, "nothing changed": 1.2}  # engine wall / floor wall, at most
# Over a vendor that answers each page after 50 ms, the engine overlaps its work with the
# wait: at least this share of the floor's items/s (SQLite; other delays are reported).
LATENCY_TARGET = {50.0: 1.3}
RSS_TARGET_MB = 100.0
IMPORT_TARGET_MS = 100.0
HELP_TARGET_MS = 300.0
DISPATCH_TARGET = 30_000.0
LAG_P99_TARGET = 0.1
GAP_SLACK = 1.1


@dataclass(frozen=True)
class Options:
    """Sizes of one run of the benchmark."""

    items: int = 100_000
    rounds: int = 3
    # Pairs of the short phases per round: a run of 0.15-0.3 s moves by a third with the
    # host's speed, so each phase's ratio is the median of this many pairs, run in
    # alternating order, each against fresh changes.
    repeats: int = 5
    dispatch_items: int = 100_000
    partitions: tuple[int, ...] = (2_000, 10_000)
    partitions_seconds: float = 90.0
    schedule_min: str = "10s"
    schedule_max: str = "30s"
    latency_ms: float = 100.0
    budget: int = 150
    stores: tuple[str, ...] = ("sqlite", "postgres")
    shapes: tuple[str, ...] = tuple(SHAPES)
    # The vendor's delay before each page of the sync scenario, one row per value and shape;
    # past 0, only the initial sync runs, on SQLite.
    page_latencies_ms: tuple[float, ...] = (0.0, 20.0, 50.0, 100.0)


QUICK = Options(
    items=20_000,
    rounds=1,
    repeats=3,
    dispatch_items=20_000,
    partitions=(300,),
    partitions_seconds=20.0,
    schedule_min="2s",
    schedule_max="6s",
    page_latencies_ms=(0.0, 50.0),
)

# (label, met, figure); ``None`` for a figure that is reported, not held to a target.
_results: list[tuple[str, bool | None, str]] = []


def _verdict(ok: bool | None) -> str:
    return "report" if ok is None else "met   " if ok else "MISSED"


def _check(label: str, ok: bool | None, figure: str) -> None:
    _results.append((label, ok, figure))
    print(f"  {_verdict(ok)} {label}: {figure}", flush=True)


def _row(who: str, m: Measured) -> str:
    items = m.out.get("items", 0)
    rate = f"{items / m.wall:>9,.0f}/s" if items else f"{'-':>11}"
    connections = f"  connections {m.out['connections']:>4,}" if "connections" in m.out else ""
    return (
        f"    {who:<8} wall {m.wall:6.2f} s  cpu {m.cpu:6.2f} s  rss {m.rss_mb:5.0f} MB  "
        f"items {items:>7,} {rate}  events {m.out.get('events', 0):>7,}  "
        f"written {m.written_mb:5.0f} MB{connections}"
    )


def _postgres_reason() -> str | None:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            return None
    except Exception as error:  # any failure means: skip, with the reason
        return f"{type(error).__name__}: {error}"


def _drop_schemas() -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for schema in (FLOOR_SCHEMA, ENGINE_SCHEMA):
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def sync(options: Options) -> None:
    """Floor and engine, alternately, in fresh processes, on every vendor shape and delay.

    With no delay: initial, 1% changed, nothing (the two short phases in
    ``options.repeats`` pairs per round) on every store. With a delay: the initial sync
    alone, one pair per round, on SQLite.
    """
    print(
        f"== sync over HTTP: {options.items:,} orders, pages of 1,000, {options.rounds} round(s), "
        f"vendor shapes {', '.join(options.shapes)}, page delays "
        f"{', '.join(f'{ms:g}' for ms in options.page_latencies_ms)} ms",
        flush=True,
    )
    stores = list(options.stores)
    if "postgres" in stores:
        reason = _postgres_reason()
        if reason is not None:
            print(f"  postgres SKIPPED: {reason}")
            stores.remove("postgres")
    ratios: dict[tuple[str, str, float], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in options.shapes:
            for latency in options.page_latencies_ms:
                with VendorProcess(options.items, latency, shape=shape) as vendor:
                    if latency:
                        if "sqlite" in stores:
                            runs = _initial_rounds(vendor, Path(tmp), shape, options)
                            ratios["sqlite", shape, latency] = _latency_figures(
                                shape, latency, runs
                            )
                        continue
                    for store in stores:
                        runs_by_phase = _phases(vendor, Path(tmp), store, shape, options)
                        ratios[store, shape, latency] = _sync_targets(store, shape, runs_by_phase)
    _ratio_table(ratios, options)


def _databases(tmp: Path, store: str) -> tuple[list[str], list[str]]:
    """Fresh databases of the floor and of the engine, as their command-line arguments.

    SQLite files left by the round before are deleted first: a sync of 100,000 orders
    leaves tens of megabytes, and every shape and delay has rounds of its own.
    """
    if store == "sqlite":
        for old in tmp.glob("*.db*"):
            old.unlink()
        return (
            ["--sqlite", str(tmp / "floor.db")],
            ["--sqlite", str(tmp / "engine.db")],
        )
    _drop_schemas()
    return (
        ["--postgres", POSTGRES_URL, "--schema", FLOOR_SCHEMA],
        ["--postgres", POSTGRES_URL, "--schema", ENGINE_SCHEMA],
    )


def _phases(
    vendor: VendorProcess, tmp: Path, store: str, shape: str, options: Options
) -> dict[str, list[tuple[Measured, Measured]]]:
    """Every phase of every round on one store, with no delay at the vendor."""
    runs: dict[str, list[tuple[Measured, Measured]]] = {phase: [] for phase in PHASES}
    for round_ in range(options.rounds):
        vendor.post("/_reset")
        floor_db, engine_db = _databases(tmp, store)
        for phase in PHASES:
            pairs = 1 if phase == "initial" else options.repeats
            for repeat in range(pairs):
                if phase == "1% changed":
                    vendor.post("/_change?share=0.01")
                floor, engine = _pair(vendor, shape, floor_db, engine_db, repeat % 2 == 1)
                if phase == "initial":
                    _check_initial(floor, options)
                count = "" if pairs == 1 else f" ({repeat + 1}/{pairs})"
                print(f"  {store}, {shape} vendor, round {round_ + 1}, {phase}{count}:")
                print(_row("floor", floor))
                print(_row("watukuy", engine), flush=True)
                runs[phase].append((floor, engine))
    if store == "postgres":
        _drop_schemas()
    return runs


def _initial_rounds(
    vendor: VendorProcess, tmp: Path, shape: str, options: Options
) -> list[tuple[Measured, Measured]]:
    """The initial sync on SQLite, one pair per round, the engine first every other round."""
    runs = []
    for round_ in range(options.rounds):
        vendor.post("/_reset")
        floor_db, engine_db = _databases(tmp, "sqlite")
        floor, engine = _pair(vendor, shape, floor_db, engine_db, round_ % 2 == 1)
        _check_initial(floor, options)
        print(f"  sqlite, {shape} vendor, round {round_ + 1}, initial:")
        print(_row("floor", floor))
        print(_row("watukuy", engine), flush=True)
        runs.append((floor, engine))
    return runs


def _pair(
    vendor: VendorProcess,
    shape: str,
    floor_db: list[str],
    engine_db: list[str],
    engine_first: bool,
) -> tuple[Measured, Measured]:
    """The floor and the engine on the same vendor state, one after the other: the floor
    first, or the engine first when ``engine_first`` (alternating the order cancels what
    running second costs or gains, such as a warm page cache). Each run's ``out`` gets the
    connections the vendor accepted during it."""
    url = ["--url", vendor.url, "--shape", shape]

    def counted(module: str, *args: str) -> Measured:
        before = vendor.connections()
        run = measure(module, *args)
        run.out["connections"] = vendor.connections() - before - 1
        return run

    def floor() -> Measured:
        return counted("bench.http.floor", *url, *floor_db)

    def engine() -> Measured:
        return counted("bench.http.engine_child", "sync", *url, *engine_db)

    if engine_first:
        engine_run = engine()
        floor_run = floor()
    else:
        floor_run = floor()
        engine_run = engine()
    if engine_run.out.get("pending"):
        raise RuntimeError(f"the engine left events pending: {engine_run.out}")
    if engine_run.out["events"] != floor_run.out["events"]:
        raise RuntimeError(f"events differ: floor {floor_run.out}, engine {engine_run.out}")
    return floor_run, engine_run


def _check_initial(floor: Measured, options: Options) -> None:
    """An initial sync emits every order once: anything else is a database left over."""
    if floor.out["events"] != options.items:
        raise RuntimeError(f"the initial sync emitted {floor.out['events']:,} events: {floor.out}")


def _items_share(runs: list[tuple[Measured, Measured]]) -> float:
    """The median of the engine's items/s over the floor's, pair by pair."""
    shares: list[float] = [(e.out["items"] / e.wall) / (f.out["items"] / f.wall) for f, e in runs]
    return statistics.median(shares)


def _latency_figures(shape: str, latency: float, runs: list[tuple[Measured, Measured]]) -> float:
    """Report the initial sync against a delaying vendor; return the items/s share."""
    share = _items_share(runs)
    pages = statistics.median(f.out["pages"] for f, _ in runs)
    waited = pages * latency / 1000
    floor_wall = statistics.median(f.wall for f, _ in runs)
    engine_wall = statistics.median(e.wall for _, e in runs)
    target = LATENCY_TARGET.get(latency)
    _check(
        f"sqlite, {shape} vendor, {latency:g} ms per page: initial sync, engine / floor items/s"
        + ("" if target is None else f" >= {target}x"),
        None if target is None else share >= target,
        f"{share:.2f}x (median walls: floor {floor_wall:.2f} s, engine {engine_wall:.2f} s; "
        f"{pages:,.0f} pages x {latency:g} ms = {waited:.2f} s of waiting alone)",
    )
    return share


def _ratio_table(ratios: dict[tuple[str, str, float], float], options: Options) -> None:
    """The initial sync's items/s share, one line per store and shape, one column per delay."""
    if not ratios:
        return
    latencies = options.page_latencies_ms
    print("  initial sync, engine / floor items/s (median of the pairs):")
    print("    " + " " * 24 + "".join(f"{f'{ms:g} ms':>9}" for ms in latencies))
    for store in ("sqlite", "postgres"):
        for shape in options.shapes:
            cells = [ratios.get((store, shape, ms)) for ms in latencies]
            if any(cell is not None for cell in cells):
                figures = "".join(f"{'-' if c is None else f'{c:.2f}x':>9}" for c in cells)
                print(f"    {f'{store}, {shape} vendor':<24}{figures}")


def _sync_targets(
    store: str, shape: str, runs: dict[str, list[tuple[Measured, Measured]]]
) -> float:
    """Check the targets of one store and shape with no delay; return the items/s share."""
    tag = f"{store}, {shape} vendor,"
    print(f"  {tag} targets (median over every pair of every round):")
    initial = runs["initial"]
    share = _items_share(initial)
    cpu_share = statistics.median(f.cpu / e.cpu for f, e in initial)
    _check(
        f"{tag} initial sync >= {THROUGHPUT_TARGET[store]}x the floor's items/s",
        share >= THROUGHPUT_TARGET[store],
        f"{share:.2f}x (by CPU: floor cpu / engine cpu = {cpu_share:.2f}x)",
    )
    for phase, limit in WALL_TARGET.items():
        ratio = statistics.median(e.wall / f.wall for f, e in runs[phase])
        cpu = statistics.median(e.cpu / f.cpu for f, e in runs[phase])
        _check(
            f"{tag} {phase} wall <= {limit}x the floor's",
            ratio <= limit,
            f"{ratio:.2f}x (cpu {cpu:.2f}x)",
        )
    rss = max(e.rss_mb for _, e in initial)
    floor_rss = max(f.rss_mb for f, _ in initial)
    _check(
        f"{tag} initial sync peak RSS <= {RSS_TARGET_MB:.0f} MB",
        rss <= RSS_TARGET_MB,
        f"{rss:.0f} MB (floor {floor_rss:.0f} MB)",
    )
    return share


def _import_ms() -> float:
    done = subprocess.run(
        [child_python(), "-X", "importtime", "-c", "import watukuy"],
        capture_output=True,
        text=True,
        check=True,
        env=child_env(),
    )
    for line in reversed(done.stderr.splitlines()):
        parts = [part.strip() for part in line.split("|")]
        if len(parts) == 3 and parts[2] == "watukuy":
            return int(parts[1]) / 1000
    raise RuntimeError(f"no 'watukuy' line in -X importtime output:\n{done.stderr[-2000:]}")


def startup(options: Options) -> None:
    """``import watukuy`` (median of 5, ``-X importtime``) and ``watukuy --help`` (median of 5)."""
    print("== start-up", flush=True)
    imports = [_import_ms() for _ in range(5)]
    cli = str(Path(child_python()).with_name("watukuy"))
    helps = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([cli, "--help"], capture_output=True, check=True, env=child_env())
        helps.append((time.perf_counter() - started) * 1000)
    bare = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([child_python(), "-c", "pass"], check=True, env=child_env())
        bare.append((time.perf_counter() - started) * 1000)
    print(f"  import watukuy runs (ms): {', '.join(f'{v:.0f}' for v in imports)}")
    print(f"  watukuy --help runs (ms): {', '.join(f'{v:.0f}' for v in helps)}")
    print(f"  (python -c pass, for scale: median {statistics.median(bare):.0f} ms)")
    _check(
        f"import watukuy < {IMPORT_TARGET_MS:.0f} ms (median of 5, -X importtime)",
        statistics.median(imports) < IMPORT_TARGET_MS,
        f"{statistics.median(imports):.0f} ms",
    )
    _check(
        f"watukuy --help < {HELP_TARGET_MS:.0f} ms (median of 5, whole process)",
        statistics.median(helps) < HELP_TARGET_MS,
        f"{statistics.median(helps):.0f} ms",
    )


def dispatch(options: Options) -> None:
    """Deliver ``dispatch_items`` pending events to a no-op handler on SQLite."""
    print(f"== dispatch: {options.dispatch_items:,} pending events, SQLite", flush=True)
    with VendorProcess(options.dispatch_items) as vendor, tempfile.TemporaryDirectory() as tmp:
        db = ["--sqlite", str(Path(tmp) / "dispatch.db")]
        filled = measure(
            "bench.http.engine_child", "sync", "--no-handler", "--url", vendor.url, *db
        )
        if filled.out["pending"] != options.dispatch_items:
            raise RuntimeError(f"expected {options.dispatch_items:,} pending: {filled.out}")
        run = measure("bench.http.engine_child", "dispatch", "--url", vendor.url, *db)
    delivered, seconds = run.out["delivered"], run.out["tick_s"]
    if run.out["pending"] or delivered != options.dispatch_items:
        raise RuntimeError(f"dispatch did not deliver everything: {run.out}")
    print(_row("watukuy", run))
    _check(
        f"dispatch >= {DISPATCH_TARGET:,.0f} events/s (the tick, in process)",
        delivered / seconds >= DISPATCH_TARGET,
        f"{delivered / seconds:,.0f}/s ({delivered:,} in {seconds:.2f} s; "
        f"whole process {run.wall:.2f} s)",
    )


def _seconds(text: str) -> float:
    from watukuy import parse_duration

    return parse_duration(text, "schedule") / 1000


def partitions(options: Options) -> None:
    """Thousands of partitions, a slow vendor, a budget: lag, poll gaps, the budget held."""
    limit = _seconds(options.schedule_max) * GAP_SLACK
    for count in options.partitions:
        for client in ("explicit", "default"):
            print(
                f"== partitions: {count:,}, vendor {options.latency_ms:.0f} ms, "
                f"Budget({options.budget}, '1s'), Schedule(min={options.schedule_min}, "
                f"max={options.schedule_max}), {options.partitions_seconds:.0f} s, "
                f"{client} client",
                flush=True,
            )
            with (
                VendorProcess(1, options.latency_ms) as vendor,
                tempfile.TemporaryDirectory() as tmp,
            ):
                run = measure(
                    "bench.http.partitions_child",
                    "--url",
                    vendor.url,
                    "--sqlite",
                    str(Path(tmp) / "partitions.db"),
                    "--partitions",
                    str(count),
                    "--seconds",
                    str(options.partitions_seconds),
                    "--budget",
                    str(options.budget),
                    "--schedule-min",
                    options.schedule_min,
                    "--schedule-max",
                    options.schedule_max,
                    "--client",
                    client,
                )
                stats = vendor.get("/_stats")
            _partition_figures(count, client, run, stats, options, limit)


def _partition_figures(
    count: int, client: str, run: Measured, stats: dict[str, Any], options: Options, limit: float
) -> None:
    out = run.out
    started, stopped = out["started"], out["stopped"]
    arrivals: dict[str, list[float]] = stats["arrivals"]
    gaps: list[float] = []
    late = 0
    worst = 0.0
    first: list[float] = []
    for times in arrivals.values():
        times = [t for t in times if t <= stopped]
        if not times:
            continue
        first.append(times[0] - started)
        between = [b - a for a, b in itertools.pairwise(times)]
        gaps.extend(between)
        # The time since the last poll counts too: a tenant left alone to the end is late.
        waits = [*between, stopped - times[-1]]
        worst = max(worst, *waits)
        late += sum(1 for wait in waits if wait > limit)
    never = count - sum(1 for times in arrivals.values() if any(t <= stopped for t in times))
    every = sorted(t for times in arrivals.values() for t in times)
    window = 0
    lo = 0
    for hi, t in enumerate(every):
        while t - every[lo] >= 1.0:
            lo += 1
        window = max(window, hi - lo + 1)
    gaps.sort()

    def pick(share: float) -> float:
        return gaps[min(len(gaps) - 1, int(share * len(gaps)))] if gaps else 0.0

    print(
        f"    polls {out['polls']:,}, requests {len(every):,}, errors {out['errors'] or 'none'}; "
        f"wall {run.wall:.0f} s, cpu {run.cpu:.1f} s, rss {run.rss_mb:.0f} MB"
    )
    print(
        f"    loop lag p50 {out['lag_p50'] * 1000:.0f} ms, p99 {out['lag_p99'] * 1000:.0f} ms, "
        f"max {out['lag_max'] * 1000:.0f} ms"
    )
    print(
        f"    first poll of a tenant after start: median {statistics.median(first or [0]):.1f} s, "
        f"max {max(first or [0]):.1f} s; gap between two polls: median {pick(0.5):.1f} s, "
        f"p99 {pick(0.99):.1f} s, max {pick(1.0):.1f} s; longest wait, the end included "
        f"{worst:.1f} s (limit {limit:.1f} s)"
    )
    tag = f"{count:,} partitions, {client} client"
    _check(f"{tag}: every tenant polled", never == 0, f"{never} never polled")
    # The budget alone sets how long one round over every tenant takes at the least: past
    # the limit, no scheduler could keep the gaps under it, and the figure is a report.
    round_s = count / options.budget
    coverable = round_s <= limit
    _check(
        f"{tag}: no gap over schedule.max x {GAP_SLACK}",
        (late == 0 and never == 0) if coverable else None,
        f"{late} waits over {limit:.1f} s (longest {worst:.1f} s)"
        + (
            ""
            if coverable
            else f"; at {options.budget} requests/s one round over {count:,} tenants takes "
            f"{round_s:.1f} s at the least"
        ),
    )
    _check(
        f"{tag}: loop lag p99 <= {LAG_P99_TARGET * 1000:.0f} ms",
        out["lag_p99"] <= LAG_P99_TARGET,
        f"{out['lag_p99'] * 1000:.0f} ms",
    )
    _check(
        f"{tag}: budget never exceeded at the vendor",
        window <= options.budget,
        f"most requests arriving in any 1 s: {window} (budget {options.budget})",
    )


SCENARIOS = {"sync": sync, "startup": startup, "dispatch": dispatch, "partitions": partitions}


def run(names: list[str], options: Options) -> int:
    """Run the named scenarios; print every target; 1 when one is missed."""
    _results.clear()
    compile_package()
    print(f"== children run with {child_python()}", flush=True)
    for name in names:
        started = time.perf_counter()
        SCENARIOS[name](options)
        print(f"== {name}: {time.perf_counter() - started:.0f} s\n", flush=True)
    print("== summary")
    for label, ok, figure in _results:
        print(f"  {_verdict(ok)} {label}: {figure}")
    return 0 if all(ok is not False for _, ok, _ in _results) else 1
