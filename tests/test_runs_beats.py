"""Run outcomes, overlap and jitter with real beats and a real worker: the worker hook
records what became of each run, and the beats hold occurrences back by it."""

from __future__ import annotations

import itertools
import json

from celery import Celery

from redisbeat import Entry, Interval, Run, occurrence_id
from redisbeat.schedule.clock import from_ms, to_ms
from redisbeat.schedule.ids import jitter_ms
from redisbeat_testkit.ports import wait_until


def test_a_worker_records_outcomes_and_the_beats_apply_overlap(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.history_size = 50
    store.upsert_many(
        [
            Entry("ok", "proj.ping", Interval(1)),
            Entry("bad", "proj.fail", Interval(1)),
            Entry("skip", "proj.sleep", Interval(0.5), args=(1.2,), overlap="skip"),
            Entry("buffer", "proj.sleep", Interval(0.5), args=(1.2,), overlap="buffer_one"),
        ]
    )
    procs = beats_for(redis_server, prefix, TEST_TRACK_RUNS="1", TEST_HISTORY="50")
    procs.start_worker(concurrency=4)
    procs.start(2)

    def ran(name: str, n: int) -> bool:
        return len([r for r in store.history(name, 50) if r.outcome]) >= n

    wait_until(lambda: all(ran(n, 4) for n in ("ok", "bad", "skip", "buffer")), 60, "runs")

    ok = [r for r in store.history("ok", 50) if r.outcome]
    assert {r.outcome for r in ok} == {"succeeded"}
    assert all(r.runtime is not None and r.runtime >= 0 and r.worker for r in ok)
    bad = [r for r in store.history("bad", 50) if r.outcome]
    assert {(r.outcome, r.exception) for r in bad} == {("failed", "ValueError")}
    assert store.state("bad").last_outcome.outcome == "failed"

    for name in ("skip", "buffer"):
        runs = sorted((r for r in store.history(name, 50) if r.started), key=lambda r: r.started)
        for a, b in itertools.pairwise(runs):
            assert b.started >= a.ended, f"{name}: {b.task_id} started while {a.task_id} ran"
    skipped = [r for r in store.history("skip", 50) if r.result == "skipped"]
    assert skipped and {r.reason for r in skipped} == {"overlap"}
    assert store.state("skip").skipped >= len(skipped)
    # buffer_one skips none: an occurrence due while the previous run was queued or going
    # waited for its end and went out when the worker's end woke the beats (not at the 30 s
    # re-check), never before it.
    buffered = sorted((r for r in store.history("buffer", 50) if r.sent_at), key=lambda r: r.due)
    assert not [r for r in buffered if r.result == "skipped"]
    woken = 0
    for a, b in itertools.pairwise(buffered):
        if a.ended is None or b.sent_at is None:
            continue
        assert b.sent_at >= a.ended, f"{b.task_id} was sent while {a.task_id} ran"
        woken += (b.sent_at - a.ended).total_seconds() < 5 and b.late is not None and b.late > 0.3
    assert woken


def test_jitter_delays_each_occurrence_by_the_same_amount_on_every_beat(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.history_size = 20
    store.upsert(Entry("jittery", "proj.ping", Interval(2), jitter=1.5))
    procs = beats_for(redis_server, prefix, TEST_HISTORY="20")
    procs.start(2)
    wait_until(lambda: len(store.beats()) == 2, 30, "both beats")
    # Occurrences due while a beat was still starting up are late by its start-up as well.
    up_ms = store.now_ms()

    def sent_since_up() -> list[Run]:
        runs = store.history("jittery", 20)
        return [r for r in runs if r.result == "sent" and to_ms(r.due) >= up_ms]

    sends = wait_until(lambda: len(sent_since_up()) >= 4 and sent_since_up(), 30, "sends")
    assert len({r.task_id for r in sends}) == len(sends)
    for r in sends:
        expected = jitter_ms("jittery", to_ms(r.due), 1.5, 2000) / 1000
        assert expected <= r.late < expected + 1.0, (r.late, expected)
    assert len({round(r.late, 1) for r in sends}) > 1  # spread, not one fixed delay
    # The next runs listed are the times the beats will send, each with its own delay (read
    # again if a beat held the next occurrence's claim, for the moment before it defers it).
    grid = to_ms(sends[-1].due)

    def listed_with_their_delays() -> bool:
        runs = store.next_runs("jittery", 5)
        nominal = [grid + (to_ms(at) - grid) // 2000 * 2000 for at in runs]
        delays = [to_ms(at) - n for at, n in zip(runs, nominal, strict=True)]
        return len(runs) == 5 and delays == [jitter_ms("jittery", n, 1.5, 2000) for n in nominal]

    wait_until(listed_with_their_delays, 10, "the next runs listed with their delays")


def test_a_worker_records_retried_and_revoked_runs(redis_server, prefix, beats_for, stores):
    store = stores(redis_server, prefix)
    store.history_size = 10
    store.upsert(Entry("flaky", "proj.flaky", Interval(3600)))
    revoked = Entry("revoked", "proj.ping", Interval(3600), start_at=from_ms(store.now_ms() + 4000))
    store.upsert(revoked)
    due = to_ms(store.state("revoked").next_run_at)
    procs = beats_for(redis_server, prefix, TEST_TRACK_RUNS="1", TEST_HISTORY="10")
    worker = procs.start_worker(concurrency=2)
    wait_until(lambda: " ready." in worker.output(), 60, "the worker")
    control = Celery(broker=redis_server.url(1))
    control.control.revoke(occurrence_id(prefix, "revoked", due))
    wait_until(lambda: "revoked" in worker.output().lower(), 30, "the revoke to reach the worker")
    procs.start(1)
    wait_until(lambda: store.beats(), 30, "the beat")
    store.run_now("flaky")

    def outcomes(name: str) -> list[str | None]:
        # Each occurrence's outcome once: on a starved machine a lease can run out before the
        # finish, and the same occurrence is sent again (a second send row, or a copy the
        # worker dropped), which is not what this test is about.
        runs = store.history(name, 10)
        return list(dict.fromkeys(r.outcome for r in runs if r.outcome and r.result != "duplicate"))

    try:
        wait_until(lambda: outcomes("flaky") == ["succeeded"] and outcomes("revoked"), 60, "runs")
    except AssertionError:
        histories = {name: store.history(name, 10) for name in ("flaky", "revoked")}
        raise AssertionError(f"{histories}\n{worker.output()[-5000:]}") from None

    # The send shows how its last try ended; each try's end is in the history's records, in
    # the order the worker processes recorded them (the retry may end first).
    def tries() -> list[str]:
        raw = store.client.lrange(store.keys.history("flaky"), 0, -1)
        return sorted(json.loads(r)["outcome"] for r in raw if json.loads(r)["kind"] == "run")

    wait_until(lambda: len(tries()) >= 2, 10, "both tries' ends")
    assert tries() == ["retried", "succeeded"]
    assert outcomes("revoked") == ["revoked"]
    assert store.state("revoked").last_outcome.outcome == "revoked"
    control.close()
