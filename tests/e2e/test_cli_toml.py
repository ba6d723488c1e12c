"""``watukuy`` run on a ``pollers.toml`` file: the real console script in a subprocess,
reading a small real HTTP vendor started by the test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

WATUKUY = str(Path(sys.executable).with_name("watukuy"))


@dataclass
class Vendor:
    """Issues listed newest id last, ``per_page`` at a time, linked with ``Link: rel=next``."""

    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    base_url: str = ""


def _handler(vendor: Vendor) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            vendor.requests.append(self.path)
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path != "/issues" or self.headers.get("authorization") != "Bearer t0ken":
                self.send_response(404 if url.path != "/issues" else 401)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            page = int(query.get("page", ["1"])[0])
            size = int(query.get("per_page", ["2"])[0])
            chunk = vendor.items[(page - 1) * size : page * size]
            body = json.dumps(chunk).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            if page * size < len(vendor.items):
                nxt = f"{vendor.base_url}/issues?page={page + 1}&per_page={size}"
                self.send_header("link", f'<{nxt}>; rel="next"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def vendor() -> Iterator[Vendor]:
    state = Vendor(
        items=[{"id": n, "title": f"issue {n}", "updated_at": f"2026-01-0{n}"} for n in (1, 2, 3)]
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


FILE = """
[engine]
store = "sqlite:///wk.db"

[pollers.issues]
url = "${VENDOR_URL}/issues"
params = { per_page = 2 }
identity = "id"
version = "updated_at"
paginator = { type = "link_header" }
auth = { type = "bearer", token = "${VENDOR_TOKEN}" }
schedule = { min = "1s", max = "2s" }

