"""Batch publishing: the messages Celery's own apply_async would send, one round trip a batch."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.signals import after_task_publish, before_task_publish
from celery.utils.saferepr import saferepr
from hypothesis import given, settings
from hypothesis import strategies as st
from kombu import Producer
from kombu.transport import redis as kombu_redis
from test_dispatcher import Unbuffered

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id
from redisbeat.beat.loop import Dispatcher
from redisbeat.beat.scheduler import RedisScheduler
from redisbeat.config import Config
from redisbeat.schedule.clock import parse_iso
from redisbeat.sending import Publisher, message_options
from redisbeat.sending.lists import Lists
from redisbeat.sending.reprs import argument_repr
from redisbeat.sending.template import TaskMessages
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer

BROKER_DB = 3
BEAT = "host:1:beat"
#: kombu 5.7 added Producer.batch(); with an older kombu each message goes out as it is
#: published, which the tests of the same message and of the dispatcher still check.
needs_batches = pytest.mark.skipif(
    not hasattr(Producer, "batch"), reason="this kombu has no Producer.batch()"
)


def make_app(url: str) -> Celery:
    app = Celery("pubtest", broker=url, set_as_current=False)
    app.conf.timezone = "UTC"
    app.conf.task_routes = {
        "t.defaults": {"queue": "special", "routing_key": "special.rk", "priority": 5}
    }

    @app.task(name="t.plain", shared=False)
    def plain(*args: Any, **kwargs: Any) -> None:
        pass

    @app.task(name="t.defaults", expires=60, time_limit=30, serializer="json", shared=False)
    def defaults(*args: Any, **kwargs: Any) -> None:
        pass

    @app.task(name="t.typed", shared=False)
    def typed(x: int) -> None:
        pass

    return app


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


def take_messages(client: redis.Redis) -> list[dict[str, Any]]:
    """Pop every message from every queue of the broker, oldest first, bodies decoded."""
    out = []
    for key in sorted(client.keys()):
        if client.type(key) != b"list":
            continue
        while (raw := client.rpop(key)) is not None:
            message = json.loads(raw)
            if message["content-type"] == "application/json":
                message["body"] = json.loads(base64.b64decode(message["body"]))
            message["queue"] = key.decode()
            out.append(message)
    return out


def comparable(message: dict[str, Any]) -> dict[str, Any]:
    """A message without what differs between two sends of it (a random tag, the clock)."""
    message = json.loads(json.dumps(message))
    del message["properties"]["delivery_tag"]
    # By this host's clock: a task's own numeric expires, and the seconds left to live.
    message["headers"]["expires"] = message["headers"]["expires"] is not None
    message["properties"].pop("expiration", None)
    return message


def clock_fields(message: dict[str, Any]) -> tuple[float | None, int | None]:
    expires, ttl = message["headers"]["expires"], message["properties"].get("expiration")
    return (
        None if expires is None else parse_iso(expires).timestamp(),
        None if ttl is None else int(ttl),
    )


def send_like_celery(app: Celery, producer: Any, entry: Entry, task_id: str, due: int) -> None:
    """What redisbeat sent before batches: task.apply_async (or send_task by name)."""
    options = message_options(entry, due, due + 5, BEAT)
    task = app.tasks.get(entry.task)
    if task is not None:
        task.apply_async(
            tuple(entry.args), dict(entry.kwargs), task_id=task_id, producer=producer, **options
        )
    else:
        app.send_task(
            entry.task,
            entry.args,
            dict(entry.kwargs),
            task_id=task_id,
            producer=producer,
            **options,
        )


ENTRIES = [
    Entry("plain", "t.plain", Interval(60), args=(1, "a"), kwargs={"k": {"n": [1, 2]}}),
    Entry(
        "options",
        "t.plain",
        Interval(60),
        options={"queue": "reports", "priority": 3, "expires": 30, "headers": {"h": "v"}},
    ),
    Entry("task defaults", "t.defaults", Interval(60)),
    Entry(
        "overrides",
        "t.defaults",
        Interval(60),
        options={"queue": "other", "routing_key": "rk", "time_limit": 10, "ignore_result": True},
    ),
    Entry("by name", "remote.task", Interval(60), kwargs={"a": 1}, options={"expires": 5}),
    Entry("serializer", "t.plain", Interval(60), args=(1,), options={"serializer": "pickle"}),
    Entry("expires at", "t.plain", Interval(60), options={"expires": "2100-01-01T00:00:00+00:00"}),
    Entry("expired", "t.plain", Interval(60), options={"expires": "2000-01-01T00:00:00+00:00"}),
    # "Z" for UTC, as JavaScript and most APIs spell it (Python 3.10 does not read it alone).
    Entry("expires at, Z", "t.plain", Interval(60), options={"expires": "2100-01-01T00:00:00Z"}),
    # Only apply_async handles these: they take the per-message way, with the same result.
    Entry("group", "t.plain", Interval(60), options={"group_id": "g-1"}),
    Entry("naive expiry", "t.plain", Interval(60), options={"expires": "2100-01-01T00:00:00"}),
]


#: Entries whose later messages are their first one with the id, due time and expiry put in
#: (a task's own numeric expires is counted from this host's clock at each send).
REUSED = {"plain", "options", "by name", "serializer", "expires at", "expired", "expires at, Z"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_a_batched_message_is_the_one_celerys_apply_async_sends(app, producer, broker, entry):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    # The first occurrence is built step by step; later ones reuse what it worked out.
    for due in (1_800_000_000_000, 1_800_000_060_000, 1_800_000_120_000):
        task_id = occurrence_id("p", entry.name, due)
        publisher.send(entry, task_id, due, due + 5)
        assert publisher.flush() == {}
        [batched] = take_messages(broker)
        send_like_celery(app, producer, entry, task_id, due)
        [celerys] = take_messages(broker)
        assert comparable(batched) == comparable(celerys)
        assert batched["headers"]["id"] == batched["headers"]["root_id"] == task_id
        assert batched["properties"]["correlation_id"] == task_id
        assert batched["headers"]["redisbeat_entry"] == entry.name
        assert batched["headers"]["redisbeat_due"] == due
        assert batched["headers"]["redisbeat_beat"] == BEAT
        if "expires" in entry.options:  # by the Redis clock: the same in both
            assert batched["headers"]["expires"] == celerys["headers"]["expires"]
        pairs = zip(clock_fields(batched), clock_fields(celerys), (2, 2000), strict=True)
        for ours, theirs, tolerance in pairs:
            assert (ours is None) == (theirs is None)
            assert ours is None or theirs is None or abs(ours - theirs) < tolerance
    reused = publisher._template(entry).first is not None
    assert reused == (entry.name in REUSED), "reuses the first message"


def take_raw(client: redis.Redis) -> list[tuple[str, bytes]]:
    """Pop every message from every queue of the broker as stored: (list, JSON)."""
    out = []
    for key in sorted(client.keys()):
        if client.type(key) == b"list":
            while (raw := client.rpop(key)) is not None:
                out.append((key.decode(), raw))
    return out


def stored_but_clock(raw: bytes) -> str:
    """A stored message with its random tag and host-clock fields blanked, encoded again
    (key order and all) by the Redis transport's encoder."""
    message = json.loads(raw)
    message["properties"]["delivery_tag"] = "tag"
    if message["headers"].get("expires") is not None:
        message["headers"]["expires"] = "expires"
    if "expiration" in message["properties"]:
        message["properties"]["expiration"] = "ttl"
    encoded: str = kombu_redis.dumps(message)
    return encoded


