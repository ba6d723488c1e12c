"""The harness itself: plans, replay, shrinking, and an oracle that does catch what it must."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from watukuy.testing.conformance import (
    CONFIGS,
    KNOWN_OPEN,
    ConformanceReport,
    assert_conformance,
    config_named,
    format_plan,
    generate_plan,
    parse_plan,
    replay_command,
    run_conformance,
)
from watukuy.testing.conformance._oracle import Delivery, check
from watukuy.testing.conformance._plan import Step
from watukuy.testing.conformance._run import ConformanceRun
from watukuy.testing.conformance._shrink import shrink

PLAN = "+k01=1 +k02=0 +k03=2 +k04=1 t900 p ~k02=1 p -k03 p t1500 +k05=0 ~k01=2 p p t1200 p"


def test_a_plan_reads_back_as_it_was_written() -> None:
    assert format_plan(parse_plan(PLAN)) == PLAN
    steps = parse_plan("~k01=2@700 kafter-commit !empty K o:reset_clear")
    assert [step.kind for step in steps] == ["write", "arm", "fault", "kill", "op"]
    assert steps[0].late_ms == 700
    with pytest.raises(ValueError, match="not a conformance step"):
        parse_plan("t12 jump")


def test_a_seed_gives_the_same_plan() -> None:
    config = config_named("ts-lag")
    assert generate_plan(config, 7, 10) == generate_plan(config, 7, 10)
    assert generate_plan(config, 7, 10) != generate_plan(config, 8, 10)


async def test_a_plan_replays_to_the_same_report() -> None:
    first = await run_conformance("snapshot-counter", plan=PLAN)
    second = await run_conformance("snapshot-counter", plan=PLAN)
    assert first.ok, first.violations
    assert (first.requests, first.delivered, first.ticks) == (
        second.requests,
        second.delivered,
        second.ticks,
    )
    assert first.trace == second.trace
    assert replay_command(first) == (
        f"python -m watukuy.testing.conformance --config snapshot-counter --plan '{PLAN}'"
    )


async def test_kills_mid_request_and_at_kill_points_are_survived() -> None:
    plan = (
        "+k01=1 +k02=0 +k03=2 +k04=1 +k05=0 t900 p K t1500 ~k01=2 kafter-commit p p t1200 "
        "-k02 kbefore-ack p t1300 ~k04=2 p K t1100 p"
    )
    report = await run_conformance("ts-reconcile", plan=plan)
    assert_conformance(report)
    assert report.kills.get("request", 0) == 2
    assert report.total_kills >= 3
    assert report.restarts >= 3


async def test_a_failing_report_names_the_seed_the_replay_and_the_trace() -> None:
    report = ConformanceReport(
        config="ts", store="MemoryStore", plan="t1 p", seed=3, steps=2, rounds=30
    )
    report.violations = ["[final] k01 is in the vendor, never emitted"]
    report.shrunk = "t1"
    with pytest.raises(AssertionError) as raised:
        assert_conformance(report)
    text = str(raised.value)
    assert "--config ts --seed 3 --rounds 30" in text
    assert "--plan t1" in text
    assert report.kind == "[final]"


async def test_shrinking_keeps_only_what_the_failure_needs() -> None:
    steps = parse_plan("t1 t2 ~k01=1 t3 -k02 t4 p t5")

    async def run(candidate: list[Step]) -> ConformanceReport:
        report = ConformanceReport("ts", "MemoryStore", format_plan(candidate), None, 0)
        texts = {step.text for step in candidate}
        if {"~k01=1", "t4"} <= texts:
            report.violations = ["[seen] k01"]
        return report

    smaller, report = await shrink(steps, "[seen]", run)
    assert format_plan(smaller) == "~k01=1 t4"
    assert report is not None


# --- the oracle catches what it must --------------------------------------------------------


async def _clean_run(name: str, plan: str) -> ConformanceRun:
    run = ConformanceRun(config_named(name), parse_plan(plan))
    report = await run.run()
    assert report.ok, report.violations
    run.violations.clear()
    return run


def _kinds(run: ConformanceRun, deliveries: list[Delivery]) -> set[str]:
    problems = check(run.config, run.vendor, deliveries, run.commits, run.clears, run.backfills)
    return {problem[: problem.index("]") + 1] for problem in problems}


async def test_the_oracle_sees_a_lost_update() -> None:
    run = await _clean_run("snapshot-counter", PLAN)
    last_update = max((d for d in run.deliveries if d.type == "updated"), key=lambda d: d.sequence)
    kept = [d for d in run.deliveries if d.id != last_update.id]
    assert {"[seen]", "[final]", "[consumer]"} <= _kinds(run, kept)


async def test_the_oracle_sees_a_phantom_delete_and_a_reused_id() -> None:
    run = await _clean_run("snapshot-counter", PLAN)
    live = next(d for d in run.deliveries if d.subject == "k04")
    phantom = dataclasses.replace(
        live,
        id="f" * 64,
        type="deleted",
        data=None,
        sequence=10_000,
        request=len(run.vendor.requests),
    )
    assert "[phantom]" in _kinds(run, [*run.deliveries, phantom])
    updated = next(d for d in run.deliveries if d.type == "updated")
    created = next(d for d in run.deliveries if d.subject == updated.subject)
    reused = dataclasses.replace(updated, id=created.id)
    kinds = _kinds(run, [reused if d is updated else d for d in run.deliveries])
    assert {"[ids]", "[consumer]"} <= kinds


async def test_the_oracle_sees_events_out_of_order_and_for_untouched_items() -> None:
    run = await _clean_run("snapshot-counter", PLAN)
    k01 = [d for d in run.deliveries if d.subject == "k01"]
    assert len(k01) == 2
    swapped = [d for d in run.deliveries if d.subject != "k01"] + list(reversed(k01))
    assert "[order]" in _kinds(run, swapped)
    untouched = next(d for d in run.deliveries if d.subject == "k04")
    extra = dataclasses.replace(untouched, id="e" * 64, type="updated", sequence=10_001)
    assert "[unchanged]" in _kinds(run, [*run.deliveries, extra])


# --- the command line -----------------------------------------------------------------------


def test_the_command_line_replays_a_plan_and_lists_configurations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from watukuy.testing.conformance._cli import main

    assert main(["--config", "snapshot-counter", "--plan", PLAN]) == 0
    assert ": ok" in capsys.readouterr().out
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(config.name in listed for config in CONFIGS)
    assert listed.count("known open") == len(KNOWN_OPEN)
    assert main(["--config", "no-such-config", "--seed", "1"]) == 2
    assert "no conformance configuration" in capsys.readouterr().err


def test_the_command_line_leaves_the_engine_logger_as_it_found_it() -> None:
    from watukuy.testing.conformance._cli import main

    logger = logging.getLogger("watukuy")
    before = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        assert main(["--config", "snapshot-counter", "--plan", PLAN]) == 0
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)
