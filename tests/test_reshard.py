"""``redisbeat reshard N``: a live deployment's entries move to a new shard count, keeping
their definitions, due times, run state, owners, histories, running markers and claims, and
its pending delayed tasks move with them, while beats send and editors write."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id
from redisbeat.errors import ConfigurationError
from redisbeat.schedule.clock import from_ms, to_ms
from redisbeat.schedule.delayed import DelayedTask
from redisbeat.store.delayed_moving import DelayedMoves
from redisbeat.store.keys import DELAYED_MARK
from redisbeat.store.moving import Moves
from redisbeat.store.receipts import Delivery, Receipt
from redisbeat.store.records import Outcome
from redisbeat.store.reshard import Reshard
from redisbeat.store.shards import Layout
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.messages import Sent
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
        pipe.exists(k.history(name))
        pipe.hexists(k.running, name)
        pipe.zscore(k.spent, name)
        if any(pipe.execute()):
            found.append(index)
    return found


def delayed_stored(store: ScheduleStore, key: str, owner: str | None = None) -> list[int]:
    """The shards whose keys hold anything of delayed task ``key``."""
    found = []
    for index in range(8):
        k = store.keys.of_shard(index)
        pipe = store.client.pipeline(transaction=False)
        pipe.hexists(k.delayed_tasks, key)
        pipe.zscore(k.delayed, key)
        pipe.hexists(k.delayed_quarantine, key)
        pipe.hexists(k.delayed_moving, key)
        pipe.zscore(k.delayed_owner(owner or "-"), key)
        if any(pipe.execute()):
            found.append(index)
    return found


def nothing_moving(store: ScheduleStore) -> bool:
    """No shard keeps a reshard's bookkeeping."""
    keys = store.keys
    return not any(
        store.client.exists(k.moving, k.arrived, k.delayed_moving, k.delayed_arrived)
        for k in map(keys.of_shard, range(8))
    )


def run_one(
    store: ScheduleStore, name: str, *, last: bool = False, task_id: str = "task-1"
) -> None:
    """Claim and finish ``name`` once, as a beat does, so that it has a run state (and a
    history, with ``history_size``); ``last``: its last run (it is spent)."""
    store.run_now(name)
    batch = store.claim("beat-x", 30 * SECOND, 100)
    claim = next(c for c in batch.claims if c.name == name)
    nxt = None if last else claim.due_ms + 3600 * SECOND
    outcome = Outcome(name, "sent", claim.due_ms, nxt, task_id)
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


def test_a_reshard_moves_each_entrys_history_running_marker_and_spent_time_with_it(
    store: ScheduleStore,
):
    store.history_size = 10
    store.upsert_many(every(n) for n in NAMES)
    for i, name in enumerate(NAMES[:20]):
        run_one(store, name, task_id=f"{name}-1")
        run_one(store, name, last=i % 4 == 0, task_id=f"{name}-2")  # spent: left for good
        store.run_started(name, f"{name}-2", None, "worker-1")
    before = {name: moved_records(store, name) for name in NAMES}
    assert all(before[n]["history"] and before[n]["running"] for n in NAMES[:20])
    assert sum(before[n]["spent"] is not None for n in NAMES) == 5
    for shards in (4, 1, 3):
        Reshard(store).run(shards)
        for name in NAMES:
            assert moved_records(store, name) == before[name], name
            assert where_stored(store, name) == [store.layout.home(name)], name
        assert nothing_moving(store)
    assert [r.task_id for r in store.history(NAMES[1])] == [f"{NAMES[1]}-2", f"{NAMES[1]}-1"]
    assert set(store.running(NAMES[:20], store.now_ms())) == set(NAMES[:20])


def moved_records(store: ScheduleStore, name: str) -> dict[str, Any]:
    """What a move must carry of an entry besides its definition and state, as stored."""
    k = store.shard(name).keys
    return {
        "history": store.client.lrange(k.history(name), 0, -1),
        "running": store.client.hget(k.running, name),
        "spent": store.client.zscore(k.spent, name),
    }