@pytest.mark.parametrize("keyprefix", ["", "pfx:"], ids=["plain", "global_keyprefix"])
@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.name in REUSED], ids=lambda e: e.name)
def test_a_message_pushed_onto_the_list_is_the_one_kombu_stores_to_the_byte(
    redis_server, broker, entry, keyprefix
):
    app = make_app(redis_server.url(BROKER_DB))
    app.conf.broker_transport_options = {"global_keyprefix": keyprefix} if keyprefix else {}
    connection = app.connection_for_write()
    producer = app.amqp.Producer(connection, auto_declare=False)
    try:
        publisher = Publisher(app, lambda: producer, BEAT, 100)
        publisher.send(entry, "first", 1_800_000_000_000, 1_800_000_000_005)
        publisher.flush()
        take_raw(broker)
        for due in (1_800_000_060_000, 1_800_000_120_000):
            task_id = occurrence_id("p", entry.name, due)
            publisher.send(entry, task_id, due, due + 5)
            assert publisher._lists is not None and len(publisher._pushed) == 1
            assert publisher.flush() == {}
            [(key, ours)] = take_raw(broker)
            send_like_celery(app, producer, entry, task_id, due)
            [(celerys_key, celerys)] = take_raw(broker)
            assert key == celerys_key and key.startswith(keyprefix)
            assert kombu_redis.dumps(json.loads(ours)).encode() == ours  # kombu's encoding
            assert stored_but_clock(ours) == stored_but_clock(celerys)
        shape = publisher._template(entry).first.family["lists"][1]  # type: ignore[union-attr]
        assert [e is not None for e in shape.envelopes.values()] == [True], "from its text"
    finally:
        connection.release()
        app.close()


