"""``redisbeat reshard N``: a live deployment's entries move to a new shard count, keeping
their definitions, due times, run state, owners and claims, while beats and editors run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.errors import ConfigurationError
from redisbeat.store.moving import Moves
from redisbeat.store.records import Outcome
from redisbeat.store.reshard import Reshard
from redisbeat.store.shards import Layout
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.occurrences import SECOND, Recorder, add_entries, check_sent, occurrences
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer

NAMES = [f"e{i}" for i in range(60)]


@pytest.fixture
def store(redis_server: RedisServer, prefix: str, sharded_stores: Any) -> ScheduleStore:
    made: ScheduleStore = sharded_stores(redis_server.url(), prefix, 1)
    return made


def every(name: str, source: str = "api") -> Entry:
    return Entry(name, "proj.ping", Interval(3600), source=source)


def snapshot(store: ScheduleStore) -> dict[str, Any]:
    """What a user sees of every entry: definition, next run, run state, owners."""
    entries = {e.name: e for e in store}
    states = dict(zip(entries, store.states(list(entries)), strict=True))
    owners = {src: store.names(src) for src in ("api", "django")}
    return {"entries": entries, "states": states, "owners": owners}


def where_stored(store: ScheduleStore, name: str) -> list[int]:
    """The shards whose keys hold anything of ``name``."""
    found = []
    for index in range(8):
        k = store.keys.of_shard(index)
        pipe = store.client.pipeline(transaction=False)
        pipe.hexists(k.entries, name)
        pipe.zscore(k.schedule, name)
        pipe.hexists(k.state, name)
        pipe.sismember(k.source("api"), name)
        pipe.sismember(k.source("django"), name)
        if any(pipe.execute()):
            found.append(index)
    return found


def run_one(store: ScheduleStore, name: str) -> None:
    """Claim and finish ``name`` once, as a beat does, so that it has a run state."""
    store.run_now(name)
    batch = store.claim("beat-x", 30 * SECOND, 100)
    claim = next(c for c in batch.claims if c.name == name)
    outcome = Outcome(name, "sent", claim.due_ms, claim.due_ms + 3600 * SECOND, "task-1")
    store.finish("beat-x", batch.lease_until_ms, [outcome])


def test_a_reshard_moves_every_entry_whole_and_leaves_nothing_behind(store: ScheduleStore):
    store.upsert_many(every(n, "django" if i % 3 == 0 else "api") for i, n in enumerate(NAMES))
    run_one(store, "e5")
    store.client.hset(store.keys.quarantine, "e7", '{"definition": "{", "error": "x"}')
    before = snapshot(store)
    for shards in (4, 3, 1):
        report = Reshard(store).run(shards)
        assert store.layout == Layout(shards)
        assert report.moved > 0
        assert snapshot(store) == before
        for name in NAMES:
            assert where_stored(store, name) == [store.layout.home(name)], name
        for index in range(4):
            k = store.keys.of_shard(index)
            assert not store.client.exists(k.moving, k.arrived)
    assert store.state("e5").last_task_id == "task-1"
    assert "e7" in store.quarantined()
    assert Reshard(store).run(1).moved == 0  # already there


def test_a_store_that_read_the_old_layout_writes_where_the_entry_now_lives(
    redis_server: RedisServer, prefix: str, store: ScheduleStore, sharded_stores: Any
):
    store.upsert_many(every(n) for n in NAMES)
    stale = sharded_stores(redis_server.url(), prefix, 1)
    assert stale.layout == Layout(1)  # read before the reshard
    Reshard(store).run(4)
    moved, gone = [n for n in NAMES if store.layout.home(n) != 0][:2]
    stale.upsert(Entry(moved, "proj.other", Interval(60)))
    assert stale.remove(gone)
    assert stale.layout == Layout(4)
    assert store.get(moved).task == "proj.other"
    assert where_stored(store, moved) == [store.layout.home(moved)]
    assert len(store) == len(NAMES) - 1 and gone not in store
    assert where_stored(store, gone) == []


def test_an_interrupted_reshard_is_finished_by_running_it_again(store: ScheduleStore):
    store.upsert_many(every(n) for n in NAMES)
    layout = Layout(1, 4)
    Reshard(store)._begin(layout)  # the command stopped after taking some entries out
    leaving = [n for n in NAMES if layout.home(n) != 0][:20]
    taken = Moves(store.runner, store.keys).take_out(leaving, layout)
    assert sum(isinstance(t, str) for t in taken) == 20
    assert len(store) == len(NAMES) - 20  # out of every schedule: no beat sends them
    with pytest.raises(ConfigurationError, match=r"reshard .* to 4 shards is under way"):
        Reshard(store).run(2)
    Reshard(store).run(4)
    assert sorted(e.name for e in store) == sorted(NAMES)
    assert all(store.state(n).next_run_at for n in NAMES)


def test_an_entry_a_beat_holds_moves_once_its_beat_has_finished_it(store: ScheduleStore):
    store.upsert_many(every(n) for n in NAMES)
    held = next(n for n in NAMES if Layout(1, 4).home(n) != 0)
    store.run_now(held)
    batch = store.claim("beat-x", 30 * SECOND, 100)
    (claim,) = batch.claims
    done = threading.Event()
    reshard = threading.Thread(target=lambda: (Reshard(store).run(4), done.set()))
    reshard.start()
    try:
        wait_until(lambda: store.layout.moving_to == 4 or done.is_set(), 10, "the move")
        assert not done.wait(0.5), "the reshard waits for the claim"
        assert where_stored(store, held) == [0]
        nxt = claim.due_ms + 3600 * SECOND
        store.finish("beat-x", batch.lease_until_ms, [Outcome(held, "sent", claim.due_ms, nxt)])
        assert done.wait(10)
    finally:
        reshard.join(15)
    assert where_stored(store, held) == [store.layout.home(held)]
    assert store.state(held).next_run_at is not None


def test_the_command_names_the_deployment_and_refuses_a_bad_count(
    redis_server: RedisServer, prefix: str, store: ScheduleStore
):
    store.upsert_many(every(n) for n in NAMES)
    url = ["--url", redis_server.url(), "--prefix", prefix]
    done = redisbeat_command(*url, "reshard", "2")
    assert done.returncode == 0, done.stderr
    assert "1 -> 2 shard(s)" in done.stdout
    bad = redisbeat_command(*url, "reshard", "0")
    assert bad.returncode == 2 and "SHARDS" in bad.stderr
    neither = redisbeat_command("reshard", "2")
    assert neither.returncode == 2 and "-A/--app or with --url" in neither.stderr
    store.forget_layout()
    assert store.layout == Layout(2) and len(store) == len(NAMES)


def test_the_command_runs_as_the_documented_resharder_user(
    redis_server: RedisServer, prefix: str, store: ScheduleStore
):
    store.upsert_many(every(n) for n in NAMES)
    page = (Path(__file__).parents[1] / "docs" / "security.md").read_text()
    editor = re.search(r"^ACL SETUSER editor reset on >s3cret (.+)$", page, re.M)
    resharder = re.search(r"^ACL SETUSER resharder reset on >s3cret (.+)$", page, re.M)
    assert editor and resharder
    commands = [r for r in editor[1].split() if r.startswith("+")]
    rules = resharder[1].replace("<the editor's commands>", " ".join(commands))
    admin = redis.Redis.from_url(redis_server.url())
    admin.execute_command(
        "ACL",
        "SETUSER",
        "resharder",
        "reset",
        "on",
        ">pw",
        *rules.replace("redisbeat", prefix).split(),
    )
    try:
        url = redis_server.url().replace("redis://", "redis://resharder:pw@")
        done = redisbeat_command("--url", url, "--prefix", prefix, "reshard", "3")
        assert done.returncode == 0, done.stderr
        store.forget_layout()
        assert store.layout == Layout(3) and len(store) == len(NAMES)
    finally:
        admin.execute_command("ACL", "DELUSER", "resharder")
        admin.close()


def redisbeat_command(*args: str, env: dict[str, str] | None = None) -> Any:
    command = [str(Path(sys.executable).with_name("redisbeat")), *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


# -- real beats -------------------------------------------------------------------------------


def test_two_beats_send_every_occurrence_once_across_a_reshard_up_and_down(
    redis_server: RedisServer, prefix: str, beats_for: Any, store: ScheduleStore
):
    reshard_under_beats(beats_for, redis_server, redis_server.url(), store, ("3", "2"))


def test_on_a_cluster_a_reshard_spreads_the_entries_over_masters_with_beats_running(
    rig: ClusterRig, redis_server: RedisServer, prefix: str, beats_for: Any, sharded_stores: Any
):
    store = sharded_stores(rig.url, prefix, 1)
    reshard_under_beats(beats_for, redis_server, rig.url, store, ("6",))
    masters = {rig.node_for_key(s.keys.schedule) for s in store.all_shards()}
    assert len(store.all_shards()) == 6 and len(masters) >= 2


def reshard_under_beats(
    beats_for: Any, broker: RedisServer, url: str, store: ScheduleStore, counts: tuple[str, ...]
) -> None:
    """24 entries due every 2 s; the command moves them to each of ``counts`` shards in turn
    while two beats run (with one shard in their settings) and an editor writes: every
    occurrence is sent, none twice, and each entry ends up only where the last count puts it.
    ``store``: a store of the deployment at ``url``, with one shard in its settings.
    """
    prefix = store.keys.prefix
    queue = redis.Redis.from_url(broker.url(1), decode_responses=True)
    recorder = Recorder(queue)
    recorder.drain()
    beats: Beats = beats_for(broker, prefix, TEST_STORE_URL=url, TEST_HEARTBEAT="0.5")
    beats.start(2)
    try:
        wait_until(lambda: len(store.beats()) == 2, 30, "both beats to register")
        start = store.now_ms() + SECOND
        anchors = add_entries(store, 24, 2.0, start)
        for shards in counts:
            sent = len(recorder.sent)
            recorder.until(lambda n=sent: len(recorder.sent) > n + 10, 30, "sends")  # type: ignore[misc]
            editor = threading.Thread(target=edit_while_moving, args=(store,))
            editor.start()
            done = redisbeat_command("--url", url, "--prefix", prefix, "reshard", shards)
            editor.join(30)
            assert done.returncode == 0, done.stderr
        end = store.now_ms() + 4 * SECOND
        recorder.until(lambda: max(s.due_ms for s in recorder.sent) >= end, 30, "more rounds")
        beats.stop_all()
        recorder.drain()
        window = [s for s in recorder.sent if start <= s.due_ms < end and s.entry in anchors]
        counts_sent = check_sent(window, occurrences(anchors, 2.0, start, end), prefix)
        assert not {k: n for k, n in counts_sent.items() if n > 1}
        assert len({s.beat for s in recorder.sent}) == 2, "both beats sent"
        store.forget_layout()  # this store is no beat: it read the layout at the last edit
        assert store.layout == Layout(int(counts[-1]))
        assert all(where_stored(store, n) == [store.layout.home(n)] for n in anchors)
    finally:
        queue.close()


def edit_while_moving(store: ScheduleStore) -> None:
    """An editor's writes during the move: new entries that are never due, and removals."""
    for i in range(20):
        store.upsert(Entry(f"edit{i}", "proj.ping", Interval(3600)))
    for i in range(0, 20, 2):
        store.remove(f"edit{i}")
