"""The scale harness (``make bench-scale``) runs end to end at tiny sizes.

Performance targets are meaningless at these sizes; what must hold at any size is checked:
every change is delivered, no key is polled by two replicas at once, a killed replica's
keys are taken over within two lease TTLs, a no-change snapshot cycle writes nothing.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run_harness(tmp_path: Path, *arguments: str) -> dict[str, Any]:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--smoke", "--json", str(out), *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # 0: every target met, 1: a target missed (expected at these sizes), 2: a crash.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert report["errors"] == {}
    return report


def figures_of(report: dict[str, Any], scenario: str) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in report["figures"] if f["scenario"] == scenario}


def test_partitions_and_snapshot_on_sqlite(tmp_path: Path) -> None:
    report = run_harness(tmp_path, "partitions", "snapshot")

    partitions = figures_of(report, "partitions")
    assert partitions["delivered_20"]["value"] == "1/1"
    assert partitions["delivered_20"]["passed"] is True
    assert partitions["delivered_100"]["value"] == "1/1"
    assert partitions["delivered_100"]["passed"] is True
    for size in report["details"]["partitions"]:
        assert size["created_delivered"] == size["created"] == 3 * size["partitions"]
        assert size["idle_passes"] > 0
        assert [tick["polled"] for tick in size["idle_ticks"]] == [0, 0, 0]
    assert {"idle_pass_ratio", "run_ratio", "idle_tick_ratio"} <= set(partitions)

    snapshot = figures_of(report, "snapshot/sqlite")
    assert snapshot["again_events"]["value"] == 0
    assert snapshot["again_events"]["passed"] is True
    again = report["details"]["snapshot/sqlite"]["again"]
    assert (again["items"], again["pages"], again["error"]) == (2_000, 4, None)
    initial = report["details"]["snapshot/sqlite"]["initial"]
    assert (initial["events"], initial["delivered"]) == (2_000, 2_000)
    assert 0 < snapshot["again_rss"]["value"] < 300
    assert snapshot["again_rss"]["passed"] is True


def test_replicas_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    report = run_harness(tmp_path, "replicas", "--stores", "postgres")

    replicas = figures_of(report, "replicas/postgres")
    assert replicas["overlaps"]["value"] == 0
    assert replicas["overlaps"]["passed"] is True
    details = report["details"]["replicas/postgres"]
    # That the killed replica's keys are taken over is asserted here; how fast (the 2-TTL
    # target) is a figure of `make bench-scale`, which a loaded machine may stretch.
    takeover = replicas["takeover"]["value"]
    assert math.isfinite(takeover), "a key of the killed replica was never polled again"
    assert takeover <= 20 * details["lease_ttl_ms"] / 1000, takeover
    assert details["expected_events"] == details["delivered_events"] >= 24 * 3
    assert details["missing"] == []
    assert sorted(details["shares"]) == ["po-r1", "po-r2", "po-r3"]
    assert details["exit_codes"] == {"po-r1": 0, "po-r2": -9, "po-r3": 0}