@pytest.mark.parametrize(
    "name, kwargs",
    [('ünïcødé “名前” \\ "q"', {"k": "😀 \u2028 \x01"}), ("plain", {"n": 10**30, "f": 1.5})],
    ids=["awkward text", "big numbers"],
)
def test_a_message_written_from_its_envelope_is_the_encoders_to_the_byte(
    app, producer, broker, name, kwargs
):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    first = Entry("first", "t.plain", Interval(60), kwargs={"k": 1})
    entry = Entry(name, "t.plain", Interval(60), args=(name,), kwargs=kwargs)
    publisher.send(first, "first", 1000, 1000)  # the family's first message
    publisher.flush()
    take_raw(broker)
    for due in (2000, 3000):
        task_id = occurrence_id("p", name, due)
        publisher.send(entry, task_id, due, due)
        assert len(publisher._pushed) == 1
        assert publisher.flush() == {}
        [(_, ours)] = take_raw(broker)
        send_like_celery(app, producer, entry, task_id, due)
        [(_, celerys)] = take_raw(broker)
        assert kombu_redis.dumps(json.loads(ours)).encode() == ours
        assert stored_but_clock(ours) == stored_but_clock(celerys)
        assert json.loads(ours)["headers"]["redisbeat_entry"] == name
    shape = publisher._template(entry).first.family["lists"][1]  # type: ignore[union-attr]
    assert [e is not None for e in shape.envelopes.values()] == [True], "from its text"


def test_what_kombus_redis_lists_do_not_cover_goes_through_the_producer(app, producer, broker):
    # Compression changes the body and a header: kombu's producer does it, as for any
    # transport other than Redis (where the publisher has no lists at all).
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    zlib = {"compression": "zlib"}
    entry = Entry("zipped", "t.plain", Interval(60), args=("x" * 500,), options=zlib)
    for due in (1000, 2000):
        publisher.send(entry, f"id-{due}", due, due)
        assert publisher._pushed == []
        assert publisher.flush() == {}
    [(_, ours)] = take_raw(broker)[1:]
    send_like_celery(app, producer, entry, "id-2000", 2000)
    [(_, celerys)] = take_raw(broker)
    assert stored_but_clock(ours) == stored_but_clock(celerys)
    memory = Celery("memory", broker="memory://", set_as_current=False)
    with memory.connection_for_write() as connection:
        assert Lists.of(memory.amqp.Producer(connection)) is None
    memory.close()


@needs_batches
def test_the_messages_of_a_batch_reach_the_broker_together_when_it_is_flushed(
    app, producer, broker
):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    entries = [Entry(f"e{i}", "t.plain", Interval(60)) for i in range(50)]
    for i, entry in enumerate(entries):
        publisher.send(entry, f"id-{i}", 1000 + i, 2000)
    assert broker.llen("celery") == 0
    assert publisher.flush() == {}
    assert [m["headers"]["id"] for m in take_messages(broker)] == [f"id-{i}" for i in range(50)]