def test_a_copy_of_a_send_that_arrives_after_its_entry_moved_is_still_dropped(
    store: ScheduleStore,
):
    """A beat killed mid-send leaves the occurrence to another, which sends it again under the
    same task id; a worker that received the first copy before a reshard moved the entry,
    and the second after, runs it once: the mark of the last send moves with the entry."""
    store.upsert_many(every(n) for n in NAMES)
    for name in NAMES:
        run_one(store, name, task_id=f"{name}-1")
        run_one(store, name, task_id=f"{name}-2")
        for task_id in (f"{name}-1", f"{name}-2"):
            first = Delivery("periodic", name, task_id, 0, None, "tag-a", False, "w1")
            assert store.receive(first, 60_000).run
    before = {n: store.client.pttl(store.shard(n).keys.seen(f"{n}-2")) for n in NAMES}
    Reshard(store).run(4)
    moved = [n for n in NAMES if store.layout.home(n) != 0]
    assert moved and all(where_stored(store, n) == [store.layout.home(n)] for n in NAMES)
    for name in NAMES:
        mark = store.shard(name).keys.seen(f"{name}-2")
        # Its time left goes with it, not a new window.
        assert 0 < store.client.pttl(mark) <= before[name], name
        again = Delivery("periodic", name, f"{name}-2", 0, None, "tag-b", False, "w2")
        assert store.receive(again, 60_000) == Receipt(False, "received", "w1"), name
    # An earlier send's mark stays where it was, and expires; the last send's left.
    old = store.keys.of_shard(0)
    assert all(store.client.exists(old.seen(f"{n}-1")) for n in moved)
    assert not any(store.client.exists(old.seen(f"{n}-2")) for n in moved)


def test_a_history_an_editors_move_leaves_behind_is_brought_by_the_reshard_newest_first(
    store: ScheduleStore,
):
    store.history_size = 10
    store.upsert_many(every(n) for n in NAMES)
    layout = Layout(1, 4)
    name = next(n for n in NAMES if layout.home(n) != 0)
    run_one(store, name, task_id="old-1")
    run_one(store, name, task_id="old-2")
    old = store.client.lrange(store.keys.history(name), 0, -1)
    Reshard(store)._begin(layout)
    store.upsert(Entry(name, "proj.other", Interval(3600)))  # the editor moves it first
    home = store.keys.of_shard(layout.home(name))
    assert store.client.hget(home.arrived, name) == "h"  # its history is still to come
    assert store.client.lrange(store.keys.history(name), 0, -1) == old
    run_one(store, name, task_id="new-1")  # sent from its new shard meanwhile
    Reshard(store).run(4)
    assert [r.task_id for r in store.history(name)] == ["new-1", "old-2", "old-1"]
    assert store.client.lrange(home.history(name), 1, -1) == old
    assert where_stored(store, name) == [layout.home(name)]
    assert store.get(name).task == "proj.other" and nothing_moving(store)


