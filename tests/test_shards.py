"""A schedule split into shards: each shard one hash tag, every call on the right one, beats
walking every shard, on one Redis and on a Redis Cluster where shards spread over masters."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from celery import Celery

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.config import Config
from redisbeat.errors import ConfigurationError
from redisbeat.store.beats import MIN_SHARE
from redisbeat.store.keys import DELAYED_MARK, Keys, shard_of
from redisbeat.store.records import Outcome
from redisbeat.store.scripts import CLAIM, FINISH
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.occurrences import SECOND, Recorder, add_entries, check_sent, occurrences
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer


def sharded(url: str, prefix: str, shards: int) -> ScheduleStore:
    app = Celery("shards-test", set_as_current=False)
    app.conf.update(redisbeat_redis_url=url, redisbeat_key_prefix=prefix, redisbeat_shards=shards)
    return ScheduleStore.from_app(app)


def every(name: str, seconds: float = 60, **kw: Any) -> Entry:
    return Entry(name, "proj.ping", Interval(seconds), **kw)


# -- where an entry lives -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shards", "shard"),
    [("report", 4, 0), ("e0", 4, 1), ("e1", 4, 3), ("e1", 16, 7), ("日報", 16, 3), ("x", 1, 0)],
)
def test_an_entry_lives_in_the_same_shard_in_every_process_and_release(name, shards, shard):
    # A changed hash would leave every entry of a sharded deployment where no one looks.
    assert shard_of(name, shards) == shard


def test_each_shard_has_a_hash_tag_of_its_own_and_the_deployment_keys_stay_on_shard_0():
    keys = Keys("p")
    assert keys.schedule == "{p}:schedule" and keys.of_shard(3).schedule == "{p:3}:schedule"
    assert keys.of_shard(3).source("api") == "{p:3}:source:api"
    for name in ("beats", "config", "events", "layout"):
        assert getattr(keys.of_shard(3), name) == getattr(keys, name) == f"{{p}}:{name}"


@pytest.mark.parametrize("shards", [0, -1, 1025, True, "4"])
def test_a_shard_count_out_of_range_stops_startup_naming_the_setting(shards):
    with pytest.raises(ConfigurationError, match="redisbeat_shards"):
        Config(redis_url="redis://x", shards=shards)


# -- the API over shards ------------------------------------------------------------------------


def test_every_api_call_finds_an_entry_in_its_shard(
    redis_server: RedisServer, prefix: str, sharded_stores: Any
):
    store = sharded_stores(redis_server.url(), prefix, 4)
    client = store.client
    store.upsert_many(every(f"e{i}", source="config") for i in range(40))
    sizes = [client.hlen(s.keys.entries) for s in store.shard_scripts]
    assert sum(sizes) == 40 and all(sizes), sizes
    assert len(store) == 40 and {e.name for e in store} == {f"e{i}" for i in range(40)}
    assert store.names("config") == {f"e{i}" for i in range(40)}
    names = [f"e{i}" for i in (7, 1, 30, 2)]
    assert [s.name for s in store.states(names)] == names
    assert all(s.next_run_at is not None for s in store.states(names))
    assert "e7" in store and store.get("e7").name == "e7"
    store.run_now("e7")
    assert store.disable("e1") and not store.get("e1").enabled
    assert store.remove("e2") and "e2" not in store
    report = store.sync_source("config", [every(f"e{i}", source="config") for i in range(30)])
    assert (report.added, report.updated) == (["e2"], ["e1"])
    assert report.removed == [f"e{i}" for i in range(30, 40)] and report.unchanged == 28
    shard = store.shard("e5")
    store.quarantine("e5", client.hget(shard.keys.entries, "e5"), "cannot load it", "b")
    assert list(store.quarantined()) == ["e5"]


def test_a_store_with_another_shard_count_follows_the_deployments_and_says_so(
    redis_server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
):
    first = sharded(redis_server.url(), prefix, 4)
    try:
        first.upsert_many(every(f"e{i}") for i in range(8))
        for shards in (1, 2):
            other = sharded(redis_server.url(), prefix, shards)
            try:
                assert sorted(e.name for e in other) == sorted(e.name for e in first)
                other.upsert(every(f"new{shards}"))
                assert first.get(f"new{shards}") == other.get(f"new{shards}")
                assert other.layout.shards == 4
            finally:
                other.close()
        assert "redisbeat_shards is 1, but deployment" in caplog.text
        assert "set redisbeat_shards = 4" in caplog.text
    finally:
        first.close()


def test_entries_written_before_shards_existed_keep_the_deployment_at_one_shard(
    redis_server: RedisServer, prefix: str
):
    old = sharded(redis_server.url(), prefix, 1)
    old.upsert(every("report"))
    old.client.delete(old.keys.layout)  # as a deployment from before the record existed
    old.close()
    new = sharded(redis_server.url(), prefix, 4)
    try:
        assert len(new) == 1 and new.layout.shards == 1
        assert new.get("report").name == "report"
    finally:
        new.close()


def test_the_heartbeat_finds_a_score_past_any_valid_time_in_every_shard(
    redis_server: RedisServer, prefix: str, sharded_stores: Any
):
    store = sharded_stores(redis_server.url(), prefix, 4)
    store.upsert_many(every(f"e{i}") for i in range(8))
    broken = next(f"e{i}" for i in range(8) if shard_of(f"e{i}", 4) != 0)
    store.client.zadd(store.shard(broken).keys.schedule, {broken: float("inf")})
    beat = store.heartbeat("beat-1")
    assert [name for name, _ in beat.beyond] == [broken]
    assert store.repair(broken, beat.beyond[0][1], "beat-1").startswith("rescheduled")
    assert store.state(broken).next_run_at is not None


def test_a_beat_claims_from_every_shard_and_a_change_makes_it_look_at_all_again(
    redis_server: RedisServer, prefix: str, sharded_stores: Any
):
    store = sharded_stores(redis_server.url(), prefix, 4)
    store.upsert_many(every(f"e{i}", 3600) for i in range(12))
    now = store.now_ms()
    for i in range(12):
        store.client.zadd(store.shard(f"e{i}").keys.schedule, {f"e{i}": now - 10})
    claimed: list[str] = []
    for _ in range(4):  # each shard once, the soonest first
        batch = store.claim("beat-1", 5 * SECOND, 100)
        claimed += [c.name for c in batch.claims]
    assert sorted(claimed) == sorted(f"e{i}" for i in range(12))
    assert batch.next_due_ms is not None and batch.next_due_ms > now  # nothing due now


# -- real beats ---------------------------------------------------------------------------------


def run_beats(beats_for: Any, broker: RedisServer, url: str, prefix: str, shards: int) -> None:
    """Two beats send 24 entries due every 2 s from ``shards`` shards: every occurrence once,
    each with its occurrence's id, and both beats take part."""
    store = sharded(url, prefix, shards)
    queue = redis.Redis.from_url(broker.url(1), decode_responses=True)
    recorder = Recorder(queue)
    recorder.drain()
    beats: Beats = beats_for(broker, prefix, TEST_STORE_URL=url, TEST_SHARDS=str(shards))
    beats.start(2)
    try:
        wait_until(lambda: len(store.beats()) == 2, 30, "both beats to register")
        start = store.now_ms() + SECOND
        anchors = add_entries(store, 24, 2.0, start)
        end = start + 6 * SECOND
        recorder.until(
            lambda: sum(1 for s in recorder.sent if s.due_ms < end) >= 3 * 24, 30, "3 rounds"
        )
        beats.stop_all()
        recorder.drain()
        window = [s for s in recorder.sent if s.due_ms < end]
        counts = check_sent(window, occurrences(anchors, 2.0, start, end), prefix)
        assert not {k: n for k, n in counts.items() if n > 1}
        assert len({s.beat for s in recorder.sent}) == 2, "both beats sent"
    finally:
        store.close()
        queue.close()


