"""One beat's loop against what a real deployment does to it: changes published at awkward
moments, a listening connection cut, a slow broker, a claim whose reply is lost, an outage.

A beat's loop runs in-process (the publish callable is redisbeat's own boundary) against
real redis-server processes, with a TCP proxy where the link itself must misbehave.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from test_dispatcher import Recorder, dispatcher, every, make_due

from redisbeat import Entry, ScheduleStore, occurrence_id
from redisbeat.beat.activity import Activity
from redisbeat.beat.lease import LeaseKeeper
from redisbeat.store.scripts import CLAIM
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.proxy import TcpProxy
from redisbeat_testkit.redis_server import RedisServer


def test_a_change_published_between_the_first_claim_and_the_first_wait_wakes_the_beat(
    store, redis_server
):
    d = dispatcher(store, Recorder(), max_loop_interval=30.0, heartbeat_seconds=30.0)
    assert d.tick() > 5  # nothing due: it would sleep
    editor = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=store.keys.prefix
    )
    editor.upsert(every("new", 3600))  # published before the beat ever waited
    editor.close()
    t0 = time.monotonic()
    d.wait(5)
    assert time.monotonic() - t0 < 1, "the change was not heard"


def test_a_cut_listening_connection_is_resubscribed_before_the_next_claim(store, client, caplog):
    d = dispatcher(store, Recorder(), max_loop_interval=30.0, heartbeat_seconds=30.0)
    d.tick()
    client.client_kill_filter(_type="pubsub")
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        d.tick()
        store.upsert(every("new", 3600))
        t0 = time.monotonic()
        d.wait(5)
    assert time.monotonic() - t0 < 1, "the change was not heard"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[TcpProxy]:
    p = TcpProxy(redis_server.port).start()
    yield p
    p.stop()


def test_a_claim_whose_reply_was_lost_is_handed_back_as_soon_as_redis_answers(
    store, client, proxy, caplog
):
    """Without it, the occurrence would wait for its 30 s lease to run out."""
    linked = ScheduleStore(
        redis.Redis.from_url(proxy.url(), decode_responses=True, socket_timeout=1),
        prefix=store.keys.prefix,
    )
    linked.upsert(every("e", 3600))
    rec = Recorder()
    d = dispatcher(linked, rec, lease_seconds=30.0)
    d.tick()  # registers, subscribes, claims nothing yet
    store.run_now("e")  # due now, and the beat hears of it
    due = int(client.zscore(store.keys.schedule, "e"))
    claim_sha = CLAIM.sha.encode()
    proxy.stall_replies(from_request=lambda chunk: claim_sha in chunk)
    assert d.tick() > 0  # the claim ran in Redis; its reply never came
    proxy.heal()
    assert client.hexists(store.keys.inflight, "e")
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        wait_until(lambda: (d.tick(), rec.sent)[1], 5, "the lost claim to be sent")
    assert rec.sent == [("e", due, occurrence_id(store.keys.prefix, "e", due))]
    assert "handed back 1 claim(s) whose reply was lost" in caplog.text
    assert not client.hexists(store.keys.inflight, "e")
    linked.close()


def test_a_batch_sent_for_longer_than_its_lease_is_renewed_and_never_taken_over(store, client):
    store.upsert_many([every(f"e{i}") for i in range(3)])
    dues = {f"e{i}": make_due(client, store, f"e{i}", 5) for i in range(3)}
    release = threading.Event()
    slow = Recorder()
    original = slow.__call__

    def publish(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        release.wait(10)  # a broker that takes 3 s for the first message
        original(entry, task_id, due_ms, now_ms)

    d = dispatcher(store, publish, lease_seconds=1.0)
    sender = threading.Thread(target=d.tick)
    sender.start()
    wait_until(lambda: client.hlen(store.keys.inflight) == 3, 5, "the slow beat to claim")
    other = dispatcher(store, Recorder(), lease_seconds=1.0)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert other.store.claim(other.beat_id, 1000, 10).claims == []
        time.sleep(0.05)
    release.set()
    sender.join(10)
    assert sorted(slow.sent) == sorted(
        (n, due, occurrence_id(store.keys.prefix, n, due)) for n, due in dues.items()
    )
    assert client.hlen(store.keys.inflight) == 0
    assert store.state("e0").total_run_count == 1
    d.close()


def test_a_batch_in_hand_is_let_go_while_redis_is_frozen(own_redis: RedisServer):
    """Every renewal waits out the socket timeout (longer than a sixth of the lease): the
    keeper must still wait between them, or the beat could never let go of the batch (and a
    SIGTERM would hang for as long as Redis stays frozen)."""
    client = redis.Redis.from_url(own_redis.url(), decode_responses=True, socket_timeout=0.5)
    store = ScheduleStore(client, prefix="p")
    keeper = LeaseKeeper(store, "b", lease_seconds=1.5)
    keeper.hold(store.now_ms() + 1500, ["e"], time.monotonic())
    own_redis.process.send_signal(signal.SIGSTOP)
    try:
        time.sleep(2)  # renewals fail meanwhile (had none begun, release() would pass anyway)
        released = threading.Thread(target=keeper.release, daemon=True)
        released.start()
        released.join(3)
        assert not released.is_alive(), "release() waited for Redis to come back"
    finally:
        own_redis.process.send_signal(signal.SIGCONT)
    keeper.close()
    store.close()


def test_a_beat_stopped_while_redis_is_down_says_what_becomes_of_its_claims(
    own_redis: RedisServer, caplog
):
    client = redis.Redis.from_url(own_redis.url(), decode_responses=True, socket_timeout=1)
    d = dispatcher(ScheduleStore(client, prefix="p"), Recorder())
    d.tick()  # registered
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        d.close()
    [line] = [r.getMessage() for r in caplog.records if "stopped without" in r.getMessage()]
    assert f"beat {d.beat_id} stopped without reaching Redis" in line
    assert "when their lease ends" in line


def test_a_beat_survives_redis_going_away_tries_it_often_and_resumes_at_once_losing_nothing(
    own_redis: RedisServer, caplog
):
    client = redis.Redis.from_url(own_redis.url(), decode_responses=True, socket_timeout=2)
    store = ScheduleStore(client, prefix="p")
    store.upsert(every("e", 60))
    rec = Recorder()
    d = dispatcher(store, rec)
    d.tick()
    make_due(client, store, "e", 5)  # due while Redis is down (kept in its append-only file)
    own_redis.stop()
    with caplog.at_level(logging.ERROR, logger="redisbeat"):
        delays = [d.tick() for _ in range(20)]
    assert max(delays) <= 0.25
    assert len([r for r in caplog.records if "unavailable" in r.message]) == 1
    own_redis.start()
    t0 = time.monotonic()
    wait_until(lambda: (d.tick(), rec.sent)[1], 5, "a send after Redis came back", interval=0)
    assert time.monotonic() - t0 < 1
    assert store.state("e").total_run_count == 1
    store.close()


def test_the_activity_line_says_how_much_was_sent_how_late_and_what_was_recovered(caplog):
    from redisbeat.store.records import Outcome

    activity = Activity(period=0)
    for late in range(100):
        activity.record(Outcome("e", "sent", 0), late, recovered=late == 7)
    activity.record(Outcome("f", "failed", 0), 5, recovered=False)
    with caplog.at_level(logging.INFO, logger="redisbeat"):
        activity.report()
    assert "sent 100 occurrence(s) (late p50 50 ms, p99 99 ms, max 99 ms)" in caplog.text
    assert "recovered 1 claim(s)" in caplog.text and "failed 1" in caplog.text


def test_a_beat_far_behind_says_so_in_one_summary_line_not_a_line_per_send(store, client, caplog):
    # 300 entries each 10 periods behind: every one missed occurrences, yet the beat writes
    # one line for the period, and the signal still tells each entry.
    import re

    from redisbeat import signals

    store.upsert_many([every(f"e{i}", 0.5) for i in range(300)])
    now = store.now_ms()
    client.zadd(store.keys.schedule, {f"e{i}": now - 5_000 for i in range(300)})
    told: list[str] = []

    def receiver(sender: object, name: str, **_: object) -> None:
        told.append(name)

    signals.occurrence_missed.connect(receiver)
    rec = Recorder()
    d = dispatcher(store, rec, summary_seconds=3600.0)
    try:
        with caplog.at_level(logging.INFO, logger="redisbeat"):
            while d.tick() == 0.0:
                pass
            d.activity.period = 0  # the period ends: its summary line
            d.observer.summary(store)
    finally:
        signals.occurrence_missed.disconnect(receiver)
    lines = [r for r in caplog.records if r.name.startswith("redisbeat")]
    per_send = [r for r in lines if not _celerys_own_or_start(r.getMessage())]
    assert len(per_send) == 1, caplog.text
    [summary] = per_send
    assert summary.levelno == logging.WARNING
    message = summary.getMessage()
    assert "sent 300 occurrence(s)" in message, message
    # The ten (or, claimed slowly, more) before each one sent coalesced into it.
    missed = re.search(r"missed (\d+) occurrence\(s\) of 300 entries \((\d+) late\)", message)
    assert missed and int(missed[1]) == int(missed[2]) >= 3000, message
    assert sorted(set(told)) == sorted(f"e{i}" for i in range(300))


def _celerys_own_or_start(message: str) -> bool:
    """Celery's own line per send (INFO, as its scheduler writes it), or the start line."""
    return "Sending due task" in message or " started on " in message
