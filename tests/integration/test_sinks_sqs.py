"""sqs_sink against a local SQS-compatible server (moto in server mode, started here on
127.0.0.1 with an ephemeral port), through aiobotocore and through boto3.

The engine run is a small one of ``test_sinks.py`` (a local SQS server answers slowly): 30
items, a store that "crashes" between publishing and acking every tenth event, so 3 events
are sent twice. A FIFO queue must hold each event once (SQS drops the second copy by
``MessageDeduplicationId`` = event id), every message in the group of its item.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import watukuy as wk
from watukuy.model.errors import ConfigError
from watukuy.model.rows import PKey
from watukuy.sinks import sqs_group_id, sqs_sink
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items

from .test_sinks import CrashBeforeAck, an_event, orders_poller

pytest.importorskip("moto.server", reason="moto[server] is a development dependency")
aiobotocore_session = pytest.importorskip("aiobotocore.session")

N_ITEMS = 30
KEY = PKey("orders", "")
REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


async def deliver_all(sink: Any) -> tuple[frozenset[str], frozenset[str]]:
    """Tick an engine with ``sink`` until every event is acked: (all ids, those sent twice)."""
    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(N_ITEMS))
    store = CrashBeforeAck()
    engine = wk.Engine(
        store=store, pollers=[orders_poller(api)], clock=clock, random=SeededRandom(7)
    )
    engine.on("orders", sink)
    for _ in range(50):
        await engine.tick()
        if len(store.sequence_of) == N_ITEMS and await store.count_pending(KEY) == 0:
            break
        await clock.advance("1m")
    assert await engine.parked.list("orders") == []
    await engine.stop()
    assert len(store.sequence_of) == N_ITEMS
    assert await store.count_pending(KEY) == 0
    assert len(store.crashed) == N_ITEMS // 10
    return frozenset(store.sequence_of), frozenset(store.crashed)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def sqs_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
async def sqs(sqs_endpoint: str) -> AsyncIterator[Any]:
    session = aiobotocore_session.get_session()
    async with session.create_client(
        "sqs", region_name=REGION, endpoint_url=sqs_endpoint, **CREDENTIALS
    ) as client:
        yield client


async def _queue(sqs: Any, name: str, *, fifo: bool) -> str:
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    created = await sqs.create_queue(QueueName=name, Attributes=attributes)
    url: str = created["QueueUrl"]
    return url


async def _receive_all(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while True:
        answer = await sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=300,
        )
        batch = answer.get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)


async def test_a_fifo_queue_holds_each_event_once_in_its_items_group(sqs: Any) -> None:
    url = await _queue(sqs, "orders-once.fifo", fifo=True)
    ids_made, sent_twice = await deliver_all(sqs_sink(sqs, url))
    assert len(sent_twice) == 3

    messages = await _receive_all(sqs, url)
    ids = [m["MessageAttributes"]["ce_id"]["StringValue"] for m in messages]
    assert len(ids) == len(set(ids)) == N_ITEMS
    assert set(ids) == ids_made
    for message in messages:
        body = json.loads(message["Body"])
        attributes = message["Attributes"]
        assert attributes["MessageDeduplicationId"] == body["id"]
        assert attributes["MessageGroupId"] == f"orders//{body['subject']}"
        assert body["type"] == "orders.created"
        assert message["MessageAttributes"]["content-type"]["StringValue"] == (
            "application/cloudevents+json"
        )


async def test_a_standard_queue_gets_every_copy_labelled_with_the_event_id(sqs: Any) -> None:
    url = await _queue(sqs, "orders-standard", fifo=False)
    sink = sqs_sink(sqs, url, format="raw")
    assert not sink.fifo
    assert "MessageGroupId" not in sink.message(an_event())

    for n in (1, 1, 2):
        await sink.publish(an_event(n))
    messages = await _receive_all(sqs, url)
    ids = sorted(m["MessageAttributes"]["ce_id"]["StringValue"] for m in messages)
    assert ids == [an_event(1).id, an_event(1).id, an_event(2).id]
    assert json.loads(messages[0]["Body"])["attempt"] == 1  # the raw envelope


def test_boto3_clients_are_called_in_a_worker_thread(sqs_endpoint: str) -> None:
    import asyncio

    boto3 = pytest.importorskip("boto3")
    client = boto3.client("sqs", region_name=REGION, endpoint_url=sqs_endpoint, **CREDENTIALS)
    url = client.create_queue(QueueName="orders-boto3.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    sink = sqs_sink(client, url, group_id=lambda event: event.partition or "all")

    async def send() -> None:
        await sink.publish(an_event(3))
        await sink.publish(an_event(3))  # the same event again: dropped by SQS

    asyncio.run(send())
    answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
    messages = answer.get("Messages", [])
    assert len(messages) == 1
    assert messages[0]["Attributes"]["MessageGroupId"] == "all"


def test_group_ids_sqs_would_refuse_are_hashed_and_bad_options_are_config_errors() -> None:
    plain = an_event(1)
    assert sqs_group_id(plain) == "orders//item-001"
    odd = dataclasses.replace(plain, subject="ünïcode id " + "x" * 200)
    assert len(sqs_group_id(odd)) == 64
    assert sqs_group_id(odd) == sqs_group_id(odd)

    class Client:
        async def send_message(self, **arguments: Any) -> dict[str, Any]:
            return arguments

    with pytest.raises(ConfigError) as caught:
        sqs_sink(object(), "https://sqs.example/q.fifo")
    assert caught.value.field == "client"
    with pytest.raises(ConfigError) as caught:
        sqs_sink(Client(), "q.fifo")
    assert caught.value.field == "queue_url"
    with pytest.raises(ConfigError) as caught:
        sqs_sink(Client(), "https://sqs.example/q.fifo", group_id="has space")
    assert caught.value.field == "group_id"
    with pytest.raises(ConfigError) as caught:
        sqs_sink(Client(), "https://sqs.example/q.fifo", group_id=lambda e: "").message(plain)
    assert caught.value.field == "group_id"
