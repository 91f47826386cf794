"""Redis Sentinel: settings, the store through a sentinel:// URL, beats across failovers, WAIT."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id
from redisbeat.config import Config, SentinelURL
from redisbeat.errors import ConfigurationError
from redisbeat.store.records import Outcome
from redisbeat_testkit.occurrences import (
    Recorder,
    add_entries,
    check_sent,
    longest_pause,
    occurrences,
)
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer
from redisbeat_testkit.sentinel import SentinelGroup

SECOND = 1000
MASTER = "mymaster"
SHORT_OF_REPLICAS = "acknowledged a write within"


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    sentinels = SentinelGroup(tmp_path_factory.mktemp("sentinel"), master_name=MASTER).start()
    yield sentinels
    sentinels.stop()


@pytest.fixture(scope="module")
def broker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The Celery broker of the beat tests: a plain redis-server outside the group."""
    server = RedisServer(tmp_path_factory.mktemp("broker")).start()
    yield server
    server.stop()


def app_with(**conf: object) -> Celery:
    app = Celery("sentinel-test", set_as_current=False)
    app.conf.update(conf)
    return app


def sentinel_store(group: SentinelGroup, prefix: str, **conf: object) -> ScheduleStore:
    app = app_with(
        redisbeat_redis_url=group.url(),
        redisbeat_sentinel_master=MASTER,
        redisbeat_key_prefix=prefix,
        **conf,
    )
    return ScheduleStore.from_app(app)


def wait_calls(group: SentinelGroup) -> int:
    client = group.master_client()
    try:
        return int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))
    finally:
        client.close()


# -- settings ---------------------------------------------------------------------------------


def test_a_sentinel_url_lists_every_sentinel_with_the_masters_database_and_login():
    url = "sentinel://u:p%40ss@10.0.0.1:26380;sentinel://10.0.0.2/3;sentinel://[::1]:5000"
    parsed = SentinelURL.parse(url)
    assert parsed.addresses == (("10.0.0.1", 26380), ("10.0.0.2", 26379), ("::1", 5000))
    assert (parsed.db, parsed.username, parsed.password) == (3, "u", "p@ss")
    config = Config(redis_url=url, sentinel_master="prod")
    store = ScheduleStore.from_config(config)  # connects lazily: nothing listens there
    try:
        assert store.describe() == (
            "sentinel master prod via 10.0.0.1:26380,10.0.0.2:26379,[::1]:5000 "
            "db=3 prefix=redisbeat"
        )
    finally:
        store.close()


def test_a_sentinel_broker_lends_its_master_name_and_sentinel_options_as_kombu_does():
    config = Config.from_app(
        app_with(
            broker_url="sentinel://:pw@10.0.0.1:26379;sentinel://10.0.0.2:26379",
            broker_transport_options={
                "master_name": "cluster1",
                "sentinel_kwargs": {"password": "s"},
            },
            redisbeat_socket_timeout=4,
        )
    )
    assert config.redis_url.startswith("sentinel://:pw@10.0.0.1")
    assert config.sentinel_master == "cluster1"
    assert config.sentinel is not None and config.sentinel.password == "pw"
    # The sentinels get the password, and timeouts so a silent sentinel cannot hang a beat.
    assert config.sentinel_options == {
        "password": "s",
        "socket_timeout": 4,
        "socket_connect_timeout": 5.0,
    }
    assert (config.wait_replicas, config.wait_timeout) == (0, 0.5)


def test_redisbeat_settings_win_over_the_sentinel_brokers_transport_options():
    config = Config.from_app(
        app_with(
            broker_url="sentinel://10.0.0.1:26379",
            broker_transport_options={"master_name": "broker-master", "sentinel_kwargs": {"a": 1}},
            redisbeat_sentinel_master="beat-master",
            redisbeat_sentinel_options={"ssl": True},
            redisbeat_wait_replicas=2,
            redisbeat_wait_timeout=0.25,
        )
    )
    assert config.sentinel_master == "beat-master"
    assert config.sentinel_options["ssl"] is True and "a" not in config.sentinel_options
    assert (config.wait_replicas, config.wait_timeout) == (2, 0.25)


