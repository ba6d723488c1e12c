"""Sinks end to end against the real brokers: NATS JetStream, RabbitMQ, Redis, Celery.

Every test runs the same world: a FakeApi with 1,000 items, a VirtualClock, and an engine
whose store "crashes" between publishing and acking every tenth event, so those 100 events
are published a second time on the next tick. The consumer side must then hold every
event, with the second copies dropped by the destination where it dedups (JetStream, the
Redis stream sink) and recognisable by event id everywhere else.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import watukuy as wk
from watukuy.model.rows import CommitBatch, Lease, PKey
from watukuy.sinks import (
    SinkError,
    celery_sink,
    kafka_sink,
    nats_sink,
    rabbitmq_sink,
    redis_stream_sink,
)
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items

N_ITEMS = 1_000
CRASH_EVERY = 10
N_REDELIVERED = N_ITEMS // CRASH_EVERY
KEY = PKey("orders", "")
MAX_TICKS = 500


class CrashBeforeAck(wk.MemoryStore):
    """A MemoryStore whose first ack of every tenth event (by sequence) fails, as if the
    process died after the sink published the event and before the outbox was told.

    A store call is atomic, so a call that acks several events, one of them such an event,
    fails as a whole; the dispatcher then acks that group's events one by one, and the
    event's own ack is the one that fails.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sequence_of: dict[str, int] = {}
        self.crashed: set[str] = set()

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        await super().commit_poll(key, lease, batch)
        self.sequence_of.update({row.event_id: row.sequence for row in batch.events})

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        for event_id in event_ids:
            if self.sequence_of[event_id] % CRASH_EVERY == 0 and event_id not in self.crashed:
                if len(event_ids) == 1:
                    self.crashed.add(event_id)
                raise wk.StoreError(f"simulated crash between publish and ack of {event_id}")
        await super().ack_events(key, lease, event_ids)


@dataclass(frozen=True)
class Run:
    """What the engine produced: every event id, and those it published twice."""

    ids: frozenset[str]
    redelivered: frozenset[str]
    ticks: int


def orders_poller(api: FakeApi) -> wk.PollerDefinition[Any]:
    """A token-paged poller over the fake API, 100 items a page."""

    async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        listing = api.list_token(ctx.cursor.value, limit=100)
        return wk.Page(listing.data, cursor=listing.next)

    return wk.define_poller(
        name="orders", identity=lambda item: item["id"], cursor=wk.TokenCursor(), fetch=fetch
    )


async def deliver_all(sink: Any) -> Run:
    """Tick an engine with ``sink`` as the handler until all 1,000 events are acked."""
    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(N_ITEMS))
    store = CrashBeforeAck()
    engine = wk.Engine(
        store=store, pollers=[orders_poller(api)], clock=clock, random=SeededRandom(7)
    )
    engine.on("orders", sink)
    ticks = 0
    while ticks < MAX_TICKS:
        ticks += 1
        await engine.tick()
        if len(store.sequence_of) == N_ITEMS and await store.count_pending(KEY) == 0:
            break
        await clock.advance("1m")
    parked = await engine.parked.list("orders")
    await engine.stop()
    assert len(store.sequence_of) == N_ITEMS
    assert await store.count_pending(KEY) == 0
    assert parked == []
    assert len(store.crashed) == N_REDELIVERED
    return Run(frozenset(store.sequence_of), frozenset(store.crashed), ticks)


def an_event(n: int = 1, poller: str = "orders") -> wk.Event[Any]:
    """A stand-alone event for single-publish checks."""
    return wk.Event(
        id=f"{n:064x}",
        type="created",
        source=f"urn:watukuy:{poller}",
        subject=f"item-{n:03d}",
        time="2026-01-01T00:00:00.000Z",
        poller=poller,
        partition="",
        lane="live",
        sequence=n,
        data={"id": f"item-{n:03d}", "n": n},
    )


def _unique(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:12]}"


# --- NATS JetStream -------------------------------------------------------------------------


async def test_nats_jetstream_drops_the_redeliveries(nats_client: Any) -> None:
    from nats.js.api import StreamConfig

    js = nats_client.jetstream()
    stream = _unique("WKTEST_")
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"], duplicate_window=600))
    try:
        sink = nats_sink(js, subject=lambda e: f"{stream}.{e.poller}.{e.type}", stream=stream)
        run = await deliver_all(sink)

        info = await js.stream_info(stream)
        assert info.state.messages == N_ITEMS  # 1,100 publishes, 1,000 stored
        subscription = await js.pull_subscribe(f"{stream}.>", stream=stream)
        messages: list[Any] = []
        while len(messages) < N_ITEMS:
            messages += await subscription.fetch(N_ITEMS - len(messages), timeout=5)
        await subscription.unsubscribe()
    finally:
        await js.delete_stream(stream)

    msg_ids = Counter(message.headers["Nats-Msg-Id"] for message in messages)
    assert set(msg_ids) == run.ids
    assert max(msg_ids.values()) == 1
    first = messages[0]
    assert first.subject == f"{stream}.orders.created"
    assert first.headers["Content-Type"] == "application/cloudevents+json"
    body = json.loads(first.data)
    assert body["id"] == first.headers["Nats-Msg-Id"]
    assert body["data"]["id"] == "item-0001"
    assert body["watukuysequence"] == 1


