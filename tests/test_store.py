"""The schedule API: writing, reading, ownership, state and bad input, against real Redis."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
import redis

from redisbeat import (
    Clocked,
    ConfigurationError,
    CorruptEntry,
    Cron,
    Crontab,
    Entry,
    EntryNotFound,
    Interval,
    InvalidEntry,
    InvalidSchedule,
    OwnershipError,
    ScheduleStore,
)
from redisbeat.store.scripts import Upsert

UTC = timezone.utc


def entry(name: str = "e", **kw: object) -> Entry:
    return Entry(
        name=name,
        task=kw.pop("task", "proj.ping"),  # type: ignore[arg-type]
        schedule=kw.pop("schedule", timedelta(seconds=60)),
        **kw,
    )  # type: ignore[arg-type]


def score(client: redis.Redis, store: ScheduleStore, name: str) -> float | None:
    return client.zscore(store.keys.schedule, name)


def test_an_upserted_entry_reads_back_equal_and_is_scheduled_one_interval_ahead(store, client):
    before = store.now_ms()
    e = entry(args=[1, "x"], kwargs={"k": [1, 2]}, options={"queue": "q"}, description="d")
    assert store.upsert(e) is True
    assert store.get("e") == e
    due = score(client, store, "e")
    assert due is not None and before + 60_000 <= due <= store.now_ms() + 60_000
    assert len(store) == 1 and "e" in store and [x.name for x in store] == ["e"]


def test_writing_the_same_entry_again_changes_nothing(store, client):
    store.upsert(entry())
    due = score(client, store, "e")
    assert store.upsert(entry()) is False
    assert score(client, store, "e") == due


def test_an_edit_that_keeps_the_timing_keeps_the_next_due_time(store, client):
    store.upsert(entry())
    due = score(client, store, "e")
    assert store.upsert(entry(args=[42])) is True
    assert score(client, store, "e") == due
    assert store.get("e").args == (42,)


def test_an_edit_of_the_schedule_reschedules(store, client):
    store.upsert(entry())
    store.upsert(entry(schedule=timedelta(hours=5)))
    assert score(client, store, "e") > store.now_ms() + 4 * 3600_000


def test_an_edit_made_while_an_occurrence_is_claimed_starts_after_that_occurrence(store, client):
    # Every 2 s, then every 1 s, both on the epoch's grid: the occurrence claimed ahead is on
    # the new grid too, and its beat sends it; the new timing must not make it due again.
    store.upsert(entry(schedule=Interval(2, relative=True)))
    (claim,) = store.claim("beat", 30_000, 10, ahead_ms=2_500).claims
    assert claim.due_ms > store.now_ms()
    store.upsert(entry(schedule=Interval(1, relative=True)))
    assert score(client, store, "e") == claim.due_ms + 1_000
    store.upsert(entry(schedule=Interval(1, relative=True), args=[1]))  # the timing kept
    assert score(client, store, "e") == claim.due_ms + 1_000


def test_a_change_of_timing_is_refused_when_the_score_moved_since_it_was_read(store, client):
    # A beat claims (or finishes) between an editor's read and its write: the due time the
    # editor worked out did not know that claim, so the script has it read again.
    store.upsert(entry())
    read = score(client, store, "e")
    shard = store.shard_scripts[0]
    stored = client.hget(store.keys.entries, "e")
    new = entry(schedule=timedelta(seconds=5)).dumps()
    change = Upsert("e", stored, new, 1, False, "api", "api")
    layout = store.layout.spelled
    client.zadd(store.keys.schedule, {"e": read + 1})
    assert shard.upsert([replace(change, score=repr(read))], layout) == [-1]
    assert shard.upsert([replace(change, score=repr(read + 1))], layout) == [1]
    assert score(client, store, "e") == 1


def test_start_at_is_the_first_occurrence_and_anchors_an_interval(store, client):
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    store.upsert(entry(start_at=start))
    assert score(client, store, "e") == start.timestamp() * 1000
    past = start - timedelta(hours=3, seconds=30)
    store.upsert(entry("f", start_at=past))
    due = score(client, store, "f")
    assert (due - past.timestamp() * 1000) % 60_000 == 0 and due > store.now_ms()


def test_a_crontab_entry_takes_the_stores_time_zone_when_it_has_none(redis_server, prefix):
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    s = ScheduleStore(c, prefix=prefix, timezone="Asia/Tokyo")
    s.upsert(entry(schedule=Crontab(minute="0", hour="9")))
    stored = s.get("e").schedule
    assert isinstance(stored, Crontab) and stored.tz == "Asia/Tokyo"
    due = datetime.fromtimestamp(c.zscore(s.keys.schedule, "e") / 1000, UTC)
    assert due.hour == 0 and due.minute == 0  # 09:00 in Tokyo
    s.close()


def test_a_wall_clock_entry_takes_the_stores_dst_policies_where_it_has_none(redis_server, prefix):
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    s = ScheduleStore(c, prefix=prefix, dst_gap="skip", dst_fold="twice")
    s.upsert_many([entry("a", schedule=Cron("0 9 * * *")), entry("b", schedule=Interval(60))])
    s.upsert(entry("c", schedule=Crontab("0", "9", dst_gap="shift")))
    assert s.get("a").schedule == Cron("0 9 * * *", tz="UTC", dst_gap="skip", dst_fold="twice")
    assert s.get("b").schedule == Interval(60)
    assert s.get("c").schedule == Crontab("0", "9", tz="UTC", dst_gap="shift", dst_fold="twice")
    with pytest.raises(ConfigurationError, match="dst_gap must be one of"):
        ScheduleStore(c, prefix=prefix, dst_gap="never")
    s.close()


def test_disable_takes_an_entry_off_the_schedule_and_enable_puts_it_back(store, client):
    store.upsert(entry())
    assert store.disable("e") is True
    assert score(client, store, "e") is None and store.get("e").enabled is False
    assert store.disable("e") is False
    assert store.enable("e") is True
    assert score(client, store, "e") is not None


def test_run_now_makes_an_entry_due_by_the_redis_clock(store, client):
    store.upsert(entry())
    store.run_now("e")
    assert score(client, store, "e") <= store.now_ms()
    with pytest.raises(EntryNotFound):
        store.run_now("missing")


def test_remove_deletes_the_entry_and_everything_about_it(store, client):
    store.upsert(entry())
    assert store.remove("e") is True
    assert store.remove("e") is False
    assert "e" not in store and score(client, store, "e") is None
    assert store.names("api") == set()
    with pytest.raises(EntryNotFound):
        store.get("e")


def test_remove_with_a_source_leaves_entries_of_other_sources(store):
    store.upsert(entry(source="config"))
    assert store.remove("e", source="django") is False
    assert store.get("e").source == "config"
    assert store.remove("e", source="config") is True
    assert "e" not in store


def test_upsert_owned_reports_each_name_and_skips_foreign_ones(store):
    store.upsert(entry(name="theirs", source="config"))
    store.upsert(entry(name="same", source="django"))
    result = store.upsert_owned(
        [
            entry(name="theirs", source="django"),
            entry(name="same", source="django"),
            entry(name="new", source="django"),
        ]
    )
    assert result == {"theirs": "foreign", "same": "unchanged", "new": "added"}
    assert store.upsert_owned([entry(name="new", source="django", enabled=False)]) == {
        "new": "updated"
    }
    assert store.get("theirs").source == "config"


def test_a_clocked_entry_in_the_past_is_due_at_once(store, client):
    at = datetime.now(UTC) - timedelta(minutes=5)
    store.upsert(entry(schedule=Clocked(at)))
    assert score(client, store, "e") == int(at.timestamp() * 1000)


def test_an_entry_owned_by_another_source_is_not_overwritten_without_force(store):
    store.upsert(entry(source="config"))
    with pytest.raises(OwnershipError, match="owned by source 'config'"):
        store.upsert(entry(args=[1]))
    assert store.upsert(entry(args=[1]), force=True) is True
    assert store.get("e").source == "api"
    assert store.names("config") == set() and store.names("api") == {"e"}


def test_sync_source_adds_updates_removes_and_leaves_other_sources_alone(store):
    store.upsert(entry("mine-old", source="config"))
    store.upsert(entry("mine-kept", source="config"))
    store.upsert(entry("theirs", source="django"))
    report = store.sync_source(
        "config",
        [
            entry("mine-kept", source="config", args=[2]),
            entry("mine-new", source="config"),
            entry("theirs", source="config"),
        ],
    )
    assert report.added == ["mine-new"] and report.updated == ["mine-kept"]
    assert report.removed == ["mine-old"] and report.foreign == ["theirs"]
    assert store.get("theirs").source == "django"
    assert store.names("config") == {"mine-kept", "mine-new"}
    again = store.sync_source("config", [entry("mine-kept", source="config", args=[2])])
    assert again.unchanged == 1 and again.removed == ["mine-new"]


def test_upsert_many_loads_a_hundred_thousand_entries(store):
    entries = [entry(f"bulk-{i}", schedule=timedelta(seconds=10 + i % 50)) for i in range(100_000)]
    assert store.upsert_many(entries) == 100_000
    assert len(store) == 100_000
    assert store.upsert_many(entries[:1000]) == 0


def test_state_reports_next_run_and_is_empty_before_any_run(store):
    store.upsert(entry())
    state = store.state("e")
    assert state.next_run_at is not None and state.total_run_count == 0
    assert state.last_run_at is None and state.running is False
    with pytest.raises(EntryNotFound):
        store.state("missing")


def test_states_of_many_entries_come_back_in_order(store):
    store.upsert_many([entry("a"), entry("b", enabled=False)])
    a, b, c = store.states(["a", "b", "c"])
    assert (a.name, b.name, c.name) == ("a", "b", "c")
    assert a.next_run_at is not None and b.next_run_at is None and c.next_run_at is None


BAD = [
    (dict(name=""), "name"),
    (dict(name="x" * 201), "name"),
    (dict(name="tab\there"), "name"),
    (dict(task=""), "task"),
    (dict(schedule="every day"), "schedule"),
    (dict(args="not a list"), "args"),
    (dict(args=[object()]), "args"),
    (dict(kwargs={"when": datetime.now()}), "kwargs"),
    (dict(kwargs={1: "x"}), "kwargs"),
    (dict(options={"task_id": "mine"}), "options"),
    (dict(catch_up="sometimes"), "catch_up"),
    (dict(grace=-1), "grace"),
    (dict(start_at=datetime(2030, 1, 1)), "start_at"),
    (dict(enabled="yes"), "enabled"),
    (dict(max_runs=0), "max_runs"),
    (dict(max_runs=True), "max_runs"),
]


@pytest.mark.parametrize(("fields", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_input_is_rejected_naming_the_entry_and_field_before_anything_is_written(
    store, fields, field
):
    kw = {"name": "bad", **fields}
    name = kw.pop("name")
    with pytest.raises(InvalidEntry) as info:
        entry(name, **kw)
    assert info.value.field.startswith(field)
    assert f"field {info.value.field!r}" in str(info.value)
    assert len(store) == 0


def test_max_runs_is_stored_only_when_set_so_older_definitions_read_back_alike(store, client):
    plain = entry("plain")
    assert "max_runs" not in plain.dumps()
    limited = entry("limited", max_runs=7)
    assert '"max_runs":7' in limited.dumps()
    store.upsert_many([plain, limited])
    assert store.get("plain").max_runs is None and store.get("limited").max_runs == 7


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Cron("61 * * * *"), "schedule.expr"),
        (lambda: Cron("0 0 31 2 *"), "schedule.expr"),
        (lambda: Crontab(day_of_month="31", month_of_year="2"), "schedule.day_of_month"),
        (lambda: Cron("* * * * *", tz="Mars/Olympus"), "schedule.tz"),
    ],
    ids=["bad-cron", "cron-never-fires", "crontab-never-fires", "unknown-zone"],
)
def test_bad_schedules_cannot_be_built_and_name_the_field(make, field):
    with pytest.raises(InvalidSchedule) as info:
        make()
    assert info.value.field == field


def test_a_stored_definition_that_never_fires_fails_to_load_naming_the_entry_and_field():
    raw = (
        entry("feb-31")
        .dumps()
        .replace(
            '{"every":60.0,"kind":"interval","relative":false}',
            '{"kind":"cron","expr":"0 0 31 2 *","tz":"UTC"}',
        )
    )
    with pytest.raises(CorruptEntry) as info:
        Entry.loads(raw, "feb-31")
    assert info.value.name == "feb-31" and info.value.field == "schedule.expr"


def test_a_stored_time_that_ends_in_z_reads_as_utc_on_every_python():
    # Written by another tool (JavaScript's toISOString): Python 3.10 alone reads no "Z".
    start = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    stored = json.dumps({**json.loads(entry("z").dumps()), "start_at": "2030-01-02T03:04:05Z"})
    assert Entry.loads(stored, "z").start_at == start
    with pytest.raises(CorruptEntry) as info:
        Entry.loads(stored.replace("05Z", "05Q"), "z")
    assert (info.value.name, info.value.field) == ("z", "start_at")


def test_a_client_that_returns_bytes_is_refused_up_front(redis_server):
    from redisbeat import ConfigurationError

    raw = redis.Redis.from_url(redis_server.url())
    with pytest.raises(ConfigurationError, match="decode_responses=True"):
        ScheduleStore(raw)
    raw.close()
