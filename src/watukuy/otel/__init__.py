"""OpenTelemetry for watukuy: spans and metrics from the engine's hooks.

::

    from watukuy.otel import OtelHooks

    engine = wk.Engine(
        store=wk.SqliteStore("watukuy.db"),
        pollers=[orders],
        hooks=OtelHooks(attributes={"service.name": "erp-sync"}),
    )

Install the extra with ``pip install 'watukuy[otel]'`` (``opentelemetry-api``) and configure
an SDK and exporter as usual; without an SDK the hooks are no-ops. This module imports
without OpenTelemetry installed; creating :class:`OtelHooks` then raises ``ImportError``.

Lag is not an OpenTelemetry metric here: it is a property of the stored cursor, not of a
hook. Read ``lag_ms`` from ``engine.inspect()`` (the FastAPI health router in
``watukuy.integrations.fastapi`` does) and export it from there if you need it.
"""

from __future__ import annotations

from ._gauges import CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN
from ._hooks import SCOPE_NAME, AttributeScalar, OtelHooks
from ._instruments import DURATION_BUCKETS_MS, INSTRUMENT_NAMES

__all__ = [
    "AttributeScalar",
    "CIRCUIT_CLOSED",
    "CIRCUIT_HALF_OPEN",
    "CIRCUIT_OPEN",
    "DURATION_BUCKETS_MS",
    "INSTRUMENT_NAMES",
    "SCOPE_NAME",
    "OtelHooks",
]
