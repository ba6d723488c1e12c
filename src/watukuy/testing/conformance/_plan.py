"""Plans: the step lists a conformance run executes, their text form, and their generation.

A plan is a list of short text steps, consumed in order. Some steps happen *between
ticks* (the driver takes them), the others *at the next request* (the vendor takes them
as each request of a cycle arrives), so a change can land between any two requests of a
cycle::

    t1200          advance the clock 1200 ms, then tick               (between ticks)
    o:reset        an operator action (see Op)                        (between ticks)
    +k03=1         insert k03 with value 1 (an update if it exists)   (either)
    ~k03=2         update k03 to value 2 (an insert if it is absent)  (either)
    ~k03=2@900     the same, made visible late: stamped 900 ms back   (either)
    -k03           delete k03                                         (either)
    kafter-commit  arm a store kill point                             (either)
    p              let one request through untouched                  (consumes a request)
    !500           answer this request with a fault (see Fault)       (consumes a request)
    K              the process dies now (during this request, or idle) (consumes a request)

Steps before the first ``t`` build the vendor's initial dataset. The request-level steps
after a ``t`` are taken by that tick's requests as they arrive (``t900 p ~k01=2 p``: the
first request sees the old ``k01``, the second the new one); what a tick leaves untaken
the driver applies after it. A plan stays valid when any steps are removed, which is what
shrinking relies on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from watukuy.testing.faulty import KILL_POINTS
from watukuy.testing.random import SeededRandom

from ._config import ConformanceConfig

__all__ = ["Step", "format_plan", "generate_plan", "parse_plan", "parse_step"]

StepKind = Literal["tick", "op", "write", "delete", "arm", "pass", "fault", "kill"]

_WRITE: Final = re.compile(r"([+~])([A-Za-z0-9_-]+)=(\d+)(?:@(\d+))?")
_TOKEN: Final = re.compile(r"\S+")
_REQUEST_POINTS: Final = tuple(point for point in KILL_POINTS if point != "during-release")


@dataclass(frozen=True, slots=True)
class Step:
    """One parsed step (see the module docstring for the text form)."""

    kind: StepKind
    text: str
    identity: str = ""
    value: int = 0
    late_ms: int = 0
    number: int = 0
    name: str = ""

    @property
    def between_ticks(self) -> bool:
        """Only the driver takes it (a tick or an operator action)."""
        return self.kind in ("tick", "op")

    @property
    def consumes_request(self) -> bool:
        """Taken by the vendor, it decides the fate of that request."""
        return self.kind in ("pass", "fault", "kill")


def parse_step(text: str) -> Step:
    """Read one step.

    Raises:
        ValueError: The text is not a step.
    """
    if text == "p":
        return Step("pass", text)
    if text == "K":
        return Step("kill", text)
    if text.startswith("t") and text[1:].isdigit():
        return Step("tick", text, number=int(text[1:]))
    if text.startswith("o:") and text[2:]:
        return Step("op", text, name=text[2:])
    if text.startswith("!") and text[1:] in ("429", "500", "empty", "bad"):
        return Step("fault", text, name=text[1:])
    if text.startswith("k") and text[1:] in KILL_POINTS:
        return Step("arm", text, name=text[1:])
    if text.startswith("-") and len(text) > 1:
        return Step("delete", text, identity=text[1:])
    match = _WRITE.fullmatch(text)
    if match:
        late = int(match.group(4)) if match.group(4) else 0
        return Step("write", text, identity=match.group(2), value=int(match.group(3)), late_ms=late)
    raise ValueError(f"not a conformance step: {text!r}")


def parse_plan(text: str | Iterable[str]) -> list[Step]:
    """Read a plan from its text form (steps separated by spaces) or a list of steps.

    Raises:
        ValueError: A step cannot be read.
    """
    tokens = _TOKEN.findall(text) if isinstance(text, str) else list(text)
    return [parse_step(token) for token in tokens]


def format_plan(steps: Sequence[Step]) -> str:
    """The text form of a plan, as :func:`parse_plan` reads it."""
    return " ".join(step.text for step in steps)


# --- generation ---------------------------------------------------------------------------


def _ids(config: ConformanceConfig) -> list[str]:
    return [f"k{index:02d}" for index in range(config.id_pool)]


def generate_plan(config: ConformanceConfig, seed: int, rounds: int) -> list[Step]:
    """A seeded plan for ``config``: the initial items, then ``rounds`` ticks, each with a
    few groups of changes and request fates for the requests of that tick.

    Args:
        config: What the plan may do (ops, faults, kills, late changes).
        seed: Seeds every choice.
        rounds: Ticks before quiescence.
    """
    rng = SeededRandom(seed)
    pool = _ids(config)
    values: dict[str, int] = {}
    steps: list[str] = []

    def write(identity: str, late: int = 0) -> None:
        current = values.get(identity)
        value = rng.pick([v for v in range(3) if v != current])
        prefix = "~" if current is not None else "+"
        steps.append(f"{prefix}{identity}={value}" + (f"@{late}" if late else ""))
        values[identity] = value

    for identity in rng.shuffle(list(pool))[: config.items]:
        write(identity)
    window = config.late_window_ms
    # An initial_now cursor never reads the history: the backfill from None must, early,
    # while some of the history is still untouched.
    backfill_round = rng.int(1, 3) if rounds > 3 else 0
    for round_ in range(rounds):
        if config.ops and rng.chance(0.08):
            steps.append(f"o:{rng.pick(list(config.ops))}")
        elif config.initial_now and round_ == backfill_round:
            steps.append("o:backfill")
        steps.append(f"t{rng.int(200, 2_500)}")
        for _ in range(rng.int(0, 4)):
            for _ in range(rng.pick([0, 0, 1, 1, 2, 3, 5])):
                present = list(values)
                roll = rng.next()
                if not present or roll < 0.25:
                    absent = [i for i in pool if i not in values]
                    if absent:
                        write(rng.pick(absent))
                elif roll < 0.75:
                    late = rng.int(1, window) if window and rng.chance(0.3) else 0
                    write(rng.pick(present), late)
                else:
                    target = rng.pick(present)
                    steps.append(f"-{target}")
                    del values[target]
            if config.kills and rng.chance(0.05):
                steps.append(f"k{rng.pick(list(_REQUEST_POINTS))}")
            roll = rng.next()
            if config.kills and roll < 0.03:
                steps.append("K")
            elif config.faults and roll < 0.12:
                steps.append(f"!{rng.pick(list(config.faults))}")
            else:
                steps.append("p")
    return parse_plan(steps)
