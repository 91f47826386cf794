"""Missed occurrences, histories, the worker hook's records, and the deferrals of jitter and
overlap, in-process against real Redis."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone

import pytest
from test_dispatcher import Recorder, dispatcher, make_due

from redisbeat import (
    Entry,
    EntryNotFound,
    Interval,
    InvalidEntry,
    MessageRefused,
    ScheduleStore,
    occurrence_id,
    signals,
)
from redisbeat.schedule.clock import from_ms, to_ms
from redisbeat.schedule.ids import jitter_ms
from redisbeat.store.history import join_history
from redisbeat_testkit.ports import wait_until


def every(name: str, seconds: float = 60, **kw: object) -> Entry:
    return Entry(name, "proj.ping", Interval(seconds), **kw)  # type: ignore[arg-type]


def tick_hearing_missed(store: ScheduleStore) -> tuple[Recorder, list[dict[str, object]]]:
    """One beat's tick, and what it said through ``occurrence_missed``."""
    heard: list[dict[str, object]] = []

    def hear(sender: str, signal: object = None, **kw: object) -> None:
        heard.append(kw)

    signals.occurrence_missed.connect(hear)
    try:
        rec = Recorder()
        dispatcher(store, rec).tick()
    finally:
        signals.occurrence_missed.disconnect(hear)
    return rec, heard


def test_a_late_claim_counts_the_occurrences_it_coalesced_as_missed(store, client):
    store.history_size = 10
    store.upsert(every("e", 1))
    due = make_due(client, store, "e", 10_500)
    rec, heard = tick_hearing_missed(store)
    [(_, sent_due, _)] = rec.sent
    missed = (sent_due - due) // 1000  # the ones before the one sent
    assert missed >= 10
    state = store.state("e")
    assert state.missed == missed and state.last_missed.count == missed
    assert state.last_missed.reason == "late" and to_ms(state.last_missed.due) == sent_due
    assert heard == [
        {
            "name": "e",
            "task": "proj.ping",
            "count": missed,
            "reason": "late",
            "before": state.last_missed.due,
        }
    ]
    [run] = store.history("e")
    assert (run.result, run.missed, to_ms(run.due), run.reason) == (
        "sent",
        missed,
        sent_due,
        "late",
    )
    assert 0 <= run.late < 2


def test_a_skipped_late_occurrence_is_missed_too_and_an_on_time_send_misses_none(store, client):
    store.history_size = 10
    store.upsert_many([every("late", 20, catch_up="skip"), every("fine", 20)])
    make_due(client, store, "late", 30_000)  # two occurrences, the last one past its 5 s grace
    make_due(client, store, "fine", 5)
    dispatcher(store, Recorder()).tick()
    late = store.state("late")
    assert late.missed == 2 and late.total_run_count == 0
    assert [(r.result, r.missed) for r in store.history("late")] == [("skipped", 2)]
    assert store.state("fine").missed == 0 and store.state("fine").last_missed is None


