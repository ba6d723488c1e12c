"""serialize_event and to_sink_payload: the wire forms every sink shares."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from watukuy import ConfigError, Event
from watukuy.sinks import (
    CLOUDEVENTS_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    SerializedEvent,
    serialize_event,
    to_sink_payload,
)

EventFactory = Callable[..., Event[Any]]


def test_cloudevents_is_the_default_and_matches_to_cloudevent(make_event: EventFactory) -> None:
    event = make_event()

    wire = serialize_event(event)

    assert isinstance(wire, SerializedEvent)
    assert wire.content_type == CLOUDEVENTS_CONTENT_TYPE == "application/cloudevents+json"
    assert json.loads(wire.body) == event.to_cloudevent()
    assert json.loads(wire.body) == {
        "specversion": "1.0",
        "id": "5dc9ec28d4ec668a7add37c6a32e916f839cd6d98ee013de30acd06b32599862",
        "source": "urn:watukuy:orders",
        "type": "orders.updated",
        "subject": "ord_1",
        "time": "2026-01-01T00:00:05.000Z",
        "datacontenttype": "application/json",
        "watukuypartition": "",
        "watukuylane": "live",
        "watukuysequence": 7,
        "watukuypoller": "orders",
        "data": {"id": "ord_1", "total": 42},
    }


def test_raw_is_the_envelope_as_json(make_event: EventFactory) -> None:
    event = make_event(type="deleted", data=None, previous={"id": "ord_1", "total": 41})

    wire = serialize_event(event, "raw")

    assert wire.content_type == JSON_CONTENT_TYPE == "application/json"
    assert json.loads(wire.body) == event.to_dict()
    assert json.loads(wire.body)["previous"] == {"id": "ord_1", "total": 41}
    assert json.loads(wire.body)["attempt"] == 1


def test_body_is_compact_utf8(make_event: EventFactory) -> None:
    wire = serialize_event(make_event(data={"name": "Ñandú", "n": 1}))

    assert b'"data":{"name":"\xc3\x91and\xc3\xba","n":1}' in wire.body
    assert b", " not in wire.body


def test_big_integers_survive(make_event: EventFactory) -> None:
    wire = serialize_event(make_event(data={"n": 2**70}), "raw")

    assert b'"n":1180591620717411303424' in wire.body


def test_to_sink_payload_gives_the_data_before_encoding(make_event: EventFactory) -> None:
    event = make_event()

    assert to_sink_payload(event) == event.to_cloudevent()
    assert to_sink_payload(event, "raw") == event.to_dict()


def test_unknown_format_is_a_config_error(make_event: EventFactory) -> None:
    with pytest.raises(ConfigError, match=r"format: expected one of .*got 'xml'"):
        serialize_event(make_event(), "xml")  # type: ignore[arg-type]