@pytest.mark.parametrize(
    "conf",
    [
        {"redisbeat_redis_url": "sentinel://10.0.0.1:26379"},
        {"broker_url": "sentinel://10.0.0.1:26379"},
        {"broker_url": "sentinel://10.0.0.1", "broker_transport_options": {"master_name": ""}},
    ],
    ids=["explicit-url", "broker-url", "empty-name"],
)
def test_a_sentinel_url_without_a_master_name_stops_startup_naming_the_setting(conf):
    with pytest.raises(ConfigurationError, match="redisbeat_sentinel_master must be set"):
        Config.from_app(app_with(**conf))


@pytest.mark.parametrize(
    ("conf", "error"),
    [
        ({"redisbeat_redis_url": "sentinel://:secret@h:1;redis://h:2"}, "redisbeat_redis_url"),
        ({"redisbeat_redis_url": "sentinel://:secret@h:port"}, "redisbeat_redis_url"),
        ({"redisbeat_redis_url": "sentinel://:secret@h/0;sentinel://h/1"}, "redisbeat_redis_url"),
        ({"redisbeat_redis_url": "sentinel://:secret@h/x"}, "redisbeat_redis_url"),
        ({"redisbeat_redis_url": "sentinel://:secret@h?ssl=1"}, "redisbeat_redis_url"),
        ({"redisbeat_redis_url": "redis://:secret@h"}, "redisbeat_sentinel_master is set but"),
        ({"redisbeat_sentinel_options": ["password"]}, "redisbeat_sentinel_options"),
        ({"redisbeat_wait_replicas": -1}, "redisbeat_wait_replicas"),
        ({"redisbeat_wait_replicas": True}, "redisbeat_wait_replicas"),
        ({"redisbeat_wait_timeout": 0}, "redisbeat_wait_timeout"),
        ({"redisbeat_wait_replicas": 1, "redisbeat_wait_timeout": 10}, "redisbeat_wait_timeout"),
        ({"redisbeat_sentinel_mster": "m"}, "did you mean redisbeat_sentinel_master"),
    ],
)
def test_bad_sentinel_and_wait_settings_are_rejected_naming_the_setting(conf, error):
    base = {"redisbeat_redis_url": "sentinel://:secret@h", "redisbeat_sentinel_master": "m"}
    with pytest.raises(ConfigurationError, match=error) as info:
        Config.from_app(app_with(**{**base, **conf}))
    assert "secret" not in str(info.value)


# -- the store through Sentinel ---------------------------------------------------------------


def test_the_store_api_works_through_a_sentinel_url(group: SentinelGroup, prefix: str):
    store = sentinel_store(group, prefix)
    try:
        via = ",".join(f"{host}:{port}" for host, port in group.sentinel_addresses())
        assert store.describe() == f"sentinel master {MASTER} via {via} db=0 prefix={prefix}"
        store.upsert(Entry("report", "proj.ping", Interval(60)))
        assert store.get("report").schedule == Interval(60)
        master = group.master_client()
        assert master.hexists(store.keys.entries, "report")
        master.close()
        store.run_now("report")
        batch = store.claim("beat-1", 5 * SECOND, 10)
        assert [c.name for c in batch.claims] == ["report"]
        due = batch.claims[0].due_ms
        assert store.state("report").running
        task_id = occurrence_id(prefix, "report", due)
        result = store.finish(
            "beat-1",
            batch.lease_until_ms,
            [Outcome("report", "sent", due, due + 60 * SECOND, task_id)],
        )
        assert result.finished == 1
        state = store.state("report")
        assert state.last_task_id == task_id and state.total_run_count == 1
        # Wake-ups: pub/sub goes to the master too.
        store.subscribe()
        store.run_now("report")
        assert store.wait_for_change(5)
    finally:
        store.close()