def test_without_a_history_size_no_history_is_written(store, client):
    store.upsert(every("e", 1))
    make_due(client, store, "e", 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert rec.sent and store.history("e") == []
    assert client.exists(store.keys.history("e")) == 0


def test_a_history_keeps_its_size_and_joins_each_send_with_its_runs_outcome(store, client):
    store.history_size = 3
    store.upsert(every("e", 1))
    sent = []
    for _ in range(12):
        make_due(client, store, "e", 5)
        rec = Recorder()
        dispatcher(store, rec).tick()
        [(_, due, task_id)] = rec.sent
        sent.append((due, task_id))
        store.run_started("e", task_id, due, "w1")
        store.run_ended("e", task_id, due, "w1", "failed", "KeyError")
        assert client.llen(store.keys.history("e")) <= 9
    runs = store.history("e", 3)
    assert [r.task_id for r in runs] == [t for _, t in reversed(sent[-3:])]
    assert all(r.outcome == "failed" and r.exception == "KeyError" for r in runs)
    assert all(r.runtime is not None and r.worker == "w1" for r in runs)
    last = store.state("e").last_outcome
    assert (last.task_id, last.outcome, last.exception) == (sent[-1][1], "failed", "KeyError")


def test_a_running_marker_is_cleared_by_its_own_end_only_and_expires(store, client):
    store.upsert(every("e"))
    store.run_started("e", "t1", None, "w1")
    now = store.now_ms()
    assert store.running(["e", "other"], now)["e"].task_id == "t1"
    store.run_ended("e", "t0", None, "w1", "succeeded")  # an older, overlapping run
    assert "e" in store.running(["e"], now)
    store.run_ended("e", "t1", None, "w1", "succeeded")
    assert store.running(["e"], now) == {}
    store.run_expiry_ms = 1
    store.run_started("e", "t2", None, "w1")
    wait_until(lambda: store.running(["e"], store.now_ms()) == {}, 5, "the marker to expire")


def test_a_retrys_end_stays_the_outcome_when_the_try_it_retried_records_its_end_later(
    store, client
):
    # Two worker processes: the retry (try 1) starts and ends on one before the first try,
    # which published it, records its own end on the other.
    store.history_size = 10
    store.upsert(every("e"))
    make_due(client, store, "e", 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    [(_, due, task_id)] = rec.sent
    store.run_started("e", task_id, due, "w1")
    store.run_started("e", task_id, due, "w2", retries=1)
    store.run_ended("e", task_id, due, "w1", "retried", retries=0)
    now = store.now_ms()
    assert store.running(["e"], now)["e"].worker == "w2"  # the retry still runs
    store.run_ended("e", task_id, due, "w2", "succeeded", retries=1)
    assert store.running(["e"], now) == {}
    store.run_started("e", task_id, due, "w3", retries=2)  # as if retried once more,
    store.run_ended("e", task_id, due, "w1", "retried", retries=1)  # told late again
    store.run_ended("e", task_id, due, "w3", "failed", "KeyError", retries=2)
    [run] = store.history("e")
    assert (run.task_id, run.outcome, run.exception, run.worker) == (
        task_id,
        "failed",
        "KeyError",
        "w3",
    )
    last = store.state("e").last_outcome
    assert (last.task_id, last.outcome) == (task_id, "failed")
    store.run_ended("e", task_id, due, "w1", "retried", retries=0)  # the latest try stays
    assert store.history("e")[0].outcome == store.state("e").last_outcome.outcome == "failed"


def test_jitter_defers_the_occurrence_and_every_beat_sends_it_under_its_own_id(store, client):
    store.upsert(every("e", 10, jitter=5))
    due = make_due(client, store, "e", 1)
    delay = jitter_ms("e", due, 5, 10_000)
    assert delay > 0
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert rec.sent == []
    state = store.state("e")
    assert state.held == "jitter" and to_ms(state.held_due) == due and not state.running
    assert to_ms(state.next_run_at) == due + delay
    assert store.next_runs("e", 1) == [state.next_run_at]
    # Any beat sends it once its time comes: another dispatcher here.
    wait_until(lambda: store.now_ms() >= due + delay, 10, "the jittered time")
    other = Recorder()
    dispatcher(store, other).tick()
    assert other.sent == [("e", due, occurrence_id(store.keys.prefix, "e", due))]
    assert store.state("e").held is None
    assert to_ms(store.state("e").next_run_at) == due + 10_000


def test_overlap_skip_and_buffer_one_hold_back_while_a_run_goes_on(store, client):
    store.history_size = 5
    store.upsert_many([every("s", 60, overlap="skip"), every("b", 60, overlap="buffer_one")])
    for name in ("s", "b"):
        store.run_started(name, "previous", None, "w1")
    due_s, due_b = make_due(client, store, "s", 5), make_due(client, store, "b", 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert rec.sent == []
    assert store.state("s").skipped == 1 and store.state("s").last_skipped.reason == "overlap"
    assert [(r.result, r.reason) for r in store.history("s")] == [("skipped", "overlap")]
    assert client.zscore(store.keys.schedule, "s") == due_s + 60_000
    held = store.state("b")
    assert held.held == "overlap" and to_ms(held.next_run_at) > store.now_ms() + 20_000
    # The run's end makes the waiting occurrence due at once, and a beat sends it.
    store.run_ended("b", "previous", None, "w1", "succeeded")
    assert client.zscore(store.keys.schedule, "b") <= store.now_ms()
    dispatcher(store, rec).tick()
    assert rec.sent == [("b", due_b, occurrence_id(store.keys.prefix, "b", due_b))]


def test_join_history_reads_what_it_can_and_keeps_outcomes_without_their_send():
    send = {"kind": "send", "result": "sent", "due": 1000, "at": 1005, "task_id": "a"}
    run = {"kind": "run", "task_id": "a", "outcome": "succeeded", "runtime": 250}
    orphan = {"kind": "run", "task_id": "z", "outcome": "revoked", "ended": 500}
    runs = join_history([run, send, {"kind": "send", "due": "garbage"}, orphan])
    assert (runs[0].task_id, runs[0].result, runs[0].outcome) == ("a", "sent", "succeeded")
    assert runs[0].runtime == 0.25 and runs[0].late == 0.005
    assert ("z", "run", "revoked") in [(r.task_id, r.result, r.outcome) for r in runs]
    assert json.dumps([r.task_id for r in runs])


def test_backfill_sends_each_past_occurrence_once_under_its_own_id_paced(store, client):
    store.upsert(every("e", 10))
    now = store.now_ms()
    start, end = from_ms(now - 60_000), from_ms(now - 1)
    dues = store.backfill("e", start, end, rate=50)
    assert 5 <= len(dues) <= 7 and dues == sorted(dues)
    assert all(b - a == timedelta(seconds=10) for a, b in itertools.pairwise(dues))
    assert store.count_pending("backfill:e") == len(dues)
    assert store.backfill("e", start, end, rate=50) == dues  # replaces, adds none
    assert store.count_pending("backfill:e") == len(dues)
    etas = sorted(t.eta for t in store.pending("backfill:e"))
    assert all(b - a == timedelta(milliseconds=20) for a, b in itertools.pairwise(etas))  # paced
    rec = Recorder()
    beat = dispatcher(store, rec)

    def sent_all() -> bool:
        beat.tick()
        return len(rec.sent) >= len(dues)

    wait_until(sent_all, 10, "the backfill")
    assert sorted(rec.sent) == [
        ("e", to_ms(d), occurrence_id(store.keys.prefix, "e", to_ms(d))) for d in dues
    ]
    assert store.count_pending("backfill:e") == 0


def test_backfill_refuses_a_future_end_a_naive_time_and_too_long_a_range(store):
    store.upsert(every("e", 1))
    now = datetime.now(timezone.utc)
    with pytest.raises(InvalidEntry, match="field 'end': is in the future"):
        store.backfill("e", now - timedelta(minutes=1), now + timedelta(minutes=1))
    with pytest.raises(InvalidEntry, match="field 'start': must be a time-zone aware"):
        store.backfill("e", datetime(2026, 1, 1), now)
    with pytest.raises(InvalidEntry, match="over 10000 occurrences"):
        store.backfill("e", now - timedelta(hours=3), now - timedelta(seconds=5))
    with pytest.raises(EntryNotFound):
        store.backfill("nope", now - timedelta(minutes=1), now - timedelta(seconds=5))


def test_occurrences_a_pause_held_back_are_missed_when_it_ends_or_is_resumed(store, client):
    # Every 2 s, so a slow machine's tick a second late still finds the same occurrences.
    store.history_size = 10
    store.upsert_many([every("until", 2), every("resumed", 2)])
    d0 = make_due(client, store, "until", -500)  # due in 500 ms
    make_due(client, store, "resumed", -500)
    now = store.now_ms()
    store.pause("until", until=from_ms(now + 5_000))  # holds back d0, d0 + 2 s, d0 + 4 s
    store.pause("resumed")
    assert client.zscore(store.keys.schedule, "until") == d0 + 6_000
    wait_until(lambda: store.now_ms() >= d0 + 4_500, 10, "the pause to hold some back")
    store.resume("resumed")
    wait_until(lambda: store.now_ms() >= d0 + 6_000, 10, "the pause to end")
    rec, heard = tick_hearing_missed(store)
    assert ("until", d0 + 6_000) in [(n, d) for n, d, _ in rec.sent]
    until = store.state("until")
    assert (until.missed, until.last_missed.reason, until.paused) == (3, "paused", None)
    [run] = store.history("until")
    assert (run.result, run.missed, run.reason) == ("sent", 3, "paused")
    resumed = store.state("resumed")
    assert (resumed.missed, resumed.last_missed.reason) == (3, "paused")
    assert {(h["name"], h["reason"]) for h in heard} == {("until", "paused"), ("resumed", "paused")}
    assert "unsent" not in json.loads(client.hget(store.keys.state, "resumed"))


def test_removing_an_entry_drops_its_history_and_its_running_marker(store, client):
    store.history_size = 5
    store.upsert(every("e", 1))
    make_due(client, store, "e", 5)
    dispatcher(store, Recorder()).tick()
    store.run_started("e", "t1", None, "w1")
    assert client.exists(store.keys.history("e")) and client.hexists(store.keys.running, "e")
    assert store.remove("e")
    assert not client.exists(store.keys.history("e"))
    assert not client.hexists(store.keys.running, "e")


def test_overlap_counts_a_run_from_its_send_so_a_queued_one_holds_the_next_back(store, client):
    store.upsert_many([every("s", 60, overlap="skip"), every("free", 60)])
    make_due(client, store, "s", 5)
    make_due(client, store, "free", 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    [(_, due, task_id)] = [s for s in rec.sent if s[0] == "s"]
    marked = store.running(["s", "free"], store.now_ms())
    assert list(marked) == ["s"] and marked["s"].task_id == task_id  # no worker started it yet
    make_due(client, store, "s", 5)  # the next one, while the first still waits in the queue
    dispatcher(store, rec).tick()
    assert [s for s in rec.sent if s[0] == "s"] == [("s", due, task_id)]
    assert store.state("s").skipped == 1
    store.run_started("s", task_id, due, "w1")
    store.run_ended("s", task_id, due, "w1", "succeeded")
    assert store.running(["s"], store.now_ms()) == {}


def test_a_refused_or_failed_send_takes_its_running_mark_back(store, client):
    store.upsert(every("s", 60, overlap="skip"))
    make_due(client, store, "s", 5)

    def broker_down(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        raise ConnectionError("broker down")

    dispatcher(store, broker_down).tick()  # handed back
    assert store.running(["s"], store.now_ms()) == {}

    def refuse(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        raise MessageRefused("s", "no route to the queue")

    dispatcher(store, refuse).tick()
    assert store.state("s").failures == 1
    assert store.running(["s"], store.now_ms()) == {}
