"""The tier's own checks, on a history written by hand: each catches what it names."""

from __future__ import annotations

from typing import Any

from real_vendor_tier.checks import DELETE_SETTLE_S, Delivery, evaluate, json_key
from real_vendor_tier.oracle import JsonWrite, json_history

T0 = 1_000.0


def order(identity: int, version: int, second: int) -> dict[str, Any]:
    return {"id": identity, "version": version, "updatedAt": f"2026-01-01T00:00:{second:02d}.000Z"}


def history() -> Any:
    """Order 1: v1 from T0, v2 from T0+20 (stamped late), deleted at T0+40; order 2: v1."""
    log = [
        JsonWrite("put", order(1, 2, 15), T0 + 19, T0 + 20, 200),
        JsonWrite("delete", {"id": 1}, T0 + 39, T0 + 40, 200),
    ]
    return json_history([order(1, 1, 1), order(2, 1, 2)], T0, log)


def delivery(
    event_id: str, kind: str, item: dict[str, Any] | None, at: float, instance: str = "a-1"
) -> Delivery:
    subject = str(item["id"]) if item else "1"
    return Delivery(event_id, kind, subject, "live", item, instance, at)


def judge(
    deliveries: list[Delivery], *, killed: tuple[str, ...] = (), end: float = T0 + 80
) -> dict[str, Any]:
    verdict = evaluate(
        history(),
        deliveries,
        key_of=json_key,
        end=end,
        deletes_observable=True,
        killed=killed,
    )
    return verdict.figures()


GOOD = [
    delivery("e1", "created", order(1, 1, 1), T0 + 1),
    delivery("e2", "created", order(2, 1, 2), T0 + 1),
    delivery("e3", "updated", order(1, 2, 15), T0 + 21),
    delivery("e4", "deleted", None, T0 + 45),
]


def test_a_faithful_poller_passes_every_check() -> None:
    got = judge(GOOD)
    assert (got["obligations"], got["delivered"], got["missed"], got["wrong_final"]) == (3, 3, 0, 0)
    assert (got["phantom_deletes"], got["duplicates"], got["order_violations"]) == (0, 0, 0)
    assert (got["deletes_seen"], got["delete_latency_max_s"]) == (1, 5.0)


def test_a_late_version_never_delivered_is_missed_and_leaves_nothing_wrong_after_a_delete() -> None:
    got = judge([GOOD[0], GOOD[1], GOOD[3]])
    assert (got["missed"], got["wrong_final"]) == (1, 0)


def test_a_delete_before_the_vendor_deleted_is_a_phantom() -> None:
    early = delivery("e4", "deleted", None, T0 + 30)
    assert judge([*GOOD[:3], early])["phantom_deletes"] == 1


def test_a_missing_delete_is_a_wrong_final_state_where_deletes_are_observable() -> None:
    got = judge(GOOD[:3])
    assert (got["wrong_final"], got["deletes_undelivered"]) == (1, 1)


def test_a_delete_two_passes_could_not_have_confirmed_yet_is_not_judged() -> None:
    got = judge(GOOD[:3], end=T0 + 40 + DELETE_SETTLE_S - 1)
    assert (got["wrong_final"], got["deletes_undelivered"]) == (0, 0)


def test_duplicates_are_explained_only_by_a_killed_first_delivery() -> None:
    again = delivery("e2", "created", order(2, 1, 2), T0 + 50, instance="a-2")
    assert judge([*GOOD, again])["unexplained_duplicates"] == 1
    assert judge([*GOOD, again], killed=("a-1",))["unexplained_duplicates"] == 0


def test_going_back_to_an_older_version_is_an_order_violation() -> None:
    older = delivery("e5", "updated", order(1, 1, 1), T0 + 22)
    assert judge([*GOOD[:3], older])["order_violations"] == 1


def test_an_item_no_version_of_the_vendor_matches_is_unknown() -> None:
    invented = delivery("e5", "updated", order(2, 7, 9), T0 + 22)
    assert judge([*GOOD, invented])["unknown_versions"] == 1


def test_a_delete_undone_by_a_recreation_may_go_unreported() -> None:
    log = [
        JsonWrite("delete", {"id": 1}, T0 + 9, T0 + 10, 200),
        JsonWrite("post", order(1, 2, 50), T0 + 49, T0 + 50, 200),
    ]
    recreated = json_history([order(1, 1, 1)], T0, log)
    deliveries = [
        delivery("e1", "created", order(1, 1, 1), T0 + 1),
        delivery("e2", "updated", order(1, 2, 50), T0 + 52),
    ]
    verdict = evaluate(recreated, deliveries, key_of=json_key, end=T0 + 80, deletes_observable=True)
    assert (verdict.deletes_undelivered, verdict.wrong_final, verdict.delete_latency) == (0, [], [])


def test_a_deleted_event_is_timed_against_the_delete_just_before_it() -> None:
    log = [
        JsonWrite("delete", {"id": 1}, T0 + 9, T0 + 10, 200),
        JsonWrite("post", order(1, 2, 20), T0 + 19, T0 + 20, 200),
        JsonWrite("delete", {"id": 1}, T0 + 29, T0 + 30, 200),
    ]
    twice = json_history([order(1, 1, 1)], T0, log)
    deliveries = [
        delivery("e1", "created", order(1, 1, 1), T0 + 1),
        delivery("e2", "deleted", None, T0 + 36),
    ]
    verdict = evaluate(twice, deliveries, key_of=json_key, end=T0 + 80, deletes_observable=True)
    assert (verdict.delete_latency, verdict.deletes_undelivered) == ([6.0], 0)