def test_two_beats_send_every_occurrence_of_a_sharded_schedule_once(
    redis_server: RedisServer, prefix: str, beats_for: Any
):
    run_beats(beats_for, redis_server, redis_server.url(), prefix, 4)


def test_on_a_cluster_shards_spread_over_masters_and_two_beats_send_each_occurrence_once(
    rig: ClusterRig, redis_server: RedisServer, prefix: str, beats_for: Any, sharded_stores: Any
):
    store = sharded_stores(rig.url, prefix, 6)
    masters = {rig.node_for_key(s.keys.schedule) for s in store.shard_scripts}
    assert len(masters) >= 2, "6 hash tags on one master of 3"
    run_beats(beats_for, redis_server, rig.url, prefix, 6)


def test_one_claim_takes_what_falls_due_soon_on_every_shard_in_one_round_trip(
    redis_server: RedisServer, prefix: str, sharded_stores: Any, monkeypatch: pytest.MonkeyPatch
):
    """Claims on different shards proceed together: no shard's due entries wait behind a
    batch held ahead on another."""
    store = sharded_stores(redis_server.url(), prefix, 3)
    names = [f"e{i}" for i in range(12)]
    store.upsert_many(every(name) for name in names)
    start = store.now_ms() + 300
    dues = {name: start + 10 * i for i, name in enumerate(names)}
    dues["e11"] = start + 60_000  # beyond the window: stays
    for name, due in dues.items():
        store.client.zadd(store.shard(name).keys.schedule, {name: due})
    assert len({store.shard(name).keys.shard for name in names}) == 3
    for script in (CLAIM, FINISH):  # loaded, as on a server a beat has used
        store.client.script_load(script.source)
    trips: list[int] = []
    sent = redis.connection.Connection.send_packed_command
    monkeypatch.setattr(
        redis.connection.Connection,
        "send_packed_command",
        lambda self, *a, **kw: (trips.append(1), sent(self, *a, **kw))[1],
    )
    batch = store.claim("beat-1", 5 * SECOND, 100, ahead_ms=1000)
    assert len(trips) == 1
    assert [c.name for c in batch.claims] == names[:11]  # every shard's, in due order
    assert [c.due_ms for c in batch.claims] == sorted(dues[n] for n in names[:11])
    # What is left on each shard is due when its leases end.
    assert batch.next_due_ms == batch.lease_until_ms
    outcomes = [
        Outcome(c.name, "sent", c.due_ms, c.due_ms + 60_000, f"t-{c.name}") for c in batch.claims
    ]
    trips.clear()
    result = store.finish("beat-1", batch.lease_until_ms, outcomes)
    assert len(trips) == 1 and result.finished == 11
    for name in names[:11]:
        assert store.client.zscore(store.shard(name).keys.schedule, name) == dues[name] + 60_000
        assert not store.client.hexists(store.shard(name).keys.inflight, name)


