"""The vendors themselves: what each pagination style and filter answers.

These pin what the pollers of the tier rely on, so a Django, DRF or json-server upgrade
that changes it shows up here first, not as a mystery in the runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from real_vendor_tier.oracle import drf_history
from real_vendor_tier.vendors import DrfVendor, JsonServer
from real_vendor_tier.writers import seed_drf

pytestmark = pytest.mark.slow


def settled(count: Callable[[], int], expected: int) -> int:
    """``count()`` once it reaches ``expected`` or 5 s passed: a server writes its access
    log line after the answer has left."""
    deadline = time.monotonic() + 5
    while count() < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count()


def test_drf_serves_three_pagination_styles_and_a_keyset_filter(drf_vendor: DrfVendor) -> None:
    seed_drf(drf_vendor.dsn, drf_vendor.schema, 120)
    base = drf_vendor.client_url("self-test")

    pages = httpx.get(f"{base}/orders/pages/", params={"page": 2, "page_size": 50}).json()
    assert (pages["count"], len(pages["results"])) == (120, 50)
    past = httpx.get(f"{base}/orders/pages/", params={"page": 4, "page_size": 50})
    assert (past.status_code, past.json()) == (404, {"detail": "Invalid page."})

    offset = httpx.get(f"{base}/orders/offset/", params={"offset": 200, "limit": 50}).json()
    assert (offset["results"], offset["next"]) == ([], None)

    first = httpx.get(f"{base}/orders/cursor/", params={"page_size": 100}).json()
    last = httpx.get(first["next"]).json()
    assert (len(first["results"]), len(last["results"]), last["next"]) == (100, 20, None)

    # The keyset: at exactly `updated_at__gte`, only ids above `after_id`.
    middle = first["results"][60]
    after = httpx.get(
        f"{base}/orders/offset/",
        params={
            "updated_at__gte": middle["updated_at"],
            "after_id": middle["id"],
            "ordering": "updated_at,id",
            "limit": 1000,
        },
    ).json()
    assert [order["id"] for order in after["results"]] == [
        order["id"] for order in [*first["results"], *last["results"]][61:]
    ]
    assert settled(lambda: drf_vendor.requests("self-test"), 6) == 6
    assert drf_history(drf_vendor.dsn, drf_vendor.schema).count() == 120


def test_the_audit_trigger_records_commits_not_statements(drf_vendor: DrfVendor) -> None:
    import psycopg

    with psycopg.connect(drf_vendor.dsn) as conn:
        schema = drf_vendor.schema
        conn.execute(
            f'INSERT INTO "{schema}".orders (id, customer, status, amount, version, updated_at) '
            "VALUES (9001, 'a', 'new', 1, 1, now())"
        )
        conn.execute(f'UPDATE "{schema}".orders SET version = 2 WHERE id = 9001')
        conn.commit()
        conn.execute(f'DELETE FROM "{schema}".orders WHERE id = 9001')
        conn.rollback()  # never visible: not in the history
    states = drf_history(drf_vendor.dsn, drf_vendor.schema).versions[9001]
    # Written twice in one transaction, visible once, in its last form; the delete rolled back.
    assert [(state.key[1], state.deleted) for state in states] == [(2, False)]
    assert states[0].visible_until is None


def test_json_server_pages_sorts_and_filters(json_server_vendor: JsonServer) -> None:
    base = json_server_vendor.client_url("self-test")
    page = httpx.get(f"{base}/orders", params={"_page": 2, "_limit": 8, "_sort": "id"})
    assert page.headers["x-total-count"] == "20"
    assert [order["id"] for order in page.json()] == list(range(9, 17))
    assert httpx.get(f"{base}/orders", params={"_page": 4, "_limit": 8}).json() == []

    orders = httpx.get(f"{base}/orders", params={"_sort": "id"}).json()
    since = orders[11]["updatedAt"]
    newer = httpx.get(
        f"{base}/orders",
        params={"updatedAt_gte": since, "_sort": "updatedAt,id", "_order": "asc,asc", "_limit": 5},
    ).json()
    assert [order["id"] for order in newer] == [12, 13, 14, 15, 16]
    assert settled(lambda: json_server_vendor.requests("self-test"), 4) == 4
    assert set(json_server_vendor.final_state()) == set(range(1, 21))