def test_a_batch_is_one_lpush_per_queue(app, producer, broker, redis_server):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    queues = ({}, {"queue": "reports"})
    for options in queues:  # the first messages: they connect, declare and are kept
        publisher.send(Entry(f"warm{options}", "t.plain", Interval(60), options=options), "w", 1, 2)
    publisher.flush()
    take_messages(broker)
    before = _commands(redis_server)
    for i in range(30):
        entry = Entry(f"e{i}", "t.plain", Interval(60), args=(i,), options=queues[i % 2])
        publisher.send(entry, f"id-{i}", 1000 + i, 2000)
    assert publisher.flush() == {}
    after = _commands(redis_server)
    assert after.get("cmdstat_lpush", 0) - before.get("cmdstat_lpush", 0) == 2
    sent = take_messages(broker)
    # Each queue holds its messages in the order they were sent, as one LPUSH each would.
    assert [(m["queue"], m["headers"]["id"]) for m in sent] == [
        ("celery", f"id-{i}") for i in range(0, 30, 2)
    ] + [("reports", f"id-{i}") for i in range(1, 30, 2)]


def _commands(server: RedisServer) -> dict[str, int]:
    client = redis.Redis.from_url(server.url())
    try:
        return {k: int(v["calls"]) for k, v in client.info("commandstats").items()}
    finally:
        client.close()


def test_after_task_publish_fires_once_the_message_is_on_the_broker(app, producer, broker):
    seen: list[tuple[str, int]] = []

    def after(headers: dict[str, Any], **kwargs: Any) -> None:
        seen.append((headers["id"], broker.llen("celery")))

    after_task_publish.connect(after, weak=False)
    try:
        publisher = Publisher(app, lambda: producer, BEAT, 100)
        for i in range(3):
            publisher.send(Entry(f"e{i}", "t.plain", Interval(60)), f"id-{i}", 1000, 2000)
        assert seen == []
        publisher.flush()
    finally:
        after_task_publish.disconnect(after)
    assert seen == [("id-0", 3), ("id-1", 3), ("id-2", 3)]


def test_a_before_task_publish_receiver_sees_and_changes_every_message(app, producer, broker):
    entry = Entry("e", "t.plain", Interval(60), kwargs={"n": 1})
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    publisher.send(entry, "id-0", 1000, 1000)  # the first message, before any receiver
    publisher.flush()

    def before(headers: dict[str, Any], body: Any, **kwargs: Any) -> None:
        headers["traced"] = headers["id"]  # as tracing libraries do
        body[1]["n"] += 1

    before_task_publish.connect(before, weak=False)
    try:
        for due in (2000, 3000):
            publisher.send(entry, f"id-{due}", due, due)
            publisher.flush()
    finally:
        before_task_publish.disconnect(before)
    sent = take_messages(broker)
    assert [m["headers"].get("traced") for m in sent] == [None, "id-2000", "id-3000"]
    assert [m["body"][1]["n"] for m in sent] == [1, 2, 2]
    assert entry.kwargs == {"n": 1}


def test_a_router_function_is_asked_for_every_message(app, producer, broker):
    queues = iter(["q1", "q2", "q3"])
    app.conf.task_routes = [lambda name, *args, **kwargs: {"queue": next(queues)}]
    app.amqp.flush_routes()
    app.amqp.__dict__.pop("router", None)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    entry = Entry("e", "t.plain", Interval(60))
    for due in (1000, 2000, 3000):
        publisher.send(entry, f"id-{due}", due, due)
        publisher.flush()
    assert [m["queue"] for m in take_messages(broker)] == ["q1", "q2", "q3"]


