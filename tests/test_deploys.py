"""beat_schedule under real beats: written when it is new, never re-asserted over runtime
changes, the newest standing when old and new beats run side by side during a deploy."""

from __future__ import annotations

import json
import signal
import time

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.beat.deploys import BeatSchedule
from redisbeat.schedule.from_celery import CONFIG_SOURCE, digests, version
from redisbeat.store.records import ConfigMarker
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beat

HOURLY = {"task": "proj.ping", "schedule": 3600}


def heartbeats_after(store: ScheduleStore, moment_ms: int, count: int = 3) -> None:
    """Wait until every beat has sent ``count`` heartbeats (0.5 s apart) after ``moment_ms``."""
    wait_until(
        lambda: (
            store.beats()
            and all(
                int(b.last_seen.timestamp() * 1000) > moment_ms + count * 500 for b in store.beats()
            )
        ),
        20,
        f"{count} heartbeats",
    )


def applied(store: ScheduleStore) -> ConfigMarker:
    """The deployment's beat_schedule record once a beat marked it applied: the beat writes
    the entries first and the mark after, so the entries can be seen before the mark."""
    found: ConfigMarker = wait_until(
        lambda: (marker := store.config_marker()) is not None and marker.applied and marker,
        10,
        "the configuration to be marked applied",
    )
    return found


def one_beat(server, prefix, beats_for, stores, config) -> tuple[ScheduleStore, Beat]:
    """A beat with ``config`` as its beat_schedule (heartbeat 0.5 s), once it is synced."""
    store = stores(server, prefix)
    beats = beats_for(server, prefix, TEST_HEARTBEAT="0.5")
    [beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(config))
    wait_until(lambda: all(name in store for name in config), 30, "the config to sync")
    return store, beat


def test_a_config_entry_disabled_at_runtime_stays_disabled_when_a_paused_beat_comes_back(
    redis_server, prefix, beats_for, stores
):
    store, beat = one_beat(redis_server, prefix, beats_for, stores, {"cfg": HOURLY})
    store.disable("cfg")
    beat.process.send_signal(signal.SIGSTOP)  # longer than its heartbeat's time to live
    # Three heartbeats' time (the time to live) and more without one: it has aged out.
    paused = store.now_ms()
    wait_until(lambda: store.now_ms() > paused + 2500, 10, "the paused beat to age out")
    beat.process.send_signal(signal.SIGCONT)
    heartbeats_after(store, store.now_ms())
    assert store.get("cfg").enabled is False
    assert beat.output().count("beat_schedule synced") == 1  # at its start only


def test_a_beat_restarted_with_the_same_config_writes_nothing_over_runtime_changes(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    config = json.dumps({"cfg": HOURLY, "other": HOURLY})
    beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="0.5")
    beats.start(1, TEST_BEAT_SCHEDULE=config)
    wait_until(lambda: "cfg" in store and "other" in store, 30, "the config to sync")
    beats.stop_all()
    store.disable("cfg")
    store.remove("other")
    [again] = beats.start(1, TEST_BEAT_SCHEDULE=config)
    wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register")
    heartbeats_after(store, store.now_ms())
    assert store.get("cfg").enabled is False and "other" not in store
    assert "beat_schedule synced" not in again.output()


def test_when_redis_loses_its_data_a_running_beat_writes_its_config_again(
    own_redis, prefix, beats_for, stores
):
    store, beat = one_beat(own_redis, prefix, beats_for, stores, {"cfg": HOURLY})
    store.client.flushall()
    wait_until(lambda: "cfg" in store, 10, "the config to come back")
    assert "the beat_schedule record is gone from Redis" in beat.output()


