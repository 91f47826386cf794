"""Redis Cluster: the URL, the store, and real beats on a real cluster of redis-server processes
(3 masters, a replica each), through failovers and a slot moving under them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from click.testing import CliRunner

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.cli import main as redisbeat_cli
from redisbeat.config import Config
from redisbeat.errors import ConfigurationError
from redisbeat.store.errors import StoreError, StoreRefused
from redisbeat.urls import ClusterURL
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.occurrences import SECOND, Recorder, add_entries, check_sent, occurrences
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRig]:
    with ClusterRig(replicas_per_master=1, parent=tmp_path_factory.mktemp("cluster")) as rig:
        yield rig


@pytest.fixture(scope="module")
def broker_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The Celery broker of the beat tests: a plain redis-server outside the cluster."""
    server = RedisServer(tmp_path_factory.mktemp("broker")).start()
    yield server
    server.stop()


def cluster_store(url: str, prefix: str) -> ScheduleStore:
    app = Celery("cluster-test", set_as_current=False)
    app.conf.update(redisbeat_redis_url=url, redisbeat_key_prefix=prefix)
    return ScheduleStore.from_app(app)


# -- the URL ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "seeds", "username", "password", "tls"),
    [
        ("redis-cluster://h:7000", (("h", 7000),), None, None, False),
        ("redis-cluster://a:1,b:2, c:3/", (("a", 1), ("b", 2), ("c", 3)), None, None, False),
        ("rediss-cluster://u:p%40ss@a:1,[::1]:2/0", (("a", 1), ("::1", 2)), "u", "p@ss", True),
        ("redis-cluster://:pw@a", (("a", 6379),), None, "pw", False),
    ],
)
def test_a_cluster_url_names_seed_nodes_and_the_login(url, seeds, username, password, tls):
    parsed = ClusterURL.parse(url)
    assert (parsed.seeds, parsed.username, parsed.password, parsed.tls) == (
        seeds,
        username,
        password,
        tls,
    )
    assert Config(redis_url=url).cluster == parsed


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis-cluster://", "no seed node"),
        ("redis-cluster://a:1/2", "database 0 only"),
        ("redis-cluster://a:1?timeout=3", "takes no query"),
        ("redis-cluster://u:secret@a:x", "must be a number"),
    ],
)
def test_a_malformed_cluster_url_stops_startup_naming_the_setting_without_the_password(url, why):
    with pytest.raises(ConfigurationError, match=why) as caught:
        Config(redis_url=url)
    assert "redisbeat_redis_url" in str(caught.value)
    assert "secret" not in str(caught.value)


# -- the store --------------------------------------------------------------------------------


def test_the_store_api_works_on_a_cluster_whichever_node_serves_the_schedule(
    rig: ClusterRig, prefix: str
):
    store = cluster_store(rig.url, prefix)
    try:
        assert "redis cluster" in store.describe()
        store.upsert_many(Entry(f"e{i}", "proj.ping", Interval(60)) for i in range(5))
        assert len(store) == 5 and store.get("e3").task == "proj.ping"
        store.client.zadd(store.keys.schedule, {"e0": store.now_ms() - 10})
        batch = store.claim("beat-1", 5 * SECOND, 10)
        assert [c.name for c in batch.claims] == ["e0"]
        store.run_now("e1")
        assert store.remove("e4") and "e4" not in store
        assert [s.total_run_count for s in store.states(["e0", "e1"])] == [0, 0]
        assert sorted(e.name for e in store) == ["e0", "e1", "e2", "e3"]
    finally:
        store.close()


