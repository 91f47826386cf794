"""The worker hook's duplicate check with real ``celery worker`` processes: copies of a task
id redisbeat sent are dropped (one at a time, and by two workers at once), a message its
worker gave back unrun still runs, and a worker that cannot reach Redis runs everything.

The task counts its own runs (``TEST_RUNS_URL``), so no record of redisbeat's is trusted for
how often it ran."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from click.testing import CliRunner

from redisbeat import Entry, Interval
from redisbeat.cli import main as redisbeat_cli
from redisbeat.schedule.clock import to_ms
from redisbeat_testkit.ports import free_port, wait_until
from redisbeat_testkit.processes import Beat


def runs(client: Any, prefix: str) -> dict[str, int]:
    """How often each task id ran, as the task itself counted."""
    return {k: int(v) for k, v in client.hgetall(f"{prefix}:runs").items()}


def skipped(port: int) -> float:
    """``redisbeat_duplicates_skipped_total`` as a worker serves it (0 before any)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    found = re.findall(
        r'^redisbeat_duplicates_skipped_total\{task="proj.ping"\} (\S+)$', text, re.M
    )
    return float(found[0]) if found else 0.0


@contextmanager
def sender(url: str) -> Iterator[Celery]:
    app = Celery("sender", broker=url, set_as_current=False)
    try:
        yield app
    finally:
        app.close()


def send_copy(app: Celery, task_id: str, name: str, due: int, **headers: Any) -> None:
    """A message as a beat sends it: the entry's header, its due time, its task id."""
    headers = {"redisbeat_entry": name, "redisbeat_due": due, **headers}
    app.send_task("proj.ping", task_id=task_id, headers=headers)


def ready(worker: Beat) -> None:
    wait_until(lambda: " ready." in worker.output(), 60, "the worker to be ready", interval=0.1)


def hook_env(redis_server: Any, prefix: str, **env: str) -> dict[str, str]:
    """A worker with the hook, its task counting its runs in ``<prefix>:runs``."""
    runs_env = {"TEST_RUNS_URL": redis_server.url(0), "TEST_RUNS_KEY": f"{prefix}:runs"}
    return {"TEST_TRACK_RUNS": "1", **runs_env, **env}


def test_a_worker_runs_a_task_id_once_and_drops_the_copies_that_follow(
    redis_server, prefix, beats_for, stores, client
):
    store = stores(redis_server, prefix)
    store.history_size = 10
    store.upsert(Entry("report", "proj.ping", Interval(3600)))
    port = free_port()
    procs = beats_for(
        redis_server,
        prefix,
        **hook_env(redis_server, prefix, TEST_HISTORY="10"),
        TEST_WORKER_METRICS_PORT=str(port),
    )
    worker = procs.start_worker(concurrency=2)
    procs.start(1)
    wait_until(store.beats, 60, "the beat")
    store.run_now("report")
    task_id = wait_until(lambda: store.state("report").last_task_id, 60, "the beat's send")
    wait_until(lambda: runs(client, prefix) == {task_id: 1}, 60, "the first run")
    wait_until(lambda: store.state("report").last_outcome, 30, "the first run's end")
    due = to_ms(store.state("report").last_run_at)
    with sender(redis_server.url(1)) as app:
        send_copy(app, task_id, "report", due)  # as a beat that took over a dead one's claim
        send_copy(app, task_id, "report", due)
    wait_until(lambda: skipped(port) == 2, 60, "the worker to drop both copies")
    assert runs(client, prefix) == {task_id: 1}, worker.output()[-3000:]
    state = store.state("report")
    assert state.duplicates == 2 and state.last_duplicate.stage == "ended"
    assert state.last_outcome.outcome == "succeeded"
    history = store.history("report")
    assert [(r.result, r.outcome) for r in history] == [
        ("duplicate", "duplicate"),
        ("duplicate", "duplicate"),
        ("sent", "succeeded"),
    ]
    assert history[0].reason == f"already ran on {history[2].worker}"
    deployment = ["--url", redis_server.url(0), "--prefix", prefix]
    wide = {"COLUMNS": "200"}
    show = CliRunner().invoke(redisbeat_cli, [*deployment, "show", "report"], env=wide)
    assert show.exit_code == 0, show.output
    assert re.search(r"│ duplicates +│ 2 in all; the last at ", show.output), show.output
    listed = CliRunner().invoke(redisbeat_cli, [*deployment, "history", "report"], env=wide)
    assert listed.output.count("duplicate (already ran on ") == 2, listed.output
    assert f"Task proj.ping[{task_id}] received" in worker.output()  # once: the first
    assert worker.output().count(f"Task proj.ping[{task_id}] received") == 1


