"""webhook_sink end to end: an engine posts 1,000 events to a real HTTP receiver on
127.0.0.1 that checks every signature, with forced redeliveries and failed answers."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus

import pytest
from standardwebhooks import Webhook

from watukuy.sinks import WebhookDeliveryError, verify_webhook_signature, webhook_sink

from .test_sinks import N_ITEMS, N_REDELIVERED, an_event, deliver_all

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REFUSE_EVERY = 25  # the first request of every 25th event gets a 503


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A minimal HTTP/1.1 server (keep-alive, Content-Length bodies) that verifies the
    Standard Webhooks signature of every request, twice: with watukuy's verifier and with
    the ``standardwebhooks`` reference package."""

    secret: str
    refuse_every: int | None = None
    requests: list[Request] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    rejected: int = 0
    refused: set[str] = field(default_factory=set)
    errors: list[BaseException] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _connections: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/hooks/orders"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def answer(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        headers = request.headers
        ours = verify_webhook_signature(
            self.secret,
            headers.get("webhook-id", ""),
            headers.get("webhook-timestamp", ""),
            request.body,
            headers.get("webhook-signature", ""),
        )
        try:
            Webhook(self.secret).verify(request.body, headers)
            reference = True
        except Exception:
            reference = False
        assert ours == reference
        if not ours:
            self.rejected += 1
            return 401, {}, b"invalid signature"
        event = json.loads(request.body)
        sequence = event.get("watukuysequence", event.get("sequence"))
        first_time = event["id"] not in self.refused
        if self.refuse_every and sequence % self.refuse_every == 0 and first_time:
            self.refused.add(event["id"])
            return 503, {"retry-after": "1"}, b"busy, come back later"
        self.accepted.append(headers["webhook-id"])
        return 204, {}, b""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while request := await _read_request(reader):
                self.requests.append(request)
                try:
                    status, headers, body = self.answer(request)
                except Exception as error:  # reported by the fixture, not swallowed
                    self.errors.append(error)
                    status, headers, body = 500, {}, repr(error).encode()
                head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
                head += f"content-length: {len(body)}\r\n"
                head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
                writer.write(head.encode() + b"\r\n" + body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    method, target, _ = line.decode().split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = raw.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, target, headers, body)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = Receiver(SECRET, refuse_every=REFUSE_EVERY)
    await server.start()
    yield server
    await server.stop()
    assert server.errors == []


async def test_every_event_arrives_signed_and_identified(receiver: Receiver) -> None:
    async with webhook_sink(receiver.url, SECRET, headers={"x-tenant": "acme"}) as sink:
        run = await deliver_all(sink)

    refused = N_ITEMS // REFUSE_EVERY
    assert len(receiver.requests) == N_ITEMS + N_REDELIVERED + refused
    assert receiver.rejected == 0
    assert len(receiver.refused) == refused
    copies = Counter(receiver.accepted)
    assert len(receiver.accepted) == N_ITEMS + N_REDELIVERED
    assert set(copies) == run.ids
    assert {event_id for event_id, n in copies.items() if n == 2} == run.redelivered
    first = receiver.requests[0]
    assert first.method == "POST"
    assert first.target == "/hooks/orders"
    assert first.headers["content-type"] == "application/cloudevents+json"
    assert first.headers["x-tenant"] == "acme"
    body = json.loads(first.body)
    assert body["id"] == first.headers["webhook-id"]
    assert body["type"] == "orders.created"
    assert body["data"]["id"] == "item-0001"


async def test_a_receiver_with_another_secret_refuses_with_401(receiver: Receiver) -> None:
    async with webhook_sink(receiver.url, "whsec_" + "A" * 32) as sink:
        with pytest.raises(WebhookDeliveryError) as caught:
            await sink.publish(an_event())

    assert caught.value.status == 401
    assert caught.value.body_text == "invalid signature"
    assert caught.value.url == receiver.url
    assert receiver.rejected == 1


async def test_a_refusal_carries_retry_after(receiver: Receiver) -> None:
    async with webhook_sink(receiver.url, SECRET, format="raw") as sink:
        with pytest.raises(WebhookDeliveryError) as caught:
            await sink.publish(an_event(REFUSE_EVERY))
        status = await sink.publish(an_event(REFUSE_EVERY))

    assert (caught.value.status, caught.value.retry_after) == (503, 1.0)
    assert str(caught.value) == f"POST {receiver.url} answered 503: busy, come back later"
    assert status == 204
