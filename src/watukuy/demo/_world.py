"""The simulated vendor behind the demo: a shop's orders, catalog and per-tenant invoices.

The world is a pure function of a seed and a list of step times. Step ``k`` draws from a
``random.Random(seed)`` that has made exactly the draws of steps ``1..k-1``, so replaying
the same steps rebuilds the same datasets, byte for byte. The step times come from a
journal file written *before* each step is applied: a demo killed at any moment restarts
with the vendor exactly as its pollers last saw it (or one unseen step further), which is
what a real vendor's database would do across our crash.

What changes, and what it exercises:

- **orders** (timestamp cursor + reconcile): new orders, status changes
  ``open -> paid -> shipped`` or ``cancelled``, several stamped with the same
  ``updated_at`` (ties across page boundaries), and archived orders that vanish from the
  listing (only a reconcile finds those).
- **catalog** (snapshot diff): price and stock changes, products added and removed.
- **invoices** of tenants ``acme``, ``globex``, ``initech`` (token cursor, partitioned):
  new invoices and invoices getting paid; invoices are never deleted.
- **faults**: now and then a ``429`` with ``Retry-After`` on the orders listing or a
  ``503`` on the catalog, scripted on the fake API (never during a replay).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import iso_time
from watukuy.testing import FakeApi

__all__ = [
    "CATALOG",
    "ORDERS",
    "TENANTS",
    "Fault",
    "Journal",
    "VendorWorld",
]

ORDERS: Final = "orders"
CATALOG: Final = "catalog"
TENANTS: Final = ("acme", "globex", "initech")

_CUSTOMERS: Final = ("Ada", "Grace", "Linus", "Barbara", "Edsger", "Margaret", "Alan", "Frances")
_ADJECTIVES: Final = ("blue", "oak", "steel", "tiny", "smart", "woolen", "glass", "copper")
_THINGS: Final = ("mug", "lamp", "chair", "desk", "kettle", "notebook", "plant", "clock")
_JOURNAL_FORMAT: Final = 1


@dataclass(frozen=True, slots=True)
class Fault:
    """A failure the vendor scripts for the next matching request.

    Attributes:
        status: HTTP status (429 or 503).
        path: Route glob it applies to.
        retry_after: ``Retry-After`` seconds, when sent.
    """

    status: int
    path: str
    retry_after: int | None = None

    def describe(self) -> str:
        """One line for the event stream."""
        wait = f" (Retry-After: {self.retry_after}s)" if self.retry_after is not None else ""
        return f"vendor answers the next GET {self.path} with {self.status}{wait}"


class VendorWorld:
    """The vendor's datasets on a :class:`~watukuy.testing.FakeApi`, driven by a seed.

    Tenants of the fake API hold the datasets: ``orders``, ``catalog``, and one per
    invoicing customer (``acme``, ``globex``, ``initech``).

    Args:
        seed: Seed of every random choice.
        api: The fake API to fill (default: a new one).
    """

    def __init__(self, seed: int, api: FakeApi | None = None) -> None:
        self.seed = seed
        self.api = api if api is not None else FakeApi(page_size=50)
        self.steps = 0
        self._rng = random.Random(seed)
        self._counters: dict[str, int] = {}

    def _next_id(self, kind: str, width: int) -> str:
        number = self._counters.get(kind, 0) + 1
        self._counters[kind] = number
        return f"{kind}-{number:0{width}d}"

    # --- the initial datasets ---------------------------------------------------------------

    def populate(self, at: int) -> None:
        """Fill the datasets as they are when the demo first starts (at ``at``, epoch ms)."""
        orders = self.api.tenant(ORDERS)
        for index in range(12):
            # Groups of four orders share one updated_at: ties inside and across pages.
            stamped = at - 60_000 + (index // 4) * 1_000
            orders.add(self._new_order(stamped))
        catalog = self.api.tenant(CATALOG)
        for _ in range(10):
            catalog.add(self._new_product(at))
        for tenant in TENANTS:
            invoices = self.api.tenant(tenant)
            for _ in range(4):
                invoices.add(self._new_invoice(tenant, at))

    def _new_order(self, at: int) -> dict[str, Any]:
        rng = self._rng
        return {
            "id": self._next_id("ord", 4),
            "customer": rng.choice(_CUSTOMERS),
            "status": "open",
            "total_cents": rng.randint(500, 25_000),
            "updated_at": iso_time(at),
        }

    def _new_product(self, at: int) -> dict[str, Any]:
        rng = self._rng
        return {
            "id": self._next_id("sku", 3),
            "name": f"{rng.choice(_ADJECTIVES)} {rng.choice(_THINGS)}",
            "price_cents": rng.randint(300, 9_000),
            "stock": rng.randint(0, 40),
            "updated_at": iso_time(at),
        }

    def _new_invoice(self, tenant: str, at: int) -> dict[str, Any]:
        rng = self._rng
        return {
            "id": self._next_id(f"inv-{tenant}", 4),
            "tenant": tenant,
            "status": "issued",
            "amount_cents": rng.randint(1_000, 90_000),
            "updated_at": iso_time(at),
        }

    # --- one step of change ----------------------------------------------------------------

    def step(self, at: int) -> list[Fault]:
        """Apply the next step of change, stamped ``at``; returns the faults it scripts
        (the caller decides whether to apply them: a replay does not)."""
        self.steps += 1
        stamp = iso_time(at)
        self._step_orders(at, stamp)
        self._step_catalog(at, stamp)
        self._step_invoices(at, stamp)
        faults: list[Fault] = []
        roll = self._rng.random()
        if roll < 0.05:
            faults.append(Fault(429, f"/t/{ORDERS}/items", retry_after=1))
        elif roll < 0.09:
            faults.append(Fault(503, f"/t/{CATALOG}/items/all"))
        return faults

    def _step_orders(self, at: int, stamp: str) -> None:
        rng = self._rng
        orders = self.api.tenant(ORDERS)
        if rng.random() < 0.35:
            orders.add(self._new_order(at))
        # Every order changed in this step carries the same updated_at: a tie.
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            moving = [o for o in orders.all() if o["status"] in ("open", "paid")]
            if not moving:
                break
            order = rng.choice(moving)
            if order["status"] == "open":
                status = "cancelled" if rng.random() < 0.15 else "paid"
            else:
                status = "shipped"
            orders.update(order["id"], status=status, updated_at=stamp)
        if rng.random() < 0.08:
            done = [o["id"] for o in orders.all() if o["status"] in ("shipped", "cancelled")]
            if done:
                orders.remove(rng.choice(done))

    def _step_catalog(self, at: int, stamp: str) -> None:
        rng = self._rng
        catalog = self.api.tenant(CATALOG)
        roll = rng.random()
        products = [p["id"] for p in catalog.all()]
        if roll < 0.2 and products:
            changes = {"price_cents": rng.randint(300, 9_000), "stock": rng.randint(0, 40)}
            catalog.update(rng.choice(products), updated_at=stamp, **changes)
        elif roll < 0.3 and len(products) > 3:
            catalog.remove(rng.choice(products))
        elif roll < 0.42:
            catalog.add(self._new_product(at))

    def _step_invoices(self, at: int, stamp: str) -> None:
        rng = self._rng
        tenant = rng.choice(TENANTS)
        invoices = self.api.tenant(tenant)
        roll = rng.random()
        if roll < 0.3:
            invoices.add(self._new_invoice(tenant, at))
        elif roll < 0.55:
            issued = [i["id"] for i in invoices.all() if i["status"] == "issued"]
            if issued:
                invoices.update(rng.choice(issued), status="paid", updated_at=stamp)

    # --- rebuilding -----------------------------------------------------------------------

    @classmethod
    def replay(cls, seed: int, started_at: int, steps: Iterable[int]) -> VendorWorld:
        """The world after ``populate(started_at)`` and one ``step`` per time in ``steps``
        (faults dropped)."""
        world = cls(seed)
        world.populate(started_at)
        for at in steps:
            world.step(at)
        return world

    @classmethod
    def from_journal(cls, path: str | os.PathLike[str]) -> VendorWorld:
        """The world a demo journal describes (what its vendor served last)."""
        header, steps = Journal.read(Path(path))
        return cls.replay(header["seed"], header["started_at"], steps)


class Journal:
    """The vendor's write-ahead journal: a header line, then one line per step.

    A line is written and flushed to the operating system *before* its step is applied,
    so a process killed at any point loses no step its pollers could have seen.

    Args:
        path: The journal file (JSON lines).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self.steps: list[int] = []
        self.header: dict[str, Any] = {}

    @staticmethod
    def read(path: Path) -> tuple[dict[str, Any], list[int]]:
        """The header and the step times of a journal (a torn last line is ignored).

        Raises:
            ConfigError: The file is not a demo journal.
        """
        header, steps, _ = Journal._parse(path)
        return header, steps

    @staticmethod
    def _parse(path: Path) -> tuple[dict[str, Any], list[int], int]:
        data = path.read_bytes()
        header: dict[str, Any] | None = None
        steps: list[int] = []
        good = 0
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break  # torn by a kill in the middle of a write: that step never applied
            try:
                line = wkjson.loads(raw)
            except ValueError:
                break
            if header is None:
                if not isinstance(line, dict) or line.get("watukuy_demo_vendor") != _JOURNAL_FORMAT:
                    raise ConfigError(f"{str(path)!r} is not a demo vendor journal", field="--db")
                header = line
            elif isinstance(line, dict) and line.get("step") == len(steps) + 1:
                steps.append(int(line["at"]))
            else:
                raise ConfigError(
                    f"{str(path)!r} is damaged at step {len(steps) + 1}; start over with --reset",
                    field="--db",
                )
            good += len(raw)
        if header is None:
            raise ConfigError(f"{str(path)!r} has no header; start over with --reset", field="--db")
        return header, steps, good

    def open(self, seed: int, now: int) -> None:
        """Open (or create) the journal for ``seed``.

        Raises:
            ConfigError: The journal was written with another seed.
        """
        if self.path.exists() and self.path.stat().st_size > 0:
            self.header, self.steps, good = self._parse(self.path)
            if self.header.get("seed") != seed:
                raise ConfigError(
                    f"the demo in {str(self.path)!r} was started with --seed "
                    f"{self.header.get('seed')}; pass that seed, or --reset to start over",
                    field="--seed",
                )
            with self.path.open("r+b") as handle:
                handle.truncate(good)
        else:
            self.header = {"watukuy_demo_vendor": _JOURNAL_FORMAT, "seed": seed, "started_at": now}
            self.steps = []
            self.path.write_text(wkjson.dumps(self.header) + "\n", encoding="utf-8")
        self._file = self.path.open("a", encoding="utf-8")

    @property
    def started_at(self) -> int:
        """When the vendor's datasets were first created (epoch ms)."""
        return int(self.header["started_at"])

    def append(self, at: int) -> int:
        """Record the next step at ``at``; returns its number."""
        number = len(self.steps) + 1
        self._file.write(wkjson.dumps({"step": number, "at": at}) + "\n")
        self._file.flush()
        self.steps.append(at)
        return number

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None
