"""The command line in process: exit statuses, one-line errors, id prefixes."""

from __future__ import annotations

import io
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import click
import pytest

import watukuy
from watukuy.cli import CliIO, main
from watukuy.cli._commands import resolve_ids
from watukuy.cli._errors import CliError, describe_failure, failure_of
from watukuy.model.errors import ConfigError, StoreError, WatukuyError


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["version"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("watukuy ")
    assert run(["--version"], capsys)[1] == out


def test_bare_command_shows_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("Usage: watukuy [OPTIONS] COMMAND [ARGS]...")
    code, out, _ = run(["parked"], capsys)
    assert code == 0
    assert "retry" in out


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["nope"], "error: No such command 'nope'. (see 'watukuy --help')"),
        (
            ["pause", "--store", "memory://"],
            "error: Missing option '--poller'. (see 'watukuy pause --help')",
        ),
        (
            ["inspect"],
            "error: inspect needs --app package.module:engine (or WATUKUY_APP), or --store URL "
            "(or WATUKUY_STORE)",
        ),
        (
            ["tick", "--app", "x:y", "--max-duration", "soon"],
            "error (CONFIG): --max-duration: expected a duration like '250ms', '5s', '2m', "
            "'6h' or '1d' (a bare number is seconds), got 'soon'",
        ),
        (["pause", "--store", "memory://", "--poller", "orders"], None),
    ],
)
def test_mistakes_are_one_line_and_exit_2(
    argv: list[str],
    line: str | None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WATUKUY_APP", raising=False)
    monkeypatch.delenv("WATUKUY_STORE", raising=False)
    code, out, err = run(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    if line is not None:
        assert err == line + "\n"
    else:
        assert err.startswith("error: --poller: the store has no poller 'orders'")


def test_store_only_inspect_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["inspect", "--store", "memory://", "--json"], capsys)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["pollers"] == []
    assert report["status"] == "store-only"


def test_describe_failure() -> None:
    assert describe_failure(CliError("--poller: nope")) == ("error: --poller: nope", 2)
    assert describe_failure(ConfigError("bad\nvalue", field="x")) == (
        "error (CONFIG): x: bad value",
        2,
    )
    assert describe_failure(StoreError("down")) == ("error (STORE): down", 2)
    assert describe_failure(WatukuyError("who", code="UNKNOWN_POLLER")) == (
        "error (UNKNOWN_POLLER): who",
        2,
    )
    assert describe_failure(click.ClickException("odd")) == ("error: odd", 1)
    line, code = describe_failure(ZeroDivisionError("division by zero"))
    assert code == 1
    assert line == (
        "error: unexpected ZeroDivisionError: division by zero "
        "(set WATUKUY_DEBUG=1 to see the traceback)"
    )


def test_resolve_ids() -> None:
    known = ["abcdef01" + "0" * 56, "abcdef02" + "0" * 56, "99887766" + "1" * 56]
    assert resolve_ids(["abcdef01", "9988"], known) == [known[0], known[2]]
    assert resolve_ids([known[1], known[1][:10]], known) == [known[1]]
    with pytest.raises(CliError, match="'abcdef' matches 2 parked rows"):
        resolve_ids(["abcdef"], known)
    with pytest.raises(CliError, match="no parked row has an id starting with 'ffff'"):
        resolve_ids(["ffff"], known)
    with pytest.raises(CliError, match="'998' is too short"):
        resolve_ids(["998"], known)


FAILING_APP = """
import watukuy as wk

async def fetch(ctx):
    raise RuntimeError("vendor down")

engine = wk.Engine(
    store=wk.MemoryStore(),
    pollers=[
        wk.define_poller(
            name="things", identity=lambda t: t["id"], cursor=wk.SnapshotDiff(), fetch=fetch
        )
    ],
)
"""


def test_a_failed_cycle_makes_tick_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"failing_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(FAILING_APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    try:
        code, out, _ = run(["tick", "--app", f"{name}:engine", "--json"], capsys)
    finally:
        sys.modules.pop(name, None)
    assert code == 1
    result = json.loads(out)
    assert [(r["poller"], r["error"]["message"]) for r in result["polled"]] == [
        ("things", "vendor down")
    ]


THROTTLED_APP = """
import httpx
import watukuy as wk

def vendor(request):
    return httpx.Response(429, headers={"retry-after": "0"}, json={"error": "slow down"})

async def fetch(ctx):
    response = await ctx.http.get("https://vendor.test/things")
    return wk.Page(items=response.json())

engine = wk.Engine(
    store=wk.MemoryStore(),
    pollers=[
        wk.define_poller(
            name="things", identity=lambda t: t["id"], cursor=wk.SnapshotDiff(), fetch=fetch
        )
    ],
    http_client=httpx.AsyncClient(transport=httpx.MockTransport(vendor)),
)
"""


def test_a_throttled_cycle_is_not_a_failure_for_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"throttled_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(THROTTLED_APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    try:
        code, out, _ = run(["tick", "--app", f"{name}:engine", "--json"], capsys)
    finally:
        sys.modules.pop(name, None)
    assert code == 0
    [cycle] = json.loads(out)["polled"]
    assert cycle["throttled"] is True
    assert cycle["error"]["status"] == 429


def test_main_returns_the_status_and_writes_to_the_given_streams() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["--version"], CliIO(out, err)) == 0
    assert out.getvalue() == f"watukuy {watukuy.__version__}\n"
    assert err.getvalue() == ""

    out, err = io.StringIO(), io.StringIO()
    assert main(["pause", "--store", "memory://", "--poller", "orders"], CliIO(out, err)) == 2
    assert out.getvalue() == ""
    assert err.getvalue().startswith("error: --poller: the store has no poller 'orders'")
    assert err.getvalue().count("\n") == 1


