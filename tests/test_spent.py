"""Entries that will never fire again (a one-off, a Clocked entry, one past its end) are kept
for redisbeat_spent_retention_seconds once they fired, then forgotten, when the store API
made them; other sources' entries, and ones scheduled again, are kept."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from test_dispatcher import Recorder, dispatcher, every, make_due

from redisbeat import Entry, ScheduleStore
from redisbeat.schedule.clock import from_ms
from redisbeat.schedule.kinds import Clocked
from redisbeat_testkit.redis_server import RedisServer

RETENTION = 0.3


@pytest.fixture
def short(redis_server: RedisServer, prefix: str) -> Iterator[ScheduleStore]:
    """A store whose spent entries are kept RETENTION seconds."""
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    s = ScheduleStore(c, prefix=prefix, spent_retention=RETENTION)
    yield s
    s.close()


def once(store: ScheduleStore, name: str, **kw: object) -> Entry:
    """A Clocked entry due a second ago (so at the next claim)."""
    at = from_ms(store.now_ms() - 1000)
    return Entry(name, "proj.ping", Clocked(at), **kw)  # type: ignore[arg-type]


def sweep_until_quiet(store: ScheduleStore, client: redis.Redis) -> int:
    """Sweep until the retention has passed for everything spent; how many were forgotten."""
    forgotten = 0
    deadline = time.monotonic() + 10
    while client.zcard(store.keys.spent) and time.monotonic() < deadline:
        forgotten += store.sweep_spent()
        time.sleep(0.05)
    assert client.zcard(store.keys.spent) == 0, "the sweep left spent names behind"
    return forgotten


def test_a_fired_one_off_is_kept_for_the_retention_then_forgotten(short, client):
    short.upsert(once(short, "clocked"))
    short.upsert(every("one-off", 60, one_off=True))
    make_due(client, short, "one-off", 10)
    rec = Recorder()
    dispatcher(short, rec, spent_retention_seconds=RETENTION).tick()
    assert sorted(name for name, _, _ in rec.sent) == ["clocked", "one-off"]
    assert short.sweep_spent() == 0  # kept for the retention: still readable
    assert short.state("clocked").total_run_count == 1 and "one-off" in short
    assert sweep_until_quiet(short, client) == 2
    assert "clocked" not in short and "one-off" not in short and len(short) == 0
    assert short.names("api") == set()
    assert client.hlen(short.keys.state) == 0


def test_other_sources_entries_and_ones_scheduled_again_are_kept(short, client):
    short.upsert_owned([once(short, "from-django", source="django")])
    short.upsert(once(short, "again"))
    short.upsert(every("periodic", 1))
    make_due(client, short, "periodic", 10)
    rec = Recorder()
    d = dispatcher(short, rec, spent_retention_seconds=RETENTION, heartbeat_seconds=60)
    d.tick()
    assert {"from-django", "again", "periodic"} <= {name for name, _, _ in rec.sent}
    short.run_now("again")  # due again: no longer spent
    assert sweep_until_quiet(short, client) == 0
    assert all(name in short for name in ("from-django", "again", "periodic"))
    assert short.state("from-django").total_run_count == 1


def test_an_entry_past_its_end_is_spent_too(short, client):
    now = from_ms(short.now_ms())
    short.upsert(every("ended", 60, end_at=now + timedelta(seconds=30)))
    make_due(client, short, "ended", 10)
    dispatcher(short, Recorder(), spent_retention_seconds=RETENTION).tick()
    assert sweep_until_quiet(short, client) == 1
    assert "ended" not in short


def test_a_beat_sweeps_two_thousand_fired_one_offs_away(short, client):
    short.upsert_many(once(short, f"o{i}") for i in range(2000))
    rec = Recorder()
    d = dispatcher(
        short, rec, spent_retention_seconds=RETENTION, heartbeat_seconds=0.1, batch_size=500
    )
    deadline = time.monotonic() + 30
    while (len(rec.sent) < 2000 or len(short)) and time.monotonic() < deadline:
        d.tick()
        time.sleep(0.02)
    assert len(rec.sent) == 2000 and len({name for name, _, _ in rec.sent}) == 2000
    assert len(short) == 0 and client.hlen(short.keys.state) == 0
    assert client.zcard(short.keys.spent) == 0


def test_garbage_in_the_spent_index_never_stops_the_sends(short, client, caplog):
    client.set(short.keys.spent, "garbage")
    short.upsert(once(short, "clocked"))
    rec = Recorder()
    with caplog.at_level(logging.ERROR, logger="redisbeat"):
        dispatcher(short, rec, spent_retention_seconds=RETENTION).tick()
    assert [name for name, _, _ in rec.sent] == ["clocked"]
    assert short.state("clocked").total_run_count == 1
    assert "could not forget spent entries" in caplog.text and "is not a zset" in caplog.text