def test_a_beat_behind_on_many_shards_claims_fuller_batches_from_the_soonest_due_first(
    redis_server: RedisServer, prefix: str, sharded_stores: Any
):
    """Each shard's claim costs Redis a fixed part: a batch shared among every shard behind
    would be a few claims each. After a full claim the next asks at most batch / MIN_SHARE
    shards, those due soonest; every occurrence is claimed once, each shard's in due order."""
    store = sharded_stores(redis_server.url(), prefix, 12)
    names = [f"e{i}" for i in range(12 * 4 * MIN_SHARE)]  # several full claims a shard
    store.upsert_many(every(name) for name in names)
    now = store.now_ms()
    remaining: dict[int, list[str]] = {}
    for name in names:
        remaining.setdefault(store.shard(name).keys.shard, []).append(name)
    assert len(remaining) == 12
    # Every entry overdue, each shard's an hour later than the one before.
    dues = {}
    pipe = store.client.pipeline(transaction=False)
    for rank, shard in enumerate(sorted(remaining)):
        for i, name in enumerate(remaining[shard]):
            dues[name] = now - 3_600_000 * (12 - rank) + i
            pipe.zadd(store.shard(name).keys.schedule, {name: dues[name]})
    pipe.execute()
    batch_size, full, narrowed = 4 * MIN_SHARE, False, 0
    for _ in range(100):
        if not any(remaining.values()):
            break
        heads = sorted((dues[left[0]], shard) for shard, left in remaining.items() if left)
        batch = store.claim("beat-1", 60 * SECOND, batch_size)
        taken: dict[int, list[str]] = {}
        for claim in batch.claims:
            taken.setdefault(store.shard(claim.name).keys.shard, []).append(claim.name)
        if full:
            soonest = {shard for _, shard in heads[: batch_size // MIN_SHARE]}
            assert set(taken) <= soonest, f"claimed from {set(taken)}, due soonest {soonest}"
            narrowed += 1
        for shard, claimed in taken.items():
            assert claimed == remaining[shard][: len(claimed)]  # once each, in due order
            del remaining[shard][: len(claimed)]
        full = len(batch.claims) >= batch_size
    assert not any(remaining.values()), "the claims stopped taking what is due"
    assert narrowed >= 5


def test_a_busy_beat_claims_from_the_soonest_shard_of_each_lane(
    redis_server: RedisServer, prefix: str, sharded_stores: Any
):
    """After a full claim a beat asks, in each lane, the shards due soonest (one per
    MIN_SHARE of the batch): periodic entries overdue by an hour do not hold back delayed
    tasks due now, and each shard asked is asked for a whole share."""
    store = sharded_stores(redis_server.url(), prefix, 12)
    names = [f"e{i}" for i in range(12 * 4 * MIN_SHARE)]
    store.upsert_many(every(name) for name in names)
    past = store.now_ms() - 3_600_000
    pipe = store.client.pipeline(transaction=False)
    for i, name in enumerate(names):
        pipe.zadd(store.shard(name).keys.schedule, {name: past + i})
    pipe.execute()
    keys = [f"d{i}" for i in range(12 * MIN_SHARE)]
    for key in keys:
        store.delay("proj.t", key=key, countdown=0)
    left = {DELAYED_MARK + key for key in keys}
    full, busy_rounds = False, 0
    for _ in range(100):  # each claim takes some delayed tasks: far fewer rounds than this
        if not left:
            break
        batch = store.claim("beat-1", 60 * SECOND, MIN_SHARE)
        delayed = {c.name for c in batch.claims if c.name.startswith(DELAYED_MARK)}
        periodic = [c.name for c in batch.claims if not c.name.startswith(DELAYED_MARK)]
        if full:
            busy_rounds += 1
            assert delayed, "a busy claim left the delayed lane out"
            assert len({shard_of(n[len(DELAYED_MARK) :], 12) for n in delayed}) == 1
            assert len({store.shard(n).keys.shard for n in periodic}) == 1
        assert periodic, "the periodic backlog was left out"
        left -= delayed
        full = len(batch.claims) >= MIN_SHARE
    assert not left, f"{len(left)} delayed tasks were never claimed"
    assert busy_rounds >= 5
