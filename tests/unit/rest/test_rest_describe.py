"""The request template, its placeholders, and the item selectors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import watukuy as wk
from watukuy import rest
from watukuy.model.page import InvalidPageError
from watukuy.rest._describe import field_reader, fill, fill_value, items_reader

TENANT = wk.Partition("acme", {"org": "acme-corp", "limit": 50, "token": "s3cret"})


# --- placeholders -----------------------------------------------------------------------


def test_partition_and_its_fields_are_filled_in() -> None:
    assert fill("/t/{partition}/orgs/{partition.org}", TENANT, "request.url") == (
        "/t/acme/orgs/acme-corp"
    )


def test_other_braces_are_left_alone() -> None:
    query = (
        "query { repository(owner: $o) { issues(first: 50) { nodes { id } } } } {x} {partitions}"
    )
    assert fill(query, TENANT, "request.json") == query


def test_a_value_that_is_one_placeholder_keeps_its_type() -> None:
    body = {"variables": {"first": "{partition.limit}", "org": "org:{partition.org}"}, "n": [1]}
    assert fill_value(body, TENANT, "request.json") == {
        "variables": {"first": 50, "org": "org:acme-corp"},
        "n": [1],
    }


def test_an_unknown_partition_field_names_the_field_and_hides_the_data() -> None:
    with pytest.raises(wk.ConfigError) as caught:
        fill_value({"q": "{partition.region}"}, TENANT, "request.params")
    assert caught.value.field == "request.params.q"
    assert "region" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_partition_data_may_be_an_object() -> None:
    @dataclasses.dataclass
    class Data:
        org: str

    assert fill("{partition.org}", wk.Partition("k", Data("o")), "request.url") == "o"


def test_a_partition_without_data_has_no_fields() -> None:
    with pytest.raises(wk.ConfigError, match="has no 'org'"):
        fill("{partition.org}", wk.Partition("k"), "request.url")


def test_render_fills_every_part() -> None:
    request = rest.Request(
        url="https://api.example/{partition}/items",
        method="post",
        params={"org": "{partition.org}", "per_page": 100},
        headers={"X-Org": "{partition.org}"},
        json={"query": "{ items }", "org": "{partition.org}"},
    )
    call = request.render(TENANT)
    assert call == rest.Call(
        method="POST",
        url="https://api.example/acme/items",
        params={"org": "acme-corp", "per_page": 100},
        headers={"X-Org": "acme-corp"},
        json={"query": "{ items }", "org": "acme-corp"},
    )


# --- selectors ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [".", ""])
def test_items_of_the_body_itself(spec: str) -> None:
    assert items_reader(spec)([{"id": 1}]) == [{"id": 1}]


def test_items_at_a_dotted_path() -> None:
    body = {"data": {"orders": {"nodes": [{"id": 1}, {"id": 2}]}}}
    assert items_reader("data.orders.nodes")(body) == [{"id": 1}, {"id": 2}]


def test_items_by_a_callable() -> None:
    assert items_reader(lambda body: body["x"])({"x": ({"id": 1},)}) == [{"id": 1}]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"other": []}, "no 'results'"),
        ({"results": None}, "got NoneType"),
        ({"results": {"id": 1}}, "got dict"),
        ({"results": "text"}, "got str"),
    ],
)
def test_a_body_without_its_list_is_an_invalid_page(body: Any, message: str) -> None:
    with pytest.raises(InvalidPageError, match=message):
        items_reader("results")(body)


@pytest.mark.parametrize("spec", [3, "a..b", None])
def test_a_bad_items_path_is_a_config_error(spec: Any) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        items_reader(spec)
    assert caught.value.field == "items"


def test_field_reader_follows_keys_indexes_and_attributes() -> None:
    @dataclasses.dataclass
    class Meta:
        stamp: str

    assert field_reader("id", "identity")({"id": 7}) == 7
    assert field_reader("lines.1.sku", "identity")({"lines": [{}, {"sku": "b"}]}) == "b"
    assert field_reader("meta.stamp", "version")({"meta": Meta("t1")}) == "t1"
    assert field_reader(lambda item: item["id"] * 2, "identity")({"id": 2}) == 4


def test_field_reader_on_an_item_without_the_path_raises_value_error() -> None:
    with pytest.raises(ValueError, match="no 'id'"):
        field_reader("id", "identity")({"key": 1})


@pytest.mark.parametrize("spec", ["", ".id", 5])
def test_a_bad_field_path_names_the_field(spec: Any) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        field_reader(spec, "version")
    assert caught.value.field == "version"


# --- the Request ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"url": ""}, "request.url"),
        ({"url": 5}, "request.url"),
        ({"url": "u", "method": "FETCH"}, "request.method"),
        ({"url": "u", "params": ["a"]}, "request.params"),
        ({"url": "u", "params": {"a": {"b": 1}}}, "request.params.a"),
        ({"url": "u", "headers": {"Accept": 1}}, "request.headers.Accept"),
        ({"url": "u", "headers": {"": "x"}}, "request.headers"),
        ({"url": "u", "json": {"a": [1, {"b": object()}]}}, "request.json.a.b"),
        ({"url": "u", "json": {1: "x"}}, "request.json"),
    ],
)
def test_a_bad_request_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        rest.Request(**kwargs)
    assert caught.value.field == field


def test_a_secret_header_of_the_wrong_type_is_not_shown() -> None:
    with pytest.raises(wk.ConfigError) as caught:
        rest.Request(url="u", headers={"X-Api-Key": 123456789})
    assert "123456789" not in str(caught.value)


def test_request_fields_are_the_toml_keys() -> None:
    names = [f.name for f in dataclasses.fields(rest.Request)]
    assert names == ["url", "method", "params", "headers", "json"]


def test_request_of_a_url() -> None:
    assert rest.Request.of("https://x/y") == rest.Request(url="https://x/y")
    with pytest.raises(wk.ConfigError, match="request"):
        rest.Request.of(42)  # type: ignore[arg-type]


def test_repr_shows_no_secret() -> None:
    request = rest.Request(
        url="https://user:pw@api.example/items?api_key=k1",
        params={"per_page": 100, "access_token": "k2"},
        headers={"Accept": "application/json", "Authorization": "Bearer k3", "X-Key": "k4"},
        json={"password": "k5"},
    )
    shown = repr(request)
    for secret in ("pw", "k1", "k2", "k3", "k4", "k5"):
        assert secret not in shown.replace("per_page", "")
    assert "application/json" in shown
    assert "per_page" in shown
    assert "'Authorization': '***'" in shown