async def test_nats_publish_reports_a_duplicate(nats_client: Any) -> None:
    from nats.js.api import StreamConfig

    js = nats_client.jetstream()
    stream = _unique("WKTEST_")
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    try:
        sink = nats_sink(js, subject=f"{stream}.orders")
        first = await sink.publish(an_event())
        again = await sink.publish(an_event())
        other = await sink.publish(an_event(2))
    finally:
        await js.delete_stream(stream)

    assert (first.seq, bool(first.duplicate)) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    assert (other.seq, bool(other.duplicate)) == (2, False)


# --- RabbitMQ -------------------------------------------------------------------------------


async def _drain(queue: Any) -> list[Any]:
    messages = []
    while (message := await queue.get(no_ack=True, fail=False)) is not None:
        messages.append(message)
    return messages


async def test_rabbitmq_keeps_every_copy_labelled_with_the_event_id(
    amqp_connection: Any,
) -> None:
    channel = await amqp_connection.channel()
    queue = await channel.declare_queue(_unique("wk-test-"), durable=True)
    try:
        run = await deliver_all(rabbitmq_sink(channel, routing_key=queue.name))
        messages = await _drain(queue)
    finally:
        await queue.delete(if_unused=False, if_empty=False)

    copies = Counter(message.message_id for message in messages)
    assert len(messages) == N_ITEMS + N_REDELIVERED
    assert set(copies) == run.ids
    assert {event_id for event_id, n in copies.items() if n == 2} == run.redelivered
    assert max(copies.values()) == 2
    first = messages[0]
    assert first.delivery_mode == 2  # persistent
    assert first.content_type == "application/cloudevents+json"
    assert first.type == "orders.created"
    assert first.app_id == "watukuy"
    assert json.loads(first.body)["id"] == first.message_id


async def test_rabbitmq_through_a_topic_exchange(amqp_connection: Any) -> None:
    import aio_pika

    channel = await amqp_connection.channel()
    exchange = await channel.declare_exchange(
        _unique("wk-test-"), aio_pika.ExchangeType.TOPIC, auto_delete=True
    )
    queue = await channel.declare_queue(_unique("wk-test-"), auto_delete=True)
    await queue.bind(exchange, routing_key="orders.*")
    sink = rabbitmq_sink(exchange, routing_key=lambda e: f"{e.poller}.{e.type}", format="raw")
    try:
        await sink.publish(an_event(1))
        with pytest.raises(SinkError) as caught:  # no queue is bound to invoices.*
            await sink.publish(an_event(2, poller="invoices"))
        messages = await _drain(queue)
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await exchange.delete()

    refused = caught.value
    assert [json.loads(m.body)["subject"] for m in messages] == ["item-001"]
    assert messages[0].content_type == "application/json"
    assert refused.event_id == an_event(2).id
    assert refused.code == "HANDLER"
    assert "routing key 'invoices.created'" in str(refused)


async def test_rabbitmq_an_unroutable_event_is_not_acked(amqp_connection: Any) -> None:
    channel = await amqp_connection.channel()
    sink = rabbitmq_sink(channel, routing_key=_unique("wk-test-nobody-"))
    ctx = wk.HandlerContext(partition=wk.Partition(""), attempt=3, logger=logging.getLogger("test"))

    with pytest.raises(SinkError, match="did not route") as caught:
        await sink(dataclasses.replace(an_event(), attempt=3), ctx)

    assert caught.value.attempt == 3
    assert ctx.acked is False


# --- Redis streams --------------------------------------------------------------------------


