"""A configuration file built into an engine that polls a real vendor: the events reach the
file's sinks, and a secret named with ``{ env = ... }`` is read when a request goes out."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import watukuy as wk
from support.rest_vendors import StripeVendor
from watukuy import rest

FILE = """
[pollers.charges]
url = "${STRIPE_API}/v1/items"
items = "data"
identity = "id"
paginator = { type = "starting_after", limit = 2 }
auth = { type = "bearer", token = { env = "STRIPE_TOKEN" } }
deletes = { confirm_passes = 1, guard_share = 1.0 }

[sinks.file]
type = "jsonl"
path = "${EVENTS}"
"""


@pytest.fixture
def stripe() -> Iterator[StripeVendor]:
    with StripeVendor(token="sk_test_123") as vendor:
        yield vendor


def events(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return [(line["type"], line["subject"]) for line in lines]


async def test_a_file_polls_a_vendor_into_its_sink(
    tmp_path: Path, stripe: StripeVendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        stripe.add(amount=100)
    path = tmp_path / "pollers.toml"
    path.write_text(textwrap.dedent(FILE), "utf-8")
    out = tmp_path / "events.jsonl"
    config = rest.load_config(path, env={"STRIPE_API": stripe.base_url, "EVENTS": str(out)})
    # The token is read from the environment at request time, not when the file is loaded.
    monkeypatch.setenv("STRIPE_TOKEN", "sk_test_123")
    engine = config.build_engine(store=wk.MemoryStore())
    try:
        result = await engine.tick()
        assert [row.error for row in result.polled] == [None]
        assert sorted(events(out)) == [
            ("charges.created", "it_000001"),
            ("charges.created", "it_000002"),
            ("charges.created", "it_000003"),
        ]
        stripe.update("it_000002", amount=250)
        stripe.delete("it_000003")
        await engine.trigger("charges")
        await engine.tick()
        await engine.tick()
    finally:
        await engine.stop()
        await config.aclose()
    later: list[Any] = events(out)[3:]
    assert sorted(later) == [("charges.deleted", "it_000003"), ("charges.updated", "it_000002")]
