"""The when= filters on their own: paths, wildcards, to/from_, combinators."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.diff.patch import json_patch
from watukuy.runtime.filters import as_filter, needs_previous


def updated(before: Any, after: Any, **extra: Any) -> wk.Event[Any]:
    return wk.Event(
        id="e",
        type="updated",
        source="urn:watukuy:orders",
        subject="o1",
        time="1970-01-01T00:00:00.000Z",
        poller="orders",
        partition="",
        lane="live",
        sequence=1,
        data=after,
        previous=before,
        changes=json_patch(before, after),
        **extra,
    )


ORDER = {"status": "pending", "lines": [{"id": 1, "qty": 1}, {"id": 2, "qty": 2}]}


def order(**changes: Any) -> dict[str, Any]:
    return {**ORDER, **changes}


@pytest.mark.parametrize(
    ("when", "after", "passes"),
    [
        (wk.changed("status"), order(status="paid"), True),
        (wk.changed("status"), order(), False),
        (wk.changed(), order(status="paid"), True),
        (wk.changed(""), order(), False),
        (wk.changed("status", to="paid"), order(status="paid"), True),
        (wk.changed("status", to="paid"), order(status="lost"), False),
        (wk.changed("status", from_="pending"), order(status="lost"), True),
        (wk.changed("status", from_="paid"), order(status="lost"), False),
        (wk.changed("/lines/*/qty"), order(lines=[{"id": 1, "qty": 1}, {"id": 2, "qty": 3}]), True),
        (wk.changed("/lines/*/qty", to=3), order(lines=[{"id": 2, "qty": 3}]), True),
        (wk.changed("/lines/*/qty", to=2), order(lines=[{"id": 2, "qty": 2}]), False),
        # A parent changed: a line added counts for /lines/*/qty, with its value.
        (
            wk.changed("/lines/*/qty", to=9),
            order(lines=[*ORDER["lines"], {"id": 3, "qty": 9}]),
            True,
        ),
        (wk.changed("/lines/*/qty", from_=1), order(lines=[{"id": 2, "qty": 2}]), True),
        # A child changed: /lines counts when /lines/1/qty did.
        (wk.changed("lines"), order(lines=[{"id": 1, "qty": 1}, {"id": 2, "qty": 5}]), True),
        (wk.changed("/lines/*/id"), order(lines=[{"id": 1, "qty": 1}, {"id": 2, "qty": 5}]), False),
        (wk.changed("status") | wk.changed("lines"), order(status="x"), True),
        (wk.changed("status") & wk.changed("lines"), order(status="x"), False),
        (~wk.changed("status"), order(status="x"), False),
        (wk.updated() & (lambda e: e.data["status"] == "x"), order(status="x"), True),
        ((lambda e: False) | wk.changed("status"), order(status="x"), True),
        ((lambda e: True) & ~wk.changed("status"), order(status="x"), False),
        (wk.created() | wk.deleted(), order(status="x"), False),
    ],
    ids=repr,
)
def test_filters_on_an_updated_order(when: wk.EventFilter, after: Any, passes: bool) -> None:
    assert as_filter(when)(updated(ORDER, after)) is passes


def test_member_names_with_a_slash_are_escaped() -> None:
    event = updated({"a/b": 1}, {"a/b": 2})
    assert wk.changed("a/b")(event)
    assert wk.changed("/a~1b", to=2)(event)
    assert not wk.changed("/a/b")(event)


def test_changed_never_passes_created_deleted_or_events_without_a_patch() -> None:
    event = updated(ORDER, order(status="paid"))
    for other in ("created", "deleted"):
        fields = {name: getattr(event, name) for name in wk.Event.__dataclass_fields__}
        assert not wk.changed("status")(wk.Event(**{**fields, "type": other}))
    fields = {name: getattr(event, name) for name in wk.Event.__dataclass_fields__}
    assert not wk.changed()(wk.Event(**{**fields, "changes": None}))


def test_needs_previous_follows_the_combinators() -> None:
    assert needs_previous(wk.changed("status"))
    assert needs_previous(wk.created() | wk.changed("status"))
    assert needs_previous(~wk.changed("status"))
    assert needs_previous((lambda e: True) & wk.changed("status"))
    assert not needs_previous(wk.created() | wk.deleted())
    assert not needs_previous(lambda e: True)


def test_reprs_say_what_the_filter_is() -> None:
    assert repr(wk.changed("status", to="paid")) == "changed('/status', to='paid')"
    assert repr(wk.created() | ~wk.deleted()) == "(created() | ~deleted())"


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(wk.ConfigError) as raised:
        wk.changed(3)  # type: ignore[arg-type]
    assert raised.value.field == "path"
    with pytest.raises(wk.ConfigError):
        as_filter("status")  # type: ignore[arg-type]