def test_during_a_deploy_the_newest_config_stands_and_the_old_beat_says_so_and_leaves_it(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    old = {"kept": HOURLY, "changed": HOURLY, "old-only": HOURLY}
    new = {"kept": HOURLY, "changed": {**HOURLY, "args": [2]}, "new-only": HOURLY}
    beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="0.5")
    [old_beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(old))
    wait_until(lambda: "old-only" in store, 30, "the old config to sync")
    store.disable("kept")  # a runtime change to an entry neither deploy touches
    [new_beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(new))
    wait_until(lambda: "new-only" in store and "old-only" not in store, 30, "the new config")
    heartbeats_after(store, store.now_ms())
    assert "old-only" not in store and "new-only" in store
    assert store.get("changed").args == (2,)
    assert store.get("kept").enabled is False
    said = new_beat.output()
    assert "this beat's beat_schedule differs from the one in Redis" in said
    assert "it adds new-only; changes changed; removes old-only" in said
    heard = old_beat.output()
    assert "a newer beat_schedule was deployed" in heard
    assert "it adds new-only; changes changed; removes old-only" in heard
    assert heard.count("a newer beat_schedule was deployed") == 1
    time.sleep(0)  # both beats keep running: neither exits on the difference
    assert old_beat.process.poll() is None and new_beat.process.poll() is None


def test_a_rewrite_after_lost_data_cut_short_by_a_redis_error_is_finished_once_redis_answers(
    own_redis, prefix, beats_for, stores
):
    store, beat = one_beat(own_redis, prefix, beats_for, stores, {"cfg": HOURLY})
    owned = f"{{{prefix}}}:source:config"
    with store.client.pipeline(transaction=True) as pipe:  # lost data, and a key in the way
        pipe.flushall().set(owned, "not a set").execute()
    wait_until(lambda: "wrong type" in beat.output(), 10, "the rewrite to fail")
    store.client.delete(owned)
    wait_until(lambda: "cfg" in store, 10, "the config to come back")
    assert applied(store).applied  # the rewrite was finished, not left halfway


def test_a_record_no_beat_could_have_written_is_replaced_by_a_starting_beats_config(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.client.hset(f"{{{prefix}}}:config", "version", "scribbled")
    one_beat(redis_server, prefix, beats_for, stores, {"cfg": HOURLY})
    assert "cfg" in applied(store).entries


def config(**args: list[int]) -> list[Entry]:
    return [
        Entry(n, "proj.ping", Interval(3600), args=a, source=CONFIG_SOURCE) for n, a in args.items()
    ]


def test_a_config_deployed_over_one_whose_writer_stopped_halfway_rewrites_what_it_may_have_left(
    redis_server, prefix, stores
):
    store = stores(redis_server, prefix)
    BeatSchedule(store, "first", config(a=[1], b=[1], gone=[1])).heartbeat(None)
    # The next deploy's beat records its configuration and stops before writing any entry.
    halfway = digests(config(a=[2], b=[1]))
    before = store.config_marker()
    assert before is not None
    store.claim_config(before.version, version(halfway), "stopped", halfway, before.entries)
    third = BeatSchedule(store, "third", config(a=[2], b=[1], c=[1]))
    third.heartbeat(version(halfway))
    assert store.get("a").args == (2,)  # the stopped beat's change, never written by it
    assert "gone" not in store and "c" in store
    marker = store.config_marker()
    assert marker is not None and marker.applied and marker.version == third.version


def test_when_redis_loses_its_data_during_a_deploy_the_new_config_is_written_not_the_old(
    own_redis, prefix, beats_for, stores
):
    store = stores(own_redis, prefix)
    old = {"kept": HOURLY, "old-only": HOURLY}
    new = {"kept": HOURLY, "new-only": HOURLY}
    beats = beats_for(own_redis, prefix)
    # The old beat hears of the loss first: its heartbeat is the more frequent.
    [old_beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(old), TEST_HEARTBEAT="0.3")
    wait_until(lambda: "old-only" in store, 30, "the old config to sync")
    [new_beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(new), TEST_HEARTBEAT="0.6")
    wait_until(lambda: "a newer beat_schedule was deployed" in old_beat.output(), 30, "deploy")

    def new_beat_seen() -> int:
        [seen] = [b.last_seen for b in store.beats() if b.pid == new_beat.process.pid]
        return int(seen.timestamp() * 1000)

    before = new_beat_seen()
    wait_until(lambda: new_beat_seen() > before, 10, "a heartbeat of the new beat")
    store.client.flushall()  # just after it: the old beat hears first
    wait_until(lambda: "new-only" in store, 10, "the new config to come back")
    heartbeats_after(store, store.now_ms())
    assert "old-only" not in store and "kept" in store
    assert old_beat.output().count("a newer beat_schedule was deployed") == 1
