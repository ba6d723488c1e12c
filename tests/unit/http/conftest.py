"""Fixtures for the ``ctx.http`` tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from http_fakes import World


@pytest.fixture
async def world() -> AsyncIterator[World]:
    """A scripted API, a validator store and a virtual clock; the client is closed after."""
    w = World()
    yield w
    await w.client.aclose()
