"""The REST test vendors behave like the APIs they stand for, and an engine polling them
with a hand-written ``fetch`` sees the changes a test makes between cycles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.rest_vendors import LinkVendor, StripeVendor


@pytest.fixture
def link() -> Iterator[LinkVendor]:
    with LinkVendor(token="gh-token") as api:
        for n in range(5):
            api.add(title=f"issue {n}")
        yield api


@pytest.fixture
def stripe() -> Iterator[StripeVendor]:
    with StripeVendor() as api:
        for n in range(5):
            api.add(amount=n)
        yield api


def test_the_link_vendor_pages_sorts_and_filters_like_github(link: LinkVendor) -> None:
    headers = {"authorization": "Bearer gh-token"}
    link.update(2, title="edited")
    first = httpx.get(
        f"{link.base_url}/items", params={"per_page": 2, "sort": "updated"}, headers=headers
    )
    assert [issue["id"] for issue in first.json()] == [1, 3]
    assert first.links["next"]["url"] == f"{link.base_url}/items?per_page=2&sort=updated&page=2"
    assert first.links["last"]["url"].endswith("page=3")
    last = httpx.get(first.links["last"]["url"], headers=headers)
    assert [issue["id"] for issue in last.json()] == [2]
    assert set(last.links) == {"first", "prev"}
    since = httpx.get(
        f"{link.base_url}/items", params={"since": link.items[3]["updated_at"]}, headers=headers
    )
    assert [issue["id"] for issue in since.json()] == [2, 4, 5]
    assert httpx.get(f"{link.base_url}/items").status_code == 401
    assert link.requests == 4


def test_the_stripe_vendor_lists_newest_first_after_the_last_id(stripe: StripeVendor) -> None:
    page = httpx.get(f"{stripe.base_url}/v1/items", params={"limit": 2}).json()
    assert [charge["id"] for charge in page["data"]] == ["it_000005", "it_000004"]
    assert page["has_more"] is True
    stripe.delete("it_000004")  # the token of the next page names an id gone since
    rest = httpx.get(
        f"{stripe.base_url}/v1/items", params={"limit": 5, "starting_after": "it_000004"}
    ).json()
    assert [charge["id"] for charge in rest["data"]] == ["it_000003", "it_000002", "it_000001"]
    assert rest["has_more"] is False


async def _changes(fetch: Any, change: Any) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The events of a first cycle, and of the two after ``change()`` (a delete from a full
    listing needs two complete passes that missed the item)."""
    events: list[tuple[str, Any]] = []
    items = wk.define_poller(
        name="items",
        identity=lambda item: item["id"],
        version=lambda item: item["updated_at"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
    )
    client = httpx.AsyncClient(timeout=10)
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[items], http_client=client)

    @engine.on("items")
    def record(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        events.append((event.type, event.subject))

    try:
        (first,) = (await engine.tick()).polled
        assert first.error is None
        before, events[:] = sorted(events), []
        change()
        for _ in range(2):
            await engine.trigger("items")
            (later,) = (await engine.tick()).polled
            assert later.error is None
    finally:
        await client.aclose()
    return before, sorted(events)


async def test_an_engine_sees_what_changed_in_the_link_vendor(link: LinkVendor) -> None:
    async def fetch(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{link.base_url}/items",
            params={"per_page": 2, "page": ctx.page},
            headers={"authorization": "Bearer gh-token"},
        )
        return wk.Page(items=response.json(), has_more="next" in response.raw.links)

    def change() -> None:
        link.add(title="new")
        link.update(1, title="edited")
        link.delete(3)

    before, after = await _changes(fetch, change)
    assert before == [("created", str(n)) for n in range(1, 6)]
    assert after == [("created", "6"), ("deleted", "3"), ("updated", "1")]


async def test_an_engine_sees_what_changed_in_the_stripe_vendor(stripe: StripeVendor) -> None:
    async def fetch(ctx: wk.FetchContext[None]) -> AsyncIterator[wk.Page[Any]]:
        after = None
        while True:
            response = await ctx.http.get(
                f"{stripe.base_url}/v1/items", params={"limit": 2, "starting_after": after}
            )
            body = response.json()
            yield wk.Page(items=body["data"], has_more=body["has_more"])
            if not body["has_more"]:
                return
            after = body["data"][-1]["id"]

    def change() -> None:
        stripe.add(amount=9)
        stripe.update("it_000002", amount=20)
        stripe.delete("it_000005")

    before, after = await _changes(fetch, change)
    assert before == [("created", f"it_00000{n}") for n in range(1, 6)]
    assert after == [("created", "it_000006"), ("deleted", "it_000005"), ("updated", "it_000002")]
