"""The short real-vendor run: pollers written from our docs, and pollers described only in
TOML (``real_vendor_tier/toml``), held against the vendors' own history (see
``conftest.py`` for what runs, ``real_vendor_tier`` for how).
"""

from __future__ import annotations

import itertools
import re

import pytest
from real_vendor_tier.scenario import RunResult
from real_vendor_tier.short import ShortTier

pytestmark = pytest.mark.slow

# The TOML recipes of the short run (make real-vendors runs every file).
TOML = {
    "drf": ("toml-keyset", "toml-token", "toml-snapshot"),
    "json": ("toml-keyset", "toml-link"),
}
RECIPES = {
    "drf": ("quickstart", "overlap", "token", "snapshot", *TOML["drf"]),
    "json": ("quickstart", "overlap", "snapshot", *TOML["json"]),
}
ALL = [(vendor, recipe) for vendor, recipes in RECIPES.items() for recipe in recipes]
ALL_TOML = [(vendor, recipe) for vendor, recipes in TOML.items() for recipe in recipes]
FULL_LISTINGS = [
    ("drf", "snapshot"),
    ("json", "snapshot"),
    ("drf", "toml-snapshot"),
    ("json", "toml-link"),
]


def run_of(tier: ShortTier, vendor: str) -> RunResult:
    run: RunResult = tier.get(vendor)
    return run


def figures(tier: ShortTier, vendor: str, recipe: str) -> dict[str, object]:
    return run_of(tier, vendor).recipes[recipe].figures()


# --- the run is what it claims to be -----------------------------------------------------


@pytest.mark.parametrize("vendor", ["drf", "json"])
def test_the_writers_made_late_tied_deleted_and_recreated_writes(
    short_tier: ShortTier, vendor: str
) -> None:
    run = run_of(short_tier, vendor)
    print(f"{vendor}: writes {run.writes}, lateness {run.lateness()}")
    assert run.lateness()["max"] > 1.0  # commits landed seconds after their stamp
    assert run.writes["bulk"] >= 1
    assert run.writes["delete"] >= 1
    assert run.writes["recreate"] >= 1
    stamps: dict[int, int] = {}
    for states in run.history.versions.values():
        for state in states:
            if not state.deleted:
                stamps[state.key[2]] = stamps.get(state.key[2], 0) + 1
    assert max(stamps.values()) > 100 if vendor == "drf" else max(stamps.values()) >= 60
    recreated = [
        states
        for states in run.history.versions.values()
        if any(a.deleted and not b.deleted for a, b in itertools.pairwise(states))
    ]
    assert recreated, "no order was deleted and created again"
    assert run.history.version_collisions() == []
    for recipe in RECIPES[vendor]:
        assert run.recipes[recipe].verdict.obligations > 100


# --- what every recipe must hold, today ----------------------------------------------------


@pytest.mark.parametrize(("vendor", "recipe"), ALL)
def test_no_phantom_delete_no_unexplained_duplicate_per_key_order(
    short_tier: ShortTier, vendor: str, recipe: str
) -> None:
    got = figures(short_tier, vendor, recipe)
    print(got)
    assert got["unknown_versions"] == 0
    assert got["phantom_deletes"] == 0
    assert got["unexplained_duplicates"] == 0
    assert got["order_violations"] == 0


@pytest.mark.parametrize(
    ("vendor", "recipe"),
    [
        ("drf", "overlap"),
        ("drf", "snapshot"),
        ("drf", "token"),
        ("json", "overlap"),
        ("json", "snapshot"),
        *ALL_TOML,
    ],
)
def test_recipes_end_in_the_vendors_final_state(
    short_tier: ShortTier, vendor: str, recipe: str
) -> None:
    got = figures(short_tier, vendor, recipe)
    assert got["wrong_final"] == 0, got


@pytest.mark.parametrize(("vendor", "recipe"), [("drf", "overlap"), ("json", "overlap")])
def test_overlap_delivers_every_version_visible_10s(
    short_tier: ShortTier, vendor: str, recipe: str
) -> None:
    got = figures(short_tier, vendor, recipe)
    assert got["missed"] == 0, got


@pytest.mark.parametrize(("vendor", "recipe"), FULL_LISTINGS)
def test_full_listing_deletes_arrive(short_tier: ShortTier, vendor: str, recipe: str) -> None:
    got = figures(short_tier, vendor, recipe)
    print(got)
    assert got["deletes_seen"] > 0  # the run had deletes that stood, and they arrived
    assert got["deletes_undelivered"] == 0


# --- issue 34's done-when lines ------------------------------------------------------------


@pytest.mark.parametrize("vendor", ["drf", "json"])
def test_quickstart_delivers_every_version_visible_10s(short_tier: ShortTier, vendor: str) -> None:
    got = figures(short_tier, vendor, "quickstart")
    print(got)
    assert got["missed"] == 0, got