[sinks.out]
type = "jsonl"
path = "events.jsonl"
"""


@dataclass
class Shell:
    cwd: Path
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [WATUKUY, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def events(self) -> list[dict[str, Any]]:
        path = self.cwd / "events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture
def sh(tmp_path: Path, vendor: Vendor) -> Shell:
    (tmp_path / "pollers.toml").write_text(textwrap.dedent(FILE), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATUKUY_")}
    env.update(VENDOR_URL=vendor.base_url, VENDOR_TOKEN="t0ken", COLUMNS="100")
    return Shell(tmp_path, env)


def one_mistake_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_typo_is_one_line_naming_file_table_and_key(sh: Shell) -> None:
    text = (sh.cwd / "pollers.toml").read_text("utf-8")
    (sh.cwd / "pollers.toml").write_text(
        text.replace('path = "events.jsonl"', 'pth = "events.jsonl"'),
        "utf-8",
    )
    line = one_mistake_line(sh.run("tick", "pollers.toml"))
    assert line == (
        "error (CONFIG): pollers.toml: [sinks.out] unknown key 'pth' (did you mean 'path'?)"
    )
    # --json keeps the mistake in JSON on stdout, with the field at fault.
    result = sh.run("inspect", "--app", "pollers.toml", "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout) == {
        "error": {
            "type": "ConfigError",
            "code": "CONFIG",
            "message": "pollers.toml: [sinks.out] unknown key 'pth' (did you mean 'path'?)",
            "field": "sinks.out.pth",
        }
    }
    assert not (sh.cwd / "wk.db").exists()


def test_an_unset_variable_is_named_and_its_neighbours_values_are_not_shown(sh: Shell) -> None:
    del sh.env["VENDOR_TOKEN"]
    line = one_mistake_line(sh.run("run", "pollers.toml"))
    assert line == (
        "error (CONFIG): pollers.toml: [pollers.issues.auth] token: the environment "
        "variable VENDOR_TOKEN is not set (set it, or write a default after ':-' inside the "
        "braces)"
    )


def test_a_missing_file_and_a_file_next_to_another_app(sh: Shell) -> None:
    line = one_mistake_line(sh.run("tick", "absent.toml"))
    assert line == "error: --app: there is no configuration file at 'absent.toml'"
    line = one_mistake_line(sh.run("tick", "pollers.toml", "--app", "other.toml"))
    assert line == (
        "error: tick: got both the configuration file 'pollers.toml' and --app 'other.toml'; "
        "give one"
    )


def subjects(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((event["type"], event["subject"]) for event in events)


def test_tick_reads_the_vendor_and_the_sink_gets_the_items(sh: Shell, vendor: Vendor) -> None:
    result = sh.run("tick", "pollers.toml", "--json")
    assert result.returncode == 0, (result.stdout, result.stderr)
    report = json.loads(result.stdout)
    assert [row["poller"] for row in report["polled"]] == ["issues"]
    assert subjects(sh.events()) == [
        ("issues.created", "1"),
        ("issues.created", "2"),
        ("issues.created", "3"),
    ]
    assert sh.events()[0]["data"] == {"id": 1, "title": "issue 1", "updated_at": "2026-01-01"}
    assert vendor.requests == ["/issues?per_page=2", "/issues?page=2&per_page=2"]
    assert (sh.cwd / "wk.db").exists()


def test_inspect_and_the_environment_name_the_file_too(sh: Shell) -> None:
    assert sh.run("tick", "pollers.toml").returncode == 0
    report = json.loads(sh.run("inspect", "--app", "pollers.toml", "--json").stdout)
    [key] = report["pollers"]
    assert key["poller"] == "issues"
    assert key["items"] == 3
    sh.env["WATUKUY_APP"] = "pollers.toml"
    again = json.loads(sh.run("inspect", "--json").stdout)
    assert [(k["poller"], k["items"]) for k in again["pollers"]] == [("issues", 3)]


def test_every_operator_command_takes_the_file_in_place_of_app(sh: Shell) -> None:
    assert sh.run("tick", "pollers.toml").returncode == 0
    report = json.loads(sh.run("inspect", "pollers.toml", "--json").stdout)
    assert [(k["poller"], k["items"]) for k in report["pollers"]] == [("issues", 3)]
    for command in (
        ("pause", "pollers.toml", "--poller", "issues"),
        ("resume", "pollers.toml", "--poller", "issues"),
        ("trigger", "pollers.toml", "--poller", "issues"),
        ("parked", "ls", "pollers.toml", "--poller", "issues"),
        ("deletes", "show", "pollers.toml", "--poller", "issues"),
        ("migrate", "pollers.toml"),
    ):
        result = sh.run(*command, "--json")
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    line = one_mistake_line(sh.run("inspect", "pollers.toml", "--app", "other.toml"))
    assert line == (
        "error: inspect: got both the configuration file 'pollers.toml' and --app "
        "'other.toml'; give one"
    )


def test_store_on_the_command_line_wins_over_the_file(sh: Shell) -> None:
    result = sh.run("tick", "pollers.toml", "--store", "sqlite:///other.db")
    assert result.returncode == 0, result.stderr
    assert (sh.cwd / "other.db").exists()
    assert not (sh.cwd / "wk.db").exists()


def test_run_delivers_events_and_stops_on_sigterm(sh: Shell, vendor: Vendor) -> None:
    process = subprocess.Popen(
        [WATUKUY, "run", "pollers.toml", "--refresh", "200ms"],
        cwd=sh.cwd,
        env=sh.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: len(sh.events()) >= 3, process)
        vendor.items.append({"id": 4, "title": "issue 4", "updated_at": "2026-01-04"})
        vendor.items[0] = {**vendor.items[0], "title": "issue one", "updated_at": "2026-01-05"}
        wait_for(lambda: len(sh.events()) >= 5, process)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, (stdout, stderr)
    assert stdout.rstrip().endswith("stopped")
    assert subjects(sh.events()) == [
        ("issues.created", "1"),
        ("issues.created", "2"),
        ("issues.created", "3"),
        ("issues.created", "4"),
        ("issues.updated", "1"),
    ]


def wait_for(condition: Any, process: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"watukuy run exited: {process.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for events")
        time.sleep(0.1)


def test_with_a_stdout_sink_stdout_is_the_events_and_the_report_goes_to_stderr(
    sh: Shell,
) -> None:
    text = (sh.cwd / "pollers.toml").read_text("utf-8")
    (sh.cwd / "pollers.toml").write_text(
        text.replace('type = "jsonl"\npath = "events.jsonl"', 'type = "stdout"'), "utf-8"
    )
    result = sh.run("tick", "pollers.toml", "--json")
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert subjects(printed) == [
        ("issues.created", "1"),
        ("issues.created", "2"),
        ("issues.created", "3"),
    ]
    assert all(event["specversion"] == "1.0" for event in printed)
    [report] = [json.loads(line) for line in result.stderr.splitlines()]
    assert [row["poller"] for row in report["polled"]] == ["issues"]
    result = sh.run("tick", "pollers.toml")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # nothing new, and the table went to stderr
    assert re.search(r"\b\d+ cycles? ran\b", result.stderr), result.stderr
