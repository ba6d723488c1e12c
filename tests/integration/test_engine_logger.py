"""``Engine(logger=...)``: the engine's lines reach an injected logger cleaned of secrets,
every line about a key names it, and the logger helpers of ``watukuy`` and
``watukuy.testing``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import watukuy as wk
from watukuy.testing import CapturingLogger, SeededRandom, VirtualClock

SECRET = "s3cr3t-value"


def failing_poller(name: str = "orders", **options: Any) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        raise RuntimeError(f"GET https://api.test/items?api_key={SECRET} answered 500")

    return wk.define_poller(
        name=name, identity=lambda item: item["id"], cursor=wk.TokenCursor(), fetch=fetch, **options
    )


def engine_with(logger: Any, *pollers: wk.PollerDefinition[Any]) -> wk.Engine:
    return wk.Engine(
        store=wk.MemoryStore(),
        pollers=list(pollers) or [failing_poller()],
        clock=VirtualClock(),
        random=SeededRandom(1),
        logger=logger,
    )


async def test_an_injected_logger_gets_the_lines_cleaned_of_secrets() -> None:
    log = CapturingLogger()
    engine = engine_with(log)
    result = await engine.tick()
    assert result.polled[0].error is not None
    warnings = log.at("WARNING")
    assert warnings.messages, log.messages
    joined = "\n".join(warnings.messages)
    assert "api_key=***" in joined
    assert SECRET not in "\n".join(log.messages)


async def test_every_line_about_a_key_names_the_key_in_text_and_fields() -> None:
    log = CapturingLogger()
    partitioned = failing_poller(
        "tenants", partitions=lambda: [wk.Partition(key="acme"), wk.Partition(key="zeta")]
    )
    engine = engine_with(log, failing_poller("orders"), partitioned)
    await engine.tick()
    orders = log.for_poller("orders").at(logging.WARNING)
    assert orders.messages
    assert all(m.startswith("[orders] ") for m in orders.messages)
    acme = log.for_poller("tenants", "acme").at(logging.WARNING)
    assert acme.messages
    assert all(m.startswith("[tenants/acme] ") for m in acme.messages)
    assert all(record.partition == "acme" for record in acme.records)
    assert log.for_poller("tenants", "zeta").messages
    assert log.for_poller("nobody").records == []


async def test_the_default_logger_is_the_watukuy_logger_with_the_key_prefix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = engine_with(None)
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await engine.tick()
    lines = [r.getMessage() for r in caplog.records if r.name == "watukuy"]
    assert any(line.startswith("[orders] live cycle failed (fetch)") for line in lines), lines
    assert SECRET not in caplog.text


async def test_a_logger_adapter_is_accepted_and_its_own_fields_kept() -> None:
    log = CapturingLogger()
    adapter = logging.LoggerAdapter(log, {"service": "crm"})
    await engine_with(adapter).tick()
    assert log.records
    assert all(getattr(r, "service", None) == "crm" for r in log.records)
    assert SECRET not in "\n".join(log.messages)


async def test_the_silent_logger_drops_everything(capsys: pytest.CaptureFixture[str]) -> None:
    silent = wk.silent_logger()
    await engine_with(silent).tick()
    silent.warning("not shown")
    assert not silent.isEnabledFor(logging.CRITICAL)
    captured = capsys.readouterr()
    assert (captured.err, captured.out) == ("", "")


def test_child_logger_prefixes_merges_fields_and_redacts() -> None:
    log = CapturingLogger()
    billing = wk.child_logger(log, "billing", tenant="acme")
    billing.warning("token=%s refused", SECRET)
    invoices = wk.child_logger(billing, "invoices", tenant="zeta", step=2)
    invoices.info("late")
    first, second = log.records
    assert first.getMessage() == "[billing] token=*** refused"
    assert first.tenant == "acme"  # type: ignore[attr-defined]
    assert second.getMessage() == "[billing] [invoices] late"
    assert (second.tenant, second.step) == ("zeta", 2)  # type: ignore[attr-defined]


def test_logger_arguments_are_checked() -> None:
    with pytest.raises(wk.ConfigError) as caught:
        engine_with("watukuy")
    assert caught.value.field == "logger"
    with pytest.raises(wk.ConfigError) as caught:
        wk.child_logger(CapturingLogger(), "")
    assert caught.value.field == "name"


def test_the_capturing_logger_filters_by_level_and_clears() -> None:
    log = CapturingLogger()
    log.debug("one")
    log.error("two %d", 2)
    assert log.messages == ["one", "two 2"]
    assert log.at("error").messages == ["two 2"]
    assert log.at(logging.DEBUG).messages == ["one", "two 2"]
    with pytest.raises(ValueError, match="LOUD"):
        log.at("LOUD")
    log.clear()
    assert log.records == []


async def test_a_failing_hook_is_logged_under_its_key() -> None:
    class Broken:
        def on_poll_start(self, details: Any) -> None:
            raise ValueError("dashboard offline")

    log = CapturingLogger()
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[failing_poller()],
        clock=VirtualClock(),
        random=SeededRandom(1),
        logger=log,
        hooks=[Broken()],
    )
    await engine.tick()
    assert "[orders] hook on_poll_start raised ValueError: dashboard offline" in log.messages