def test_wait_replicas_adds_a_wait_to_every_claim_finish_and_write(
    group: SentinelGroup, prefix: str
):
    store = sentinel_store(group, prefix, redisbeat_wait_replicas=1)
    plain = sentinel_store(group, prefix)
    try:
        now = store.now_ms()
        plain.upsert(Entry("e", "proj.ping", Interval(60)))
        plain.run_now("e")
        plain.remove("absent")  # every script used below is known to the server now
        before = wait_calls(group)
        batch = plain.claim("beat-1", 5 * SECOND, 10)
        plain.finish("beat-1", batch.lease_until_ms, [Outcome("e", "release", now)])
        assert wait_calls(group) == before, "no WAIT with wait_replicas=0"
        batch = store.claim("beat-1", 5 * SECOND, 10)
        assert [c.name for c in batch.claims] == ["e"]
        store.finish("beat-1", batch.lease_until_ms, [Outcome("e", "release", now)])
        assert wait_calls(group) == before + 2
        store.upsert(Entry("f", "proj.ping", Interval(60)))
        store.run_now("f")
        store.disable("f")
        store.remove("f")
        assert wait_calls(group) == before + 6
        # A server that does not know the scripts (a replica just promoted) is taught them:
        # the refused EVALSHA and its WAIT, then the script and its WAIT.
        group.master_client().script_flush()
        batch = store.claim("beat-1", 5 * SECOND, 10)
        assert [c.name for c in batch.claims] == ["e"]
        assert wait_calls(group) == before + 8
    finally:
        store.close()
        plain.close()


def test_a_claim_that_a_connected_replica_did_not_acknowledge_is_not_acted_on(
    group: SentinelGroup, prefix: str
):
    # A replica that is connected could be promoted without the claim: the beat must not send
    # it. Only while no replica is connected at all does a beat carry on without one.
    group.restore()
    store = sentinel_store(group, prefix, redisbeat_wait_replicas=1, redisbeat_wait_timeout=0.2)
    plain = sentinel_store(group, prefix)
    replica = group.replicas()[0]
    assert replica.process is not None
    try:
        plain.upsert(Entry("e", "proj.ping", Interval(60)))
        plain.run_now("e")
        replica.process.send_signal(signal.SIGSTOP)  # connected, but acknowledges nothing
        try:
            with pytest.raises(redis.ConnectionError, match="connected but acknowledged no"):
                store.claim("beat-1", 5 * SECOND, 10)
        finally:
            replica.process.send_signal(signal.SIGCONT)
        assert store.claim("beat-1", 5 * SECOND, 10).claims == []  # leased on the master
        group.stop_server(replica)
        plain.run_now("e")
        assert [c.name for c in store.claim("beat-2", 5 * SECOND, 10).claims] == ["e"]
    finally:
        group.restore()
        store.close()
        plain.close()


# -- beats --------------------------------------------------------------------------------------


def start_beat(
    beats_for: Callable[..., Beats],
    broker: RedisServer,
    group: SentinelGroup,
    prefix: str,
    **env: str,
) -> Beats:
    beats = beats_for(
        broker,
        prefix,
        TEST_STORE_URL=group.url(),
        TEST_SENTINEL_MASTER=MASTER,
        TEST_MAX_INTERVAL="5",
        **env,
    )
    beats.start(1)
    return beats