def test_what_a_message_depends_on_is_worked_out_once_per_task_and_options(app, producer, broker):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    entry = Entry("e", "t.plain", Interval(60), args=(1,))
    twin = Entry("twin", "t.plain", Interval(5), args=(1,))  # another name and schedule
    other = Entry("other", "t.plain", Interval(60), args=(2,))
    for due in (1000, 2000):
        for e in (entry, twin, other):
            publisher.send(e, f"{e.name}-{due}", due, due)
        publisher.flush()
    template = publisher._template(entry)
    assert template.first is not None and template.reprs and template.bodies
    # The others' first messages were made from the entry's, their arguments put in.
    for e in (twin, other):
        made = publisher._template(e).first
        assert made is not None and made is not template.first
        assert made.publish is template.first.publish
        assert made.properties is template.first.properties
    sent = take_messages(broker)
    assert [(m["headers"]["redisbeat_entry"], m["body"][0]) for m in sent] == [
        ("e", [1]),
        ("twin", [1]),
        ("other", [2]),
    ] * 2
    assert [m["headers"]["id"] for m in sent] == [
        f"{name}-{due}" for due in (1000, 2000) for name in ("e", "twin", "other")
    ]


def test_an_entrys_template_is_kept_as_long_as_the_entry_object_and_no_longer(
    app, producer, broker
):
    # The beat's entry cache decides which entries are kept; the publisher keeps the parts
    # of their messages for exactly those, so nothing it builds for the others lives on.
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    kept = Entry("kept", "t.plain", Interval(60), args=(1,))
    publisher.send(kept, "kept-1", 1000, 1000)
    for i in range(50):
        passing = Entry(f"p{i}", "t.plain", Interval(60), args=(i,))
        publisher.send(passing, f"p{i}-1", 1000, 1000)
        del passing
    publisher.flush()
    assert list(publisher._by_entry) == [id(kept)]
    assert publisher._template(kept) is publisher._by_entry[id(kept)]
    assert len(take_messages(broker)) == 51


def test_an_occurrence_celery_refuses_is_reported_alone_with_the_reason(app, producer, broker):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    publisher.send(Entry("ok", "t.plain", Interval(60)), "ok", 1000, 2000)
    publisher.send(Entry("bad", "t.typed", Interval(60)), "bad", 1000, 2000)  # x is missing
    refused = publisher.flush()
    assert list(refused) == ["bad"]
    assert refused["bad"] is not None and refused["bad"].startswith("TypeError: ")
    assert "'x'" in refused["bad"]
    assert [m["headers"]["id"] for m in take_messages(broker)] == ["ok"]


# -- through the dispatcher and the scheduler, against real servers ------------------------------


@pytest.fixture
def broker_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "broker")
    server.directory.mkdir()
    server.start()
    yield server
    server.stop()


@needs_batches
def test_a_broker_failure_mid_batch_hands_every_unsent_claim_back(store, client, broker_server):
    app = make_app(broker_server.url())
    connection = app.connection_for_write()
    producer = app.amqp.Producer(connection, auto_declare=False)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    now = store.now_ms()
    dues = {}
    for name in ("a", "b", "c"):
        store.upsert(Entry(name, "t.plain", Interval(60)))
        dues[name] = now - 10
        client.zadd(store.keys.schedule, {name: dues[name]})

    def broker_dies_then_flush() -> set[str]:
        broker_server.stop()  # after the batch was buffered, before it is sent
        return publisher.flush()

    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
    dispatcher = Dispatcher(
        store, config, Unbuffered(publisher.send, broker_dies_then_flush), beat_id=BEAT
    )
    assert dispatcher.tick() > 0  # backs off
    for name, due in dues.items():
        assert client.zscore(store.keys.schedule, name) == due
        assert store.state(name).total_run_count == 0
    assert client.hlen(store.keys.inflight) == 0

    broker_server.start()
    dispatcher = Dispatcher(store, config, publisher, beat_id=BEAT)
    wait_until(
        lambda: dispatcher.tick() == 0 or all(store.state(n).total_run_count for n in dues),
        20,
        "the handed-back claims to be sent",
    )
    wait_until(lambda: all(store.state(n).total_run_count for n in dues), 20, "every send")
    sent = take_messages(redis.Redis.from_url(broker_server.url()))
    assert sorted(m["headers"]["id"] for m in sent) == sorted(
        occurrence_id(store.keys.prefix, name, due) for name, due in dues.items()
    )
    connection.release()
    app.close()


