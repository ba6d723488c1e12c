"""The short run of ``make test`` (pytest only): what runs, on what, for how long.

:func:`run_short_tier` runs the DRF and json-server runs, the three vanished-last-page
runs (a fetch that raises on the ``404``, the docs' fetch, and the same listing described
in TOML), the tie-group run and the ``304`` run at once (about a minute of wall time, most
of it the writers' and the idle window's), and returns a :class:`ShortTier`. The DRF and
json-server runs poll with the docs' fetches and with pollers described only in TOML
(:mod:`.toml_recipes`).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from .scenario import (
    EngineSpec,
    NotModifiedResult,
    RunPlan,
    RunResult,
    TiesResult,
    WedgeResult,
    run_drf,
    run_json,
    run_not_modified,
    run_ties,
    run_wedge,
)
from .vendors import VendorUnavailable, json_server_bin

SHORT_DRF = (
    EngineSpec("quickstart", "sqlite", kills=2),
    EngineSpec("overlap", "postgres", kills=1),
    EngineSpec("token", "sqlite", kills=1, knobs={"reconcile_every": "10s"}),
    EngineSpec("snapshot", "postgres", kills=1),
    # Pollers described only in TOML (toml_recipes.py), each killed when its docs twin is;
    # the other TOML files run in `make real-vendors` (a busy machine misses more versions
    # with every engine added here, docs recipes included).
    EngineSpec("toml-keyset", "sqlite", kills_like="quickstart"),
    EngineSpec("toml-token", "sqlite", knobs={"reconcile_every": "10s"}, kills_like="token"),
    EngineSpec("toml-snapshot", "postgres", kills_like="snapshot"),
)
SHORT_JSON = (
    EngineSpec("quickstart", "sqlite", kills=2),
    EngineSpec("overlap", "sqlite"),
    EngineSpec("snapshot", "postgres", kills=1),
    EngineSpec("toml-keyset", "sqlite", kills_like="quickstart"),
    EngineSpec("toml-link", "postgres", kills_like="snapshot"),
)
SHORT_PLAN = RunPlan(write_seconds=22, tail_seconds=20, idle_from=10, initial=300)
SHORT_JSON_PLAN = RunPlan(
    write_seconds=22, tail_seconds=20, idle_from=10, initial=200, writers=6, bulk_size=60
)


@dataclass
class ShortTier:
    """The short run's results; a vendor that could not start holds its reason instead."""

    drf: RunResult | str
    json: RunResult | str
    wedge: WedgeResult | str
    ties: TiesResult | str
    wedge_gone: WedgeResult | str
    not_modified: NotModifiedResult | str
    toml_wedge_gone: WedgeResult | str

    def get(self, name: str) -> Any:
        """The result ``name``, or skip (fail under CI) with why it could not run."""
        value = getattr(self, name)
        if isinstance(value, str):
            unavailable(value)
        return value


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``, or fail under ``CI=true`` (CI must never pass by skipping)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a missing vendor fails the run)", pytrace=False)
    pytest.skip(reason)


async def run_short_tier(folder: Path, dsn: str | None) -> ShortTier:
    """Every short run at once, in ``folder``; ``dsn=None``: PostgreSQL is unreachable."""

    async def guarded(job: Any) -> Any:
        try:
            return await job
        except VendorUnavailable as error:
            return str(error)

    no_postgres = "PostgreSQL is not reachable at WATUKUY_TEST_POSTGRES_URL"
    try:
        json_server_bin()
        node_missing = None
    except VendorUnavailable as error:
        node_missing = str(error)

    async def missing(reason: str) -> str:
        return reason

    jobs = [
        guarded(run_drf(folder / "drf", dsn, SHORT_DRF, SHORT_PLAN))
        if dsn
        else missing(no_postgres),
        guarded(run_json(folder / "json", SHORT_JSON, SHORT_JSON_PLAN, dsn=dsn))
        if dsn and node_missing is None
        else missing(node_missing or no_postgres),
        guarded(run_wedge(folder / "wedge", dsn)) if dsn else missing(no_postgres),
        guarded(run_ties(folder / "ties")) if node_missing is None else missing(node_missing),
        guarded(run_wedge(folder / "wedge-gone", dsn, recipe="wedge-gone"))
        if dsn
        else missing(no_postgres),
    ]
    jobs.append(
        guarded(run_not_modified(folder / "not-modified"))
        if node_missing is None
        else missing(node_missing)
    )
    jobs.append(
        guarded(run_wedge(folder / "toml-wedge-gone", dsn, recipe="toml-wedge-gone"))
        if dsn
        else missing(no_postgres)
    )
    drf, json, wedge, ties, wedge_gone, not_modified, toml_wedge_gone = await asyncio.gather(*jobs)
    return ShortTier(drf, json, wedge, ties, wedge_gone, not_modified, toml_wedge_gone)
