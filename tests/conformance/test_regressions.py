"""Named regression cases: the smallest plans that found each defect (see
``watukuy.testing.conformance._regressions``). Each failed on the code before its fix; a
case whose defect is still open runs in the long sweep (``--regressions``) instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from watukuy.testing.conformance import OPEN_DEFECTS, assert_conformance, run_conformance
from watukuy.testing.conformance._regressions import REGRESSIONS, Regression

from .conftest import record

FIXED = [case for case in REGRESSIONS if case.defect not in OPEN_DEFECTS]


def _id(case: Regression) -> str:
    return f"{case.defect}-{case.name}"


@pytest.mark.parametrize("case", [c for c in FIXED if c.store == "memory"], ids=_id)
async def test_fixed_defect_stays_fixed(case: Regression) -> None:
    report = await run_conformance(case.config, plan=case.plan)
    record(report)
    assert_conformance(report)


@pytest.mark.postgres
@pytest.mark.parametrize("case", [c for c in FIXED if c.store == "postgres"], ids=_id)
async def test_fixed_postgres_defect_stays_fixed(case: Regression, postgres_store: Any) -> None:
    report = await run_conformance(case.config, plan=case.plan, store=postgres_store)
    record(report)
    assert_conformance(report)


def test_every_case_names_a_configuration_and_a_valid_plan() -> None:
    from watukuy.testing.conformance import config_named, parse_plan

    for case in REGRESSIONS:
        config_named(case.config)
        assert parse_plan(case.plan)