def test_the_command_line_lists_shows_and_counts_entries_spread_over_the_masters(
    rig: ClusterRig, prefix: str, sharded_stores: Any
):
    store = sharded_stores(rig.url, prefix, 6)
    store.upsert_many(Entry(f"e{i}", "proj.ping", Interval(60 + i)) for i in range(12))
    homes = {rig.node_for_key(shard.keys.schedule) for shard in store.all_shards()}
    assert len(homes) > 1, "the shards spread over the masters"

    def cli(*args: str) -> Any:
        result = CliRunner().invoke(redisbeat_cli, ["--url", rig.url, "--prefix", prefix, *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    listed = cli("list", "--json", "--limit", "0")["entries"]
    assert [row["name"] for row in listed] == [f"e{i}" for i in range(12)]  # soonest first
    assert cli("show", "e5", "--json")["schedule"] == "Every 65 seconds"
    report = CliRunner().invoke(
        redisbeat_cli, ["--url", rig.url, "--prefix", prefix, "status", "--json"]
    )
    assert report.exit_code == 5  # no beat runs here
    status = json.loads(report.stdout.splitlines()[0])
    assert status["shards"] == 6
    assert status["counts"]["entries"] == status["counts"]["scheduled"] == 12


def test_a_redis_url_naming_one_node_of_a_cluster_is_refused_saying_how_to_name_the_cluster(
    rig: ClusterRig, prefix: str
):
    schedule_key = f"{{{prefix}}}:schedule"
    owner = rig.node_for_key(schedule_key)
    other = next(port for port in rig.masters() if port != owner)
    for port in (other, owner):  # one answers MOVED; the other would follow only its slots
        store = cluster_store(f"redis://127.0.0.1:{port}/0", prefix)
        try:
            with pytest.raises(StoreRefused) as caught:
                store.heartbeat("beat-1")
            assert caught.value.trouble.kind == "cluster"
            described = caught.value.trouble.describe(store.describe())
            assert "redisbeat_redis_url to redis-cluster://" in described
        finally:
            store.close()


def test_a_cluster_url_naming_a_plain_server_says_it_is_not_a_cluster(
    redis_server: RedisServer, prefix: str
):
    store = cluster_store(f"redis-cluster://127.0.0.1:{redis_server.port}", prefix)
    with pytest.raises(StoreError) as caught:
        len(store)
    assert caught.value.trouble.kind == "not-cluster"
    assert "use redis://" in caught.value.trouble.describe(store.describe())
    store.close()


# -- real beats -------------------------------------------------------------------------------


def start_beats(beats_for: Any, broker: RedisServer, rig: ClusterRig, prefix: str, n: int) -> Beats:
    beats: Beats = beats_for(
        broker, prefix, TEST_STORE_URL=rig.url, TEST_MAX_INTERVAL="5", TEST_LEASE="3"
    )
    beats.start(n)
    return beats


def run_through(
    rig: ClusterRig,
    broker: RedisServer,
    prefix: str,
    beats_for: Any,
    fault: Any,
    period: float = 6.0,
) -> dict[Any, int]:
    """Two beats send 24 entries due every ``period`` s across ``fault(store)``; every
    occurrence due before the end is sent, each message with its occurrence's id."""
    store = cluster_store(rig.url, prefix)
    queue = redis.Redis.from_url(broker.url(1), decode_responses=True)
    recorder = Recorder(queue)
    recorder.drain()
    beats = start_beats(beats_for, broker, rig, prefix, 2)
    try:
        wait_until(lambda: len(store.beats()) == 2, 30, "both beats to register")
        start = store.now_ms() + SECOND
        anchors = add_entries(store, 24, period, start)
        recorder.until(lambda: len(recorder.sent) >= 24, 30, "a round of sends")
        fault(store)
        after = store.now_ms()
        recorder.until(
            lambda: any(s.due_ms > after + int((period + 4) * SECOND) for s in recorder.sent),
            60,
            "sends well after the fault",
        )
        end = after + int(period * SECOND)
        beats.stop_all()
        recorder.drain()
        window = [s for s in recorder.sent if s.due_ms < end]
        counts = check_sent(window, occurrences(anchors, period, start, end), prefix)
        assert len({s.beat for s in recorder.sent}) == 2, "both beats sent"
        return {k: n for k, n in counts.items() if n > 1}
    finally:
        store.close()
        queue.close()


def test_two_beats_on_a_cluster_send_every_occurrence_once_across_a_failover(
    rig: ClusterRig, broker_server: RedisServer, prefix: str, beats_for: Any
):
    def failover(store: ScheduleStore) -> None:
        rig.failover(rig.node_for_key(store.keys.schedule))

    assert run_through(rig, broker_server, prefix, beats_for, failover) == {}


def test_two_beats_on_a_cluster_lose_nothing_when_the_schedules_master_is_killed(
    rig: ClusterRig, broker_server: RedisServer, prefix: str, beats_for: Any
):
    killed: list[int] = []

    def kill(store: ScheduleStore) -> None:
        port = rig.node_for_key(store.keys.schedule)
        rig.kill_master_and_wait_promotion(port)
        killed.append(port)

    try:
        # A kill -9 may cut off a claim's reply: at least once, repeats with the same id
        # (check_sent asserts every message carries its occurrence's id).
        run_through(rig, broker_server, prefix, beats_for, kill)
    finally:
        for port in killed:
            rig.restart(port)


def test_two_beats_on_a_cluster_send_every_occurrence_once_while_their_slot_moves(
    rig: ClusterRig, broker_server: RedisServer, prefix: str, beats_for: Any
):
    def move(store: ScheduleStore) -> None:
        slot = rig.slot_of(store.keys.schedule)
        owner = rig.node_for_key(store.keys.schedule)
        target = next(port for port in rig.masters() if port != owner)
        rig.migrate_slot(slot, target)
        assert rig.node_for_key(store.keys.schedule) == target

    assert run_through(rig, broker_server, prefix, beats_for, move) == {}


def test_a_change_wakes_beats_sleeping_on_a_cluster(
    rig: ClusterRig, broker_server: RedisServer, prefix: str, beats_for: Any
):
    """The scripts publish on the shard's node; a beat may listen on any other."""
    store = cluster_store(rig.url, prefix)
    queue = redis.Redis.from_url(broker_server.url(1), decode_responses=True)
    queue.delete("celery")
    beats: Beats = beats_for(
        broker_server, prefix, TEST_STORE_URL=rig.url, TEST_MAX_INTERVAL="60", TEST_HEARTBEAT="60"
    )
    try:
        beats.start(2)
        wait_until(lambda: len(store.beats()) == 2, 30, "both beats to register")
        store.upsert(Entry("far", "proj.ping", Interval(3600)))  # first due in an hour
        for _ in range(3):
            wait_until(lambda: not store.state("far").running, 10, "the last run to finish")
            store.run_now("far")
            # Asleep for up to 60 s unless the change wakes one of them.
            assert queue.brpop(["celery"], timeout=10) is not None
        wait_until(lambda: store.state("far").total_run_count == 3, 10, "three runs recorded")
    finally:
        beats.stop_all()
        store.close()
        queue.close()


def test_a_write_while_its_slot_is_half_moved_waits_for_the_move_never_told_to_go_back(
    rig: ClusterRig, prefix: str
):
    """A node importing a slot answers a script whose keys are not all there yet TRYAGAIN
    when asked (ASKING), MOVED back to the owner when not: the store keeps asking, and says
    so as a passing trouble while the slot is between the two."""
    store = cluster_store(rig.url, prefix)
    try:
        store.upsert(Entry("a", "proj.ping", Interval(60)))
        slot = redis.cluster.key_slot(store.keys.schedule.encode())
        owner = rig.node_for_key(store.keys.schedule)
        target = next(port for port in rig.masters() if port != owner)
        rig.begin_migration(slot, target)
        while rig.migrate_keys(slot, target):
            pass  # every key is on the target; the slot is still the owner's
        with pytest.raises(StoreError) as raised:
            store.upsert(Entry("b", "proj.ping", Interval(60)))
        assert not isinstance(raised.value, redis.exceptions.AskError)
        assert isinstance(raised.value, redis.exceptions.TryAgainError)
        assert raised.value.trouble.kind != "cluster"
        rig.end_migration(slot, target)
        store.upsert(Entry("b", "proj.ping", Interval(60)))
        assert sorted(e.name for e in store) == ["a", "b"]
    finally:
        store.close()
