"""Named regression cases: the smallest plans that found each defect, kept forever.

Each case failed on the code before its fix. A case whose defect is still open (see
:data:`~._config.OPEN_DEFECTS`) is run by the long sweep (``--regressions``), not by the test
tier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["REGRESSIONS", "Regression"]


@dataclass(frozen=True, slots=True)
class Regression:
    """One named case.

    Attributes:
        name: What broke, in a few words (also the test id).
        defect: The defect label (issue and number, or a short name for a new finding).
        config: The configuration's name.
        plan: The plan (text form) that failed before the fix.
        found: Which check failed, and how.
        store: The store it needs (``"memory"`` unless the defect is a store's).
    """

    name: str
    defect: str
    config: str
    plan: str
    found: str
    store: str = "memory"


_SAME_STAMP: Final = " ".join(f"+k0{i}=0" for i in range(8))

REGRESSIONS: Final[tuple[Regression, ...]] = (
    Regression(
        "overlap-stalls-on-ties",
        "13.1",
        "ts-overlap",
        f"{_SAME_STAMP} t1000",
        "[final]/[stall]: every page re-read page 1 from watermark - overlap; 5 of 8 items "
        "never emitted, 10 requests per tick forever",
    ),
    Regression(
        "backfill-none-reads-history",
        "13.3",
        "ts-initial-now",
        "+k01=0 +k02=1 +k03=2 +k04=0 t1000 o:backfill t1000",
        "[backfill]: backfill(None) started at the cursor's initial; the history before it "
        "never reached the handler",
    ),
    Regression(
        "validators-hide-forced-backfill",
        "13.2",
        "ts-ops-etag",
        "+k01=0 +k02=1 +k03=2 +k04=0 t1000 t1500 o:backfill_force t1000",
        "[backfill]: the backfill's first request matched the live lane's validator: 304, "
        "nothing re-emitted",
    ),
    Regression(
        "validators-hide-cleared-snapshot",
        "13.2",
        "ts-ops-etag",
        "+k01=0 +k02=1 +k03=2 +k04=0 t1000 t3500 o:reset_clear t3500 ~k04=1 t3500",
        "[final]/[stall]: after reset_cursor(clear_snapshot=True) the first request got "
        "304 every cycle: nothing re-emitted, k04's update never read",
    ),
    Regression(
        "listing-longer-than-page-cap",
        "13.4",
        "snapshot-cap",
        "+k01=0 +k02=1 +k03=2 +k04=0 +k05=1 +k06=2 +k07=0 t1000 t3500 t3500",
        "[final]: pages 1-2 re-read every cycle; k07 on page 3 never emitted",
    ),
    Regression(
        "phantom-delete-on-page-shift",
        "14.1",
        "snapshot",
        "+k06=0 +k03=1 +k08=1 t618 t1647 ~k05=0 p -k05",
        "[phantom]: k05 inserted before page 1, deleted before page 2: k08 fell between "
        "the pages and was reported deleted",
    ),
    Regression(
        "phantom-delete-on-two-shifted-passes",
        "14.1-verify",
        "snapshot",
        "+k12=1 ~k00=1 t1752 ~k10=0 t1519 ~k02=1 p +k01=1 ~k07=1 +k11=0 p !500 t498 -k10 p "
        "+k08=2 t2321 p p -k08",
        "[phantom]: an insert read k10 twice and its delete moved k12 back a page; the next "
        "pass shifted past k12 again, and two passes that both missed it deleted it",
    ),
    Regression(
        "phantom-delete-after-a-shift-and-an-empty-answer",
        "14.3-partial",
        "snapshot-empty",
        "+k01=2 +k03=0 +k00=0 t2228 +k02=2 t2435 p -k02 !500 t2263 t602 !empty t1888",
        "[phantom]: a pass resumed after a 500 missed k03 (k02's delete moved it to page 1), "
        "the next pass was a 200 with an empty list, and the two deleted k03",
    ),
    Regression(
        "delete-after-incomplete-listing",
        "14.2",
        "snapshot-bad",
        "+k01=0 +k02=1 +k03=2 t1000 t1500 !bad t1500",
        "[phantom]: an item without its id was quarantined, and the listing still deleted it",
    ),
    Regression(
        "empty-answer-deletes-everything",
        "14.3",
        "snapshot-empty",
        "+k01=0 +k02=1 +k03=2 +k04=0 t1000 t1500 !empty t1500",
        "[phantom]: one 200 with an empty list deleted the whole snapshot",
    ),
    Regression(
        "returning-state-repeats-an-id",
        "14.4",
        "snapshot-value",
        "+k01=0 t1000 p ~k01=1 t3500 p ~k01=0 t3500 p ~k01=1 t3500 p",
        "[ids]/[consumer]: 0 -> 1 -> 0 -> 1 gave the second 'updated to 1' the id of the "
        "first; a dedup-by-id consumer believes 0",
    ),
    Regression(
        "re-creation-repeats-an-id",
        "14.4",
        "snapshot-value",
        "+k01=0 t1000 p -k01 t3500 p +k01=0 t3500 p",
        "[ids]/[consumer]: deleted and re-created with the same content, the re-creation "
        "had the id of the first created; a dedup-by-id consumer holds nothing",
    ),
    Regression(
        "not-modified-first-page-ends-listing",
        "304-ends-listing",
        "token-etag",
        "~k04=1 +k05=2 +k01=0 ~k12=2 t1327 t1710 ~k08=1",
        "[final]/[stall]: page 1 unchanged (304, answered Page(items=[]) as the docs say) "
        "ended the cycle; k08 on page 2 never read",
    ),
    Regression(
        "nul-in-an-identity",
        "14.5",
        "snapshot-still-odd-ids",
        "+k01=0 +k03=1 +k04=2 t1000",
        "[final]: on PostgresStore the page with k03|\\<NUL>... failed every cycle; no item "
        "of it was ever delivered",
        store="postgres",
    ),
    Regression(
        "live-item-deleted-after-a-re-created-one",
        "recreated-between-cycles",
        "snapshot-cap",
        "~k10=2 ~k00=1 +k09=2 +k06=0 t1726 ~k04=2 ~k07=2 -k11 ~k02=2 p t613 t2482 -k02 p "
        "+k11=1 p ~k07=1 p p t1413 +k02=2 -k12 +k09=2 p t660 ~k13=0 p t465 -k02",
        "[phantom]/[ids]: live k10 reported deleted, then created again under a second id "
        "(shrunk from snapshot-cap --seed 880001)",
    ),
)
"""Every case, fixed or not."""
