"""Chaos runs that once failed, kept as they were found (the fix has a focused test in
``tests/integration/test_regressions.py``)."""

from __future__ import annotations

import pytest

from watukuy.testing.chaos import assert_chaos_report, run_chaos


@pytest.mark.parametrize("seed", [1, 2, 6])
async def test_page_reconcile_restarts_an_interrupted_listing(seed: int) -> None:
    """Reconcile listings that reuse the page poller's fetch (it reads ``ctx.cursor``) used
    to resume after a crash at their persisted page with an empty set of seen identities:
    every item of the skipped pages was reported ``deleted``, then ``created`` again under
    its first id (seed 6: 11 violations, "created (seq 202) was delivered after its deleted
    (seq 191)", "event ... was committed twice, as seq 14 and seq 207")."""
    report = await run_chaos(seed=seed, strategy="page", reconcile=True)
    assert_chaos_report(report)
    assert report.kills["after-commit"] + report.kills["after-fetch"] > 0