def test_a_beat_warns_once_while_no_replica_acknowledges_and_keeps_sending(
    group: SentinelGroup, broker_server: RedisServer, prefix: str, beats_for: Any
):
    group.restore()  # a master and a replica, whatever ran before
    store = sentinel_store(group, prefix)
    queue = redis.Redis.from_url(broker_server.url(1), decode_responses=True)
    recorder = Recorder(queue)
    recorder.drain()
    # While no replica answers, a round of claim, send and finish waits out two WAITs: keep
    # them short enough that no occurrence is late enough to be coalesced with the next.
    beats = start_beat(
        beats_for, broker_server, group, prefix, TEST_WAIT_REPLICAS="1", TEST_WAIT_TIMEOUT="0.2"
    )
    try:
        wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register")
        start = store.now_ms() + SECOND
        anchors = add_entries(store, 10, 2, start)
        recorder.until(lambda: len(recorder.sent) >= 10, 20, "sends with the replica up")
        replica = group.replicas()[0]
        group.stop_server(replica)
        stopped = store.now_ms()
        recorder.until(
            lambda: sum(s.due_ms > stopped + 3 * SECOND for s in recorder.sent) >= 20,
            30,
            "sends with the replica down",
        )
        log = beats.beats[0].output()
        assert log.count(SHORT_OF_REPLICAS) == 1, log
        group.restore()
        restored = store.now_ms()
        recorder.until(
            lambda: (
                "acknowledge writes again" in beats.beats[0].output()
                and any(s.due_ms > restored + 2 * SECOND for s in recorder.sent)
            ),
            30,
            "the beat to notice the replica is back",
        )
        end = restored
        beats.stop_all()
        recorder.drain()
        counts = check_sent(recorder.sent, occurrences(anchors, 2, start, end), prefix)
        assert not [k for k, n in counts.items() if n > 1]
        assert beats.beats[0].output().count(SHORT_OF_REPLICAS) == 1
    finally:
        store.close()
        queue.close()


def test_a_beat_sends_exactly_once_across_a_sentinel_failover_and_a_killed_master(
    group: SentinelGroup, broker_server: RedisServer, prefix: str, beats_for: Any
):
    group.restore()  # a master and a replica, whatever ran before
    store = sentinel_store(group, prefix)
    queue = redis.Redis.from_url(broker_server.url(1), decode_responses=True)
    recorder = Recorder(queue)
    recorder.drain()
    beats = start_beat(
        beats_for, broker_server, group, prefix, TEST_WAIT_REPLICAS="1", TEST_LEASE="4"
    )
    # Longer than the beat's pauses (Sentinel's promotion plus the beat's backoff), so that
    # no entry misses two occurrences in a row, which catch-up would coalesce into one send.
    period = 8.0
    try:
        wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register")
        start = store.now_ms() + SECOND
        anchors = add_entries(store, 24, period, start)
        recorder.until(lambda: len(recorder.sent) >= 12, 20, "sends before the failover")
        t0 = time.monotonic()
        group.failover()
        switched = time.monotonic() - t0
        sent = len(recorder.sent)
        recorder.until(lambda: len(recorder.sent) > sent + 4, 20, "sends after the failover")
        group.wait_healthy()
        sent = len(recorder.sent)
        recorder.until(lambda: len(recorder.sent) > sent + 4, 20, "sends before the kill")
        t0 = time.monotonic()
        group.kill_master()
        promoted = time.monotonic() - t0
        after_kill = store.now_ms()
        recorder.until(
            # Later than the window's end by more than a lease, in case a claim whose reply
            # the kill cut off has to wait out its lease.
            lambda: any(s.due_ms > after_kill + (period + 6) * SECOND for s in recorder.sent),
            40,
            "sends well after the kill",
        )
        end = after_kill + int(period * SECOND)
        beats.stop_all()
        recorder.drain()
        window = [s for s in recorder.sent if s.due_ms < end]
        counts = check_sent(window, occurrences(anchors, period, start, end), prefix)
        repeats = {k: n for k, n in counts.items() if n > 1}
        output = beats.beats[0].output()
        print(
            f"SENTINEL FAILOVER took {switched:.1f} s, promotion after kill -9 {promoted:.1f} s, "
            f"longest pause between two sends {longest_pause(output):.1f} s, "
            f"outages the beat saw: {re.findall(r'available again after ([0-9.]+ s)', output)}"
        )
        assert not repeats, f"sent more than once: {repeats}"
        assert "unavailable" in output and "available again" in output
    finally:
        store.close()
        queue.close()
