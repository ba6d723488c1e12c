"""``make real-vendors``: the long real-vendor run, printing its figures.

    python tests/real_vendors/run.py [--runs 3] [--write 120] [--tail 60]
        [--vendors drf,json] [--recipes docs,toml]
        [--engine-python /path/to/other/.venv/bin/python]

Each run starts the DRF vendor (gunicorn over a PostgreSQL schema of its own) and
json-server, runs every recipe of ``real_vendor_tier.recipes`` (``--recipes docs``) and of
``real_vendor_tier.toml_recipes`` (``--recipes toml``: pollers described only in TOML)
against them, each in its own engine process (SQLite and PostgreSQL stores, SIGKILLs during the writes), then the scripted
runs (a pass whose last page vanishes, a tie group larger than the page), and prints one
table per vendor: versions visible 10 s or more, delivered and missed, wrong final
states, phantom deletes, duplicates, delete latency, idle requests a minute and live
requests per idle cycle. ``--json FILE`` also writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_vendor_tier.scenario import (
    ENGINE_PYTHON,
    EngineSpec,
    RunPlan,
    run_drf,
    run_json,
    run_not_modified,
    run_ties,
    run_wedge,
)
from real_vendor_tier.vendors import VendorUnavailable

POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)

LONG_DRF = (
    EngineSpec("quickstart", "sqlite", kills=3),
    EngineSpec("overlap", "postgres", kills=2),
    EngineSpec("lag", "sqlite", kills=1),
    EngineSpec("token", "postgres", kills=2, knobs={"reconcile_every": "1m"}),
    EngineSpec("snapshot", "sqlite", kills=2),
    EngineSpec("page-reconcile", "postgres", kills=1, knobs={"reconcile_every": "1m"}),
)
LONG_JSON = (
    EngineSpec("quickstart", "sqlite", kills=3),
    EngineSpec("overlap", "postgres", kills=1),
    EngineSpec("snapshot", "sqlite", kills=2),
)
# The TOML twins: killed when their docs twin is (with --recipes toml alone, as many times
# as it would be, at moments of their own).
TOML_DRF = (
    EngineSpec("toml-keyset", "sqlite", kills=3, kills_like="quickstart"),
    EngineSpec("toml-overlap", "postgres", kills=2, kills_like="overlap"),
    EngineSpec(
        "toml-token", "postgres", kills=2, knobs={"reconcile_every": "1m"}, kills_like="token"
    ),
    EngineSpec("toml-snapshot", "sqlite", kills=2, kills_like="snapshot"),
    EngineSpec("toml-not-found", "sqlite", kills=2, kills_like="snapshot"),
)
TOML_JSON = (
    EngineSpec("toml-keyset", "sqlite", kills=3, kills_like="quickstart"),
    EngineSpec("toml-overlap", "postgres", kills=1, kills_like="overlap"),
    EngineSpec("toml-pages", "sqlite", kills=2, kills_like="snapshot"),
    EngineSpec("toml-link", "sqlite", kills=2, kills_like="snapshot"),
    EngineSpec("toml-offset", "postgres", kills=2, kills_like="snapshot"),
)
COLUMNS = (
    ("recipe", "recipe"),
    ("store", "store"),
    ("kills", "kills"),
    ("obligations", "visible>=10s"),
    ("delivered", "delivered"),
    ("missed", "missed"),
    ("wrong_final", "wrong final"),
    ("phantom_deletes", "phantom del"),
    ("duplicates", "dups"),
    ("unexplained_duplicates", "unexpl dups"),
    ("order_violations", "order"),
    ("unknown_versions", "unknown"),
    ("delete_latency_p50_s", "del p50 s"),
    ("delete_latency_max_s", "del max s"),
    ("idle_requests_per_min", "idle req/min"),
    ("idle_live_requests_per_cycle", "live req/idle cycle"),
    ("errors", "errors"),
    ("answered_304", "304s"),
)


def chosen(
    docs: tuple[EngineSpec, ...], toml: tuple[EngineSpec, ...], kinds: str
) -> tuple[EngineSpec, ...]:
    """The specs of the kinds asked for (``docs``, ``toml``); TOML twins without their docs
    twin draw kill moments of their own."""
    asked = kinds.split(",")
    if "docs" in asked:
        return (*docs, *(toml if "toml" in asked else ()))
    twins = {spec.recipe: spec for spec in docs}
    alone = []
    for spec in toml if "toml" in asked else ():
        twin = twins.get(spec.kills_like or "")
        alone.append(dataclasses.replace(spec, kills_like=None, kills=twin.kills if twin else 0))
    return tuple(alone)


def table(rows: list[dict[str, Any]]) -> str:
    """Rows of figures as a Markdown table."""
    head = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "---|" * len(COLUMNS)
    body = [
        "| "
        + " | ".join("-" if row.get(key) is None else str(row[key]) for key, _ in COLUMNS)
        + " |"
        for row in rows
    ]
    return "\n".join([head, rule, *body])


async def one_run(number: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    plan = RunPlan(
        write_seconds=args.write,
        tail_seconds=args.tail,
        idle_from=args.tail - args.idle,
        seed=number,
        bulk_at=(args.write * 0.2, args.write * 0.6),
        late_at=(args.write * 0.1, args.write * 0.4, args.write * 0.7),
        engine_python=args.engine_python,
    )
    jobs: dict[str, Any] = {}
    docs = "docs" in args.recipes.split(",")
    if "drf" in args.vendors:
        jobs["drf"] = run_drf(
            folder / "drf", POSTGRES_URL, chosen(LONG_DRF, TOML_DRF, args.recipes), plan
        )
        if docs:
            jobs["wedge"] = run_wedge(
                folder / "wedge", POSTGRES_URL, engine_python=args.engine_python
            )
            jobs["wedge-gone"] = run_wedge(
                folder / "wedge-gone",
                POSTGRES_URL,
                recipe="wedge-gone",
                engine_python=args.engine_python,
            )
        if "toml" in args.recipes.split(","):
            jobs["toml-wedge-gone"] = run_wedge(
                folder / "toml-wedge-gone",
                POSTGRES_URL,
                recipe="toml-wedge-gone",
                engine_python=args.engine_python,
            )
    if "json" in args.vendors:
        json_plan = RunPlan(**{**plan.__dict__, "writers": 6, "bulk_size": 60})
        jobs["json"] = run_json(
            folder / "json", chosen(LONG_JSON, TOML_JSON, args.recipes), json_plan, dsn=POSTGRES_URL
        )
        if docs:
            jobs["ties"] = run_ties(folder / "ties", engine_python=args.engine_python)
            jobs["not-modified"] = run_not_modified(
                folder / "not-modified", engine_python=args.engine_python
            )
    results = dict(zip(jobs, await asyncio.gather(*jobs.values()), strict=True))
    report: dict[str, Any] = {"run": number}
    for vendor in ("drf", "json"):
        if vendor in results:
            run = results[vendor]
            rows = [result.figures() for result in run.recipes.values()]
            report[vendor] = {
                "writes": run.writes,
                "versions": run.history.count(),
                "lateness_s": run.lateness(),
                "seconds": round(run.seconds, 1),
                "recipes": rows,
            }
            print(
                f"\n## run {number}, {vendor}: writes {run.writes}, {run.history.count()} versions"
            )
            print(f"commit/answer minus stamp (s): {run.lateness()}; run took {run.seconds:.0f} s")
            print(table(rows))
    for name, fetch in (
        ("wedge", "raises on the 404"),
        ("wedge-gone", "the docs' Page(gone=True)"),
        ("toml-wedge-gone", "built from drf-pages-two-per-cycle.toml"),
    ):
        if name not in results:
            continue
        wedge = results[name]
        report[name] = wedge.__dict__
        print(
            f"\n{name} (DRF page numbers, last page gone mid-pass; fetch: {fetch}): errors in "
            f"the 3 ticks after the cut: {[len(e) for e in wedge.errors_before_update]}; update "
            f"delivered after {wedge.ticks_to_deliver} tick(s) (None: not within 8); deleted "
            f"events {wedge.deleted_events}, phantom {wedge.phantom_deletes}"
        )
    if "ties" in results:
        ties = results["ties"]
        report["ties"] = ties.__dict__
        print(
            f"ties (json-server, group {ties.group} > _limit {ties.limit}, tie_break=None): "
            f"{ties.delivered} of {ties.orders} orders delivered in {len(ties.tick_errors)} "
            f"ticks, {ties.requests} requests, errors {sum(len(e) for e in ties.tick_errors)}: "
            f"{next((e for e in ties.tick_errors if e), [])[:1]}"
        )
    if "not-modified" in results:
        unchanged = results["not-modified"]
        report["not-modified"] = unchanged.__dict__
        print(
            f"not-modified (json-server, the quickstart's fetch reads 304 bodies): "
            f"{unchanged.answered_304} answers 304 in {len(unchanged.tick_errors)} ticks, "
            f"errors {sum(len(e) for e in unchanged.tick_errors)}, update after them "
            f"delivered: {unchanged.update_delivered}"
        )
    return report


async def main(args: argparse.Namespace) -> int:
    reports = []
    with tempfile.TemporaryDirectory(prefix="watukuy-real-vendors-") as scratch:
        tmp = args.keep or scratch
        for number in range(1, args.runs + 1):
            started = time.monotonic()
            try:
                reports.append(await one_run(number, args, Path(tmp) / f"run-{number}"))
            except VendorUnavailable as error:
                print(f"real-vendors: {error}", file=sys.stderr)
                return 2
            print(f"(run {number}: {time.monotonic() - started:.0f} s)")
    if args.json:
        await asyncio.to_thread(
            Path(args.json).write_text, json.dumps(reports, indent=2, default=str)
        )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", type=float, default=120.0, help="seconds of writes")
    parser.add_argument("--tail", type=float, default=75.0, help="idle seconds after them")
    parser.add_argument("--idle", type=float, default=60.0, help="idle seconds measured")
    parser.add_argument("--vendors", default="drf,json")
    parser.add_argument(
        "--recipes", default="docs,toml", help="docs: the docs' fetches; toml: TOML files"
    )
    parser.add_argument("--engine-python", default=ENGINE_PYTHON)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep", help="work in this folder and keep it (logs, journals)")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
