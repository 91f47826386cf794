"""Runs a worker could not start (its task not registered there, its message refused) are
outcomes: with real beats and a real ``celery worker`` with the hook, what ``show``, ``list``
and the history say of them and the beats' ``redisbeat_runs_not_started_total``; in-process,
the store's record of them and the hook's behaviour when Redis does not answer."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery
from click.testing import CliRunner
from kombu.exceptions import ContentDisallowed
from test_dispatcher import Recorder, dispatcher, make_due

from redisbeat import Entry, Interval, occurrence_id, refusals
from redisbeat.cli import main as redisbeat_cli
from redisbeat.store.receipts import Delivery
from redisbeat_testkit.ports import free_port, wait_until

MISSING = "proj.does_not_exist"


def not_started(port: int) -> dict[tuple[str, str], float]:
    """``redisbeat_runs_not_started_total`` as a beat serves it: (outcome, task) -> count."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    pattern = r'^redisbeat_runs_not_started_total\{outcome="(\w+)",task="([^"]+)"\} (\S+)$'
    return {(o, t): float(n) for o, t, n in re.findall(pattern, text, re.M)}


def scraped(port: int) -> dict[tuple[str, str], float] | None:
    try:
        return not_started(port)
    except OSError:  # not serving yet
        return None


def cli(redis_server: Any, prefix: str, *args: str) -> Any:
    result = CliRunner().invoke(
        redisbeat_cli,
        ["--url", redis_server.url(0), "--prefix", prefix, *args],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    return result


def test_runs_a_worker_could_not_start_are_outcomes_that_show_list_and_the_metric_give(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.history_size = 10
    cli(redis_server, prefix, "add", "noTask", MISSING, "--every", "1h", "--unregistered-ok")
    store.upsert_many(
        [
            Entry("pickled", "proj.ping", Interval(3600), options={"serializer": "pickle"}),
            Entry("fine", "proj.ping", Interval(3600)),
        ]
    )
    port = free_port()
    procs = beats_for(
        redis_server,
        prefix,
        TEST_TRACK_RUNS="1",
        TEST_HISTORY="10",
        TEST_METRICS_PORT=str(port),
        TEST_HEARTBEAT="0.5",
    )
    worker = procs.start_worker(concurrency=1)
    wait_until(lambda: " ready." in worker.output(), 60, "the worker")
    procs.start(1)
    wait_until(store.beats, 60, "the beat")
    for name in ("noTask", "pickled", "fine"):
        store.run_now(name)
    store.delay("proj.also_missing", countdown=0, key="later")

    def ended(name: str) -> Any:
        return store.state(name).last_outcome

    wait_until(lambda: all(map(ended, ("noTask", "pickled", "fine"))), 60, "the three ends")
    assert f"Received unregistered task of type '{MISSING}'" in worker.output()

    shown = cli(redis_server, prefix, "show", "noTask").output
    assert re.search(
        rf"│ state +│ last run could not start \(unregistered\): the worker does not know the "
        rf"task '{MISSING}': import the module that defines it in the worker",
        shown,
    ), shown
    assert re.search(r"│ last outcome +│ unregistered, task ", shown), shown
    state = json.loads(cli(redis_server, prefix, "show", "noTask", "--json").stdout)["state"]
    assert state["last_outcome"]["outcome"] == "unregistered"
    assert MISSING in state["last_outcome"]["detail"]

    listed = json.loads(cli(redis_server, prefix, "list", "--json").stdout)["entries"]
    outcomes = {e["name"]: e["state"]["last_outcome"] for e in listed}
    assert outcomes["noTask"]["outcome"] == "unregistered"
    assert (outcomes["pickled"]["outcome"], outcomes["pickled"]["exception"]) == (
        "rejected",
        "ContentDisallowed",
    )
    assert "accept_content" in outcomes["pickled"]["detail"]
    assert outcomes["fine"]["outcome"] == "succeeded" and outcomes["fine"]["detail"] is None
    table = cli(redis_server, prefix, "list").output
    assert "last run could not start (rejected): the worker refused the message" in table

    for name, outcome in (("noTask", "unregistered"), ("pickled", "rejected")):
        # A worker refuses a message as it arrives, maybe before the beat has finished the
        # send: its row is there once it has.
        wait_until(
            lambda name=name: any(r.result == "sent" for r in store.history(name)),
            10,
            f"the beat's finish of the send of {name}",
        )
        # Each send's row (a starved machine's beat may send one again under its task id).
        runs = [r for r in store.history(name) if r.outcome and r.result != "duplicate"]
        assert {(r.result, r.outcome, r.worker) for r in runs} == {
            ("sent", outcome, "worker0@test")
        }
        assert {r.detail for r in runs} == {store.state(name).last_outcome.detail}
    history = cli(redis_server, prefix, "history", "pickled").output
    assert "rejected (ContentDisallowed)" in history

    # The beat serves what Redis counts: the three refused, the delayed task's among them.
    counted = wait_until(
        lambda: (
            store.not_started().keys() >= {("unregistered", "proj.also_missing")}
            and store.not_started()
        ),
        60,
        "the delayed task's refusal",
    )
    assert set(counted) == {
        ("unregistered", MISSING),
        ("rejected", "proj.ping"),
        ("unregistered", "proj.also_missing"),
    }
    wait_until(lambda: scraped(port) == store.not_started(), 30, "the metric to read them")


# -- in-process --------------------------------------------------------------------------


def test_a_run_that_could_not_start_ends_the_sends_run_clears_its_mark_and_is_counted(
    store, client
):
    store.history_size = 10
    store.upsert(Entry("gone", MISSING, Interval(60), overlap="skip"))
    due = make_due(client, store, "gone", 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    [(_, _, task_id)] = rec.sent
    assert "gone" in store.running(["gone"], store.now_ms())  # marked from its send on
    d = Delivery("periodic", "gone", task_id, 0, due, "", False, "w1")
    store.run_not_started(d, refusals.unregistered(MISSING))
    state = store.state("gone")
    assert (state.last_outcome.outcome, state.last_outcome.task_id) == ("unregistered", task_id)
    assert state.last_outcome.runtime is None and MISSING in state.last_outcome.detail
    # The next occurrence is not held back by a run that never started.
    assert store.running(["gone"], store.now_ms()) == {}
    [run] = store.history("gone")
    assert (run.result, run.outcome, run.detail) == (
        "sent",
        "unregistered",
        state.last_outcome.detail,
    )
    delayed = Delivery("delayed", "later", "t2", 0, None, "", False, "w1")
    store.run_not_started(delayed, refusals.refused("proj.ping", ContentDisallowed("pickle")))
    store.run_not_started(delayed, refusals.refused("proj.ping", ContentDisallowed("pickle")))
    assert store.not_started() == {("unregistered", MISSING): 1, ("rejected", "proj.ping"): 2}


def test_an_end_recorded_before_the_beat_records_the_send_is_kept_and_joins_it(store, client):
    # A refusal is at once: the worker's record can reach Redis before the beat's finish.
    store.history_size = 10
    store.upsert(Entry("first", MISSING, Interval(60)))
    due = make_due(client, store, "first", 5)
    task_id = occurrence_id(store.keys.prefix, "first", due)
    refused = Delivery("periodic", "first", task_id, 0, due, "", False, "w1")
    store.run_not_started(refused, refusals.unregistered(MISSING))
    dispatcher(store, Recorder()).tick()
    state = store.state("first")
    assert (state.total_run_count, state.last_task_id) == (1, task_id)
    assert (state.last_outcome.outcome, state.last_outcome.task_id) == ("unregistered", task_id)
    [run] = store.history("first")
    assert (run.result, run.task_id, run.outcome) == ("sent", task_id, "unregistered")
    # An entry that is gone gets no run state back; its refusal is counted all the same.
    gone = Delivery("periodic", "gone", "t9", 0, None, "", False, "w1")
    store.run_not_started(gone, refusals.unregistered(MISSING))
    assert not client.hexists(store.keys.state, "gone")
    assert store.not_started() == {("unregistered", MISSING): 2}


@pytest.mark.parametrize(
    ("exc", "exception", "words"),
    [
        (
            ContentDisallowed("Refusing to deserialize untrusted content of type pickle"),
            "ContentDisallowed",
            "of type pickle; send it with a serializer the worker accepts",
        ),
        (ValueError("x" * 1000), "ValueError", "the worker refused the message: " + "x" * 300),
        (None, None, "it is not a task message the worker can read"),
    ],
)
def test_a_refusal_says_why_and_what_fixes_it(exc, exception, words):
    what = refusals.refused("proj.ping", exc)
    assert (what.outcome, what.task, what.exception) == ("rejected", "proj.ping", exception)
    assert words in what.detail and len(what.detail) < 500


def test_a_refusal_redis_does_not_take_costs_the_consumer_one_bounded_try_then_none(
    own_redis, prefix, monkeypatch, caplog
):
    monkeypatch.setattr(refusals, "_retry_at", 0.0)
    app = Celery("refusing", set_as_current=False)
    app.conf.redisbeat_redis_url = own_redis.url(0)
    app.conf.redisbeat_key_prefix = prefix
    refusals.watch(app)
    own_redis.stop()
    consumer = SimpleNamespace(app=app, hostname="w1")
    message = SimpleNamespace(headers={"id": "t1", "task": MISSING, "redisbeat_entry": "gone"})
    started = time.monotonic()
    refusals._unknown(sender=consumer, message=message, name=MISSING)
    assert time.monotonic() - started < 5
    assert caplog.text.count("could not record the run of gone (t1)") == 1
    started = time.monotonic()
    refusals._unknown(sender=consumer, message=message, name=MISSING)  # not even tried
    assert time.monotonic() - started < 0.1
    assert caplog.text.count("could not record the run of gone") == 1
