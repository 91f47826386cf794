"""An app with ``before_task_publish`` receivers (tracing): batched messages, with the
receivers' changes, are the ones Celery's own apply_async sends."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from celery.signals import after_task_publish, before_task_publish
from test_publisher import (
    BEAT,
    BROKER_DB,
    ENTRIES,
    REUSED,
    comparable,
    make_app,
    send_like_celery,
    stored_but_clock,
    take_messages,
    take_raw,
)

from redisbeat import Entry, Interval, occurrence_id
from redisbeat.sending import Publisher
from redisbeat_testkit.redis_server import RedisServer

Receiver = Callable[..., None]


@pytest.fixture
def broker(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url(BROKER_DB))
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def app(redis_server: RedisServer, broker: redis.Redis) -> Iterator[Celery]:
    app = make_app(redis_server.url(BROKER_DB))
    yield app
    app.close()


@pytest.fixture
def producer(app: Celery) -> Iterator[Any]:
    connection = app.connection_for_write()
    yield app.amqp.Producer(connection, auto_declare=False)
    connection.release()


@pytest.fixture
def connected() -> Iterator[Callable[[Receiver], None]]:
    """Connects receivers of ``before_task_publish``, disconnected after the test."""
    receivers: list[Receiver] = []

    def connect(receiver: Receiver) -> None:
        before_task_publish.connect(receiver, weak=False)
        receivers.append(receiver)

    yield connect
    for receiver in receivers:
        before_task_publish.disconnect(receiver)


def traceparent(task_id: str) -> str:
    """A W3C trace context header of the task id's own (the same for both senders)."""
    digest = hashlib.sha256(task_id.encode()).hexdigest()
    return f"00-{digest[:32]}-{digest[32:48]}-01"


def reads(headers: dict[str, Any], body: Any, **kwargs: Any) -> None:
    """Looks at the message and changes nothing."""
    assert headers["id"] and body[1] is not None


def traces(headers: dict[str, Any], **kwargs: Any) -> None:
    """As OpenTelemetry's Celery instrumentation: the task id from the headers, its trace
    context put into them."""
    headers["traceparent"] = traceparent(headers["id"])
    headers["tracestate"] = "redisbeat=1"


def traces_and_sets_priority(headers: dict[str, Any], properties: Any, **kwargs: Any) -> None:
    traces(headers)
    properties["priority"] = 7  # another of the broker's lists


def traces_and_adds_a_kwarg(headers: dict[str, Any], body: Any, **kwargs: Any) -> None:
    traces(headers)
    body[1]["traced"] = headers["id"]


RECEIVERS = [reads, traces, traces_and_sets_priority, traces_and_adds_a_kwarg]
DUES = (1_800_000_000_000, 1_800_000_060_000, 1_800_000_120_000)


@pytest.mark.parametrize("receiver", RECEIVERS, ids=lambda r: r.__name__)
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_with_a_receiver_the_broker_gets_the_message_apply_async_sends(
    app, producer, broker, connected, entry, receiver
):
    connected(receiver)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    kwargs = json.loads(json.dumps(entry.kwargs))
    # The first occurrence is built step by step; later ones reuse what it worked out.
    for due in DUES:
        task_id = occurrence_id("p", entry.name, due)
        publisher.send(entry, task_id, due, due + 5)
        assert publisher.flush() == {}
        [batched] = take_messages(broker)
        send_like_celery(app, producer, entry, task_id, due)
        [celerys] = take_messages(broker)
        assert comparable(batched) == comparable(celerys)
        if receiver is not reads:  # popped from the broker's list: the receiver's header
            assert batched["headers"]["traceparent"] == traceparent(task_id)
    # Still batched, from a template that no receiver changed.
    first = publisher._template(entry).first
    assert (first is not None) == (entry.name in REUSED)
    if first is not None:
        assert "traceparent" not in first.headers and first.properties.get("priority") != 7
        assert "traced" not in first.body[1]
    assert entry.kwargs == kwargs


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.name in REUSED], ids=lambda e: e.name)
def test_a_traced_message_goes_onto_the_list_as_kombu_stores_it_to_the_byte(
    app, producer, broker, connected, entry
):
    connected(traces)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    publisher.send(entry, "first", DUES[0], DUES[0] + 5)
    publisher.flush()
    take_raw(broker)
    for due in DUES[1:]:
        task_id = occurrence_id("p", entry.name, due)
        publisher.send(entry, task_id, due, due + 5)
        assert len(publisher._pushed) == 1, "written onto the list, with the batch"
        assert publisher.flush() == {}
        [(key, ours)] = take_raw(broker)
        send_like_celery(app, producer, entry, task_id, due)
        [(celerys_key, celerys)] = take_raw(broker)
        assert key == celerys_key
        assert stored_but_clock(ours) == stored_but_clock(celerys)
        assert json.loads(ours)["headers"]["traceparent"] == traceparent(task_id)
    # Each message's trace context is a value of its own in the kept text.
    shape = publisher._template(entry).first.family["lists"][1]  # type: ignore[union-attr]
    [(key, envelope)] = shape.envelopes.items()
    assert key[2] == ("traceparent", "tracestate") and envelope is not None


