"""The broker sinks against recording doubles: what each one sends, and bad options."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from watukuy import ConfigError, Event, HandlerContext
from watukuy.sinks import (
    celery_sink,
    kafka_binary_headers,
    kafka_sink,
    nats_sink,
    rabbitmq_sink,
    redis_stream_sink,
)
from watukuy.sinks._common import require

EventFactory = Callable[..., Event[Any]]


class Recorder:
    """Records calls of one method name, returning ``result`` (or raising ``fail``)."""

    def __init__(self, result: Any = None, fail: Exception | None = None) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self._result = result
        self._fail = fail

    def record(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self._fail is not None:
            raise self._fail
        return self._result


class FakeJetStream(Recorder):
    async def publish(self, *args: Any, **kwargs: Any) -> Any:
        return self.record(*args, **kwargs)


class FakeNatsConnection:
    def jetstream(self) -> FakeJetStream:
        return FakeJetStream()

    async def publish(self, *args: Any) -> None: ...


class FakeProducer(Recorder):
    async def send_and_wait(self, *args: Any, **kwargs: Any) -> Any:
        return self.record(*args, **kwargs)


class FakeCelery(Recorder):
    def send_task(self, *args: Any, **kwargs: Any) -> Any:
        return self.record(*args, **kwargs)


# --- NATS -----------------------------------------------------------------------------------


async def test_nats_publishes_with_the_event_id_as_msg_id(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    js = FakeJetStream(result="puback")
    event = make_event()

    await nats_sink(js, subject="erp.orders")(event, ctx)

    ((args, kwargs),) = js.calls
    assert args[0] == "erp.orders"
    assert json.loads(args[1]) == event.to_cloudevent()
    assert kwargs == {
        "headers": {"Nats-Msg-Id": event.id, "Content-Type": "application/cloudevents+json"}
    }
    assert ctx.acked is True


async def test_nats_computed_subject_stream_timeout_and_raw(make_event: EventFactory) -> None:
    js = FakeJetStream(result="puback")
    sink = nats_sink(
        js,
        subject=lambda e: f"erp.{e.poller}.{e.type}",
        format="raw",
        stream="ERP",
        timeout="2500ms",
    )

    assert await sink.publish(make_event(type="deleted", data=None)) == "puback"

    ((args, kwargs),) = js.calls
    assert args[0] == "erp.orders.deleted"
    assert json.loads(args[1])["type"] == "deleted"
    assert kwargs["stream"] == "ERP"
    assert kwargs["timeout"] == 2.5
    assert kwargs["headers"]["Content-Type"] == "application/json"


async def test_nats_failures_propagate_without_ack(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    failure = TimeoutError("no ack from the stream")
    js = FakeJetStream(fail=failure)

    with pytest.raises(TimeoutError) as caught:
        await nats_sink(js, subject="erp.orders")(make_event(), ctx)

    assert caught.value is failure
    assert ctx.acked is False


async def test_nats_a_computed_subject_must_be_a_string(make_event: EventFactory) -> None:
    sink = nats_sink(FakeJetStream(), subject=lambda e: "")

    with pytest.raises(ConfigError, match=r"^subject: expected the function to return"):
        await sink.publish(make_event())


@pytest.mark.parametrize(
    ("js", "options", "field", "message"),
    [
        (FakeNatsConnection(), {"subject": "a"}, "js", "nc.jetstream()"),
        (object(), {"subject": "a"}, "js", "expected a JetStream context"),
        (FakeJetStream(), {"subject": ""}, "subject", "non-empty string"),
        (FakeJetStream(), {"subject": 3}, "subject", "non-empty string"),
        (FakeJetStream(), {"subject": "a", "stream": ""}, "stream", "stream name"),
        (FakeJetStream(), {"subject": "a", "timeout": 0}, "timeout", "positive"),
        (FakeJetStream(), {"subject": "a", "format": "xml"}, "format", "expected one of"),
    ],
)
def test_nats_bad_options(js: Any, options: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        nats_sink(js, **options)

    assert caught.value.field == field


# --- Kafka ----------------------------------------------------------------------------------


async def test_kafka_binary_mode_keys_by_subject_with_ce_headers(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    producer = FakeProducer(result="metadata")
    event = make_event()

    await kafka_sink(producer, "erp.orders")(event, ctx)

    ((args, kwargs),) = producer.calls
    assert args == ("erp.orders",)
    assert kwargs["key"] == b"ord_1"
    assert json.loads(kwargs["value"]) == {"id": "ord_1", "total": 42}
    assert kwargs["headers"] == [
        ("content-type", b"application/json"),
        ("ce_specversion", b"1.0"),
        ("ce_id", event.id.encode()),
        ("ce_source", b"urn:watukuy:orders"),
        ("ce_type", b"orders.updated"),
        ("ce_subject", b"ord_1"),
        ("ce_time", b"2026-01-01T00:00:05.000Z"),
        ("ce_watukuylane", b"live"),
        ("ce_watukuysequence", b"7"),
        ("ce_watukuypoller", b"orders"),
    ]
    assert ctx.acked is True


def test_kafka_headers_of_a_partitioned_delete_with_previous(make_event: EventFactory) -> None:
    event = make_event(type="deleted", data=None, partition="acme", previous={"id": "ord_1"})

    headers = dict(kafka_binary_headers(event))

    assert headers["ce_watukuypartition"] == b"acme"
    assert headers["ce_type"] == b"orders.deleted"
    assert "ce_watukuyprevious" not in headers
    assert "ce_data" not in headers
    assert "ce_datacontenttype" not in headers


async def test_kafka_delete_without_payload_sends_null(make_event: EventFactory) -> None:
    producer = FakeProducer()

    await kafka_sink(producer, "t").publish(make_event(type="deleted", data=None))

    assert producer.calls[0][1]["value"] == b"null"


async def test_kafka_structured_mode_sends_the_cloudevent(make_event: EventFactory) -> None:
    producer = FakeProducer()
    event = make_event()

    await kafka_sink(producer, lambda e: f"erp.{e.poller}", format="structured").publish(event)

    ((args, kwargs),) = producer.calls
    assert args == ("erp.orders",)
    assert kwargs["key"] == b"ord_1"
    assert json.loads(kwargs["value"]) == event.to_cloudevent()
    assert kwargs["headers"] == [("content-type", b"application/cloudevents+json")]


async def test_kafka_failures_propagate_without_ack(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    producer = FakeProducer(fail=ConnectionError("broker unavailable"))

    with pytest.raises(ConnectionError, match="broker unavailable"):
        await kafka_sink(producer, "t")(make_event(), ctx)

    assert ctx.acked is False


@pytest.mark.parametrize(
    ("producer", "topic", "format", "field"),
    [
        (object(), "t", "binary", "producer"),
        (FakeProducer(), "", "binary", "topic"),
        (FakeProducer(), "t", "cloudevents", "format"),
    ],
)
def test_kafka_bad_options(producer: Any, topic: Any, format: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        kafka_sink(producer, topic, format=format)

    assert caught.value.field == field


# --- Celery ---------------------------------------------------------------------------------


async def test_celery_sends_the_task_with_the_event_id(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    app = FakeCelery(result="async-result")
    event = make_event()

    await celery_sink(app, "erp.order_changed", queue="orders", options={"priority": 5})(event, ctx)

    assert app.calls == [
        (
            ("erp.order_changed",),
            {
                "args": (event.to_cloudevent(),),
                "task_id": event.id,
                "priority": 5,
                "queue": "orders",
            },
        )
    ]
    assert ctx.acked is True


async def test_celery_raw_format_and_result(make_event: EventFactory) -> None:
    app = FakeCelery(result="async-result")
    event = make_event()

    assert await celery_sink(app, "t", format="raw").publish(event) == "async-result"
    assert app.calls[0][1] == {"args": (event.to_dict(),), "task_id": event.id}


async def test_celery_failures_propagate_without_ack(
    make_event: EventFactory, ctx: HandlerContext
) -> None:
    app = FakeCelery(fail=OSError("broker down"))

    with pytest.raises(OSError, match="broker down"):
        await celery_sink(app, "t")(make_event(), ctx)

    assert ctx.acked is False


@pytest.mark.parametrize(
    ("app", "task_name", "options", "field"),
    [
        (object(), "t", {}, "app"),
        (FakeCelery(), "", {}, "task_name"),
        (FakeCelery(), "t", {"queue": ""}, "queue"),
        (FakeCelery(), "t", {"options": {"task_id": "x"}}, "options.task_id"),
        (FakeCelery(), "t", {"options": {"args": ()}}, "options.args"),
        (FakeCelery(), "t", {"format": "xml"}, "format"),
    ],
)
def test_celery_bad_options(app: Any, task_name: Any, options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        celery_sink(app, task_name, **options)

    assert caught.value.field == field


# --- RabbitMQ and Redis: option checks (publishing is tested on the real servers) -----------


class FakeChannel:
    def __init__(self, *, confirms: bool) -> None:
        self.publisher_confirms = confirms
        self.default_exchange = FakeExchange(self)


class FakeExchange:
    name = ""

    def __init__(self, channel: FakeChannel) -> None:
        self.channel = channel

    async def publish(self, *args: Any, **kwargs: Any) -> None: ...


def test_rabbitmq_needs_publisher_confirms() -> None:
    with pytest.raises(ConfigError, match="publisher_confirms=False") as caught:
        rabbitmq_sink(FakeChannel(confirms=False), routing_key="q")

    assert caught.value.field == "channel_or_exchange"


def test_rabbitmq_takes_a_channel_or_an_exchange() -> None:
    channel = FakeChannel(confirms=True)

    by_channel = rabbitmq_sink(channel, routing_key="q")
    by_exchange = rabbitmq_sink(channel.default_exchange, routing_key=lambda e: e.poller)

    assert repr(by_channel) == "RabbitMQSink(exchange='(default)', routing_key='q')"
    assert by_exchange.mandatory is True


@pytest.mark.parametrize(
    ("target", "options", "field"),
    [
        (object(), {"routing_key": "q"}, "channel_or_exchange"),
        (FakeChannel(confirms=True), {"routing_key": ""}, "routing_key"),
        (FakeChannel(confirms=True), {"routing_key": "q", "mandatory": 1}, "mandatory"),
        (FakeChannel(confirms=True), {"routing_key": "q", "timeout": -1}, "timeout"),
        (FakeChannel(confirms=True), {"routing_key": "q", "format": "xml"}, "format"),
    ],
)
def test_rabbitmq_bad_options(target: Any, options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        rabbitmq_sink(target, **options)

    assert caught.value.field == field


class FakeRedis:
    def register_script(self, source: str) -> object:
        return object()


@pytest.mark.parametrize(
    ("client", "options", "field"),
    [
        (object(), {"stream": "s"}, "client"),
        (FakeRedis(), {"stream": ""}, "stream"),
        (FakeRedis(), {"stream": "s", "dedup_window": 0}, "dedup_window"),
        (FakeRedis(), {"stream": "s", "dedup_window": "forever"}, "dedup_window"),
        (FakeRedis(), {"stream": "s", "prefix": None}, "prefix"),
        (FakeRedis(), {"stream": "s", "maxlen": 0}, "maxlen"),
        (FakeRedis(), {"stream": "s", "maxlen": True}, "maxlen"),
    ],
)
def test_redis_bad_options(client: Any, options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        redis_stream_sink(client, **options)

    assert caught.value.field == field


def test_redis_window_and_marker_keys() -> None:
    sink = redis_stream_sink(FakeRedis(), stream="erp:orders", prefix="app:")

    assert sink.dedup_window_ms == 86_400_000
    assert sink.dedup_key("erp:orders", "abc") == "app:dedup:erp:orders:abc"
    assert redis_stream_sink(FakeRedis(), stream="s", dedup_window=None).dedup_window_ms == 0


# --- optional libraries ---------------------------------------------------------------------


def test_a_missing_client_library_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install 'watukuy\[sinks\]'") as caught:
        require("watukuy_no_such_client_library")
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)

    with pytest.raises(ImportError, match=r"pip install 'watukuy\[rabbitmq\]'$"):
        require("watukuy_no_such_client_library", "rabbitmq")
