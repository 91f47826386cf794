"""A bad beat_schedule item stops nothing: the other entries are stored and sent, the item is
logged once (entry, field, what to fix) and set aside in the quarantine, an earlier stored
definition of it keeps running, and a deploy that fixes the item releases it."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab
from test_beats import broker
from test_deploys import heartbeats_after

from redisbeat import Entry, Interval, InvalidEntry, ScheduleStore, signals
from redisbeat.beat.deploys import BeatSchedule
from redisbeat.schedule.from_celery import CONFIG_SOURCE, config_entries, read_config
from redisbeat_testkit.messages import read_queue
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import BEAT_APP, Beat, Beats, environ_without_django

#: ``datetime.now()`` in the beat's beat_schedule (the testkit's proj revives it).
NOW = {"$now": {}}


def every_second(prefix: str, **fields: Any) -> dict[str, Any]:
    """An item sent every second to a queue of this test's own."""
    return {"task": "proj.ping", "schedule": 1, "options": {"queue": prefix}, **fields}


class Sends:
    """The entries whose messages this test's queue received, by beat."""

    def __init__(self, server: Any, queue: str) -> None:
        self.client = broker(server)
        self.queue = queue
        self.seen: set[tuple[str, str]] = set()

    def entries(self, beat: str | None = None) -> set[str]:
        self.seen |= {(s.entry, s.beat) for s in read_queue(self.client, self.queue)}
        return {entry for entry, by in self.seen if beat in (None, by)}


def lines_about(beat: Beat, name: str) -> list[str]:
    return [line for line in beat.output().splitlines() if repr(name) in line]


def started(beats: Beats, store: ScheduleStore, config: dict[str, Any]) -> tuple[Beat, str]:
    """A beat with ``config`` as its beat_schedule, and its id once it registered."""
    [beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(config))
    ids = wait_until(lambda: [b.id for b in store.beats() if b.pid == beat.process.pid], 30, "it")
    return beat, ids[0]


