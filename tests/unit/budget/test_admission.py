"""The daemon's admission lines: how many runs a budget admits, and who goes next."""

from __future__ import annotations

from watukuy.model.options import Budget
from watukuy.model.rows import PKey
from watukuy.runtime.admission import Admission, Entry, admission_limit


def entry(at: int, seq: int, partition: str) -> Entry:
    return (at, seq, PKey("p", partition))


def test_the_limit_is_what_one_window_grants() -> None:
    assert admission_limit(Budget(150, "1s"), costs=[1], waits=[30_000]) == 150
    assert admission_limit(Budget(150, "1s"), costs=[1, 3], waits=[30_000]) == 150
    assert admission_limit(Budget(150, "1s"), costs=[3], waits=[30_000]) == 50
    assert admission_limit(Budget(150, "1s"), costs=[0.5], waits=[30_000]) == 300
    assert admission_limit(Budget(150, "1s"), costs=[0], waits=[30_000]) == 150  # 0 is free
    assert admission_limit(Budget(10, "1s", burst=30), costs=[1], waits=[30_000]) == 30


def test_a_wait_shorter_than_the_window_admits_what_it_can_be_granted() -> None:
    assert admission_limit(Budget(100, "1m", max_wait="30s"), costs=[1], waits=[]) == 50
    assert admission_limit(Budget(100, "1m"), costs=[1], waits=[15_000, 60_000]) == 25
    assert admission_limit(Budget(100, "1m", max_wait="0s"), costs=[1], waits=[]) == 1
    assert admission_limit(Budget(1, "1h"), costs=[1], waits=[]) == 1


def test_oldest_due_first_across_lines_with_room() -> None:
    admission = Admission({"erp": 2, "crm": 1})
    admission.push(entry(30, 0, "a"), "erp")
    admission.push(entry(10, 1, "b"), "erp")
    admission.push(entry(20, 2, "c"), "crm")
    admission.push(entry(40, 3, "d"), None)
    order = []
    while (picked := admission.pop(lambda e: True)) is not None:
        order.append((picked[0][2].partition, picked[1]))
        admission.started(picked[1])
    # b (10) and c (20); a (30) takes erp's second slot; crm is full; d has no budget.
    assert order == [("b", "erp"), ("c", "crm"), ("a", "erp"), ("d", None)]
    assert admission.in_flight("erp") == 2
    assert admission.in_flight("crm") == 1


def test_a_full_budget_holds_its_line_until_a_run_ends() -> None:
    admission = Admission({"erp": 1})
    admission.push(entry(1, 0, "a"), "erp")
    admission.push(entry(2, 1, "b"), "erp")
    first = admission.pop(lambda e: True)
    assert first is not None
    admission.started("erp")
    assert admission.pop(lambda e: True) is None  # b waits: one run in flight already
    assert admission.queued("erp") == 1
    admission.finished("erp")
    second = admission.pop(lambda e: True)
    assert second is not None
    assert second[0][2].partition == "b"


def test_superseded_entries_are_dropped_and_urgent_ones_go_first() -> None:
    admission = Admission({"erp": 5})
    admission.push(entry(1, 0, "stale"), "erp")
    admission.push(entry(2, 1, "due"), "erp")
    admission.push(entry(9, 2, "triggered"), "erp", urgent=True)
    picked = [
        p[0][2].partition
        for p in iter(lambda: admission.pop(lambda e: e[2].partition != "stale"), None)
    ]
    assert picked == ["triggered", "due"]
    assert admission.queued("erp") == 0


def test_clear_forgets_lines_and_runs() -> None:
    admission = Admission({"erp": 1})
    admission.push(entry(1, 0, "a"), "erp")
    admission.started("erp")
    admission.clear()
    assert admission.in_flight("erp") == 0
    assert admission.queued("erp") == 0
    admission.finished("erp")  # a run that ends after a clear never goes below zero
    assert admission.in_flight("erp") == 0
