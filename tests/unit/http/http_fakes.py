"""Test doubles for the ``ctx.http`` tests: a scripted API, a validator store, a budget gate."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import httpx

from watukuy.http import HttpClient, HttpxFactory
from watukuy.model.errors import LeaseLostError
from watukuy.model.http_port import BudgetGate, HttpObservations, HttpScope
from watukuy.model.ports import StateStore
from watukuy.model.rows import Lane, Lease, PKey, Validator
from watukuy.testing.clock import VirtualClock

NOW = 1_700_000_000_000
"""Start of virtual time in these tests (epoch ms)."""

BASE = "https://api.example.com/items"
KEY = PKey("orders", "eu")
LEASE = Lease(owner="instance-1", epoch=7, expires_at=NOW + 30_000)


class FakeValidatorStore:
    """Just the validator half of a ``StateStore``, recording every call."""

    def __init__(self) -> None:
        self.validators: dict[tuple[PKey, str], Validator] = {}
        self.gets: list[tuple[PKey, str]] = []
        self.sets: list[tuple[PKey, Lease, str, Validator]] = []
        self.lease_lost = False
        self.fail_get: Exception | None = None
        self.fail_set: Exception | None = None

    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        self.gets.append((key, url_hash))
        if self.fail_get is not None:
            raise self.fail_get
        return self.validators.get((key, url_hash))

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        if self.lease_lost:
            raise LeaseLostError(key.poller, key.partition, lease.epoch)
        if self.fail_set is not None:
            raise self.fail_set
        self.sets.append((key, lease, url_hash, validator))
        self.validators[(key, url_hash)] = validator


class FakeGate:
    """A budget gate that answers a fixed wait, and records how it was asked."""

    def __init__(self, waited: int = 0, error: Exception | None = None) -> None:
        self.waited = waited
        self.error = error
        self.calls: list[dict[str, Any]] = []
        self.sent_before: list[int] = []
        self.sent: Callable[[], int] = lambda: 0

    async def acquire(
        self,
        budget: str,
        *,
        requester: str,
        lane: Lane,
        weight: float,
        cost: float,
        max_wait_ms: int,
    ) -> int:
        self.calls.append(
            {
                "budget": budget,
                "requester": requester,
                "lane": lane,
                "weight": weight,
                "cost": cost,
                "max_wait_ms": max_wait_ms,
            }
        )
        self.sent_before.append(self.sent())
        if self.error is not None:
            raise self.error
        return self.waited


class HttpRig:
    """One scripted API behind ``httpx.MockTransport`` and everything a scope needs.

    Args:
        base_url: The client's ``base_url`` (none by default).
    """

    def __init__(self, base_url: str = "") -> None:
        self.clock = VirtualClock(start=NOW)
        self.store = FakeValidatorStore()
        self.observations = HttpObservations()
        self.logger = logging.getLogger("watukuy.tests.http")
        self.requests: list[httpx.Request] = []
        self.responder: Callable[[httpx.Request], httpx.Response] = lambda request: httpx.Response(
            200, json={"ok": True}
        )
        self.client = httpx.AsyncClient(
            transport=httpx.MockTransport(self._handle), base_url=base_url
        )
        self.factory = HttpxFactory(self.client)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responder(request)

    def reply(self, status: int = 200, **kwargs: Any) -> None:
        """Answer every request with this response from now on."""
        self.responder = lambda request: httpx.Response(status, **kwargs)

    def scope(self, **overrides: Any) -> HttpScope:
        fields: dict[str, Any] = {
            "key": KEY,
            "lane": "live",
            "store": cast(StateStore, self.store),
            "lease": lambda: LEASE,
            "observations": self.observations,
            "budget": None,
            "budget_weight": 1.0,
            "budget_cost": 1.0,
            "max_wait_ms": 300_000,
            "gate": None,
            "clock": self.clock,
            "logger": self.logger,
        }
        fields.update(overrides)
        gate = fields["gate"]
        if isinstance(gate, FakeGate):
            gate.sent = lambda: len(self.requests)
        if gate is not None:
            assert isinstance(gate, BudgetGate)
        return HttpScope(**fields)

    def http(self, **overrides: Any) -> HttpClient:
        return self.factory.bind(self.scope(**overrides))