def test_an_interrupted_move_of_histories_and_delayed_tasks_is_finished_by_running_again(
    store: ScheduleStore,
):
    store.history_size = 10
    store.upsert_many(every(n) for n in NAMES)
    layout = Layout(1, 4)
    leaving = [n for n in NAMES if layout.home(n) != 0][:10]
    for name in leaving:
        run_one(store, name)
    histories = {n: store.client.lrange(store.keys.history(n), 0, -1) for n in leaving}
    eta = from_ms(store.now_ms() + 3600 * SECOND)
    items = [
        {"task": "proj.ping", "key": f"k{i}", "owner": f"o{i % 3}", "eta": eta} for i in range(300)
    ]
    store.delay_many(items)
    Reshard(store)._begin(layout)  # the command stopped halfway through two moves
    entries = Moves(store.runner, store.keys)
    taken = dict(zip(leaving, entries.take_out(leaving, layout, lists=True), strict=True))
    for name in leaving[:5]:  # written in the new shard, not yet forgotten in the old one
        Moves(store.runner, store.keys.of_shard(layout.home(name))).put_in(
            {name: taken[name]}, layout
        )
    keys = [f"k{i}" for i in range(300) if layout.home(f"k{i}") != 0][:100]
    tasks = dict(
        zip(keys, DelayedMoves(store.runner, store.keys).take_out(keys, layout), strict=True)
    )
    for key in keys[:50]:
        DelayedMoves(store.runner, store.keys.of_shard(layout.home(key))).put_in(
            {key: tasks[key]}, layout
        )
    # Set aside, and still read back and listed.
    for key in (keys[0], keys[-1]):  # written in its new shard, or only set aside
        task = store.get_delayed(key)
        assert task is not None and (task.state, task.eta) == ("pending", eta)
    assert sum(len(all_pending(store, f"o{i}")) for i in range(3)) == 300
    Reshard(store).run(4)
    for name in leaving:
        assert store.client.lrange(store.shard(name).keys.history(name), 0, -1) == histories[name]
        assert where_stored(store, name) == [layout.home(name)]
    for i in range(300):
        task = store.get_delayed(f"k{i}")
        assert task is not None and (task.eta, task.owner) == (eta, f"o{i % 3}")
        assert delayed_stored(store, f"k{i}", f"o{i % 3}") == [layout.home(f"k{i}")]
    assert [store.count_pending(f"o{i}") for i in range(3)] == [100, 100, 100]
    assert nothing_moving(store)


def all_pending(store: ScheduleStore, owner: str | None, page: int = 70) -> list[DelayedTask]:
    """Every pending task of ``owner`` (None: of every owner), page by page."""
    tasks: list[DelayedTask] = []
    while True:
        after = tasks[-1] if tasks else None
        batch = store.upcoming(page, after) if owner is None else store.pending(owner, page, after)
        if not batch:
            return tasks
        tasks += batch


def test_delay_change_cancel_and_listing_work_while_thousands_of_delayed_tasks_move(
    redis_server: RedisServer, prefix: str, store: ScheduleStore, sharded_stores: Any
):
    """One writer delays, reschedules, cancels and lists while the command moves 3,000
    tasks; a task a beat holds moves once the beat has sent it, and what was written
    meanwhile under its key moves after."""
    now = store.now_ms()
    want: dict[str, tuple[int, str]] = {}  # key -> (due, owner)
    for i in range(3000):
        want[f"k{i}"] = (now + (3600 + i) * SECOND, f"o{i % 3}")
    store.delay_many(
        {"task": "proj.ping", "key": k, "owner": o, "eta": from_ms(d)} for k, (d, o) in want.items()
    )
    held = next(f"h{i}" for i in range(100) if Layout(1, 4).home(f"h{i}") != 0)
    store.delay("proj.ping", key=held, owner="o0", countdown=0)
    batch = store.claim("beat-x", 60 * SECOND, 10)
    (claim,) = [c for c in batch.claims if c.name == DELAYED_MARK + held]
    want[held] = (claim.due_ms, "o0")  # listed as being sent
    beat = sharded_stores(redis_server.url(), prefix, 1)  # another beat, with its own cursor
    gone = send_one(beat, next(f"s{i}" for i in range(100) if Layout(4).home(f"s{i}") != 0))
    mover = sharded_stores(redis_server.url(), prefix, 1)
    done = threading.Event()
    reshard = threading.Thread(target=lambda: (Reshard(mover).run(4), done.set()))
    reshard.start()
    try:
        wait_until(lambda: store.client.hget(store.keys.layout, "moving_to") == "4", 10, "move")
        for i in range(60):  # the reshard cannot end meanwhile: the beat holds its claim
            write_while_moving(store, want, i)
            if i % 15 == 0:
                check_pending(store, want)
        assert not done.is_set() and store.layout.moving_to == 4
        assert store.cancel(held) is False  # the beat is sending it
        assert store.reschedule(held, countdown=60) is None
        eta = from_ms(now + 7200 * SECOND)  # a new task under its key, where the beat holds it
        assert store.delay("proj.ping", key=held, owner="o1", eta=eta) == held
        sent = Outcome(DELAYED_MARK + held, "sent", claim.due_ms, None, "task-held")
        store.finish("beat-x", batch.lease_until_ms, [sent])
        assert done.wait(30), "the reshard ends once the beat has finished"
    finally:  # a failed check still lets the reshard end (a claim finished is not handed back)
        back = Outcome(DELAYED_MARK + held, "release", claim.due_ms)
        store.finish("beat-x", batch.lease_until_ms, [back])
        reshard.join(30)
    want[held] = (to_ms(eta), "o1")
    check_pending(store, want)
    sent = store.get_delayed(gone)  # sent from its old shard before: still answered
    assert sent is not None and (sent.state, sent.task_id) == ("sent", f"id-{gone}")
    assert store.client.exists(store.keys.of_shard(Layout(4).home(gone)).delayed_done(gone))
    for key, (_due, owner) in want.items():
        assert delayed_stored(store, key, owner) == [Layout(4).home(key)], key
    assert nothing_moving(store)


