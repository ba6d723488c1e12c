"""define_rest_poller: the cursor a description implies, and the errors it names."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import watukuy as wk
from watukuy import rest


def define(**given: Any) -> wk.PollerDefinition[Any]:
    given.setdefault("name", "items")
    given.setdefault("request", "https://api.example/items")
    given.setdefault("identity", "id")
    return rest.define_rest_poller(**given)


@dataclasses.dataclass(frozen=True)
class Custom:
    """A paginator of one's own: pages by a number it keeps in a custom cursor."""

    kind: str = "page"
    ends_on_not_found: bool = False

    def apply(self, call: rest.Call, position: rest.Position) -> rest.Call:
        return call.with_params(block=position.cursor)

    def step(self, reply: rest.Reply) -> rest.Step:
        return rest.Step(has_more=False, token=reply.position.cursor + 1)


class NoAuth:
    async def apply(self, call: rest.Call, ctx: wk.FetchContext[Any]) -> rest.Call:
        return call

    async def refresh(self, call: rest.Call, ctx: wk.FetchContext[Any]) -> bool:
        return False


@pytest.mark.parametrize(
    ("paginator", "mode", "cursor"),
    [
        (None, None, wk.SnapshotDiff()),
        (rest.LinkHeader(), None, wk.SnapshotDiff()),
        (rest.NextUrl(), "full", wk.SnapshotDiff()),
        (rest.CursorParam(path="next"), "token", wk.TokenCursor()),
        (rest.StartingAfter(), "token", wk.TokenCursor()),
        (rest.PageNumber(), None, wk.SnapshotDiff()),
        (rest.PageNumber(start=0), "token", wk.PageCursor()),
        (rest.OffsetLimit(), "token", wk.PageCursor()),
        (rest.Keyset(), None, wk.TimestampCursor(field="updated_at", tie_break="id")),
        (
            rest.Keyset(field="m.t", tie_break="k"),
            "keyset",
            wk.TimestampCursor(field="m.t", tie_break="k"),
        ),
        (rest.Keyset(), "full", wk.SnapshotDiff()),
    ],
)
def test_the_cursor_a_description_implies(paginator: Any, mode: Any, cursor: Any) -> None:
    assert define(paginator=paginator, mode=mode).cursor == cursor


def test_the_keyset_cursor_keeps_the_default_lookback() -> None:
    cursor = define(paginator=rest.Keyset()).cursor
    assert isinstance(cursor, wk.TimestampCursor)
    assert (cursor.lookback, cursor.lag_ms) == (True, 0)


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"mode": "incremental"}, "mode"),
        ({"mode": "keyset", "paginator": rest.LinkHeader()}, "mode"),
        ({"mode": "token", "paginator": rest.Keyset()}, "mode"),
        ({"paginator": "link_header"}, "paginator"),
        ({"paginator": rest.PageNumber(), "cursor": wk.PageCursor()}, "cursor"),
        ({"cursor": wk.PageCursor()}, "cursor"),
        ({"fetch": lambda ctx: []}, "fetch"),
        ({"auth": "Bearer abc"}, "auth"),
        ({"transform": "strip"}, "transform"),
        ({"reconcile": "6h"}, "reconcile"),
        ({"items": 3}, "items"),
        ({"identity": ""}, "identity"),
        ({"version": "a..b"}, "version"),
        ({"request": 7}, "request"),
        ({"request": {"url": "u"}}, "request"),
        ({"name": "bad name"}, "name"),
        ({"schedule": {"minimum": "1s"}}, "schedule"),
    ],
)
def test_a_bad_description_names_the_field(given: dict[str, Any], field: str) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        define(**given)
    assert caught.value.field == field


def test_an_auth_of_the_wrong_kind_is_not_shown() -> None:
    with pytest.raises(wk.ConfigError) as caught:
        define(auth="Bearer s3cret-token")
    assert "s3cret" not in str(caught.value)


def test_a_reconcile_next_to_a_full_listing_is_redundant() -> None:
    with pytest.raises(wk.ConfigError, match="redundant") as caught:
        define(paginator=rest.PageNumber(), reconcile=rest.Listing(every="6h"))
    assert caught.value.field == "reconcile"


def test_a_listing_becomes_a_reconcile() -> None:
    poller = define(
        paginator=rest.CursorParam(path="next"),
        mode="token",
        reconcile=rest.Listing(
            every="6h", request="https://api.example/all", paginator=rest.PageNumber()
        ),
    )
    assert poller.reconcile is not None
    assert poller.reconcile.every_ms == 6 * 3_600_000


def test_a_custom_paginator_with_a_custom_cursor() -> None:
    cursor = wk.CustomCursor(initial=0, advance=lambda ctx: (ctx.page_cursor, True))
    poller = define(paginator=Custom(), cursor=cursor)
    assert poller.cursor is cursor


def test_a_custom_keyset_paginator_needs_a_field_or_a_cursor() -> None:
    with pytest.raises(wk.ConfigError) as caught:
        define(paginator=Custom(kind="keyset"))
    assert caught.value.field == "paginator"


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"every": "soon"}, "reconcile.every"),
        ({"every": "0s"}, "reconcile.every"),
        ({"every": "1h", "request": 3}, "reconcile.request"),
        ({"every": "1h", "items": ""}, None),
        ({"every": "1h", "items": 5}, "reconcile.items"),
        ({"every": "1h", "paginator": object()}, "reconcile.paginator"),
        ({"every": "1h", "auth": "token"}, "reconcile.auth"),
    ],
)
def test_a_bad_listing_names_the_field(given: dict[str, Any], field: str | None) -> None:
    if field is None:
        rest.Listing(**given)
        return
    with pytest.raises(wk.ConfigError) as caught:
        rest.Listing(**given)
    assert caught.value.field == field


def test_listing_fields_are_the_toml_keys_and_its_request_may_be_a_url() -> None:
    names = [f.name for f in dataclasses.fields(rest.Listing)]
    assert names == ["every", "request", "items", "paginator", "auth"]
    listing = rest.Listing(every="1h", request="https://api.example/all", auth=NoAuth())
    assert listing.request == rest.Request(url="https://api.example/all")


def test_listing_repr_shows_no_header_secret() -> None:
    request = rest.Request(url="https://a/b", headers={"X-Api-Key": "k-123"})
    assert "k-123" not in repr(rest.Listing(every="1h", request=request))
