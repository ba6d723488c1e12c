"""Factories for sink tests: an event like the engine hands out, and a handler context."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from watukuy import Event, HandlerContext, Partition

EVENT_ID = "5dc9ec28d4ec668a7add37c6a32e916f839cd6d98ee013de30acd06b32599862"

EventFactory = Callable[..., Event[Any]]


@pytest.fixture
def make_event() -> EventFactory:
    """``make_event(**overrides)``: an ``updated`` event of order ``ord_1``, sequence 7."""

    def make(**overrides: Any) -> Event[Any]:
        fields: dict[str, Any] = {
            "id": EVENT_ID,
            "type": "updated",
            "source": "urn:watukuy:orders",
            "subject": "ord_1",
            "time": "2026-01-01T00:00:05.000Z",
            "poller": "orders",
            "partition": "",
            "lane": "live",
            "sequence": 7,
            "data": {"id": "ord_1", "total": 42},
        }
        fields.update(overrides)
        return Event(**fields)

    return make


@pytest.fixture
def ctx() -> HandlerContext:
    """A fresh handler context (attempt 1), not yet acked."""
    return HandlerContext(partition=Partition(""), attempt=1, logger=logging.getLogger("test"))