def send_one(store: ScheduleStore, key: str) -> str:
    """Delay ``key`` for now, and claim and send it as a beat does (task id ``id-<key>``)."""
    store.delay("proj.ping", key=key, countdown=0)
    batch = store.claim("beat-y", 30 * SECOND, 10)
    (claim,) = [c for c in batch.claims if c.name == DELAYED_MARK + key]
    sent = Outcome(DELAYED_MARK + key, "sent", claim.due_ms, None, f"id-{key}")
    store.finish("beat-y", batch.lease_until_ms, [sent])
    return key


def write_while_moving(store: ScheduleStore, want: dict[str, tuple[int, str]], i: int) -> None:
    """The i-th of a writer's changes during a move, and what it leaves pending in ``want``."""
    key = f"k{i * 50}"
    due, owner = want[key]
    if i % 3 == 0:
        assert store.cancel(key) is True
        del want[key]
    elif i % 3 == 1:
        moved = store.reschedule(key, eta=from_ms(due + 30 * SECOND))
        assert moved is not None and to_ms(moved) == due + 30 * SECOND
        want[key] = (due + 30 * SECOND, owner)
    else:
        fresh = f"n{i}"
        store.delay("proj.ping", key=fresh, owner=owner, eta=from_ms(due + 1))
        want[fresh] = (due + 1, owner)
    got = store.get_delayed(key)
    assert (got is None) if key not in want else (got and to_ms(got.eta) == want[key][0])


def check_pending(store: ScheduleStore, want: dict[str, tuple[int, str]]) -> None:
    """Each owner's listing, and every owner's, page by page, is exactly what is pending
    (a task being sent is listed at the end of its claim's lease among every owner's)."""
    for owner in ("o0", "o1", "o2"):
        listed = [(t.key, to_ms(t.eta)) for t in all_pending(store, owner, 400)]
        expected = sorted(
            ((k, d) for k, (d, o) in want.items() if o == owner), key=lambda r: (r[1], r[0])
        )
        assert listed == expected, owner
    every = [t.key for t in all_pending(store, None, 900)]
    assert len(every) == len(set(every)) and set(every) == set(want)


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
    redis_server: RedisServer, prefix: str, store: ScheduleStore, sharded_stores: Any
):
    store.history_size = 5
    store.upsert_many(every(n) for n in NAMES)
    for name in NAMES[:10]:
        run_one(store, name)  # histories to move
    eta = from_ms(store.now_ms() + 3600 * SECOND)
    store.delay_many({"task": "t", "owner": "o", "eta": eta} for _ in range(50))
    beat = sharded_stores(redis_server.url(), prefix, 1)
    gone = send_one(beat, next(f"s{i}" for i in range(100) if Layout(3).home(f"s{i}") != 0))
    with documented_user(redis_server, prefix, "resharder") as url:
        done = redisbeat_command("--url", url, "--prefix", prefix, "reshard", "3")
        assert done.returncode == 0, done.stderr
    store.forget_layout()
    assert store.layout == Layout(3) and len(store) == len(NAMES)
    assert all(len(store.history(n)) == 1 for n in NAMES[:10])
    assert store.count_pending("o") == 50 and nothing_moving(store)
    assert store.client.exists(store.keys.of_shard(Layout(3).home(gone)).delayed_done(gone))