def test_two_workers_given_two_copies_of_each_task_id_at_once_run_each_once(
    redis_server, prefix, beats_for, stores, client
):
    store = stores(redis_server, prefix)
    store.upsert(Entry("poll", "proj.ping", Interval(3600)))
    client.hset(store.keys.state, "poll", json.dumps({"total_run_count": 1}))  # as if sent
    ports = [free_port(), free_port()]
    procs = beats_for(redis_server, prefix, **hook_env(redis_server, prefix))
    workers = [procs.start_worker(1, TEST_WORKER_METRICS_PORT=str(p)) for p in ports]
    for worker in workers:
        ready(worker)
    ids = [f"{prefix}-{i}" for i in range(40)]
    with sender(redis_server.url(1)) as app:
        for task_id in ids:
            send_copy(app, task_id, "poll", 1)
            send_copy(app, task_id, "poll", 1)
    wait_until(lambda: sum(map(skipped, ports)) == len(ids), 60, "every copy to be dropped")
    wait_until(lambda: len(runs(client, prefix)) == len(ids), 60, "every task id to run")
    assert runs(client, prefix) == dict.fromkeys(ids, 1)
    assert all(skipped(p) for p in ports), "both workers dropped copies"
    ran_on = set(client.hvals(f"{prefix}:runs:on"))
    assert len(ran_on) == 2, ran_on
    assert store.state("poll").duplicates == len(ids)


def test_a_message_its_worker_gave_back_unrun_runs_on_the_next_worker(
    redis_server, prefix, beats_for, stores, client
):
    store = stores(redis_server, prefix)
    procs = beats_for(redis_server, prefix, **hook_env(redis_server, prefix))
    first = procs.start_worker(1)
    ready(first)
    with sender(redis_server.url(1)) as app:
        app.send_task("proj.sleep", args=(3,))  # holds the worker's only process
        send_copy(app, "given-back", "e", 1)  # received and marked, waiting for a process
    mark = store.shard("e").keys.seen("given-back")
    wait_until(lambda: client.get(mark), 30, "the receipt's mark")
    assert json.loads(client.get(mark))["stage"] == "received"
    first.process.send_signal(signal.SIGTERM)  # a warm stop gives the unrun message back
    # The sleep ends during the stop; now and then the pool's child then waits out billiard's
    # 30 s for the parent to take its result (GUARANTEE_MESSAGE_CONSUMPTION_RETRY_LIMIT).
    first.process.wait(60)
    assert runs(client, prefix) == {}
    second = procs.start_worker(1)
    wait_until(lambda: runs(client, prefix), 60, "the message to run on the next worker")
    assert runs(client, prefix) == {"given-back": 1}
    assert client.hget(f"{prefix}:runs:on", "given-back") == "worker1@test"
    assert "dropped" not in second.output() and "duplicate" not in second.output()


def test_a_worker_that_cannot_reach_redis_runs_every_task_and_says_so_once(
    redis_server, own_redis, prefix, beats_for, client
):
    procs = beats_for(
        redis_server, prefix, **hook_env(redis_server, prefix), TEST_STORE_URL=own_redis.url(0)
    )
    own_redis.stop()
    worker = procs.start_worker(1)
    ready(worker)
    with sender(redis_server.url(1)) as app:
        for copy in range(3):  # copies, but nothing can tell: each runs (at least once)
            send_copy(app, "unchecked", "e", 1, copy=copy)
        wait_until(lambda: runs(client, prefix) == {"unchecked": 3}, 60, "every copy to run")
        assert worker.output().count("cannot check for duplicate deliveries") == 1
        own_redis.start()
        sent: list[str] = []

        def checked_again() -> bool:
            # Unchecked for a few seconds after a failure: new ids until one is checked.
            sent.append(f"again-{len(sent)}")
            send_copy(app, sent[-1], "e", 1)
            wait_until(lambda: sent[-1] in runs(client, prefix), 30, "its run")
            return "Redis answers again" in worker.output()

        wait_until(checked_again, 60, "checks to resume", interval=0.5)
        send_copy(app, sent[-1], "e", 1)  # a copy, dropped now
        send_copy(app, "after", "e", 1)  # received after it, by the same consumer
        wait_until(lambda: "after" in runs(client, prefix), 30, "the next message's run")
    assert runs(client, prefix)[sent[-1]] == 1
