"""``watukuy demo`` as a real process: killed with SIGKILL mid-stream, restarted, and
checked from the consumer's side.

The consumer log (one row per event id, with a delivery count) must show, once the
restarted demo has caught up: the vendor's final state for every item (nothing lost, the
deletes included), one id per observation (a restart re-creates no id for what was already
delivered), and redeliveries only for events that were in flight at the kill (at most one
extra delivery each, at most as many as can be in flight).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import IO, Any

import pytest

from watukuy.demo import CATALOG, DELIVERY_CONCURRENCY, ORDERS, TENANTS, ConsumerLog, VendorWorld
from watukuy.model import json as wkjson

pytestmark = pytest.mark.slow

SEED = 5
MUTATIONS = 40


def _demo(db: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATUKUY_")}
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "watukuy",
            "demo",
            "--db",
            str(db),
            "--json",
            "--seed",
            str(SEED),
            "--mutate-every",
            "150ms",
            "--mutations",
            str(MUTATIONS),
            *extra,
        ],
        cwd=db.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _line(stream: IO[str] | None) -> dict[str, Any]:
    assert stream is not None
    line = stream.readline()
    assert line, "the demo ended early"
    data: dict[str, Any] = json.loads(line)
    return data


def _journal_steps(journal: Path) -> int:
    """Complete step lines in the vendor journal (the first line is its header)."""
    return journal.read_text("utf-8").count("\n") - 1


def _expected(journal: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The vendor's final items by (poller, partition, id)."""
    world = VendorWorld.from_journal(journal)
    assert world.steps == MUTATIONS
    items: dict[tuple[str, str, str], dict[str, Any]] = {}
    for tenant, poller, partition in [
        (ORDERS, "orders", ""),
        (CATALOG, "catalog", ""),
        *[(name, "invoices", name) for name in TENANTS],
    ]:
        for item in world.api.tenant(tenant).all():
            items[(poller, partition, item["id"])] = item
    return items


def _mismatches(
    rows: list[dict[str, Any]], expected: dict[tuple[str, str, str], dict[str, Any]]
) -> list[str]:
    """What the consumer's view still gets wrong about the vendor's final state."""
    last: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["poller"], row["partition"], row["subject"])
        if key not in last or row["sequence"] > last[key]["sequence"]:
            last[key] = row
    problems = []
    for key, item in expected.items():
        seen = last.get(key)
        if seen is None or seen["type"] == "deleted" or seen["data"] != item:
            problems.append(f"{key}: expected {item}, consumer has {seen}")
    for key, seen in last.items():
        if key not in expected and seen["type"] != "deleted":
            problems.append(f"{key}: gone at the vendor, consumer has {seen['type']}")
    return problems


def test_demo_survives_sigkill_without_losing_or_renaming_events(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    log_path = tmp_path / "demo.consumer.db"
    journal = tmp_path / "demo.vendor.jsonl"

    # First run: events flow within a few seconds; kill -9 it in the middle of the stream.
    first = _demo(db)
    try:
        started_at = time.monotonic()
        assert _line(first.stdout)["kind"] == "started"
        kinds: list[str] = []
        while len([k for k in kinds if k == "event"]) < 60:
            record = _line(first.stdout)
            kinds.append(record["kind"])
            if record["kind"] == "event" and kinds.count("event") == 1:
                # Generous bounds: they catch a demo that stalls, not a slow machine (how
                # fast the first events come is a figure, not an assertion).
                assert time.monotonic() - started_at < 60, "no first event within a minute"
        assert time.monotonic() - started_at < 120
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
    before = {row["event_id"]: row for row in ConsumerLog.read(log_path)}
    assert len(before) >= 60
    steps_at_kill = _journal_steps(journal)

    # Another seed on the same files is refused, in one line (of JSON, under --json).
    refused = subprocess.run(
        [sys.executable, "-m", "watukuy", "demo", "--db", str(db), "--seed", "12", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 2
    assert refused.stderr == ""
    [line] = refused.stdout.splitlines()
    assert "--seed" in json.loads(line)["error"]["message"]

    # Second run: it says what it resumes, then catches up with the vendor.
    second = _demo(db)
    try:
        started = _line(second.stdout)
        assert started["kind"] == "started"
        assert started["vendor_steps"] >= steps_at_kill - 1
        resumed = _line(second.stdout)
        assert resumed["kind"] == "resumed"
        keys = {(k["poller"], k["partition"]) for k in resumed["keys"]}
        assert keys == {("orders", ""), ("catalog", "")} | {("invoices", t) for t in TENANTS}
        assert resumed["consumer_log_events"] == len(before)
        orders = next(k for k in resumed["keys"] if k["poller"] == "orders")
        assert orders["cursor"] not in ("(initial)", "(start)")

        # A second demo on the same files while this one runs is refused.
        busy = subprocess.run(
            [sys.executable, "-m", "watukuy", "demo", "--db", str(db), "--seed", str(SEED)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert busy.returncode == 2
        assert "another watukuy demo" in busy.stderr
        assert busy.stderr.count("\n") == 1

        deadline = time.monotonic() + 40
        problems = ["the vendor is still changing"]
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if _journal_steps(journal) < MUTATIONS:
                continue
            problems = _mismatches(ConsumerLog.read(log_path), _expected(journal))
            if not problems:
                break
        assert problems == [], problems[:5]
    finally:
        second.send_signal(signal.SIGTERM)
        out, err = second.communicate(timeout=30)
    assert second.returncode == 0, err
    assert "Traceback" not in err
    stopped = json.loads(out.strip().splitlines()[-1])
    assert stopped["kind"] == "stopped"

    rows = ConsumerLog.read(log_path)
    # Nothing delivered before the kill went missing.
    assert set(before) <= {row["event_id"] for row in rows}
    # One id per observation: the same (item, type, payload) never got a second id.
    ids: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    for row in rows:
        observation = (
            row["poller"],
            row["partition"],
            row["subject"],
            row["type"],
            wkjson.dumps(row["data"]),
        )
        ids[observation].add(row["event_id"])
    renamed = {obs: found for obs, found in ids.items() if len(found) > 1}
    assert renamed == {}
    # Redelivered only what was in flight at the kill: once each, and no more than can be.
    twice = [row for row in rows if row["deliveries"] > 1]
    assert all(row["deliveries"] == 2 for row in twice), twice
    assert all(row["event_id"] in before for row in twice), twice
    in_flight_max = (
        DELIVERY_CONCURRENCY["orders"]
        + DELIVERY_CONCURRENCY["catalog"]
        + DELIVERY_CONCURRENCY["invoices"] * len(TENANTS)
    )
    assert len(twice) <= in_flight_max
    # The orders lane really found deletes through its reconcile, and the catalog its own.
    deleted = {(row["poller"], row["lane"]) for row in rows if row["type"] == "deleted"}
    assert ("orders", "reconcile") in deleted
    assert ("catalog", "live") in deleted


def test_demo_runs_for_a_duration_and_stops_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "short.db"
    process = _demo(db, "--duration", "3s")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["kind"] == "started"
    assert records[-1]["kind"] == "stopped"
    events = [r for r in records if r["kind"] == "event"]
    assert len(events) >= 30  # the initial datasets: 12 orders, 10 products, 12 invoices
    assert records[-1]["consumer_log_events"] == len({e["id"] for e in events})
    assert {e["poller"] for e in events} == {"orders", "catalog", "invoices"}
    assert (tmp_path / "short.vendor.jsonl").exists()
    assert (tmp_path / "short.consumer.db").exists()
