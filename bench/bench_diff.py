"""Content-hash throughput: ours next to the rfc8785 package and plain orjson + SHA-256.

Every item of every page is hashed, so :func:`watukuy.diff.content_hash` is on the hot path.
Three ways to hash the same item, side by side in one run:

* **ours**: ``content_hash(item)`` (RFC 8785, byte-identical to the original watukuy);
* **rfc8785**: ``sha256(rfc8785.dumps(item))``, the reference package (pure Python);
* **orjson+sha256**: ``sha256(orjson.dumps(item, option=OPT_SORT_KEYS))``, the floor: fast
  but not canonical (``100.0``, ``1e16``, NaN and some key orders come out differently).

Targets for the everyday item: ours >= 10x rfc8785 and >= 50% of orjson+sha256. The other
rows show, for honesty, an item with a null below the top level (orjson's text is kept, but
a walk must prove no NaN hides behind it), items that leave orjson's fast path (integral
floats; characters whose UTF-16 order differs from code-point order) and a typed item.

Run with ``make bench`` or ``python -m bench diff``. It reports; it never fails.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import time
from collections.abc import Callable
from typing import Any

import orjson
import pydantic
import rfc8785

from watukuy.diff import canonical, canonical_json, content_hash
from watukuy.model.json import to_jsonable

ROUNDS = 7
ROUND_SECONDS = 0.03

EVERYDAY: dict[str, Any] = {
    "id": "ord_000123",
    "customer": "Acme Logística S.A.",
    "status": "paid",
    "quantity": 3,
    "price": 123.45,
    "paid": True,
    "coupon": None,
    "address": {"street": "Av. Arequipa 1234", "city": "Lima", "zip": "15001", "country": "PE"},
    "lines": [
        {"sku": "A-1", "qty": 1, "unit_price": 10.5},
        {"sku": "B-2", "qty": 2, "unit_price": 20.25},
        {"sku": "C-3", "qty": 5, "unit_price": 3.99},
    ],
    "updated_at": "2026-01-02T03:04:05.006Z",
}

# The everyday order with an empty address line: orjson writes NaN as null too, and only
# None members of the top level are counted, so this null is accounted for by a walk.
NESTED_NULL: dict[str, Any] = {
    "id": "ord_000124",
    "customer": "Acme Logística S.A.",
    "status": "paid",
    "quantity": 3,
    "price": 123.45,
    "paid": True,
    "coupon": None,
    "address": {
        "street": "Av. Arequipa 1234",
        "line2": None,
        "city": "Lima",
        "zip": "15001",
        "country": "PE",
    },
    "lines": [
        {"sku": "A-1", "qty": 1, "unit_price": 10.5},
        {"sku": "B-2", "qty": 2, "unit_price": 20.25},
        {"sku": "C-3", "qty": 5, "unit_price": 3.99},
    ],
    "updated_at": "2026-01-02T03:04:05.006Z",
}

# Amounts that happen to be whole numbers, as many APIs send them: orjson writes 100.0
# where JCS writes 100, so these take the walk.
FLOAT_HEAVY: dict[str, Any] = {
    "id": "inv_9",
    "subtotal": 100.0,
    "tax": 18.0,
    "total": 118.0,
    "rate": 0.18,
    "fx": 3.75,
    "lines": [
        {"qty": 1.0, "price": 50.0, "discount": 0.0},
        {"qty": 2.0, "price": 25.0, "discount": 2.5},
        {"qty": 4.0, "price": 1e-7, "discount": 1e21},
    ],
}

NON_ASCII: dict[str, Any] = {
    "id": "cli_7",
    "name": "José Ñúñez Quispe",
    "city": "Cusco",
    "note": "日本語のメモ — überprüft ✓",
    "tags": ["ñandú", "café", "東京"],
    "score": 4.5,
}

# Fullwidth letters (U+FF21..) next to an emoji: code-point and UTF-16 key order may
# disagree, so orjson's sorted output cannot be trusted as is.
FULLWIDTH_AND_EMOJI: dict[str, Any] = {
    "id": "cli_8",
    "\uff4e\uff41\uff4d\uff45": "\uff21\uff23\uff2d\uff25\u682a\u5f0f\u4f1a\u793e",
    "\U0001f600": "grinning",
    "note": "ok 👍",
    "score": 4.5,
}


class Order(pydantic.BaseModel):
    id: str
    customer: str
    price: float
    placed_at: dt.datetime
    lines: list[dict[str, Any]]


TYPED = Order(
    id="ord_1",
    customer="Acme",
    price=123.45,
    placed_at=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    lines=[{"sku": "A-1", "qty": 1}],
)

ITEMS: list[tuple[str, Any]] = [
    ("everyday", EVERYDAY),
    ("nested null", NESTED_NULL),
    ("float-heavy", FLOAT_HEAVY),
    ("non-ASCII", NON_ASCII),
    ("fullwidth+emoji", FULLWIDTH_AND_EMOJI),
    ("pydantic model", TYPED),
]


def ours(value: Any) -> str:
    return content_hash(value)


def reference(value: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(to_jsonable(value))).hexdigest()


def floor(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def path_of(value: Any) -> str:
    """Which writers serve ``value`` (mirrors ``canonical_json``; for the table only)."""
    steps = []
    if not isinstance(value, dict | list | str | int | float) and value is not None:
        value = to_jsonable(value)
        steps.append("to_jsonable")
    if isinstance(value, dict | list):
        try:
            out = canonical._fast(value)
        except TypeError:
            out = None
        if out is not None:
            members = value.values() if isinstance(value, dict) else value
            if out.count(b"null") > sum(member is None for member in members):
                steps.append("null walk")
            return "+".join([*steps, "orjson"])
    try:
        out = orjson.dumps(canonical._prepare(value), option=canonical._OPTIONS)
    except (TypeError, ValueError):
        return "reference"
    if not canonical._numbers_agree(out):
        return "reference"
    steps.append("walk")
    if not canonical._keys_in_order(out):
        steps.append("utf16 sort")
    return "+".join([*steps, "orjson"])


def calibrate(func: Callable[[Any], Any], value: Any) -> int:
    """Iterations that take about ROUND_SECONDS."""
    count = 1
    while True:
        started = time.perf_counter()
        for _ in range(count):
            func(value)
        elapsed = time.perf_counter() - started
        if elapsed >= ROUND_SECONDS / 4:
            return max(1, int(count * ROUND_SECONDS / elapsed))
        count *= 4


def rates(funcs: dict[str, Callable[[Any], Any]], value: Any) -> dict[str, float]:
    """Best items/s of each function, rounds interleaved so load hits all of them alike."""
    counts = {name: calibrate(func, value) for name, func in funcs.items()}
    best = dict.fromkeys(funcs, 0.0)
    gc.disable()
    try:
        for _ in range(ROUNDS):
            for name, func in funcs.items():
                count = counts[name]
                started = time.perf_counter()
                for _ in range(count):
                    func(value)
                best[name] = max(best[name], count / (time.perf_counter() - started))
    finally:
        gc.enable()
    return best


def main() -> None:
    """Print the table; entry point of ``make bench``."""
    print(
        f"{'item':<16}{'ours/s':>11}{'rfc8785/s':>11}{'orjson+sha/s':>14}"
        f"{'vs rfc8785':>12}{'vs orjson':>11}  path"
    )
    for label, value in ITEMS:
        expected = rfc8785.dumps(to_jsonable(value))
        if canonical_json(value) != expected:
            print(f"{label:<16}MISMATCH with rfc8785: {canonical_json(value)!r} != {expected!r}")
            continue
        funcs: dict[str, Callable[[Any], Any]] = {"ours": ours, "rfc8785": reference}
        plain = isinstance(value, dict | list)
        if plain:
            funcs["floor"] = floor
        best = rates(funcs, value)
        floor_rate = f"{best['floor']:>14,.0f}" if plain else f"{'-':>14}"
        versus_floor = f"{best['ours'] / best['floor']:>10.0%}" if plain else f"{'-':>10}"
        print(
            f"{label:<16}{best['ours']:>11,.0f}{best['rfc8785']:>11,.0f}{floor_rate}"
            f"{best['ours'] / best['rfc8785']:>11.1f}x{versus_floor}   {path_of(value)}"
        )
    print("targets (everyday item): >= 10x rfc8785, >= 50% of orjson+sha256")


if __name__ == "__main__":
    main()
