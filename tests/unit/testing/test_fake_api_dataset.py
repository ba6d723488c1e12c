"""FakeApi datasets and direct listings: items, tenants, keyset / page / token listings."""

from __future__ import annotations

import pytest

from watukuy.model.errors import ConfigError
from watukuy.testing.clock import VirtualClock
from watukuy.testing.fake_api import FakeApi, fake_items

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z
ISO0 = "2026-01-01T00:00:00.000Z"
ISO1 = "2026-01-01T00:00:01.000Z"


def ids(items: list[dict[str, object]]) -> list[object]:
    return [item["id"] for item in items]


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def api(clock: VirtualClock) -> FakeApi:
    return FakeApi(clock)


async def tied(api: FakeApi, clock: VirtualClock) -> None:
    """c, a, b at T0; e, d at T0+1s; f at T0+2s."""
    for identity in ("c", "a", "b"):
        api.add({"id": identity})
    await clock.advance("1s")
    for identity in ("e", "d"):
        api.add({"id": identity})
    await clock.advance("1s")
    api.add({"id": "f"})


# --- fake_items -------------------------------------------------------------------------


def test_fake_items_are_deterministic_and_one_second_apart() -> None:
    assert fake_items(3) == [
        {
            "id": "item-001",
            "name": "Item 1",
            "status": "pending",
            "total": 100,
            "version": 1,
            "updated_at": "2026-01-01T00:00:00.000Z",
        },
        {
            "id": "item-002",
            "name": "Item 2",
            "status": "paid",
            "total": 200,
            "version": 1,
            "updated_at": "2026-01-01T00:00:01.000Z",
        },
        {
            "id": "item-003",
            "name": "Item 3",
            "status": "shipped",
            "total": 300,
            "version": 1,
            "updated_at": "2026-01-01T00:00:02.000Z",
        },
    ]


def test_fake_items_widen_the_padding_so_id_order_is_numeric_order() -> None:
    items = fake_items(1000)
    assert items[0]["id"] == "item-0001"
    assert items[-1]["id"] == "item-1000"
    assert items[-1]["updated_at"] == "2026-01-01T00:16:39.000Z"
    assert sorted(ids(items)) == ids(items)  # type: ignore[type-var]
    assert fake_items(999)[-1]["id"] == "item-999"