@pytest.mark.parametrize("vendor", ["drf", "json"])
def test_quickstart_ends_in_the_vendors_final_state(short_tier: ShortTier, vendor: str) -> None:
    got = figures(short_tier, vendor, "quickstart")
    assert got["wrong_final"] == 0, got


def test_token_recipe_reads_one_page_per_idle_cycle(short_tier: ShortTier) -> None:
    got = figures(short_tier, "drf", "token")
    print(got)
    per_cycle = got["idle_live_requests_per_cycle"]
    assert per_cycle is not None, got
    assert per_cycle <= 1.5, got


def test_a_pass_whose_last_page_vanished_fails_and_deletes_nothing_live(
    short_tier: ShortTier,
) -> None:
    wedge = short_tier.get("wedge")
    print(wedge)
    assert wedge.errors_before_update[0], "page 3 did not fail: the pass was not cut"
    assert wedge.phantom_deletes == 0


def test_a_pass_whose_last_page_vanished_recovers(short_tier: ShortTier) -> None:
    wedge = short_tier.get("wedge")
    assert wedge.ticks_to_deliver is not None, wedge.tick_errors


ISO_STAMP = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z?")


def test_a_tie_group_larger_than_the_page_fails_with_what_to_change(short_tier: ShortTier) -> None:
    ties = short_tier.get("ties")
    print(ties)
    messages = [ISO_STAMP.sub("", message) for errors in ties.tick_errors for message in errors]
    assert any(
        re.search(rf"\b{ties.limit}\b", message) and re.search(r"tie[_ -]?break", message)
        for message in messages
    ), messages


def test_the_docs_fetch_abandons_a_pass_whose_last_page_vanished(short_tier: ShortTier) -> None:
    # The snapshot recipe's fetch (docs/cursors.md) answers DRF's 404 past the end with
    # Page(gone=True): the pass is abandoned at once, no cycle fails, nothing is deleted.
    wedge = short_tier.get("wedge_gone")
    print(wedge)
    assert wedge.tick_errors[0] == []
    assert wedge.errors_before_update == [[], [], []]
    assert wedge.ticks_to_deliver is not None, wedge.tick_errors
    assert wedge.phantom_deletes == 0


@pytest.mark.parametrize("recipe", ["quickstart", "overlap", "snapshot"])
def test_no_json_server_cycle_fails(short_tier: ShortTier, recipe: str) -> None:
    # json-server answers the engine's conditional requests with 304; the quickstart's
    # fetch reads the body without checking `not_modified`, the snapshot's checks it.
    got = figures(short_tier, "json", recipe)
    print(got)
    assert got["errors"] == 0, run_of(short_tier, "json").recipes[recipe].errors


def test_a_304_body_read_by_the_quickstart_fetch_is_an_unchanged_page(
    short_tier: ShortTier,
) -> None:
    unchanged = short_tier.get("not_modified")
    print(unchanged)
    assert unchanged.answered_304 >= 2, "json-server answered no 304: the rule went untested"
    assert unchanged.tick_errors == [[]] * len(unchanged.tick_errors)
    assert unchanged.update_delivered


# --- pollers described only in TOML ---------------------------------------------------------


@pytest.mark.parametrize("vendor", ["drf", "json"])
def test_toml_keyset_delivers_every_version_visible_10s(short_tier: ShortTier, vendor: str) -> None:
    # The quickstart's twin: a keyset over the stamp and the id, with the default lookback.
    got = figures(short_tier, vendor, "toml-keyset")
    print(got)
    assert got["missed"] == 0, got


@pytest.mark.parametrize(("vendor", "recipe"), ALL_TOML)
def test_no_toml_poller_cycle_fails(short_tier: ShortTier, vendor: str, recipe: str) -> None:
    got = figures(short_tier, vendor, recipe)
    print(got)
    assert got["errors"] == 0, run_of(short_tier, vendor).recipes[recipe].errors


def test_toml_token_recipe_reads_one_page_per_idle_cycle(short_tier: ShortTier) -> None:
    got = figures(short_tier, "drf", "toml-token")
    print(got)
    per_cycle = got["idle_live_requests_per_cycle"]
    assert per_cycle is not None, got
    assert per_cycle <= 1.5, got


def test_a_toml_page_listing_abandons_a_pass_whose_last_page_vanished(
    short_tier: ShortTier,
) -> None:
    # drf-pages-two-per-cycle.toml: DRF's 404 on the page after the last one read is a
    # listing that shrank (its end is the page whose `next` is null), so the pass is
    # abandoned at once: no cycle fails, nothing is deleted, the next pass delivers.
    wedge = short_tier.get("toml_wedge_gone")
    print(wedge)
    assert wedge.tick_errors[0] == []
    assert wedge.errors_before_update == [[], [], []]
    assert wedge.ticks_to_deliver is not None, wedge.tick_errors
    assert wedge.phantom_deletes == 0