@pytest.mark.redis
async def test_redis_stream_holds_each_event_once(redis_client: Any, redis_prefix: str) -> None:
    stream = f"{redis_prefix}orders"

    run = await deliver_all(redis_stream_sink(redis_client, stream=stream, prefix=redis_prefix))

    assert await redis_client.xlen(stream) == N_ITEMS  # 1,100 deliveries, 1,000 entries
    entries = await redis_client.xrange(stream, count=2 * N_ITEMS)
    ids = [fields[b"id"].decode() for _, fields in entries]
    assert sorted(ids) == sorted(run.ids)
    entry_id, first = entries[0]
    assert first == {
        b"id": first[b"id"],
        b"type": b"created",
        b"source": b"urn:watukuy:orders",
        b"subject": b"item-0001",
        b"time": first[b"time"],
        b"poller": b"orders",
        b"partition": b"",
        b"lane": b"live",
        b"sequence": b"1",
        b"data": first[b"data"],
    }
    assert first[b"time"] == b"2026-01-01T00:00:00.000Z"
    assert json.loads(first[b"data"]) == fake_items(N_ITEMS)[0]
    markers = [key async for key in redis_client.scan_iter(match=f"{redis_prefix}dedup:*")]
    assert len(markers) == N_ITEMS
    marker = f"{redis_prefix}dedup:{stream}:{first[b'id'].decode()}"
    assert await redis_client.get(marker) == entry_id
    assert 0 < await redis_client.pttl(marker) <= 86_400_000


@pytest.mark.redis
async def test_redis_without_a_window_appends_every_delivery(
    redis_client: Any, redis_prefix: str
) -> None:
    stream = f"{redis_prefix}orders"

    run = await deliver_all(redis_stream_sink(redis_client, stream=stream, dedup_window=None))

    entries = await redis_client.xrange(stream, count=2 * N_ITEMS)
    copies = Counter(fields[b"id"].decode() for _, fields in entries)
    assert len(entries) == N_ITEMS + N_REDELIVERED
    assert {event_id for event_id, n in copies.items() if n == 2} == run.redelivered
    assert [key async for key in redis_client.scan_iter(match=f"watukuy:dedup:{stream}:*")] == []


@pytest.mark.redis
async def test_redis_publish_reports_duplicates_and_trims(
    redis_client: Any, redis_prefix: str
) -> None:
    stream = f"{redis_prefix}trimmed"
    sink = redis_stream_sink(
        redis_client, stream=stream, prefix=redis_prefix, dedup_window="90s", maxlen=100
    )

    first = await sink.publish(an_event(1))
    again = await sink.publish(an_event(1))
    for n in range(2, 301):
        await sink.publish(an_event(n))

    assert first.duplicate is False
    assert (again.entry_id, again.duplicate) == (first.entry_id, True)
    assert 100 <= await redis_client.xlen(stream) < 300  # MAXLEN ~ trims whole nodes
    ttl = await redis_client.pttl(sink.dedup_key(stream, an_event(1).id))
    assert 0 < ttl <= 90_000


# --- Celery ---------------------------------------------------------------------------------


async def test_celery_sends_one_task_per_delivery_with_the_event_id(
    amqp_url: str, amqp_connection: Any
) -> None:
    from celery import Celery

    queue_name = _unique("wk-test-")
    app = Celery("watukuy-test", broker=amqp_url, set_as_current=False)
    app.conf.broker_transport_options = {"confirm_publish": True}
    try:
        run = await deliver_all(celery_sink(app, "erp.order_changed", queue=queue_name))
    finally:
        app.pool.force_close_all()
        app.close()
    channel = await amqp_connection.channel()
    queue = await channel.declare_queue(queue_name, passive=True)
    try:
        messages = await _drain(queue)
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await channel.exchange_delete(queue_name)

    copies = Counter(message.headers["id"] for message in messages)
    assert len(messages) == N_ITEMS + N_REDELIVERED
    assert set(copies) == run.ids
    assert {task_id for task_id, n in copies.items() if n == 2} == run.redelivered
    first = messages[0]
    assert first.headers["task"] == "erp.order_changed"
    assert first.correlation_id == first.headers["id"]
    args, kwargs, _ = json.loads(first.body)
    assert kwargs == {}
    assert args[0]["id"] == first.headers["id"]
    assert args[0]["type"] == "orders.created"
    assert args[0]["data"]["id"] == "item-0001"


# --- Kafka (no broker here: a producer that records what it was asked to send) -------------


class RecordingProducer:
    """Stands in for a started ``AIOKafkaProducer``: keeps every record it is sent."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    async def send_and_wait(self, topic: str, **record: Any) -> int:
        self.records.append({"topic": topic, **record})
        return len(self.records)


async def test_kafka_records_are_keyed_by_subject_and_carry_the_event_id() -> None:
    producer = RecordingProducer()

    run = await deliver_all(kafka_sink(producer, "erp.orders"))

    records = producer.records
    copies = Counter(dict(record["headers"])["ce_id"].decode() for record in records)
    assert len(records) == N_ITEMS + N_REDELIVERED
    assert set(copies) == run.ids
    assert {event_id for event_id, n in copies.items() if n == 2} == run.redelivered
    first = records[0]
    assert first["topic"] == "erp.orders"
    assert first["key"] == b"item-0001"
    assert json.loads(first["value"]) == fake_items(N_ITEMS)[0]
    assert dict(first["headers"])["ce_type"] == b"orders.created"