def quarantine_list(beats: Beats) -> list[dict[str, Any]]:
    """``celery -A proj redisbeat quarantine list --json``, run as an operator runs it."""
    command = [sys.executable, "-m", "celery", "-A", BEAT_APP, "redisbeat"]
    done = subprocess.run(
        [*command, "quarantine", "list", "--json"],
        env={**environ_without_django(), **beats.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed


# -- real beats ------------------------------------------------------------------------------


def test_a_bad_item_is_logged_once_and_set_aside_while_the_good_ones_are_sent_until_a_fix(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    good = {"good-a": every_second(prefix), "good-b": every_second(prefix)}
    config = {**good, "broken": every_second(prefix, args=[NOW])}
    beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="0.5")
    sends = Sends(redis_server, prefix)
    beat, beat_id = started(beats, store, config)
    wait_until(lambda: set(good) <= sends.entries(), 30, "both good entries to be sent")
    record = wait_until(lambda: store.quarantined().get("broken"), 10, "the item set aside")
    assert record.by == beat_id and "field 'args'" in record.error
    assert "datetime.datetime(" in record.definition  # the item, as far as it can be shown
    wait_until(lambda: lines_about(beat, "broken"), 10, "the line about it")
    heartbeats_after(store, store.now_ms())
    [line] = lines_about(beat, "broken")
    assert "ERROR" in line and "field 'args'" in line and "is not JSON-serialisable" in line
    assert "fix it in beat_schedule and deploy" in line and "it is not stored" in line
    assert "Traceback" not in beat.output() and "CRITICAL" not in beat.output()
    assert beat.process.poll() is None
    assert "broken" not in store and "broken" not in sends.entries()
    [listed] = quarantine_list(beats)
    assert listed["name"] == "broken" and listed["by"] == beat_id
    assert "field 'args'" in listed["error"]

    beats.stop_all()  # a deploy that fixes the item
    fixed, fixed_id = started(beats, store, {**config, "broken": every_second(prefix, args=[1])})
    wait_until(lambda: "broken" in sends.entries(fixed_id), 30, "the fixed entry to be sent")
    assert store.get("broken").args == (1,)
    assert "broken" not in store.quarantined()
    assert "ERROR" not in fixed.output()


def test_a_deploy_that_breaks_a_running_entry_keeps_its_stored_definition_running(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="0.5")
    sends = Sends(redis_server, prefix)
    _, first_id = started(beats, store, {"job": every_second(prefix, args=[1])})
    wait_until(lambda: "job" in sends.entries(first_id), 30, "the entry to be sent")
    beats.stop_all()
    typo = {"job": every_second(prefix, args=[NOW]), "fresh": every_second(prefix, catch_up="x")}
    second, second_id = started(beats, store, typo)
    wait_until(lambda: "job" in sends.entries(second_id), 30, "the stored job sent by the new beat")
    wait_until(lambda: {"job", "fresh"} <= set(store.quarantined()), 10, "both set aside")
    wait_until(lambda: lines_about(second, "fresh"), 10, "the lines about them")
    assert store.get("job").args == (1,)  # the definition that was running
    assert "fresh" not in store and "fresh" not in sends.entries()
    [job] = [line for line in lines_about(second, "job") if "ERROR" in line]
    assert "field 'args'" in job and "the stored definition keeps running" in job
    [fresh] = lines_about(second, "fresh")
    assert "field 'catch_up'" in fresh and "it is not stored and not sent" in fresh
    assert "removes" not in second.output() and second.process.poll() is None


# -- one beat's configuration in Redis -------------------------------------------------------


def app_with(beat_schedule: dict[str, Any]) -> Celery:
    app = Celery("proj", set_as_current=False)
    app.conf.beat_schedule = beat_schedule
    app.conf.result_expires = None  # no celery.backend_cleanup beside them
    return app


def deployed(store: ScheduleStore, beat_id: str, beat_schedule: dict[str, Any]) -> BeatSchedule:
    """A beat's configuration, settled as at its first heartbeat."""
    entries, bad = read_config(app_with(beat_schedule))
    beat = BeatSchedule(store, beat_id, entries, bad=bad)
    beat.heartbeat(store.config_version())
    return beat


HOURLY = {"task": "proj.ping", "schedule": 3600}


def test_two_beats_with_the_same_broken_item_agree_on_the_version_and_a_fix_is_a_new_one(
    store, caplog
):
    first = deployed(store, "first", {"ok": HOURLY, "bad": {**HOURLY, "args": (datetime.now(),)}})
    later = datetime.now() + timedelta(seconds=1)
    again = deployed(store, "again", {"ok": HOURLY, "bad": {**HOURLY, "args": (later,)}})
    assert again.version == first.version
    assert "differs" not in caplog.text  # the second beat wrote nothing
    fixed = deployed(store, "fixed", {"ok": HOURLY, "bad": {**HOURLY, "args": (1,)}})
    assert fixed.version != first.version
    assert store.get("bad").args == (1,) and "bad" not in store.quarantined()


def test_a_fix_back_to_the_definition_that_kept_running_releases_the_record(store):
    deployed(store, "one", {"job": HOURLY})
    deployed(store, "two", {"job": {**HOURLY, "args": "x"}})
    assert "job" in store.quarantined()
    deployed(store, "three", {"job": HOURLY})  # the stored definition: nothing to write
    assert store.quarantined() == {} and store.get("job").args == ()


def test_a_bad_item_that_leaves_beat_schedule_takes_its_record_with_it(store):
    deployed(store, "one", {"ok": HOURLY, "new": {**HOURLY, "grace": -1}})
    assert "field 'grace'" in store.quarantined()["new"].error
    deployed(store, "two", {"ok": HOURLY})
    assert store.quarantined() == {} and "ok" in store


def test_the_signal_is_sent_once_per_record_not_per_beat(store):
    heard: list[dict[str, Any]] = []

    def receiver(sender: str, **kwargs: Any) -> None:
        heard.append({"sender": sender, **kwargs})

    signals.entry_quarantined.connect(receiver, weak=False)
    try:
        broken = {"ok": HOURLY, "bad": {**HOURLY, "enabled": "yes"}}
        deployed(store, "one", broken)
        deployed(store, "restarted", broken)
        store.client.delete(store.keys.config)  # lost data: the record is written again
        deployed(store, "after-loss", broken)
    finally:
        signals.entry_quarantined.disconnect(receiver)
    assert [(h["sender"], h["name"]) for h in heard] == [("one", "bad")]
    assert "field 'enabled'" in heard[0]["error"]


def test_a_full_rewrite_keeps_the_stored_definition_of_a_bad_item(store):
    deployed(store, "one", {"job": HOURLY})
    store.client.delete(store.keys.config)  # the record is gone: everything is written again
    deployed(store, "two", {"job": {**HOURLY, "args": (datetime.now(),)}})
    assert store.get("job").args == () and "job" in store.quarantined()


def test_setting_an_item_aside_leaves_the_stored_entry_and_other_records_alone(store):
    store.upsert(Entry("kept", "proj.ping", Interval(60), source=CONFIG_SOURCE))
    assert store.quarantine_item("kept", "{}", "bad", "b1")
    assert not store.quarantine_item("kept", "{}", "bad", "b2")  # the same: not anew
    assert "kept" in store and store.state("kept").next_run_at is not None
    store.client.hset(store.keys.entries, "corrupt", "{not json")
    assert store.quarantine("corrupt", "{not json", "corrupt", "b1")
    assert not store.release_item("corrupt")  # a definition set aside stays
    assert store.release_item("kept") and set(store.quarantined()) == {"corrupt"}


# -- reading beat_schedule -------------------------------------------------------------------


def test_reading_beat_schedule_separates_the_bad_items_and_shows_what_it_can():
    app = app_with(
        {
            "ok": {"task": "t", "schedule": crontab(minute="*/5")},
            "when": {"task": "t", "schedule": 60, "args": [datetime(2026, 1, 2, 3, 4)]},
            "typo": {"task": "t", "schedule": 60, "queue": "x"},
            "naive": {"task": "t", "schedule": datetime(2026, 1, 1)},
            "spelt": {"task": "t", "shedule": 60},
            "kind": {"task": "t", "schedule": "every minute"},
        }
    )
    entries, bad = read_config(app)
    assert [e.name for e in entries] == ["ok"]
    assert [(b.name, b.error.field) for b in bad] == [
        ("when", "args"),
        ("typo", "queue"),
        ("naive", "schedule"),
        ("spelt", "shedule"),
        ("kind", "schedule"),
    ]
    assert "unknown beat_schedule field (did you mean 'schedule'?)" in str(bad[3].error)
    assert "unsupported schedule type str: give seconds, a timedelta" in str(bad[4].error)
    shown = json.loads(bad[0].shown)
    assert shown["args"] == ["datetime.datetime(2026, 1, 2, 3, 4)"]
    assert shown["source"] == "config" and "name" not in shown  # restore cannot take it
    assert all(b.digest.startswith("!") for b in bad)
    with pytest.raises(InvalidEntry, match=r"entry 'when': field 'args'"):
        config_entries(app)


def test_a_bad_items_digest_counts_what_json_cannot_hold_by_type_and_the_rest_by_value():
    def digest(item: dict[str, Any]) -> str:
        [bad] = read_config(app_with({"x": item}))[1]
        return bad.digest

    base = {"task": "t", "schedule": 60, "catch_up": "never"}
    now = datetime.now(timezone.utc)
    assert digest({**base, "start_at": now}) == digest({**base, "start_at": now + timedelta(1)})
    assert digest({**base, "schedule": 60}) != digest({**base, "schedule": 61})
    cron = {**base, "schedule": crontab(minute="1")}
    assert digest(cron) != digest({**base, "schedule": crontab(minute="2")})
    thing = {**base, "kwargs": {"o": object()}}  # its repr names its address
    assert digest(thing) == digest({**base, "kwargs": {"o": object()}})
