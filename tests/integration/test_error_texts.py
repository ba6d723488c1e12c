"""A failed request says what failed: its type, its method and its URL, secrets masked.

``str(httpx.ReadTimeout(""))`` is empty, so a read timeout or a connection reset was
logged as ``live cycle failed (fetch): `` with nothing after it, and stored and shown the
same way. ``ctx.http`` now re-raises such an error (same type, the original as its cause)
with the type, the method and the redacted URL in its text; and an exception without any
text is described by its type wherever it is serialised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.testing import VirtualClock

URL = "https://vendor.test/items?api_key=k3y-s3cr3t&page=1"
SHOWN = "https://vendor.test/items?api_key=***&page=1"


class FailingBody(httpx.AsyncByteStream):
    """A body whose first read fails: the connection reset halfway through the answer."""

    async def __aiter__(self) -> Any:
        raise httpx.ReadError("")
        yield b""  # pragma: no cover - makes this an async generator


def transport(fail: Callable[[httpx.Request], httpx.Response]) -> httpx.MockTransport:
    return httpx.MockTransport(fail)


def poller(fetch: Any) -> wk.PollerDefinition[Any]:
    return wk.define_poller(
        name="orders", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )


async def fetch_url(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    response = await ctx.http.get(URL)
    return wk.Page(items=response.json()["data"])


def timed_out(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("", request=request)


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("", request=request)


def reset_midway(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, stream=FailingBody())


async def tick_once(
    fetch: Any, vendor: Callable[[httpx.Request], httpx.Response]
) -> tuple[wk.TickResult, wk.Engine]:
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller(fetch)],
        clock=VirtualClock(),
        http_client=httpx.AsyncClient(transport=transport(vendor)),
    )
    return await engine.tick(), engine


@pytest.mark.parametrize(
    ("vendor", "kind"),
    [(timed_out, "ReadTimeout"), (refused, "ConnectError"), (reset_midway, "ReadError")],
)
async def test_a_request_without_an_answer_is_logged_stored_and_reported_with_what_failed(
    vendor: Callable[[httpx.Request], httpx.Response],
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        result, engine = await tick_once(fetch_url, vendor)
    text = f"{kind} on GET {SHOWN}"
    [failed] = result.errors
    assert failed.error is not None
    assert failed.error["name"] == kind
    assert failed.error["message"] == text
    assert f"[orders] live cycle failed (fetch): {text}" in caplog.messages
    [entry] = (await engine.inspect())["pollers"]
    assert entry["schedule"]["last_error"]["message"] == text
    assert "k3y-s3cr3t" not in repr(result.to_dict()) + "".join(caplog.messages)


async def test_the_error_keeps_its_type_and_its_cause() -> None:
    caught: list[BaseException] = []

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        try:
            await ctx.http.get(URL)
        except httpx.ReadTimeout as error:  # user code catching httpx's own type still works
            caught.append(error)
        return wk.Page(items=[])

    result, _ = await tick_once(fetch, timed_out)
    assert result.errors == []
    [error] = caught
    assert str(error) == f"ReadTimeout on GET {SHOWN}"
    assert isinstance(error.__cause__, httpx.ReadTimeout)
    assert isinstance(error, httpx.ReadTimeout)
    assert error.request.url == httpx.URL(URL)


async def test_an_exception_without_text_is_told_by_its_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        raise TimeoutError

    with caplog.at_level(logging.WARNING, logger="watukuy"):
        result, _ = await tick_once(fetch, timed_out)
    [failed] = result.errors
    assert failed.error is not None
    assert failed.error["message"] == "TimeoutError"
    assert "[orders] live cycle failed (fetch): TimeoutError" in caplog.messages


async def test_a_message_that_does_not_name_its_type_is_logged_with_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        raise RuntimeError("the vendor's maintenance page")

    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await tick_once(fetch, timed_out)
    assert "[orders] live cycle failed (fetch): RuntimeError: the vendor's maintenance page" in (
        caplog.messages
    )