def test_an_editor_with_the_documented_acl_writes_while_a_reshard_runs_and_loses_no_history(
    redis_server: RedisServer, prefix: str, store: ScheduleStore, sharded_stores: Any
):
    store.history_size = 5
    store.upsert_many(every(n) for n in NAMES)
    layout = Layout(1, 4)
    name = next(n for n in NAMES if layout.home(n) != 0)
    run_one(store, name)
    keys = [k for k in (f"k{i}" for i in range(100)) if layout.home(k) != 0][:20]
    store.delay_many({"task": "t", "key": k, "owner": "o", "countdown": 3600} for k in keys)
    Reshard(store)._begin(layout)
    with documented_user(redis_server, prefix, "editor") as url:
        editor = sharded_stores(url, prefix, 1)
        assert editor.upsert(Entry(name, "proj.other", Interval(3600)))  # moved first
        assert editor.cancel(keys[0]) and editor.reschedule(keys[1], countdown=60)
        assert editor.delay("t", key="new", owner="o", countdown=60) == "new"
        got = editor.get_delayed(keys[2])
        assert got is not None and got.state == "pending"
        assert {t.key for t in editor.pending("o")} == {*keys[1:], "new"}
    Reshard(store).run(4)
    assert [r.task_id for r in store.history(name)] == ["task-1"]
    assert store.count_pending("o") == 20 and nothing_moving(store)


