"""``watukuy ui`` as a real process: it serves the admin page for a store alone on
127.0.0.1, asks for a token off loopback, and turns mistakes into one line and status 2."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATUKUY_")}
    env["HOME"] = str(tmp_path)
    return env


def _watukuy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watukuy", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_env(tmp_path),
    )


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    migrated = _watukuy(tmp_path, "migrate", "--store", url)
    assert migrated.returncode == 0, migrated.stderr
    return url


def test_mistakes_exit_2_with_one_line(tmp_path: Path, store: str) -> None:
    cases = [
        ((), "ui needs --app"),
        (("--store", store, "--host", "0.0.0.0"), "pass --token too"),
        (
            ("--store", store, "--host", "0.0.0.0", "--token", "short"),
            "--token: use at least 12 characters",
        ),
        (("--store", f"sqlite:///{tmp_path / 'missing.db'}"), "no SQLite database"),
        (("--store", store, "--port", "70000"), "--port"),
        (("--store", store, "--refresh", "soon"), "--refresh"),
        (("--store", store, "--allow-host", "http://ops.internal/"), "--allow-host"),
        (("--app", "nowhere.to.be:found"), "cannot import"),
    ]
    for args, fragment in cases:
        # Port 0 wherever the port is not the point: 8765 may be busy on a shared machine.
        port = () if "--port" in args else ("--port", "0")
        result = _watukuy(tmp_path, "ui", *args, *port)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (args, result.stderr)
        assert fragment in lines[0], (args, lines[0])


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "watukuy", "ui", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("watukuy ui: http://127.0.0.1:"), line + process.stderr.read()
    return process, line.split()[2]


def _stop(process: subprocess.Popen[str]) -> str:
    """Ctrl-C, then what the process printed after its first line."""
    process.send_signal(signal.SIGINT)
    try:
        out, _ = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return out


def test_serves_a_store_on_loopback(tmp_path: Path, store: str) -> None:
    process, url = _serve(tmp_path, "--store", store)
    try:
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200
        assert "store only" in page.text
        assert "No authentication." in page.text
    finally:
        rest = _stop(process)
    assert process.returncode == 0
    assert rest.strip() == "watukuy ui: stopped"


def test_a_token_is_asked_for_as_a_basic_password(tmp_path: Path, store: str) -> None:
    token = "correct-horse-battery"
    process, url = _serve(tmp_path, "--store", store, "--token", token)
    try:
        refused = httpx.get(url, timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic")
        wrong = base64.b64encode(b"op:nope").decode()
        assert httpx.get(url, headers={"authorization": f"Basic {wrong}"}).status_code == 401
        good = base64.b64encode(f"op:{token}".encode()).decode()
        page = httpx.get(url, headers={"authorization": f"Basic {good}"}, timeout=10)
        assert page.status_code == 200
        assert "No authentication." not in page.text
    finally:
        _stop(process)


def test_json_prints_one_line_once_serving_and_one_when_stopped(tmp_path: Path, store: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "watukuy", "ui", "--port", "0", "--store", store, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        serving = json.loads(line)
        assert set(serving) == {"url", "mode", "store", "auth"}, line
        assert serving["url"].startswith("http://127.0.0.1:")
        assert (serving["mode"], serving["auth"]) == ("store", "none")
        assert httpx.get(serving["url"], timeout=10).status_code == 200
    finally:
        rest = _stop(process)
    assert process.returncode == 0
    assert [json.loads(line) for line in rest.splitlines()] == [{"stopped": True}]


def test_a_mistake_under_json_is_json(tmp_path: Path, store: str) -> None:
    result = _watukuy(tmp_path, "ui", "--store", store, "--refresh", "soon", "--json")
    assert result.returncode == 2
    assert result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert (error["type"], error["field"]) == ("ConfigError", "--refresh")


def test_serves_the_engine_of_a_pollers_file(tmp_path: Path) -> None:
    (tmp_path / "pollers.toml").write_text(
        '[engine]\nstore = "sqlite:///ui.db"\n\n'
        '[pollers.issues]\nurl = "http://127.0.0.1:9/issues"\nidentity = "id"\n\n'
        '[sinks.out]\ntype = "jsonl"\npath = "events.jsonl"\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "watukuy", "ui", "pollers.toml", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        serving = json.loads(line)
        assert serving["mode"] == "engine", line
        page = httpx.get(serving["url"], timeout=10)
        assert page.status_code == 200
        assert "issues" in page.text
    finally:
        _stop(process)
    assert process.returncode == 0
