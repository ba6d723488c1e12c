"""webhook_sink over an in-process transport: headers, body, signature, failures."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from watukuy import ConfigError, Event, HandlerContext, HttpError
from watukuy._system import SystemClock
from watukuy.sinks import (
    MAX_WEBHOOK_ERROR_BODY_CHARS,
    WebhookDeliveryError,
    sign_webhook,
    verify_webhook_signature,
    webhook_sink,
)
from watukuy.testing import VirtualClock

EventFactory = Callable[..., Event[Any]]

URL = "https://receiver.example.com/hooks/orders"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW_MS = 1_767_225_600_500
NOW_S = str(NOW_MS // 1000)


class Receiver:
    """An httpx transport that records requests and answers what the test scripted."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self._answer = answer or (lambda request: httpx.Response(204))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self._answer(request)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


@pytest.fixture
async def receiver() -> Receiver:
    return Receiver()


async def test_posts_a_signed_cloudevent(
    receiver: Receiver, make_event: EventFactory, ctx: HandlerContext
) -> None:
    event = make_event()
    async with receiver.client() as client:
        sink = webhook_sink(URL, SECRET, client=client, clock=VirtualClock(NOW_MS))
        await sink(event, ctx)

    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert request.method == "POST"
    assert str(request.url) == URL
    assert request.headers["content-type"] == "application/cloudevents+json"
    assert request.headers["webhook-id"] == event.id
    assert request.headers["webhook-timestamp"] == NOW_S
    assert request.headers["webhook-signature"] == sign_webhook(
        SECRET, event.id, NOW_S, request.content
    )
    assert json.loads(request.content) == event.to_cloudevent()
    assert ctx.acked is True


async def test_the_standardwebhooks_package_verifies_what_the_sink_sends(
    receiver: Receiver, make_event: EventFactory, ctx: HandlerContext
) -> None:
    async with receiver.client() as client:
        await webhook_sink(URL, SECRET, client=client, clock=SystemClock())(make_event(), ctx)

    request = receiver.requests[0]
    payload = Webhook(SECRET).verify(request.content, dict(request.headers))
    assert payload["id"] == make_event().id
    assert verify_webhook_signature(
        SECRET,
        request.headers["webhook-id"],
        request.headers["webhook-timestamp"],
        request.content,
        request.headers["webhook-signature"],
    )


async def test_raw_format_posts_the_envelope(
    receiver: Receiver, make_event: EventFactory, ctx: HandlerContext
) -> None:
    event = make_event()
    async with receiver.client() as client:
        sink = webhook_sink(URL, SECRET, format="raw", client=client, clock=VirtualClock(NOW_MS))
        await sink(event, ctx)

    request = receiver.requests[0]
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == event.to_dict()
    assert verify_webhook_signature(
        SECRET,
        event.id,
        NOW_S,
        request.content,
        request.headers["webhook-signature"],
        NOW_MS / 1000,
    )


async def test_extra_headers_never_replace_the_signed_ones(
    receiver: Receiver, make_event: EventFactory, ctx: HandlerContext
) -> None:
    headers = {"Authorization": "Bearer t0k3n", "X-Tenant": "acme", "Webhook-Id": "spoofed"}
    async with receiver.client() as client:
        sink = webhook_sink(URL, SECRET, headers=headers, client=client, clock=VirtualClock())
        await sink(make_event(), ctx)

    sent = receiver.requests[0].headers
    assert sent["authorization"] == "Bearer t0k3n"
    assert sent["x-tenant"] == "acme"
    assert sent.get_list("webhook-id") == [make_event().id]
    assert sent["content-type"] == "application/cloudevents+json"


