"""Fixtures for the ``ctx.http`` tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from http_fakes import HttpRig


@pytest.fixture
async def rig() -> AsyncIterator[HttpRig]:
    """A scripted API, a validator store and a virtual clock; the client is closed after."""
    w = HttpRig()
    yield w
    await w.client.aclose()