def test_an_entry_starts_from_anothers_first_message_with_a_receiver_connected(
    app, producer, broker, connected
):
    connected(traces_and_adds_a_kwarg)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    entry = Entry("e", "t.plain", Interval(60), args=(1,))
    sibling = Entry("sibling", "t.plain", Interval(60), args=(2,), kwargs={"k": "v"})
    publisher.send(entry, "first", DUES[0], DUES[0])
    publisher.flush()
    take_messages(broker)
    assert publisher._template(sibling).first is not None, "made from the entry's"
    publisher.send(sibling, "second", DUES[1], DUES[1])
    assert publisher.flush() == {}
    [batched] = take_messages(broker)
    send_like_celery(app, producer, sibling, "second", DUES[1])
    [celerys] = take_messages(broker)
    assert comparable(batched) == comparable(celerys)
    assert batched["body"][1] == {"k": "v", "traced": "second"}


def test_after_task_publish_is_told_the_message_as_the_receivers_left_it(
    app, producer, broker, connected
):
    connected(traces)
    seen: list[tuple[str, str, int]] = []

    def after(headers: dict[str, Any], **kwargs: Any) -> None:
        seen.append((headers["id"], headers["traceparent"], broker.llen("celery")))

    after_task_publish.connect(after, weak=False)
    try:
        publisher = Publisher(app, lambda: producer, BEAT, 100)
        entries = [Entry(f"e{i}", "t.plain", Interval(60)) for i in range(3)]
        for n, due in enumerate(DUES[:2]):
            for i, entry in enumerate(entries):
                publisher.send(entry, f"id-{i}-{due}", due, due)
            assert len(seen) == 3 * n, "not before the batch is flushed"
            publisher.flush()
    finally:
        after_task_publish.disconnect(after)
    ids = [f"id-{i}-{due}" for due in DUES[:2] for i in range(3)]
    assert seen == [(i, traceparent(i), 3 * (1 + n // 3)) for n, i in enumerate(ids)]


def test_a_receiver_changing_nested_arguments_changes_its_message_alone(
    app, producer, broker, connected
):
    def appends(body: Any, **kwargs: Any) -> None:
        body[0][0].append("x")
        body[1]["k"]["n"].append(3)

    connected(appends)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    entry = Entry("nested", "t.plain", Interval(60), args=([0],), kwargs={"k": {"n": [1, 2]}})
    for due in DUES:
        publisher.send(entry, f"id-{due}", due, due)
        assert publisher.flush() == {}
    sent = take_messages(broker)
    assert [m["body"][:2] for m in sent] == [[[[0, "x"]], {"k": {"n": [1, 2, 3]}}]] * 3
    assert entry.args == ([0],) and entry.kwargs == {"k": {"n": [1, 2]}}
    first = publisher._template(entry).first
    assert first is not None and first.body[:2] == (([0],), {"k": {"n": [1, 2]}})