async def test_a_failed_answer_raises_with_its_details_and_does_not_ack(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    receiver = Receiver(
        lambda request: httpx.Response(503, headers={"retry-after": "2"}, text="upstream  down\n")
    )
    async with receiver.client() as client:
        sink = webhook_sink(URL + "?token=s3cr3t", SECRET, client=client, clock=VirtualClock())
        with pytest.raises(WebhookDeliveryError) as caught:
            await sink(make_event(), ctx)

    error = caught.value
    assert isinstance(error, HttpError)
    assert error.code == "HTTP"
    assert error.status == 503
    assert error.method == "POST"
    assert error.url == URL
    assert error.retry_after == 2.0
    assert error.body_text == "upstream  down\n"
    assert str(error) == f"POST {URL} answered 503: upstream down"
    assert "s3cr3t" not in str(error)
    assert ctx.acked is False


async def test_long_error_bodies_are_cut(make_event: EventFactory, ctx: HandlerContext) -> None:
    receiver = Receiver(lambda request: httpx.Response(500, text="x" * 50_000))
    async with receiver.client() as client:
        with pytest.raises(WebhookDeliveryError) as caught:
            await webhook_sink(URL, SECRET, client=client)(make_event(), ctx)

    assert caught.value.body_text == "x" * MAX_WEBHOOK_ERROR_BODY_CHARS + "…"
    assert len(str(caught.value)) == len(f"POST {URL} answered 500: ") + 200 + 1


async def test_an_error_without_body(make_event: EventFactory, ctx: HandlerContext) -> None:
    receiver = Receiver(lambda request: httpx.Response(404))
    async with receiver.client() as client:
        with pytest.raises(WebhookDeliveryError) as caught:
            await webhook_sink(URL, SECRET, client=client)(make_event(), ctx)

    assert caught.value.status == 404
    assert caught.value.body_text == ""
    assert caught.value.retry_after is None
    assert str(caught.value) == f"POST {URL} answered 404"


async def test_success_statuses_decide_what_counts_as_delivered(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    receiver = Receiver(lambda request: httpx.Response(410))
    async with receiver.client() as client:
        sink = webhook_sink(URL, SECRET, client=client, success_statuses={200, 410})
        status = await sink.publish(make_event())
        await sink(make_event(), ctx)

    assert status == 410
    assert ctx.acked is True


async def test_network_errors_propagate_untouched(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    failure = httpx.ConnectError("connection refused")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise failure

    async with Receiver(refuse).client() as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await webhook_sink(URL, SECRET, client=client)(make_event(), ctx)

    assert caught.value is failure
    assert ctx.acked is False


async def test_the_timeout_is_sent_with_each_request(
    receiver: Receiver, make_event: EventFactory
) -> None:
    async with receiver.client() as client:
        await webhook_sink(URL, SECRET, client=client, timeout="1500ms").publish(make_event())

    assert receiver.requests[0].extensions["timeout"] == {
        "connect": 1.5,
        "read": 1.5,
        "write": 1.5,
        "pool": 1.5,
    }


def test_url_and_repr_leave_credentials_out() -> None:
    sink = webhook_sink("https://user:pw@example.com:8443/hooks?key=s3cr3t#top", "raw secret")

    assert sink.url == "https://example.com:8443/hooks"
    assert repr(sink) == "WebhookSink('https://example.com:8443/hooks', format='cloudevents')"


async def test_a_given_client_stays_open(receiver: Receiver, make_event: EventFactory) -> None:
    async with receiver.client() as client:
        async with webhook_sink(URL, SECRET, client=client) as sink:
            await sink.publish(make_event())
        assert client.is_closed is False
        await sink.publish(make_event())

    assert len(receiver.requests) == 2


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"url": "not a url"}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": 42}, "url"),
        ({"secret": ""}, "secret"),
        ({"secret": "whsec_***"}, "secret"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "soon"}, "timeout"),
        ({"format": "xml"}, "format"),
        ({"headers": {"x-n": 1}}, "headers"),
        ({"success_statuses": 200}, "success_statuses"),
        ({"client": object()}, "client"),
    ],
)
def test_bad_configuration_is_refused_eagerly(arguments: dict[str, Any], field: str) -> None:
    options: dict[str, Any] = {"url": URL, "secret": SECRET}
    options.update(arguments)

    with pytest.raises(ConfigError) as caught:
        webhook_sink(**options)

    assert caught.value.field == field
