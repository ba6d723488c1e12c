"""``wk.Deletes``: validation names the field; the guard's threshold."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"confirm_passes": 0}, "deletes.confirm_passes"),
        ({"confirm_passes": True}, "deletes.confirm_passes"),
        ({"guard_share": 0}, "deletes.guard_share"),
        ({"guard_share": 1.5}, "deletes.guard_share"),
        ({"guard_share": "half"}, "deletes.guard_share"),
        ({"guard_min": -1}, "deletes.guard_min"),
        ({"guard_release_passes": 0}, "deletes.guard_release_passes"),
        ({"verify": "yes"}, "deletes.verify"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(wk.ConfigError) as info:
        wk.Deletes(**options)
    assert info.value.field == field


def test_define_poller_takes_a_dict_and_rejects_unknown_keys() -> None:
    def fetch(ctx: Any) -> Any:
        return []

    common: dict[str, Any] = {
        "name": "catalog",
        "fetch": fetch,
        "identity": lambda o: o["id"],
        "cursor": wk.SnapshotDiff(),
    }
    poller = wk.define_poller(**common, deletes={"confirm_passes": 3, "guard_share": None})
    assert poller.deletes == wk.Deletes(confirm_passes=3, guard_share=None)
    assert wk.define_poller(**common).deletes == wk.Deletes()
    with pytest.raises(wk.ConfigError) as info:
        wk.define_poller(**common, deletes={"confirm": 2})
    assert info.value.field == "deletes"


def test_the_guard_holds_more_than_its_share_and_at_least_its_minimum() -> None:
    guard = wk.Deletes()  # more than half, and at least 10
    assert not guard.holds(9, 10)
    assert guard.holds(10, 10)
    assert not guard.holds(10, 20)
    assert guard.holds(11, 20)
    assert not guard.holds(0, 0)
    assert not wk.Deletes(guard_share=None).holds(1_000, 1_000)
    assert wk.Deletes(guard_share=0.1, guard_min=0).holds(2, 10)