def test_fake_items_factory_and_start() -> None:
    items = fake_items(2, lambda i: {"tenant": "even" if i % 2 == 0 else "odd", "total": i})
    assert [(i["tenant"], i["total"]) for i in items] == [("even", 0), ("odd", 1)]
    shifted = fake_items(2, start="2025-06-01T12:00:00Z")
    assert [i["updated_at"] for i in shifted] == [
        "2025-06-01T12:00:00.000Z",
        "2025-06-01T12:00:01.000Z",
    ]
    assert fake_items(1, start=T0 + 500)[0]["updated_at"] == "2026-01-01T00:00:00.500Z"
    assert fake_items(0) == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_fake_items_rejects_bad_counts(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^n: expected a non-negative integer, got"):
        fake_items(bad)  # type: ignore[arg-type]


def test_fake_items_rejects_a_bad_start() -> None:
    with pytest.raises(ConfigError, match=r"^start: .*'yesterday'"):
        fake_items(1, start="yesterday")


# --- dataset operations -------------------------------------------------------------------


def test_add_fills_updated_at_and_version_and_returns_a_copy(
    api: FakeApi, clock: VirtualClock
) -> None:
    stored = api.add({"id": "a", "tags": ["x"]})
    assert stored == {"id": "a", "tags": ["x"], "updated_at": ISO0, "version": 1}
    stored["tags"].append("changed")
    assert api.get("a") == {"id": "a", "tags": ["x"], "updated_at": ISO0, "version": 1}
    kept = api.add({"id": "b", "updated_at": "2025-01-01T00:00:00Z", "version": 7})
    assert (kept["updated_at"], kept["version"]) == ("2025-01-01T00:00:00Z", 7)
    assert api.size() == 2


def test_add_rejects_duplicates_and_bad_items(api: FakeApi) -> None:
    api.add({"id": "a"})
    with pytest.raises(ConfigError, match=r"^id: item 'a' already exists"):
        api.add({"id": "a"})
    with pytest.raises(ConfigError, match=r"^item: an item needs a non-empty string 'id'"):
        api.add({"name": "no id"})
    with pytest.raises(ConfigError, match=r"^item: an item needs a non-empty string 'id', got 5"):
        api.add({"id": 5})
    with pytest.raises(ConfigError, match=r"^item: an item must be JSON data"):
        api.add({"id": "x", "bad": object()})
    assert api.size() == 1


async def test_update_bumps_version_and_stamps_now(api: FakeApi, clock: VirtualClock) -> None:
    api.add({"id": "a", "total": 1})
    await clock.advance("5s")
    updated = api.update("a", total=2)
    assert updated == {
        "id": "a",
        "total": 2,
        "updated_at": "2026-01-01T00:00:05.000Z",
        "version": 2,
    }
    assert api.get("a") == updated
    tie = api.update("a", total=3, updated_at=ISO0)
    assert (tie["updated_at"], tie["version"]) == (ISO0, 3)
    pinned = api.update("a", version=10)
    assert pinned["version"] == 10
    assert api.update("a")["version"] == 11  # a bare touch still bumps


def test_update_rejects_unknown_ids_and_id_changes(api: FakeApi) -> None:
    api.add({"id": "a"})
    with pytest.raises(KeyError, match="nope"):
        api.update("nope", total=1)
    with pytest.raises(ConfigError, match=r"^id: changes would move item 'a' to id 'b'"):
        api.update("a", id="b")
    assert api.get("a") is not None
    assert api.get("b") is None


def test_remove_get_all_seed_clear(api: FakeApi) -> None:
    for identity in ("c", "a", "b"):
        api.add({"id": identity})
    assert ids(api.all()) == ["a", "b", "c"]
    assert api.remove("a") is True
    assert api.remove("a") is False
    assert api.get("a") is None
    api.seed([{"id": "x", "updated_at": "2025-06-01T00:00:00.000Z"}, {"id": "y"}])
    assert ids(api.all()) == ["x", "y"]
    assert api.get("x") == {"id": "x", "updated_at": "2025-06-01T00:00:00.000Z", "version": 1}
    assert api.get("y") == {"id": "y", "updated_at": ISO0, "version": 1}
    with pytest.raises(ConfigError, match=r"^items\[1\]\.id: duplicate id 'x'"):
        api.seed([{"id": "x"}, {"id": "x"}])
    assert api.size() == 2  # a failed seed changes nothing
    api.clear()
    assert api.size() == 0
    assert api.all() == []


def test_dataset_operations_are_not_requests(api: FakeApi) -> None:
    api.add({"id": "a"})
    api.update("a", total=1)
    api.get("a")
    api.all()
    api.size()
    api.remove("a")
    assert api.calls == 0
    assert api.log == []


def test_tenants_hold_separate_datasets(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(2), tenants={"acme": fake_items(3)})
    assert api.tenants() == ["", "acme"]
    acme = api.tenant("acme")
    assert (acme.name, acme.size(), api.size()) == ("acme", 3, 2)
    acme.add({"id": "only-acme"})
    assert api.get("only-acme") is None
    assert acme.get("only-acme") is not None
    other = api.tenant("globex")  # created empty on first use
    assert other.size() == 0
    assert api.tenants() == ["", "acme", "globex"]
    assert FakeApi(clock, tenants=["t1", "t2"]).tenants() == ["", "t1", "t2"]
    with pytest.raises(ConfigError, match=r"^tenant: expected a string"):
        api.tenant(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"page_size": 0}, r"^page_size: expected a positive integer, got 0"),
        ({"log_limit": -1}, r"^log_limit: expected a positive integer, got -1"),
        ({"base_url": "fake.api"}, r"^base_url: expected an absolute http\(s\) URL"),
    ],
)
def test_constructor_validates(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FakeApi(VirtualClock(), **kwargs)  # type: ignore[arg-type]


# --- keyset listing -----------------------------------------------------------------------


async def test_since_none_lists_everything_by_time_then_id(
    api: FakeApi, clock: VirtualClock
) -> None:
    await tied(api, clock)
    page = api.list_since()
    assert ids(page.data) == ["a", "b", "c", "d", "e", "f"]
    assert page.has_more is False


async def test_since_is_inclusive_and_after_id_skips_only_ties(
    api: FakeApi, clock: VirtualClock
) -> None:
    await tied(api, clock)
    assert ids(api.list_since(ISO1).data) == ["d", "e", "f"]
    assert ids(api.list_since(ISO0, after_id="b").data) == ["c", "d", "e", "f"]
    # A later timestamp is never skipped, whatever its id.
    assert ids(api.list_since(ISO1, after_id="e").data) == ["f"]
    assert ids(api.list_since(ISO1, after_id="zzz").data) == ["f"]
    # after_id without since is ignored: the listing starts at the beginning.
    assert ids(api.list_since(None, after_id="c").data) == ["a", "b", "c", "d", "e", "f"]


async def test_a_page_boundary_inside_ties_neither_repeats_nor_skips(
    api: FakeApi, clock: VirtualClock
) -> None:
    await tied(api, clock)
    first = api.list_since(limit=2)
    assert (ids(first.data), first.has_more) == (["a", "b"], True)
    last = first.data[-1]
    assert last["updated_at"] == ISO0
    second = api.list_since(last["updated_at"], last["id"], 2)
    assert (ids(second.data), second.has_more) == (["c", "d"], True)
    last = second.data[-1]
    third = api.list_since(last["updated_at"], last["id"], 2)
    assert (ids(third.data), third.has_more) == (["e", "f"], False)


async def test_a_full_keyset_walk_sees_every_item_once(api: FakeApi, clock: VirtualClock) -> None:
    expected = []
    for group in range(4):
        for i in range(5):
            expected.append(f"g{group}-{i}")
            api.add({"id": f"g{group}-{i}"})
        await clock.advance("1s")
    seen: list[object] = []
    since: str | None = None
    after: str | None = None
    pages = 0
    while True:
        page = api.list_since(since, after, 3)
        pages += 1
        seen.extend(ids(page.data))
        if not page.has_more:
            break
        since, after = page.data[-1]["updated_at"], page.data[-1]["id"]
    assert seen == expected
    assert pages == 7
    assert api.calls == 7


def test_has_more_and_default_limit(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(5), page_size=2)
    page = api.list_since()
    assert (ids(page.data), page.has_more) == (["item-001", "item-002"], True)
    assert api.list_since(limit=5).has_more is False
    assert api.list_since(limit=4).has_more is True


def test_since_accepts_epochs_and_offsets(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(5))
    assert ids(api.list_since(T0 + 3000).data) == ["item-004", "item-005"]
    assert ids(api.list_since(str(T0 + 3000)).data) == ["item-004", "item-005"]
    assert ids(api.list_since(str(T0 // 1000 + 4)).data) == ["item-005"]
    assert ids(api.list_since("2026-01-01T01:00:03+01:00").data) == ["item-004", "item-005"]
    assert ids(api.list_since("2026-01-01T00:00:03.000001Z").data) == ["item-005"]


def test_items_without_a_time_sort_first(api: FakeApi) -> None:
    api.seed([{"id": "b", "updated_at": "soon"}, {"id": "a", "updated_at": ISO0}])
    assert ids(api.list_since().data) == ["b", "a"]
    assert ids(api.list_since(ISO0).data) == ["a"]


def test_listing_arguments_are_checked_and_logged_as_400(api: FakeApi) -> None:
    with pytest.raises(ConfigError, match=r"^since: expected an ISO 8601 time or epoch, got 'x'"):
        api.list_since("x")
    with pytest.raises(ConfigError, match=r"^limit: expected a positive integer, got 0"):
        api.list_since(limit=0)
    with pytest.raises(ConfigError, match=r"^page: expected a positive integer, got 0"):
        api.list_page(0)
    with pytest.raises(ConfigError, match=r"^page_size: expected a positive integer, got 1.5"):
        api.list_page(1, 1.5)  # type: ignore[arg-type]
    assert [(r.route, r.status) for r in api.log] == [
        ("since", 400),
        ("since", 400),
        ("page", 400),
        ("page", 400),
    ]


# --- page and token listings --------------------------------------------------------------


def test_pages_are_one_based_by_id(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(7))
    first = api.list_page(1, 3)
    assert (ids(first.data), first.page, first.pages, first.has_more) == (
        ["item-001", "item-002", "item-003"],
        1,
        3,
        True,
    )
    last = api.list_page(3, 3)
    assert (ids(last.data), last.pages, last.has_more) == (["item-007"], 3, False)
    past = api.list_page(5, 3)
    assert (past.data, past.pages, past.has_more) == ([], 3, False)
    empty = FakeApi(clock).list_page()
    assert (empty.data, empty.page, empty.pages, empty.has_more) == ([], 1, 1, False)


def test_token_walk_until_next_is_none(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(5))
    seen: list[object] = []
    token: str | None = None
    pages = 0
    while True:
        page = api.list_token(token, 2)
        pages += 1
        seen.extend(ids(page.data))
        token = page.next
        if token is None:
            break
    assert pages == 3
    assert seen == ids(fake_items(5))
    assert FakeApi(clock).list_token().next is None


def test_tokens_resume_after_the_last_id_despite_changes(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(4))
    first = api.list_token(limit=2)
    assert ids(first.data) == ["item-001", "item-002"]
    api.remove("item-001")
    api.add({"id": "item-000"})
    api.add({"id": "item-0025"})
    second = api.list_token(first.next, 2)
    assert ids(second.data) == ["item-0025", "item-003"]
    assert ids(api.list_token(second.next, 2).data) == ["item-004"]


@pytest.mark.parametrize("token", ["!!!", "bm90IGpzb24", "eyJhZnRlciI6IDV9"])
def test_foreign_tokens_are_rejected(clock: VirtualClock, token: str) -> None:
    api = FakeApi(clock, items=fake_items(2))
    with pytest.raises(ConfigError, match=r"^cursor: not a token issued by this API"):
        api.list_token(token)


def test_list_all_is_one_request_ordered_by_id(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=list(reversed(fake_items(3))))
    assert ids(api.list_all()) == ["item-001", "item-002", "item-003"]
    assert api.calls == 1
    record = api.log[0]
    assert (record.route, record.status, record.path, record.method) == (
        "all",
        200,
        "/items/all",
        "GET",
    )


def test_direct_listings_of_a_tenant_are_logged_under_its_prefix(clock: VirtualClock) -> None:
    api = FakeApi(clock, tenants={"acme": fake_items(3)})
    page = api.tenant("acme").list_page(2, 2)
    assert ids(page.data) == ["item-003"]
    record = api.log[-1]
    assert (record.path, record.tenant, record.query) == (
        "/t/acme/items/page",
        "acme",
        {"page": "2", "page_size": "2"},
    )
    assert api.list_all() == []


def test_listed_items_are_deep_copies(api: FakeApi) -> None:
    api.add({"id": "a", "tags": ["x"], "owner": {"name": "Ada", "roles": ["admin"]}})
    listed = api.list_page(1, 10).data[0]
    listed["tags"].append("y")
    listed["owner"]["roles"].append("root")
    listed["owner"]["name"] = "Eve"
    again = api.list_page(1, 10).data[0]
    assert (again["tags"], again["owner"]) == (["x"], {"name": "Ada", "roles": ["admin"]})
    assert again["owner"] is not listed["owner"]
