"""What ``fetch`` may return (``coerce_page``), and the gone page that ends a listing early."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.model.page import InvalidPageError, coerce_page


def test_a_gone_page_is_a_page_of_its_own() -> None:
    gone: wk.Page[Any] = wk.Page(gone=True)
    assert coerce_page(gone) is gone
    assert (gone.items, gone.cursor, gone.has_more) == ((), None, None)
    assert coerce_page({"gone": True}) == gone
    assert coerce_page({"items": [], "gone": False}) == wk.Page(items=[])
    assert wk.Page(items=[1]).gone is False


@pytest.mark.parametrize(
    "value",
    [
        wk.Page(items=[{"id": 1}], gone=True),
        wk.Page(cursor="next", gone=True),
        wk.Page(has_more=False, gone=True),
        {"items": [{"id": 1}], "gone": True},
    ],
)
def test_a_gone_page_carries_nothing_else(value: object) -> None:
    with pytest.raises(InvalidPageError, match=r"a gone page \(Page\(gone=True\)\) has no items"):
        coerce_page(value)


@pytest.mark.parametrize("value", [wk.Page(gone="yes"), {"gone": 1}])  # type: ignore[arg-type]
def test_gone_must_be_a_bool(value: object) -> None:
    with pytest.raises(InvalidPageError, match=r"Page\.gone must be a bool"):
        coerce_page(value)


def test_a_page_dict_names_the_keys_it_takes() -> None:
    with pytest.raises(InvalidPageError, match=r"items, cursor, has_more, gone; got \['next'\]"):
        coerce_page({"items": [], "next": "x"})
