"""``watukuy backfill`` against a vendor that sends ETags: ``--from null`` is the very
beginning, and validators stored by the live lane never short-circuit the backfill lane."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from watukuy.cli import main

APP = textwrap.dedent(
    """
    import httpx

    import watukuy as wk
    from watukuy.testing import FakeApi, fake_items

    api = FakeApi(items=fake_items(5))  # stamped 2026-01-01T00:00:00Z onwards
    api.set_etags(True)

    def fetch_for(limit):
        async def fetch(ctx):
            response = await ctx.http.get(
                "https://fake.api/items",
                params={
                    "since": ctx.cursor.value,
                    "after_id": ctx.cursor.tie_break,
                    "limit": limit,
                },
            )
            if response.not_modified:
                return wk.Page(items=[])
            body = response.json()
            return wk.Page(items=body["data"], has_more=body["has_more"])
        return fetch

    def make_engine():
        return wk.Engine(
            store=wk.SqliteStore("wk.db"),
            http_client=httpx.AsyncClient(transport=api.transport()),
            pollers=[
                wk.define_poller(
                    name="orders",
                    identity=lambda o: o["id"],
                    cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
                    fetch=fetch_for(10),
                ),
                wk.define_poller(
                    name="recent",
                    identity=lambda o: o["id"],
                    cursor=wk.TimestampCursor(
                        field="updated_at", tie_break="id", initial="2026-06-01T00:00:00Z"
                    ),
                    fetch=fetch_for(2),
                ),
            ],
        )
    """
)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An application whose live lanes have polled once."""
    name = f"backfill_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for variable in ("WATUKUY_APP", "WATUKUY_STORE"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["tick", "--app", f"{name}:make_engine", "--json"]) == 0
    yield f"{name}:make_engine"
    sys.modules.pop(name, None)


def backfill(app: str, capsys: pytest.CaptureFixture[str], *options: str) -> dict[str, object]:
    capsys.readouterr()
    code = main(["backfill", "--app", app, "--json", *options])
    out, err = capsys.readouterr()
    assert code == 0, err
    result: dict[str, object] = json.loads(out)
    return result


def test_backfill_from_null_reads_the_history_before_initial(
    app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = backfill(app, capsys, "--poller", "recent", "--from", "null")
    assert (result["items"], result["events"], result["done"]) == (5, 5, True)


def test_a_forced_backfill_is_not_answered_304_from_the_live_lane_validators(
    app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The live lane asked for the same first page, with an ETag in the answer.
    result = backfill(app, capsys, "--poller", "orders", "--from", "null", "--force")
    assert (result["items"], result["events"], result["done"]) == (5, 5, True)
