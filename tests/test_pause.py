"""Pausing an entry until a time or until resumed: the store API, edits and deploys while
paused, run_now. A real beat's part is in test_policy_beats."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import redis

from redisbeat import Cron, Entry, EntryNotFound, EntryPaused, Interval, ScheduleStore
from redisbeat.errors import InvalidEntry
from redisbeat.schedule.timing import from_ms, to_ms
from redisbeat_testkit.ports import wait_until

UTC = timezone.utc


def every(name: str, seconds: float, **kw: object) -> Entry:
    return Entry(name, "proj.ping", Interval(seconds), **kw)  # type: ignore[arg-type]


def score(client: redis.Redis, store: ScheduleStore, name: str) -> float | None:
    return client.zscore(store.keys.schedule, name)


def test_a_pause_until_resumed_takes_the_entry_off_the_schedule_and_resume_keeps_its_grid(
    store, client
):
    store.upsert(every("e", 60))
    due = score(client, store, "e")
    store.pause("e", note="waiting for the new API key")
    assert score(client, store, "e") is None
    paused = store.state("e").paused
    assert paused is not None and paused.until is None
    assert paused.note == "waiting for the new API key" and paused.at is not None
    assert store.next_runs("e") == []
    assert store.resume("e") is True
    resumed = score(client, store, "e")
    assert resumed is not None and (resumed - due) % 60_000 == 0
    assert store.now_ms() <= resumed <= store.now_ms() + 60_000
    assert store.state("e").paused is None
    assert store.resume("e") is False  # not paused: nothing to do


def test_a_pause_until_a_time_resumes_at_the_first_occurrence_from_then(store, client):
    store.upsert(Entry("daily", "proj.ping", Cron("0 9 * * *", tz="Europe/Berlin")))
    until = datetime(2031, 6, 1, 12, 0, tzinfo=UTC)
    store.pause("daily", until=until, note="summer break")
    assert from_ms(int(score(client, store, "daily"))) == datetime(2031, 6, 2, 7, 0, tzinfo=UTC)
    state = store.state("daily")
    assert state.paused is not None and state.paused.until == until
    assert state.next_run_at == datetime(2031, 6, 2, 7, 0, tzinfo=UTC)
    assert store.next_runs("daily", 2)[0] == state.next_run_at
    # Pausing again changes the time and the note.
    store.pause("daily", until=datetime(2031, 7, 1, tzinfo=UTC), note="longer")
    assert store.state("daily").paused.note == "longer"  # type: ignore[union-attr]
    assert store.state("daily").next_run_at == datetime(2031, 7, 1, 7, 0, tzinfo=UTC)


def test_an_edit_or_a_sync_while_paused_keeps_the_entry_paused(store, client):
    store.upsert(every("e", 60, source="config"))
    store.pause("e")
    store.upsert(every("e", 30, source="config"))  # a deploy that changes the timing
    assert store.get("e").schedule == Interval(30)
    assert score(client, store, "e") is None and store.state("e").paused is not None
    until = datetime.now(UTC) + timedelta(hours=2)
    store.pause("e", until=until)
    store.upsert(every("e", 10, source="config"))
    assert score(client, store, "e") >= to_ms(until)
    store.sync_source("config", [every("e", 20, source="config")])
    assert score(client, store, "e") >= to_ms(until)


def test_run_now_refuses_a_paused_entry_and_pause_refuses_bad_input(store, client):
    store.upsert(every("e", 60))
    store.pause("e")
    with pytest.raises(EntryPaused, match="'e' is paused"):
        store.run_now("e")
    with pytest.raises(EntryNotFound):
        store.pause("missing")
    with pytest.raises(InvalidEntry, match="'until'"):
        store.pause("e", until=datetime(2031, 1, 1))  # naive
    with pytest.raises(InvalidEntry, match="'note'"):
        store.pause("e", note="x" * 501)


def test_a_pause_that_is_over_no_longer_shows_though_it_stays_stored_until_a_send(store, client):
    store.upsert(every("e", 1))
    now = store.now_ms()
    store.pause("e", until=from_ms(now + 300))
    wait_until(lambda: store.state("e").paused is None, 5, "the pause to be over")
    state = json.loads(client.hget(store.keys.state, "e"))
    assert state["paused"]["until"] == now + 300  # still stored until a send drops it