@contextlib.contextmanager
def documented_user(server: RedisServer, prefix: str, user: str) -> Iterator[str]:
    """A URL as ``user`` (``editor`` or ``resharder``), made as docs/security.md says for a
    deployment split into shards: the user exists until the block ends."""
    page = (Path(__file__).parents[1] / "docs" / "security.md").read_text()
    editor = re.search(r"^ACL SETUSER editor reset on >s3cret (.+)$", page, re.M)
    resharder = re.search(r"^ACL SETUSER resharder reset on >s3cret (.+)$", page, re.M)
    assert editor and resharder
    commands = [r for r in editor[1].split() if r.startswith("+")]
    rules = resharder[1].replace("<the editor's commands>", " ".join(commands))
    if user == "editor":  # with the other shards' key pattern, as the page says
        rules = editor[1].replace("~{redisbeat}:*", "~{redisbeat}:* ~{redisbeat:*}:*")
    admin = redis.Redis.from_url(server.url())
    setuser = ["ACL", "SETUSER", user, "reset", "on", ">pw"]
    admin.execute_command(*setuser, *rules.replace("redisbeat", prefix).split())
    try:
        yield server.url().replace("redis://", f"redis://{user}:pw@")
    finally:
        admin.execute_command("ACL", "DELUSER", user)
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
    """24 entries due every 2 s and 1,500 delayed tasks due over 12 s; the command moves them
    to each of ``counts`` shards in turn while two beats run (with one shard in their
    settings) and an editor writes, delays, reschedules and cancels: every occurrence and
    every task is sent, none twice, and each entry ends up only where the last count puts it.
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
        plan = DelayedPlan(store, 1500, start + 2 * SECOND, start + 14 * SECOND)
        for round_, shards in enumerate(counts):
            sent = len(recorder.sent)
            recorder.until(lambda n=sent: len(recorder.sent) > n + 10, 30, "sends")  # type: ignore[misc]
            editor = threading.Thread(target=edit_while_moving, args=(store, plan, round_))
            editor.start()
            done = redisbeat_command("--url", url, "--prefix", prefix, "reshard", shards)
            editor.join(30)
            assert done.returncode == 0, done.stderr
            moved = re.search(r"(\d+) delayed tasks moved", done.stdout)
            assert moved and int(moved[1]) > 0, done.stdout  # some were pending, and moved
            assert not editor.is_alive() and plan.edited == round_ + 1
        end = store.now_ms() + 4 * SECOND
        recorder.until(lambda: max(s.due_ms for s in recorder.sent) >= end, 30, "more rounds")
        recorder.until(lambda: plan.all_sent(recorder.sent), 60, "every delayed task")
        beats.stop_all()
        recorder.drain()
        window = [s for s in recorder.sent if start <= s.due_ms < end and s.entry in anchors]
        counts_sent = check_sent(window, occurrences(anchors, 2.0, start, end), prefix)
        assert not {k: n for k, n in counts_sent.items() if n > 1}
        plan.check(recorder.sent, prefix)
        assert len({s.beat for s in recorder.sent}) == 2, "both beats sent"
        store.forget_layout()  # this store is no beat: it read the layout at the last edit
        assert store.layout == Layout(int(counts[-1]))
        assert all(where_stored(store, n) == [store.layout.home(n)] for n in anchors)
        assert store.count_pending() == 0 and nothing_moving(store)
    finally:
        queue.close()


class DelayedPlan:
    """Delayed tasks a test writes and changes, and the sends that must come of them."""

    def __init__(self, store: ScheduleStore, count: int, first_ms: int, last_ms: int) -> None:
        step = (last_ms - first_ms) // count
        #: Task key -> the due time it must be sent at, once.
        self.want = {f"d{i}": first_ms + i * step for i in range(count)}
        self.count = count
        self.edited = 0
        store.delay_many(
            {"task": "proj.ping", "key": k, "owner": f"o{i % 7}", "eta": from_ms(due)}
            for i, (k, due) in enumerate(self.want.items())
        )

    def edit(self, store: ScheduleStore, round_: int) -> None:
        """Cancel, reschedule and delay during a move, among the tasks due last."""
        for j in range(10):
            key = f"d{self.count - 1 - 30 * round_ - 3 * j}"
            if store.cancel(key):
                del self.want[key]
            key = f"d{self.count - 2 - 30 * round_ - 3 * j}"
            moved = store.reschedule(key, by=timedelta(seconds=1))
            if moved is not None:
                self.want[key] = to_ms(moved)
            key = f"new{round_}-{j}"
            due = store.now_ms() + 2 * SECOND + 10 * j
            store.delay("proj.ping", key=key, owner="o0", eta=from_ms(due))
            self.want[key] = due
        self.edited += 1

    def sent(self, sent: list[Sent]) -> Counter[tuple[str, int]]:
        return Counter((s.key, s.due_ms) for s in sent if s.key is not None)

    def all_sent(self, sent: list[Sent]) -> bool:
        return set(self.want.items()) <= set(self.sent(sent))

    def check(self, sent: list[Sent], prefix: str) -> None:
        """Each task sent exactly once, at its due time, under its own task id; no other."""
        counts = self.sent(sent)
        assert set(counts) == set(self.want.items())
        assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1][:5]
        for s in sent:
            if s.key is not None:
                assert s.task_id == occurrence_id(prefix, DELAYED_MARK + s.key, s.due_ms)


def edit_while_moving(store: ScheduleStore, plan: DelayedPlan, round_: int) -> None:
    """An editor's writes during the move: new entries that are never due, removals, and
    delayed tasks delayed, rescheduled and cancelled."""
    for i in range(20):
        store.upsert(Entry(f"edit{i}", "proj.ping", Interval(3600)))
    for i in range(0, 20, 2):
        store.remove(f"edit{i}")
    plan.edit(store, round_)
