"""Fixtures of the real-vendor tier.

- ``drf_vendor`` / ``json_server_vendor``: a running vendor for one test module (reused by
  later tiers: they take nothing but the PostgreSQL URL and a folder);
- ``short_tier``: the short run of ``make test`` (``real_vendor_tier.short``), started
  once per session.

A vendor that cannot start here (no PostgreSQL, no Node/npm) skips with the reason,
except under ``CI=true``, where it fails the run, like the service fixtures of
``tests/conftest.py``. ``WATUKUY_RV_ENGINE_PYTHON`` runs the engines with another
checkout's interpreter.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_vendor_tier.short import ShortTier, run_short_tier, unavailable
from real_vendor_tier.vendors import DrfVendor, JsonServer, VendorUnavailable
from real_vendor_tier.writers import json_orders

# The server tests/conftest.py gives the stores.
POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="module")
def drf_vendor(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DrfVendor]:
    """A DRF vendor under gunicorn, in a PostgreSQL schema of its own (dropped after)."""
    try:
        vendor = DrfVendor.start(tmp_path_factory.mktemp("drf"), postgres_url)
    except VendorUnavailable as error:
        unavailable(str(error))
    yield vendor
    vendor.stop()


@pytest.fixture(scope="module")
def json_server_vendor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JsonServer]:
    """json-server 0.17 on 20 orders (``json_orders``)."""
    try:
        server = JsonServer.start(
            tmp_path_factory.mktemp("json"), json_orders(20, start=time.time() - 60)
        )
    except VendorUnavailable as error:
        unavailable(str(error))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def short_tier(tmp_path_factory: pytest.TempPathFactory) -> ShortTier:
    """The short real-vendor run, once per session."""
    dsn: str | None = POSTGRES_URL
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception:  # psycopg missing or the server down: the DRF runs report it
        dsn = None
    return asyncio.run(run_short_tier(tmp_path_factory.mktemp("real-vendors"), dsn))
