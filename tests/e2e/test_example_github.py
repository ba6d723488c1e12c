"""``examples/github-issues.toml`` runs as shipped, with the installed ``watukuy`` command.

The vendor is :class:`support.rest_vendors.LinkVendor` at GitHub's path for a
repository's issues (``per_page`` and ``page``, a ``Link`` header, a bearer token). The
file's ``${GITHUB_API}`` points the example at it; nothing else in the file changes. With
more issues than the example's ``per_page = 100``, a cycle walks three pages. The events
come out on standard output as JSON lines; SIGTERM stops the process with status 0.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from support.rest_vendors import LinkVendor

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "github-issues.toml"
WATUKUY = Path(sys.executable).with_name("watukuy")
TOKEN = "ghp_example-token-never-printed"
REPO = "octo-org/hello-world"
ISSUES = 205  # per_page = 100: pages of 100, 100 and 5


@pytest.fixture
def github() -> Iterator[LinkVendor]:
    with LinkVendor(path=f"/repos/{REPO}/issues", token=TOKEN) as vendor:
        for number in range(1, ISSUES + 1):
            vendor.add(number=number, title=f"Issue {number}", state="open")
        yield vendor


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def test_the_example_prints_the_issues_and_stops_on_sigterm(
    github: LinkVendor, tmp_path: Path
) -> None:
    assert WATUKUY.is_file(), "the console script is installed with the package"
    env = {**os.environ, "GITHUB_API": github.base_url, "GITHUB_REPO": REPO, "GITHUB_TOKEN": TOKEN}
    env.pop("WATUKUY_APP", None)
    process = subprocess.Popen(
        [str(WATUKUY), "run", str(EXAMPLE), "--store", f"sqlite:///{tmp_path / 'github.db'}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    printed: list[str] = []
    created: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 90
        while len(created) < ISSUES and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                continue
            printed.append(line)
            event = json.loads(line)  # standard output holds events and nothing else
            assert event["type"] == "issues.created", event
            created[event["subject"]] = event
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=10)
    assert sorted(created, key=int) == [str(item["id"]) for item in github.items]
    assert {event["data"]["title"] for event in created.values()} == {
        f"Issue {number}" for number in range(1, ISSUES + 1)
    }
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert TOKEN not in err + "".join(printed)
    # One cycle, three pages, each with the example's query (the Link URLs keep it).
    assert len(github.targets) == 3
    assert all(
        "state=all" in target and "sort=created" in target and "per_page=100" in target
        for target in github.targets
    )