def test_the_scheduler_sends_a_batch_in_one_go_with_redisbeats_headers(
    redis_server, broker, prefix, keep_signal_handlers
):
    app = make_app(redis_server.url(BROKER_DB))
    app.conf.redisbeat_redis_url = redis_server.url(0)
    app.conf.redisbeat_key_prefix = prefix
    app.conf.beat_max_loop_interval = 0.1
    scheduler = RedisScheduler(app)
    store = ScheduleStore(
        redis.Redis.from_url(redis_server.url(0), decode_responses=True), prefix=prefix
    )
    try:
        now = store.now_ms()
        for i in range(5):
            store.upsert(Entry(f"e{i}", "t.plain", Interval(60)))
            store.client.zadd(store.keys.schedule, {f"e{i}": now - 100 + i})
        scheduler.tick()
        sent = take_messages(broker)
    finally:
        scheduler.close()
        store.close()
        app.close()
    assert sorted(m["headers"]["redisbeat_entry"] for m in sent) == [f"e{i}" for i in range(5)]
    for m in sent:
        h = m["headers"]
        assert h["id"] == occurrence_id(prefix, h["redisbeat_entry"], h["redisbeat_due"])
        assert h["redisbeat_beat"] == scheduler.dispatcher.beat_id


def test_the_beats_connection_to_a_redis_broker_waits_for_a_reply_as_long_as_its_store(
    redis_server, prefix, keep_signal_handlers
):
    """kombu waits forever by default: a silent link would hold the batch in hand forever.
    Timeouts the app's broker_transport_options set stand; other brokers are left alone."""
    apps = {url: make_app(url) for url in (redis_server.url(BROKER_DB), "memory://")}
    schedulers = []
    for app in apps.values():
        app.conf.redisbeat_redis_url = redis_server.url(0)
        app.conf.redisbeat_key_prefix = prefix
        app.conf.redisbeat_socket_timeout = 3.0
        app.conf.broker_transport_options = {"socket_connect_timeout": 1.5}
        schedulers.append(RedisScheduler(app))
    try:
        on_redis, on_memory = (s.connection.transport_options for s in schedulers)
        assert on_redis == {"socket_timeout": 3.0, "socket_connect_timeout": 1.5}
        assert on_memory == {"socket_connect_timeout": 1.5}
        pool = schedulers[0].producer.channel.client.connection_pool
        assert pool.connection_kwargs["socket_timeout"] == 3.0
        assert pool.connection_kwargs["socket_connect_timeout"] == 1.5
    finally:
        for scheduler in schedulers:
            scheduler.close()
        for app in apps.values():
            app.close()


def test_the_dispatcher_hands_back_exactly_the_occurrences_a_flush_reports_unsent(store, client):
    buffered: list[str] = []

    def publish(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        buffered.append(task_id)

    def flush() -> dict[str, str | None]:
        # The second one did not go out (the broker failed); the third was refused.
        return {buffered[1]: None, buffered[2]: "TypeError: bad arguments"}

    now = store.now_ms()
    dues = {}
    for name in ("a", "b", "c"):
        store.upsert(Entry(name, "t.plain", Interval(60)))
        dues[name] = now - 1000 + ord(name)
        client.zadd(store.keys.schedule, {name: dues[name]})
    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
    Dispatcher(store, config, Unbuffered(publish, flush), beat_id=BEAT).tick()
    runs = {name: store.state(name).total_run_count for name in dues}
    assert runs == {"a": 1, "b": 0, "c": 0}
    assert client.zscore(store.keys.schedule, "b") == dues["b"]
    assert client.zscore(store.keys.schedule, "a") == dues["a"] + 60_000
    assert client.zscore(store.keys.schedule, "c") == dues["c"] + 60_000
    assert (
        store.state("c").failures == 1 and store.state("c").last_error == "TypeError: bad arguments"
    )


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.name in REUSED], ids=lambda e: e.name)
def test_an_entry_of_the_same_task_and_options_starts_from_anothers_first_message(
    app, producer, broker, entry
):
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    sibling = replace(entry, name=f"{entry.name} 2", args=(2, "b" * 2000), kwargs={"x": [None]})
    due = 1_800_000_000_000
    publisher.send(entry, "first", due, due + 5)
    publisher.flush()
    take_messages(broker)
    adopted = publisher._template(sibling)
    assert adopted.first is not None, "made from the first entry's message, not built anew"
    publisher.send(sibling, "second", due, due + 5)
    assert publisher.flush() == {}
    [batched] = take_messages(broker)
    send_like_celery(app, producer, sibling, "second", due)
    [celerys] = take_messages(broker)
    assert comparable(batched) == comparable(celerys)
    argsrepr = batched["headers"]["argsrepr"]
    assert argsrepr.startswith("(2, 'bbb") and len(argsrepr) < 1100  # Celery's own cut at 1,024


