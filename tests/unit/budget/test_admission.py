"""The daemon's admission lines: how many runs a budget admits, and who goes next."""

from __future__ import annotations

from watukuy.model.options import Budget
from watukuy.model.rows import PKey
from watukuy.runtime.admission import Admission, Entry, Pace, admission_limit, start_pace


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


def test_the_pace_is_what_the_budget_grants_with_a_tenth_of_the_limit_at_once() -> None:
    assert start_pace(Budget(150, "1s"), costs=[1], limit=150) == Pace(15, 1_000 / 150)
    assert start_pace(Budget(100, "1m"), costs=[3, 0], limit=33) == Pace(3, 1_800.0)
    assert start_pace(Budget(4, "1s"), costs=[], limit=4) == Pace(1, 250.0)


def paced_starts(admission: Admission, until: int, step: int = 1) -> list[int]:
    """The times (ms) at which entries could be popped, looking every ``step`` ms."""
    starts = []
    for now in range(0, until, step):
        while (picked := admission.pop(lambda e: True, now)) is not None:
            admission.started(picked[1])
            starts.append(now)
    return starts


def test_runs_start_in_a_burst_then_at_the_pace() -> None:
    pace = start_pace(Budget(150, "1s"), costs=[1], limit=150)
    admission = Admission({"erp": 150}, {"erp": pace})
    for n in range(100):
        admission.push(entry(0, n, f"t{n:03d}"), "erp")
    starts = paced_starts(admission, 300)
    # Fifteen at once, then one every 6.67 ms: 7, 14, 20, 27, ... never ahead of the pace.
    assert starts[:15] == [0] * 15
    assert starts[15:19] == [7, 14, 20, 27]
    assert all(n + 1 <= 15 + at / pace.spacing_ms for n, at in enumerate(starts))
    assert len(starts) == 15 + 299 * 150 // 1_000
    assert admission.in_flight("erp") == len(starts)


def test_next_start_says_when_the_pace_lets_the_next_run_start() -> None:
    admission = Admission({"erp": 10}, {"erp": Pace(burst=1, spacing_ms=250)})
    assert admission.next_start(0) is None  # nothing waits
    admission.push(entry(0, 0, "a"), "erp")
    admission.push(entry(0, 1, "b"), "erp")
    assert admission.next_start(0) == 0  # a may start now
    assert admission.pop(lambda e: True, 0) is not None
    assert admission.pop(lambda e: True, 0) is None  # b waits for the pace
    assert admission.next_start(0) == 250
    assert admission.next_start(100) == 250
    assert admission.pop(lambda e: True, 249) is None
    picked = admission.pop(lambda e: True, 250)
    assert picked is not None
    assert picked[0][2].partition == "b"


def test_a_pace_that_became_ready_since_the_last_pop_is_due_now() -> None:
    # pop() at 249 turns b down (its pace is 1 ms short); whoever asks at 250 or later
    # must hear "now", not "nothing holds a line back" (which let the daemon sleep until
    # its next resync with every key overdue).
    admission = Admission({"erp": 10}, {"erp": Pace(burst=1, spacing_ms=250)})
    admission.push(entry(0, 0, "a"), "erp")
    admission.push(entry(0, 1, "b"), "erp")
    assert admission.pop(lambda e: True, 0) is not None
    assert admission.pop(lambda e: True, 249) is None
    assert admission.next_start(249) in (250, 251)  # (the refill is in floating point)
    assert admission.next_start(260) == 260
    assert admission.next_start(900) == 900


def test_a_full_line_is_not_woken_by_its_pace_and_clear_refills_it() -> None:
    admission = Admission({"erp": 1}, {"erp": Pace(burst=1, spacing_ms=250)})
    admission.push(entry(0, 0, "a"), "erp")
    admission.push(entry(0, 1, "b"), "erp")
    assert admission.pop(lambda e: True, 0) is not None
    admission.started("erp")
    assert admission.next_start(0) is None  # b waits for a run to end, not for the pace
    admission.clear()
    admission.push(entry(0, 2, "c"), "erp")
    assert admission.pop(lambda e: True, 1) is not None  # a fresh burst after a clear


def test_the_earliest_deadline_goes_first_and_a_trigger_before_it() -> None:
    admission = Admission({"erp": 5})
    admission.push(entry(10, 0, "roomy"), "erp", deadline=40)  # early in a wide band
    admission.push(entry(20, 1, "tight"), "erp", deadline=25)  # near the top of its band
    admission.push(entry(22, 2, "plain"), "erp")  # no deadline given: its due time
    admission.push(entry(30, 3, "triggered"), "erp", urgent=True, deadline=90)
    picked = [p[0][2].partition for p in iter(lambda: admission.pop(lambda e: True), None)]
    assert picked == ["triggered", "plain", "tight", "roomy"]
