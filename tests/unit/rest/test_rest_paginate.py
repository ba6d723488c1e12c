"""Each paginator's request and end rules, on plain data."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

import watukuy as wk
from watukuy import rest
from watukuy.model.page import InvalidPageError
from watukuy.rest._paginate import parse_link_header

BASE = rest.Call(method="GET", url="https://api.example/items", params={"state": "all"})


def reply(
    paginator: Any,
    body: Any = None,
    items: Sequence[Any] = (),
    *,
    page: int = 1,
    token: Any = None,
    headers: dict[str, str] | None = None,
) -> rest.Step:
    position = rest.Position(page=page, token=token)
    step: rest.Step = paginator.step(
        rest.Reply(
            call=BASE,
            position=position,
            url="https://api.example/items?page=1",
            headers=headers or {},
            body=body,
            items=list(items),
            identity=lambda item: item["id"],
        )
    )
    return step


def rows(count: int) -> list[dict[str, Any]]:
    return [{"id": n, "updated_at": f"2026-01-0{1 + n % 5}"} for n in range(1, count + 1)]


def test_every_paginator_is_registered_by_its_toml_name() -> None:
    assert dict(rest.PAGINATORS) == {
        "link_header": rest.LinkHeader,
        "next_url": rest.NextUrl,
        "cursor": rest.CursorParam,
        "starting_after": rest.StartingAfter,
        "offset": rest.OffsetLimit,
        "page_number": rest.PageNumber,
        "keyset": rest.Keyset,
    }
    for cls in rest.PAGINATORS.values():
        assert dataclasses.is_dataclass(cls)
        assert "kind" not in {f.name for f in dataclasses.fields(cls)}


def test_the_built_in_paginators_have_the_protocol() -> None:
    for paginator in (rest.LinkHeader(), rest.CursorParam(path="next"), rest.PageNumber()):
        assert isinstance(paginator, rest.Paginator)


# --- link header ------------------------------------------------------------------------------


def test_link_header_parsing() -> None:
    header = '<https://a/x?page=2>; rel="next", <https://a/x?page=9>; rel="last"'
    assert parse_link_header(header) == {"next": "https://a/x?page=2", "last": "https://a/x?page=9"}
    assert parse_link_header('<https://a/b?q=1,2>; rel="prev next"; title="a, b"') == {
        "prev": "https://a/b?q=1,2",
        "next": "https://a/b?q=1,2",
    }
    assert parse_link_header("<https://a/b>;rel=next") == {"next": "https://a/b"}
    assert parse_link_header("") == {}


def test_link_header_follows_the_next_link() -> None:
    paginator = rest.LinkHeader()
    step = reply(paginator, headers={"link": '</items?page=2>; rel="next"'})
    assert step == rest.Step(has_more=True, token="https://api.example/items?page=2")
    assert paginator.apply(BASE, rest.Position(page=1)) == BASE
    following = paginator.apply(BASE, rest.Position(page=2, token=step.token))
    assert (following.url, dict(following.params)) == ("https://api.example/items?page=2", {})


def test_link_header_ends_without_a_next_link() -> None:
    step = reply(rest.LinkHeader(), headers={"link": '</items?page=1>; rel="first"'})
    assert step == rest.Step(has_more=False)
    assert reply(rest.LinkHeader()) == rest.Step(has_more=False)


def test_link_header_with_another_rel() -> None:
    step = reply(rest.LinkHeader(rel="Older"), headers={"link": '<https://a/o>; rel="older"'})
    assert step.token == "https://a/o"


# --- next url ------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"next": None}, {"next": ""}, {}])
def test_next_url_ends_on_null_empty_or_missing(body: Any) -> None:
    assert reply(rest.NextUrl(), body) == rest.Step(has_more=False)


def test_next_url_resolves_a_relative_link() -> None:
    step = reply(rest.NextUrl(path="links.next"), {"links": {"next": "/items?cursor=abc"}})
    assert step == rest.Step(has_more=True, token="https://api.example/items?cursor=abc")


def test_next_url_that_is_not_text_is_an_invalid_page() -> None:
    with pytest.raises(InvalidPageError, match="expected a URL"):
        reply(rest.NextUrl(), {"next": 3})


# --- cursor param --------------------------------------------------------------------------------


def test_cursor_in_the_query() -> None:
    paginator = rest.CursorParam(path="response_metadata.next_cursor")
    step = reply(paginator, {"response_metadata": {"next_cursor": "dXNlcjpVMDYx"}})
    assert step == rest.Step(has_more=True, token="dXNlcjpVMDYx")
    call = paginator.apply(BASE, rest.Position(page=2, token=step.token))
    assert dict(call.params) == {"state": "all", "cursor": "dXNlcjpVMDYx"}
    assert reply(paginator, {"response_metadata": {"next_cursor": ""}}).has_more is False


def test_cursor_into_the_json_body_with_has_more() -> None:
    paginator = rest.CursorParam(
        path="data.x.pageInfo.endCursor",
        param="variables.after",
        has_more="data.x.pageInfo.hasNextPage",
        location="json",
    )
    body = {"data": {"x": {"pageInfo": {"endCursor": "Y3Vy", "hasNextPage": False}}}}
    # The last page keeps its end cursor: under mode="token" the next cycle continues after it.
    assert reply(paginator, body) == rest.Step(has_more=False, token="Y3Vy")
    call = rest.Call("POST", "https://api/graphql", json={"query": "{}", "variables": {"n": 1}})
    sent = paginator.apply(call, rest.Position(page=2, token="Y3Vy"))
    assert sent.json == {"query": "{}", "variables": {"n": 1, "after": "Y3Vy"}}
    assert call.json == {"query": "{}", "variables": {"n": 1}}  # the template is untouched


def test_cursor_has_more_must_be_a_boolean_or_a_link() -> None:
    paginator = rest.CursorParam(path="next", has_more="more")
    with pytest.raises(InvalidPageError, match="true or false"):
        reply(paginator, {"next": "t", "more": 1})
    with pytest.raises(InvalidPageError, match="true or false"):
        reply(paginator, {"next": "t"})  # a has_more the body lacks is never read as "no more"


# --- starting after ------------------------------------------------------------------------------


def test_starting_after_sends_the_last_identity() -> None:
    paginator = rest.StartingAfter(limit=2)
    assert dict(paginator.apply(BASE, rest.Position()).params) == {"state": "all", "limit": 2}
    step = reply(paginator, {"has_more": True}, rows(2))
    assert step == rest.Step(has_more=True, token="2")
    sent = paginator.apply(BASE, rest.Position(page=2, token="2"))
    assert dict(sent.params) == {"state": "all", "limit": 2, "starting_after": "2"}


def test_starting_after_ends_when_has_more_is_false_or_the_page_is_empty() -> None:
    assert reply(rest.StartingAfter(), {"has_more": False}, rows(3)).has_more is False
    assert reply(rest.StartingAfter(), {"has_more": True}, []) == rest.Step(has_more=False)


def test_starting_after_without_has_more_ends_on_a_short_page() -> None:
    paginator = rest.StartingAfter(has_more=None, limit=3)
    assert reply(paginator, {}, rows(3)).has_more is True
    assert reply(paginator, {}, rows(2)).has_more is False


# --- offset --------------------------------------------------------------------------------------


def test_offset_of_each_page() -> None:
    paginator = rest.OffsetLimit(limit=25)
    sent = paginator.apply(BASE, rest.Position(page=3))
    assert dict(sent.params) == {"state": "all", "offset": 50, "limit": 25}


def test_offset_ends_on_a_short_or_empty_page() -> None:
    paginator = rest.OffsetLimit(limit=3)
    assert reply(paginator, {}, rows(3)).has_more is True
    assert reply(paginator, {}, rows(2)).has_more is False
    assert reply(paginator, {}, []).has_more is False


def test_offset_ends_at_the_total() -> None:
    paginator = rest.OffsetLimit(limit=3, total="meta.count")
    assert reply(paginator, {"meta": {"count": 7}}, rows(3), page=2).has_more is True
    assert reply(paginator, {"meta": {"count": 6}}, rows(3), page=2).has_more is False
    with pytest.raises(InvalidPageError, match="count"):
        reply(paginator, {"meta": {}}, rows(3))


# --- page number ---------------------------------------------------------------------------------


def test_page_number_counts_from_start() -> None:
    paginator = rest.PageNumber(param="p", start=0, size_param="per_page", size=50)
    sent = paginator.apply(BASE, rest.Position(page=1))
    assert dict(sent.params) == {"state": "all", "p": 0, "per_page": 50}


def test_page_number_end_rules() -> None:
    assert reply(rest.PageNumber(), {}, rows(1)).has_more is True
    assert reply(rest.PageNumber(), {}, []).has_more is False
    short = rest.PageNumber(size=3, end="short")
    assert (reply(short, {}, rows(3)).has_more, reply(short, {}, rows(2)).has_more) == (True, False)
    flag = rest.PageNumber(end="has_more", has_more="meta.more")
    assert reply(flag, {"meta": {"more": False}}, rows(3)).has_more is False
    assert reply(flag, {"meta": {"more": True}}, rows(3)).has_more is True
    drf = rest.PageNumber(end="has_more", has_more="next")  # PageNumberPagination's `next`
    assert reply(drf, {"next": "https://api.example/items?page=3"}, rows(3)).has_more is True
    assert reply(drf, {"next": None}, rows(3)).has_more is False
    total = rest.PageNumber(end="total", total_pages="pages")
    assert reply(total, {"pages": 3}, rows(3), page=2).has_more is True
    assert reply(total, {"pages": 3}, rows(3), page=3).has_more is False
    found = rest.PageNumber(end="not_found")
    assert (found.ends_on_not_found, rest.PageNumber().ends_on_not_found) == (True, False)
    assert reply(found, {}, rows(1)).has_more is True


# --- keyset --------------------------------------------------------------------------------------


def test_keyset_sends_the_position_and_reads_the_last_item() -> None:
    paginator = rest.Keyset(limit=2)
    assert dict(paginator.apply(BASE, rest.Position()).params) == {"state": "all", "limit": 2}
    at = wk.TimestampPosition("2026-01-02", 7)
    sent = paginator.apply(BASE, rest.Position(token=at))
    assert dict(sent.params) == {
        "state": "all",
        "updated_since": "2026-01-02",
        "after_id": 7,
        "limit": 2,
    }
    step = reply(paginator, {}, rows(2))
    assert step == rest.Step(has_more=True, token=wk.TimestampPosition("2026-01-03", 2))
    assert reply(paginator, {}, rows(1)).has_more is False
    assert reply(paginator, {}, []) == rest.Step(has_more=False)


@pytest.mark.parametrize(
    ("body", "more"),
    [({"next": None}, False), ({"next": "https://a/?page=2"}, True), ({"next": False}, False)],
)
def test_keyset_has_more_from_a_next_link_or_a_flag(body: Any, more: bool) -> None:
    assert reply(rest.Keyset(limit=100, has_more="next"), body, rows(1)).has_more is more


def test_keyset_without_a_tie_break() -> None:
    paginator = rest.Keyset(after_param=None, tie_break=None, limit_param=None)
    sent = paginator.apply(BASE, rest.Position(token=wk.TimestampPosition("t", "ignored")))
    assert dict(sent.params) == {"state": "all", "updated_since": "t"}


def test_keyset_without_an_after_param_keeps_no_tie_break() -> None:
    paginator = rest.Keyset(after_param=None, limit=1)
    sent = paginator.apply(BASE, rest.Position(token=wk.TimestampPosition("t", 3)))
    assert dict(sent.params) == {"state": "all", "updated_since": "t", "limit": 1}
    assert reply(paginator, {}, rows(1)).token == wk.TimestampPosition("2026-01-02", None)
    poller = rest.define_rest_poller(name="k", request="u", identity="id", paginator=paginator)
    assert poller.cursor == wk.TimestampCursor(field="updated_at", tie_break=None)


def test_keyset_passes_initial_lag_and_overlap_to_its_cursor() -> None:
    paginator = rest.Keyset(initial="2026-01-01T00:00:00Z", lag="30s", overlap="2m")
    assert paginator.cursor() == wk.TimestampCursor(
        field="updated_at",
        tie_break="id",
        initial="2026-01-01T00:00:00Z",
        lag="30s",
        overlap="2m",
    )


def test_keyset_last_item_without_its_field_is_an_invalid_page() -> None:
    with pytest.raises(InvalidPageError, match="updated_at"):
        reply(rest.Keyset(limit=1), {}, [{"id": 1}])


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: rest.LinkHeader(rel=""), "paginator.rel"),
        (lambda: rest.NextUrl(path="a..b"), "paginator.path"),
        (lambda: rest.CursorParam(path=""), "paginator.path"),
        (lambda: rest.CursorParam(path="n", location="body"), "paginator.location"),
        (lambda: rest.CursorParam(path="n", param="a..b", location="json"), "paginator.param"),
        (lambda: rest.CursorParam(path="n", has_more=""), "paginator.has_more"),
        (lambda: rest.StartingAfter(limit=0), "paginator.limit"),
        (lambda: rest.StartingAfter(param=3), "paginator.param"),
        (lambda: rest.OffsetLimit(limit=True), "paginator.limit"),
        (lambda: rest.OffsetLimit(total=""), "paginator.total"),
        (lambda: rest.PageNumber(start=-1), "paginator.start"),
        (lambda: rest.PageNumber(end="never"), "paginator.end"),
        (lambda: rest.PageNumber(end="short"), "paginator.size"),
        (lambda: rest.PageNumber(size_param="per_page"), "paginator.size"),
        (lambda: rest.PageNumber(end="has_more"), "paginator.has_more"),
        (lambda: rest.PageNumber(end="total"), "paginator.total_pages"),
        (lambda: rest.Keyset(field=""), "paginator.field"),
        (lambda: rest.Keyset(limit=-5), "paginator.limit"),
        (lambda: rest.Keyset(initial="yesterday"), "paginator.initial"),
        (lambda: rest.Keyset(lag="soon"), "paginator.lag"),
        (lambda: rest.Keyset(overlap=-1), "paginator.overlap"),
    ],
)
def test_a_bad_paginator_names_the_field(make: Any, field: str) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        make()
    assert caught.value.field == field
