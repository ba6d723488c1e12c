"""The change set on the wire: the CloudEvents extension, and the ``"changes"`` body."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from watukuy import Event, HandlerContext, apply_patch
from watukuy.sinks import (
    CLOUDEVENTS_CONTENT_TYPE,
    JSON_PATCH_CONTENT_TYPE,
    changes_cloudevent,
    serialize_event,
    sign_webhook,
    to_sink_payload,
    webhook_sink,
)
from watukuy.testing import VirtualClock

EventFactory = Callable[..., Event[Any]]

PATCH = [{"op": "replace", "path": "/total", "value": 42}]
BEFORE = {"id": "ord_1", "total": 41}
AFTER = {"id": "ord_1", "total": 42}


def test_the_cloudevent_carries_the_patch_in_an_extension(make_event: EventFactory) -> None:
    event = make_event(previous=BEFORE, changes=PATCH)
    cloudevent = event.to_cloudevent()
    assert cloudevent["datacontenttype"] == "application/json"
    assert cloudevent["data"] == AFTER
    assert cloudevent["watukuyprevious"] == BEFORE
    assert cloudevent["watukuychanges"] == PATCH
    assert "watukuychanges" not in make_event().to_cloudevent()
    assert event.to_dict()["changes"] == PATCH
    assert "changes" not in make_event().to_dict()


def test_the_changes_body_is_a_cloudevent_whose_data_is_the_patch(
    make_event: EventFactory,
) -> None:
    event = make_event(previous=BEFORE, changes=PATCH)
    body = changes_cloudevent(event)
    assert body == {
        "specversion": "1.0",
        "id": event.id,
        "source": "urn:watukuy:orders",
        "type": "orders.updated",
        "subject": "ord_1",
        "time": "2026-01-01T00:00:05.000Z",
        "datacontenttype": JSON_PATCH_CONTENT_TYPE,
        "watukuypartition": "",
        "watukuylane": "live",
        "watukuysequence": 7,
        "watukuypoller": "orders",
        "data": PATCH,
    }
    assert to_sink_payload(event, "changes") == body
    wire = serialize_event(event, "changes")
    assert wire.content_type == CLOUDEVENTS_CONTENT_TYPE
    assert json.loads(wire.body) == body


def test_every_changes_body_takes_the_receivers_copy_to_the_current_item(
    make_event: EventFactory,
) -> None:
    created = make_event(type="created")
    hashed = make_event(type="updated")  # retain="hash": no patch, the whole item
    updated = make_event(previous=BEFORE, changes=PATCH)
    deleted = make_event(type="deleted", data=BEFORE, previous=BEFORE)
    assert changes_cloudevent(created)["data"] == [{"op": "add", "path": "", "value": AFTER}]
    assert changes_cloudevent(hashed)["data"] == [{"op": "replace", "path": "", "value": AFTER}]
    copy: Any = None
    for event in (created, updated, hashed, deleted):
        copy = apply_patch(copy, changes_cloudevent(event)["data"])
        assert copy == (None if event.type == "deleted" else AFTER)


async def test_the_webhook_sink_sends_changes_only(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    event = make_event(previous=BEFORE, changes=PATCH)
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        sink = webhook_sink(
            "https://receiver.example.com/hooks",
            secret,
            format="changes",
            client=client,
            clock=VirtualClock(1_767_225_600_500),
        )
        await sink(event, ctx)
    request = seen[0]
    assert request.headers["content-type"] == "application/cloudevents+json"
    body = json.loads(request.content)
    assert body["data"] == PATCH
    assert "watukuyprevious" not in body
    assert request.headers["webhook-signature"] == sign_webhook(
        secret, event.id, "1767225600", request.content
    )
