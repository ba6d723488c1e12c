"""The consumers of each poller, attached and detached without an engine."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.runtime.attach import ConsumerTable
from watukuy.runtime.consumers import HandlerConsumer, Subscription


def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
    return None


def table(**options: object) -> tuple[ConsumerTable, list[str]]:
    orders = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=lambda ctx: [],
        **options,  # type: ignore[arg-type]
    )
    attached: list[str] = []
    return ConsumerTable({"orders": orders}, attached.append), attached


def test_handlers_without_a_name_take_the_first_free_default_name() -> None:
    consumers, attached = table()
    for _ in range(3):
        consumers.attach_handler("orders", None, handle)
    assert list(consumers.by_poller["orders"]) == ["default", "default-2", "default-3"]
    assert attached == ["orders"] * 3
    assert consumers.has_consumer("orders")


def test_a_taken_name_is_refused_and_nothing_is_attached() -> None:
    consumers, attached = table()
    consumers.attach_handler("orders", "audit", handle)
    with pytest.raises(wk.ConfigError, match="already has a consumer named 'audit'"):
        consumers.subscribe("orders", "audit")
    assert attached == ["orders"]
    assert isinstance(consumers.by_poller["orders"]["audit"], HandlerConsumer)


def test_a_handler_must_be_callable() -> None:
    consumers, attached = table()
    with pytest.raises(wk.ConfigError, match="expected a callable handler"):
        consumers.attach_handler("orders", None, "not a handler")  # type: ignore[arg-type]
    assert attached == []
    assert not consumers.has_consumer("orders")


def test_detaching_closes_subscriptions_and_drops_an_empty_poller() -> None:
    consumers, _ = table()
    subscription = consumers.subscribe("orders", "pull")
    consumers.attach_handler("orders", "push", handle)
    consumers.detach("orders", "pull")
    assert subscription.closed
    assert list(consumers.by_poller["orders"]) == ["push"]
    consumers.detach("orders", None)
    assert not consumers.has_consumer("orders")


def test_a_subscription_closed_by_its_user_leaves_the_table() -> None:
    consumers, _ = table()
    subscription = consumers.subscribe("orders", "pull")
    subscription.close()
    assert not consumers.has_consumer("orders")


def test_stopping_closes_every_subscription_but_keeps_the_handlers() -> None:
    consumers, _ = table()
    subscription: Subscription[Any] = consumers.subscribe("orders", "pull")
    consumers.attach_handler("orders", "push", handle)
    consumers.close_subscriptions()
    assert subscription.closed
    assert "push" in consumers.by_poller["orders"]


def test_a_filter_reading_previous_needs_a_poller_that_keeps_payloads() -> None:
    consumers, _ = table(retain="hash")
    assert consumers.filter_for("orders", None) is None
    assert consumers.filter_for("orders", wk.created()) is not None
    with pytest.raises(wk.ConfigError, match='retain="payload"'):
        consumers.filter_for("orders", wk.changed("status"))
