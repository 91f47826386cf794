"""The stored format's version: recorded by the first process to touch a deployment, and one
newer than this release reads refused by every kind of process before it changes anything.
(Beats of an earlier release running with this one: test_upgrade.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from test_dispatcher import Recorder, dispatcher

from redisbeat import Entry, Interval, ScheduleStore, __version__
from redisbeat.cli import main
from redisbeat.store.errors import StoreIncompatible
from redisbeat.store.formats import FORMAT, check_format, stored_format
from redisbeat.store.reshard import Reshard
from redisbeat_testkit.redis_server import RedisServer

NEWER = str(FORMAT + 1)


def every(name: str) -> Entry:
    return Entry(name, "proj.ping", Interval(60))


def snapshot(client: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key of the deployment, as DUMP serializes it, with its time to live."""
    keys = sorted(client.scan_iter(match=f"{{{prefix}*"))
    return {key: (client.dump(key), client.pttl(key)) for key in keys}


def one_line(recorded: str, store: ScheduleStore) -> str:
    return (
        f"the store at {store.connection.describe()} (prefix {store.keys.prefix!r}) holds "
        f"format {recorded}; this redisbeat {__version__} understands up to format {FORMAT}: "
        "upgrade redisbeat on this host, see docs/operations.md#upgrades"
    )


def newer_deployment(store: ScheduleStore, client: redis.Redis) -> dict[str, Any]:
    """A deployment with an entry, a delayed task and a beat, then marked as a newer
    release's; its snapshot."""
    store.upsert(every("report"))
    store.delay("proj.ping", key="later", countdown=3600)
    store.heartbeat("beat-of-a-newer-release")
    client.hset(store.keys.layout, "format", NEWER)
    return snapshot(client, store.keys.prefix)


def test_a_new_deployment_records_the_format_this_release_writes(
    store: ScheduleStore, client: redis.Redis
) -> None:
    assert stored_format(store) is None
    store.upsert(every("report"))
    assert client.hget(store.keys.layout, "format") == str(FORMAT) == "1"
    assert stored_format(store) == FORMAT


def test_a_beat_records_the_format_at_its_first_heartbeat(
    store: ScheduleStore, client: redis.Redis
) -> None:
    store.heartbeat("beat-1")
    assert client.hget(store.keys.layout, "format") == str(FORMAT)


def test_data_of_a_release_before_the_format_was_recorded_reads_as_it_stands_and_is_stamped(
    redis_server: RedisServer, prefix: str, client: redis.Redis
) -> None:
    writer = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    writer.upsert(every("report"))
    writer.delay("proj.ping", key="later", countdown=3600)
    writer.close()
    client.hdel(f"{{{prefix}}}:layout", "format")  # as a release before formats left it
    before = snapshot(client, prefix)
    reader = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    try:
        assert reader.get("report").task == "proj.ping"
        pending = reader.get_delayed("later")
        assert pending is not None and pending.state == "pending"
        assert stored_format(reader) == FORMAT
        # Its whole migration is the recorded number: every other key is as it was.
        after = snapshot(client, prefix)
        layout = f"{{{prefix}}}:layout"
        assert {k: v for k, v in after.items() if k != layout} == {
            k: v for k, v in before.items() if k != layout
        }
        assert client.hgetall(f"{{{prefix}}}:layout") == {"shards": "1", "format": "1"}
    finally:
        reader.close()


def test_a_newer_format_is_refused_in_one_line_by_every_call_and_nothing_changes(
    redis_server: RedisServer, prefix: str, client: redis.Redis
) -> None:
    owner = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    before = newer_deployment(owner, client)
    owner.close()
    store = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    try:
        calls: dict[str, Callable[[], object]] = {
            "upsert": lambda: store.upsert(every("other")),
            "get": lambda: store.get("report"),
            "delay": lambda: store.delay("proj.ping", key="k2", countdown=60),
            "heartbeat": lambda: store.heartbeat("beat-2"),
            "check_format": lambda: check_format(store),
            "reshard": lambda: Reshard(store, say=lambda _: None).run(2),
        }
        for name, call in calls.items():
            with pytest.raises(StoreIncompatible) as refused:
                call()
            assert str(refused.value) == one_line(NEWER, store), name
            assert refused.value.trouble.kind == "incompatible"
            store.forget_layout()  # each call meets the record afresh
        assert snapshot(client, prefix) == before
    finally:
        store.close()


def test_a_running_beat_meets_a_newer_format_at_its_next_heartbeat_and_stops(
    store: ScheduleStore, client: redis.Redis
) -> None:
    sent = Recorder()
    beat = dispatcher(store, sent)
    store.upsert(every("report"))
    beat.tick()  # registered, and working
    assert client.zscore(store.keys.beats, beat.beat_id) is not None
    client.hset(store.keys.layout, "format", NEWER)
    before = snapshot(client, store.keys.prefix)
    beat.heartbeats.next_at = 0.0  # its heartbeat is due
    with pytest.raises(StoreIncompatible):
        beat.tick()  # not a backoff and a retry: retrying cannot mend it
    assert snapshot(client, store.keys.prefix) == before


def test_a_format_recorded_as_something_else_than_a_number_is_refused(
    store: ScheduleStore, client: redis.Redis
) -> None:
    client.hset(store.keys.layout, "format", "2b")
    with pytest.raises(StoreIncompatible, match=r"holds format '2b'; this redisbeat"):
        store.upsert(every("report"))
    assert not client.exists(store.keys.entries)


def test_the_command_line_refuses_a_newer_format_in_one_line_with_its_exit_code(
    redis_server: RedisServer, prefix: str, client: redis.Redis
) -> None:
    owner = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    before = newer_deployment(owner, client)
    line = one_line(NEWER, owner)
    owner.close()
    for command in (["list"], ["beats"], ["add", "other", "proj.ping", "--every", "1m"]):
        result = CliRunner().invoke(
            main, ["--url", redis_server.url(), "--prefix", prefix, *command]
        )
        assert result.exit_code == StoreIncompatible.exit_code != 0, result.output
        assert result.stderr.strip() == f"Error: {line}", command
    assert snapshot(client, prefix) == before
