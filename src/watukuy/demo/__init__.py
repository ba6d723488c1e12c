"""``watukuy demo``: the engine end to end against a simulated vendor, on your machine.

What runs (all in one process, nothing to install):

- a vendor API on 127.0.0.1 (:class:`~watukuy.testing.FakeApi` over real HTTP) whose data
  changes over time, driven by a seed (:class:`VendorWorld`) and a write-ahead journal, so
  a restart finds the vendor as it was;
- an engine with a :class:`~watukuy.SqliteStore` in ``./watukuy-demo.db`` and three pollers
  (:func:`demo_pollers`): timestamp with reconcile, snapshot diff, partitioned token;
- a consumer that records every delivered event, keyed by id, in a separate SQLite file
  (:class:`ConsumerLog`), which is how a crash test can prove nothing was lost.

Files next to ``--db``: ``<name>.vendor.jsonl`` (the vendor's journal),
``<name>.consumer.db`` (the consumer log) and ``<name>.lock``. ``--reset`` deletes them.
"""

from __future__ import annotations

from ._consumer import ConsumerLog
from ._output import DemoOutput, JsonOutput, LiveOutput, PlainOutput
from ._pollers import BUDGET, DELIVERY_CONCURRENCY, demo_pollers
from ._run import DemoOptions, DemoPaths, run_demo
from ._world import CATALOG, ORDERS, TENANTS, Fault, Journal, VendorWorld

__all__ = [
    "BUDGET",
    "CATALOG",
    "DELIVERY_CONCURRENCY",
    "ORDERS",
    "TENANTS",
    "ConsumerLog",
    "DemoOptions",
    "DemoOutput",
    "DemoPaths",
    "Fault",
    "JsonOutput",
    "Journal",
    "LiveOutput",
    "PlainOutput",
    "VendorWorld",
    "demo_pollers",
    "run_demo",
]