def _json_error(argv: list[str]) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, CliIO(out, err))
    [line] = out.getvalue().splitlines()
    return code, json.loads(line), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "status", "expected"),
    [
        (
            ["tick", "--app", "x:y", "--max-duration", "soon", "--json"],
            2,
            {"type": "ConfigError", "code": "CONFIG", "field": "--max-duration"},
        ),
        (
            ["parked", "ls", "--store", "memory://", "--poller", "customer", "--json"],
            2,
            {"type": "CliError", "field": "--poller"},
        ),
        (
            ["parked", "ls", "--store", "memory://", "--json"],
            2,
            {"type": "MissingParameter", "field": "--poller"},
        ),
        (["inspect", "--json"], 2, {"type": "CliError"}),
        (["nope", "--json"], 2, {"type": "NoSuchCommand"}),
        (
            ["migrate", "--store", "sqlite:////nonexistent-dir/x/wk.db", "--json"],
            2,
            {"type": "StoreError", "code": "STORE"},
        ),
    ],
)
def test_errors_under_json_are_one_json_object_on_stdout(
    argv: list[str], status: int, expected: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WATUKUY_APP", raising=False)
    monkeypatch.delenv("WATUKUY_STORE", raising=False)
    code, report, err = _json_error(argv)
    assert (code, err) == (status, "")
    error = report["error"]
    assert {name: error.get(name) for name in expected} == expected
    assert set(error) <= {"type", "code", "message", "field"}
    # The same words as the line printed without --json.
    text_err = io.StringIO()
    assert main([arg for arg in argv if arg != "--json"], CliIO(io.StringIO(), text_err)) == code
    assert error["message"] in text_err.getvalue()


def test_a_json_error_is_redacted_as_the_line_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATUKUY_APP", raising=False)
    url = "postgresql://ops:hunter2-secret@db.invalid:1/x"
    code, report, _ = _json_error(["inspect", "--store", url, "--json"])
    assert code == 2
    assert "hunter2-secret" not in json.dumps(report)


def test_failure_json_shape() -> None:
    failure = failure_of(ConfigError("expected a duration", field="schedule.min"))
    assert failure.to_json() == {
        "error": {
            "type": "ConfigError",
            "code": "CONFIG",
            "message": "schedule.min: expected a duration",
            "field": "schedule.min",
        }
    }
    assert failure.line() == "error (CONFIG): schedule.min: expected a duration"