def test_a_broker_failure_hands_claims_back_while_a_refused_entry_fails_alone(
    store, client, tmp_path: Path
):
    # A broker that stopped answering: no entry is to blame, and none is counted as failed.
    server = RedisServer(tmp_path / "broker")
    server.directory.mkdir()
    server.start()
    app = make_app(server.url(BROKER_DB))
    app.conf.broker_connection_retry = False
    app.conf.task_publish_retry = False
    connection = app.connection_for_write()
    producer = app.amqp.Producer(connection, auto_declare=False)
    store.upsert(Entry("ok", "t.plain", Interval(60)))
    store.upsert(Entry("bad", "t.typed", Interval(60)))  # x is missing: refused by Celery
    # "bad" first: after a broker failure the rest of a batch is handed back untried.
    dues = {"bad": make_due_now(client, store, "bad", 20), "ok": make_due_now(client, store, "ok")}
    try:
        publisher = Publisher(app, lambda: producer, BEAT, 100)
        config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
        server.stop()
        Dispatcher(store, config, publisher, beat_id=BEAT).tick()
    finally:
        connection.release()
        app.close()
        server.stop()
    assert client.zscore(store.keys.schedule, "ok") == dues["ok"]  # handed back
    assert store.state("ok").failures == 0
    assert client.zscore(store.keys.schedule, "bad") == dues["bad"] + 60_000  # moved on
    assert store.state("bad").failures == 1 and "TypeError" in str(store.state("bad").last_error)


def make_due_now(client: redis.Redis, store: ScheduleStore, name: str, ms_ago: int = 10) -> int:
    due = store.now_ms() - ms_ago
    client.zadd(store.keys.schedule, {name: due})
    return due


def test_what_the_batched_path_cannot_build_goes_out_by_apply_async_with_one_warning(
    app, producer, broker, monkeypatch, caplog
):
    # As on a Celery release without a private name the batched path reads.
    def missing(*args: Any, **kwargs: Any) -> None:
        raise AttributeError("'plain' object has no attribute '_a_newer_celerys_name'")

    monkeypatch.setattr(TaskMessages, "publish", missing)
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    entry = Entry("e", "t.plain", Interval(60), args=(1,))
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        for due in (1000, 2000):
            publisher.send(entry, f"id-{due}", due, due)
            assert publisher.flush() == {}
    sent = take_messages(broker)
    assert [m["headers"]["id"] for m in sent] == ["id-1000", "id-2000"]
    send_like_celery(app, producer, entry, "id-2000", 2000)
    [celerys] = take_messages(broker)
    assert comparable(sent[1]) == comparable(celerys)
    assert caplog.text.count("messages of t.plain are sent with apply_async") == 1


_JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_ARGUMENTS = st.recursive(
    _JSON_LEAVES,
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(), inner)
    ),
    max_leaves=25,
)


@settings(max_examples=1500, deadline=None)
@given(
    _ARGUMENTS,
    st.sampled_from([None, 1, 8, 40, 1024]),
    st.sampled_from([0, 1, 2, 3, 6]),
)
def test_argument_reprs_are_celerys_saferepr_to_the_character(
    value: Any, maxsize: int | None, maxlevels: int
) -> None:
    # The argsrepr/kwargsrepr headers of a message made from another entry's are written
    # without saferepr where that gives the same text (short, shallow JSON data).
    assert argument_repr(value, maxsize, maxlevels) == saferepr(value, maxsize, maxlevels=maxlevels)


def test_argument_reprs_leave_what_saferepr_cuts_short_or_marks_to_it() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert argument_repr(loop, 1024, 0) == saferepr(loop, 1024, maxlevels=0)
    deep = {"a": [[["x"]]]}
    assert argument_repr(deep, 1024, 3) == "{'a': [[[...]]]}"
    assert argument_repr("it's " * 300, 1024, 3).endswith("...'")


def test_a_backlog_of_expired_messages_goes_out_as_celery_sends_them_told_once_a_period(
    store, client, app, producer, broker, caplog
):
    # A beat back after its tasks' expiry sends each as Celery would (to live 0 s, so the
    # worker discards it) at the batched pace, where apply_async would warn per message.
    past = "2000-01-01T00:00:00+00:00"
    store.upsert_many(
        [Entry(f"x{i}", "t.plain", Interval(3600), options={"expires": past}) for i in range(200)]
        + [Entry(f"k{i}", "t.plain", Interval(3600), options={"expires": 600}) for i in range(50)]
    )
    now = store.now_ms()
    client.zadd(store.keys.schedule, {f"x{i}": now - 100 for i in range(200)})
    client.zadd(store.keys.schedule, {f"k{i}": now - 100 for i in range(50)})
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix, summary_seconds=3600)
    dispatcher = Dispatcher(store, config, publisher, beat_id=BEAT)
    with caplog.at_level(logging.INFO):
        while dispatcher.tick() == 0.0:
            pass
        dispatcher.activity.period = 0  # the period ends: its summary line
        dispatcher.observer.summary(store)
    messages = take_messages(broker)
    expired = [m for m in messages if m["headers"]["redisbeat_entry"].startswith("x")]
    assert len(messages) == 250 and len(expired) == 200
    # kombu keeps a message's time to live as a string, in ms.
    assert {(m["headers"]["expires"], m["properties"]["expiration"]) for m in expired} == {
        (past, "0")
    }
    kept = [float(m["properties"]["expiration"]) for m in messages if m not in expired]
    assert len(kept) == 50 and all(500_000 < ttl <= 600_000 for ttl in kept)
    assert "in the past" not in caplog.text
    [summary] = [r for r in caplog.records if "in the last" in r.getMessage()]
    assert summary.levelno == logging.WARNING
    assert "200 message(s) sent after their expiry had passed" in summary.getMessage()
    assert publisher.messages.expired == 200


def test_a_list_the_broker_refuses_takes_back_only_its_own_messages(
    store, client, app, producer, broker, caplog
):
    """One LPUSH per queue, in one pipeline: the broker may refuse one (a full memory, a key
    of the wrong type) and take the others, whose messages went out and stay sent."""
    store.upsert(Entry("refused", "t.plain", Interval(60)))  # to the "celery" queue
    store.upsert(Entry("taken", "t.plain", Interval(60), options={"queue": "other"}))
    publisher = Publisher(app, lambda: producer, BEAT, 100)
    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
    for name in ("refused", "taken"):
        make_due_now(client, store, name)
    Dispatcher(store, config, publisher, beat_id=BEAT).tick()  # both sent, queues declared
    assert len(take_messages(broker)) == 2
    broker.set("celery", "not a list")
    dues = {name: make_due_now(client, store, name) for name in ("refused", "taken")}
    with caplog.at_level(logging.DEBUG, logger="redisbeat"):
        Dispatcher(store, config, publisher, beat_id=BEAT).tick()
        Dispatcher(store, config, publisher, beat_id=BEAT).tick()  # refused again: DEBUG
    assert client.zscore(store.keys.schedule, "refused") == dues["refused"]  # handed back
    assert store.state("refused").total_run_count == 1
    assert store.state("taken").total_run_count == 2
    broker.delete("celery")
    [sent] = take_messages(broker)
    assert sent["headers"]["redisbeat_entry"] == "taken"
    refusals = [r for r in caplog.records if "(ResponseError: WRONGTYPE" in r.getMessage()]
    assert [r.levelno for r in refusals] == [logging.ERROR, logging.DEBUG]
    assert "the broker refused 1 of 2 message(s) (ResponseError: WRONGTYPE" in refusals[0].message
