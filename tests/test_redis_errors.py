"""Redis error replies, made to happen for real: OOM, READONLY, NOSCRIPT, WRONGTYPE, NOPERM.

Each is handled by a beat without dying: one log line per episode, backoff, no state half
written, and every occurrence sent once (catch-up rules apply to the time it could not run)
when Redis answers normally again.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from redis.client import Pipeline
from test_beats import add_interval_entries, broker, expected, store_for
from test_dispatcher import dispatcher, every, make_due

from redisbeat import Entry, ScheduleStore, StoreRefused
from redisbeat.beat.loop import Dispatcher
from redisbeat.cli import main
from redisbeat_testkit.messages import read_queue
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer

SECOND = 1000
#: Each private server starts a full sync to a new replica at once rather than after 5 s.
FAST_SYNC = ["--repl-diskless-sync-delay", "0"]


class Sender:
    """A publish callable that records sends and can run a hook (or fail) per entry."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.fail: set[str] = set()
        self.before_send: Callable[[str], None] | None = None

    def __call__(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        if self.before_send is not None:
            self.before_send(entry.name)
        if entry.name in self.fail:
            raise ConnectionError("broker down")
        self.sent.append((entry.name, due_ms))


def new_server(directory: Path) -> RedisServer:
    directory.mkdir()
    return RedisServer(directory, extra_args=FAST_SYNC).start()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private, non-persistent redis-server this test may misconfigure."""
    s = new_server(tmp_path / "redis")
    yield s
    s.stop()


@pytest.fixture
def other_server(tmp_path: Path) -> Iterator[RedisServer]:
    s = new_server(tmp_path / "other")
    yield s
    s.stop()


@pytest.fixture
def admin(server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(server.url(), decode_responses=True)
    yield c
    c.close()


@pytest.fixture
def store(server: RedisServer) -> Iterator[ScheduleStore]:
    s = ScheduleStore(redis.Redis.from_url(server.url(), decode_responses=True), prefix="p")
    yield s
    s.close()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="redisbeat")
    return caplog


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def error_count(client: redis.Redis, code: str) -> int:
    """How many error replies with this code Redis has sent (INFO errorstats)."""
    stat = client.info("errorstats").get(f"errorstat_{code}", {"count": 0})
    return int(stat["count"])


def make_oom(client: redis.Redis) -> None:
    """maxmemory reached for real: 2 MB of data, a limit 1 MB under the memory in use."""
    client.config_set("maxmemory-policy", "noeviction")
    client.setrange("filler", 2_000_000, "x")  # built in Redis, no big request buffer
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", used - 1_000_000)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("probe", "x")


def free_memory(client: redis.Redis) -> None:
    client.config_set("maxmemory", 0)


def snapshot(client: redis.Redis, store: ScheduleStore, state: bool = True) -> tuple[Any, ...]:
    """Everything a claim or finish writes (but the run states, with ``state=False``)."""
    k = store.keys
    return (
        client.zrange(k.schedule, 0, -1, withscores=True),
        client.hgetall(k.inflight),
        client.hgetall(k.state) if state else None,
    )


def tick_until(d: Dispatcher, done: Callable[[], bool], timeout: float, what: str) -> None:
    """Tick without waiting out the backoff (so many more ticks than a beat would make)."""
    wait_until(lambda: d.tick() >= 0 and done(), timeout, what)


# -- OOM ---------------------------------------------------------------------------------------


def test_out_of_memory_refuses_the_claim_whole_is_logged_once_and_catch_up_applies_after(
    store, admin, logs
):
    store.upsert_many([every("a", 1), every("b", 5, catch_up="skip", grace=1)])
    due = {n: make_due(admin, store, n, 10) for n in ("a", "b")}
    sender = Sender()
    d = dispatcher(store, sender)
    make_oom(admin)
    before = snapshot(admin, store)
    refused = error_count(admin, "OOM")
    # Refused for 2.5 s: two more occurrences of each entry fall due meanwhile.
    tick_until(d, lambda: store.now_ms() > due["a"] + 2500, 10, "2.5 s out of memory")
    assert error_count(admin, "OOM") - refused >= 10  # refused on many ticks...
    [line] = errors(logs)  # ...and said once
    assert "out of memory (maxmemory reached)" in line and "retrying with backoff" in line
    assert "OOM command not allowed when used memory > 'maxmemory'" in line  # Redis's words
    assert sender.sent == [] and snapshot(admin, store) == before  # no claim half-applied
    free_memory(admin)
    d.tick()
    # catch_up="once": one send, as the last occurrence due; "skip": b's only occurrence due
    # is 2.5 s late, beyond its 1 s grace, so nothing.
    [(name, sent_due)] = sender.sent
    now = store.now_ms()
    assert name == "a" and (sent_due - due["a"]) % 1000 == 0 and now - 1000 < sent_due <= now
    assert admin.zscore(store.keys.schedule, "a") == sent_due + 1000
    assert admin.zscore(store.keys.schedule, "b") == due["b"] + 5000
    assert store.state("a").total_run_count == 1 and admin.hlen(store.keys.inflight) == 0
    [back] = lines(logs, "answers normally again")
    assert "(it was out of memory)" in back


def test_a_batch_claimed_before_memory_ran_out_is_finished_and_nothing_sent_twice(
    store, admin, logs
):
    store.upsert_many([every("a", 1), every("b", 1)])
    due = {n: make_due(admin, store, n, 10) for n in ("a", "b")}
    sender = Sender()
    # Memory runs out while the batch is being sent: the finish, and later claims, meet OOM.
    sender.before_send = lambda name: make_oom(admin) if not sender.sent else None
    d = dispatcher(store, sender)
    d.tick()
    assert sorted(sender.sent) == sorted(due.items())
    # Redis runs a script's writes once its first write is let through, so the finish (which
    # first deletes its claims) completes; the next claim is refused before writing anything.
    assert admin.hlen(store.keys.inflight) == 0
    assert store.state("a").total_run_count == store.state("b").total_run_count == 1
    tick_until(d, lambda: store.now_ms() > max(due.values()) + 1500, 10, "1.5 s out of memory")
    assert len(lines(logs, "out of memory")) == 1 and len(sender.sent) == 2
    free_memory(admin)
    tick_until(d, lambda: len(sender.sent) == 4, 10, "one catch-up send each")
    assert len(set(sender.sent)) == 4 and admin.hlen(store.keys.inflight) == 0


# -- READONLY ----------------------------------------------------------------------------------


def replicate(replica: redis.Redis, primary: RedisServer) -> None:
    replica.replicaof("127.0.0.1", primary.port)
    wait_until(
        lambda: replica.info("replication").get("master_link_status") == "up",
        10,
        "the replica to sync",
    )


def test_a_store_on_a_read_only_replica_is_logged_once_and_recovers_when_it_is_promoted(
    server, other_server, store, admin, logs
):
    store.upsert(every("e", 1))
    due = make_due(admin, store, "e", 10)
    sender = Sender()
    d = dispatcher(store, sender)
    # A failover away from the store's server: the other server takes over with its data...
    other = redis.Redis.from_url(other_server.url(), decode_responses=True)
    replicate(other, server)
    other.replicaof("no", "one")
    # ...and the store's server becomes its replica: read-only.
    replicate(admin, other_server)
    refused = error_count(admin, "READONLY")
    tick_until(d, lambda: error_count(admin, "READONLY") - refused >= 5, 10, "five refusals")
    assert sender.sent == [] and admin.hlen(store.keys.inflight) == 0
    [line] = lines(logs, "READONLY")
    assert "is a read-only replica" in line and "You can't write against a read only" in line
    assert not [x for x in errors(logs) if x != line]
    admin.replicaof("no", "one")  # promoted again
    tick_until(d, lambda: bool(sender.sent), 10, "a send after the promotion")
    assert sender.sent == [("e", due)]  # the missed occurrences coalesce (catch_up="once")
    [back] = lines(logs, "answers normally again")
    assert "(it was a read-only replica)" in back
    other.close()


# -- NOSCRIPT ----------------------------------------------------------------------------------


def test_script_flush_between_ticks_is_invisible(store, admin, logs):
    store.upsert_many([every(f"e{i}", 1) for i in range(5)])
    for i in range(5):
        make_due(admin, store, f"e{i}", 10)
    sender = Sender()
    d = dispatcher(store, sender)
    flushed = error_count(admin, "NOSCRIPT")
    for _ in range(3):
        admin.script_flush()
        d.tick()
    tick_until(d, lambda: len(sender.sent) >= 10, 10, "two rounds of sends")
    assert error_count(admin, "NOSCRIPT") > flushed  # the scripts really were gone
    assert max(Counter(sender.sent).values()) == 1
    assert logs.records == []


def test_script_flush_inside_a_write_pipeline_neither_fails_nor_misreports(
    store, admin, monkeypatch
):
    # The scripts are gone just as a pipeline of EVALSHAs goes out, after the store loaded
    # them (so it does not load them in front of the pipeline).
    store.upsert(every("loaded", 60))
    execute = Pipeline.execute
    flushes = []

    def flush_then_execute(pipe: Pipeline, raise_on_error: bool = True) -> list[Any]:
        if not flushes and any(args[0] == "EVALSHA" for args, _ in pipe.command_stack):
            flushes.append(admin.script_flush())
        return execute(pipe, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", flush_then_execute)
    before = error_count(admin, "NOSCRIPT")
    report = store.sync_source("config", [every(f"e{i}", 60, source="config") for i in range(3)])
    assert error_count(admin, "NOSCRIPT") > before and flushes
    assert report.added == ["e0", "e1", "e2"] and report.unchanged == 0
    assert {e.name for e in store} == {"loaded", "e0", "e1", "e2"}


def test_a_first_sync_on_a_fresh_server_loads_its_scripts_without_noscript_errors(store, admin):
    admin.script_flush()  # as a server just started, or restarted
    before = error_count(admin, "NOSCRIPT")
    assert store.upsert_many(every(f"e{i}", 60) for i in range(3_000)) == 3_000
    assert error_count(admin, "NOSCRIPT") == before
    assert store.client.zcard(store.keys.schedule) == 3_000


# -- WRONGTYPE ---------------------------------------------------------------------------------


def break_key(client: redis.Redis, key: str) -> None:
    """Put a string where redisbeat keeps a hash or sorted set, keeping the real one aside."""
    with client.pipeline(transaction=True) as pipe:
        if client.exists(key):
            pipe.rename(key, f"{key}:saved")
        pipe.set(key, "oops")
        pipe.execute()


def repair_key(client: redis.Redis, key: str) -> None:
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(key)
        if client.exists(f"{key}:saved"):
            pipe.rename(f"{key}:saved", key)
        pipe.execute()


@pytest.mark.parametrize("which", ["schedule", "entries", "inflight", "state", "beats"])
def test_a_key_of_the_wrong_type_is_named_once_and_the_beat_resumes_when_it_is_repaired(
    store, admin, logs, which
):
    store.upsert(every("e", 60))
    make_due(admin, store, "e", 10)
    sender = Sender()
    dispatcher(store, sender).tick()  # every key now exists (inflight only while claimed)
    assert len(sender.sent) == 1
    key = getattr(store.keys, which)
    due = make_due(admin, store, "e", 10)
    break_key(admin, key)
    before = snapshot(admin, store) if which not in ("schedule", "inflight", "state") else None
    d = dispatcher(store, sender)  # a new beat: its first tick sends a heartbeat
    delays = [d.tick() for _ in range(4)]
    assert all(x > 0 for x in delays) and len(sender.sent) == 1
    [line] = errors(logs)
    assert f"WRONGTYPE redisbeat: key {key} is not a " in line
    assert "an operator must delete or repair the key" in line
    if before is not None:
        assert snapshot(admin, store) == before
    repair_key(admin, key)
    d.tick()
    assert sender.sent[1:] == [("e", due)]
    [back] = lines(logs, "answers normally again")
    assert f"(it was holding {key} with the wrong type)" in back


def test_a_schedule_of_the_wrong_type_deleted_as_the_error_advises_is_rebuilt_at_once(
    store, admin, logs
):
    store.upsert_many([every("a", 60), every("b", 60), every("off", 60)])
    store.disable("off")
    d = dispatcher(store, Sender())
    d.tick()  # its first heartbeat, with the housekeeping
    store.run_now("a")  # wakes it to claim, and meet the broken key
    break_key(admin, store.keys.schedule)
    wait_until(lambda: d.tick() is not None and errors(logs), 10, "the claim to fail")
    [line] = errors(logs)
    assert "an operator must delete or repair the key" in line
    admin.delete(store.keys.schedule)
    d.tick()  # the first heartbeat after the trouble does the housekeeping
    scheduled = [store.state(n).next_run_at is not None for n in ("a", "b", "off")]
    assert scheduled == [True, True, False]
    [back] = lines(logs, "no due time in Redis")
    assert "2 entries" in back and "'a', 'b'" in back


def test_a_finish_refused_for_a_wrong_type_writes_nothing_and_completes_once_repaired(
    store, admin, logs
):
    store.upsert_many([every("a", 60), every("b", 60)])
    for name in ("a", "b"):
        make_due(admin, store, name, 10)
    sender = Sender()
    # The state hash breaks while the batch is being sent, so only the finish meets it.
    sender.before_send = lambda name: None if sender.sent else break_key(admin, store.keys.state)
    d = dispatcher(store, sender)
    d.tick()
    claimed = snapshot(admin, store, state=False)  # the state hash cannot be read now
    assert len(sender.sent) == 2 and len(claimed[1]) == 2  # sent, both claims still held
    d.tick()
    assert snapshot(admin, store, state=False) == claimed  # nothing of the finish applied
    repair_key(admin, store.keys.state)
    d.tick()
    assert admin.hlen(store.keys.inflight) == 0 and len(sender.sent) == 2
    assert store.state("a").total_run_count == store.state("b").total_run_count == 1
    assert len(lines(logs, "WRONGTYPE")) == 1


def test_store_api_writes_name_the_key_of_the_wrong_type_and_write_nothing(store, admin):
    store.upsert(every("e", 60))
    break_key(admin, store.keys.schedule)
    with pytest.raises(redis.ResponseError, match=r"key \{p\}:schedule is not a zset"):
        store.upsert(every("e", 30))
    with pytest.raises(redis.ResponseError, match=r"key \{p\}:schedule is not a zset"):
        store.run_now("e")
    with pytest.raises(redis.ResponseError, match=r"key \{p\}:schedule is not a zset"):
        store.remove("e")
    repair_key(admin, store.keys.schedule)
    assert store.get("e") == every("e", 60)


def test_a_pipelined_read_names_the_key_of_the_wrong_type(store, admin):
    store.upsert(every("e", 60))
    break_key(admin, store.keys.entries)
    with pytest.raises(StoreRefused) as raised:
        len(store)  # one HLEN per shard, pipelined
    line = raised.value.describe()
    assert f"holds {store.keys.entries} with the wrong type (WRONGTYPE Operation" in line
    assert "pipeline" not in line and line.endswith("an operator must delete or repair the key")


def test_the_command_line_names_each_key_of_the_wrong_type_and_what_it_holds(server, store, admin):
    store.upsert(every("e", 60))
    break_key(admin, store.keys.schedule)
    break_key(admin, store.keys.state)
    wrong = (
        f"{store.keys.schedule} is a string where redisbeat keeps a zset; "
        f"{store.keys.state} is a string where redisbeat keeps a hash"
    )
    for command in (["list"], ["status"], ["show", "e"], ["pause", "e"], ["enable", "e"]):
        result = CliRunner().invoke(main, ["--url", server.url(), "--prefix", "p", *command])
        assert result.exit_code == 3, (command, result.output)
        [line] = result.output.strip().splitlines()
        assert f"holds a key of the wrong type ({wrong}); an operator must delete" in line, line


# -- NOPERM and a rejected login ----------------------------------------------------------------


def acl_store(server: RedisServer, password: str = "pw") -> ScheduleStore:
    client = redis.Redis.from_url(
        server.url(), username="beat", password=password, decode_responses=True
    )
    return ScheduleStore(client, prefix="p")


@pytest.mark.parametrize(
    ("command", "reply"),
    [
        ("evalsha", "NOPERM this user has no permissions to run the 'evalsha' command"),
        # Inside a script Redis 7.0 answers ERR, without naming the command.
        ("zadd", "ERR The user executing the script can't run this command"),
    ],
)
def test_an_acl_denial_is_logged_once_in_redis_words_and_the_beat_resumes_when_allowed(
    server, store, admin, logs, command, reply
):
    admin.execute_command("ACL", "SETUSER", "beat", "on", ">pw", "~*", "&*", "+@all", f"-{command}")
    store.upsert(every("e", 60))
    due = make_due(admin, store, "e", 10)
    sender = Sender()
    beat_store = acl_store(server)
    d = dispatcher(beat_store, sender)
    assert all(d.tick() > 0 for _ in range(4)) and sender.sent == []
    [line] = errors(logs)
    assert reply in line
    assert "the ACL user lacks a permission" in line and "docs/security.md#acl" in line
    admin.execute_command("ACL", "SETUSER", "beat", f"+{command}")
    d.tick()
    assert sender.sent == [("e", due)]
    [back] = lines(logs, "answers normally again")
    assert "(it was denying a command)" in back
    beat_store.close()


def test_a_beat_not_allowed_the_events_channel_says_so_once_and_still_hands_claims_back(
    server, store, admin, logs
):
    # Redis 7's default for a new user: no pub/sub channels at all.
    admin.execute_command("ACL", "SETUSER", "beat", "on", ">pw", "~*", "resetchannels", "+@all")
    store.upsert_many([every("a", 60), every("b", 60)])
    due = {n: make_due(admin, store, n, 10) for n in ("a", "b")}
    sender = Sender()
    sender.fail = {"b"}  # handed back: the finish would wake the other beats
    beat_store = acl_store(server)
    d = dispatcher(beat_store, sender)
    d.tick()
    assert sender.sent == [("a", due["a"])] and store.state("a").total_run_count == 1
    assert admin.zscore(store.keys.schedule, "b") == due["b"]  # handed back, at its due time
    assert admin.hlen(store.keys.inflight) == 0
    sender.fail = set()
    d.tick()
    assert sorted(sender.sent) == sorted(due.items())
    assert store.state("a").total_run_count == store.state("b").total_run_count == 1
    for _ in range(3):
        d.wait(0.1)
    [line] = lines(logs, "NOPERM")
    assert "this user has no permissions to access one of the channels" in line
    assert f"cannot listen for changes on {store.keys.events}" in line
    # The beat works on: a warning, not an error.
    assert [r.levelno for r in logs.records if "NOPERM" in r.getMessage()] == [logging.WARNING]
    admin.execute_command("ACL", "SETUSER", "beat", "allchannels")
    d.wait(0.1)
    assert len(lines(logs, "listens for changes again")) == 1
    beat_store.close()


def test_a_beat_not_allowed_the_events_channel_still_sends_delayed_tasks_written_later(
    server, store, admin, logs
):
    admin.execute_command("ACL", "SETUSER", "beat", "on", ">pw", "~*", "resetchannels", "+@all")
    beat_store = acl_store(server)
    sender = Sender()
    d = dispatcher(beat_store, sender)
    d.tick()  # nothing delayed yet: its first look finds none
    d.tick()
    store.delay("proj.ping", countdown=0, key="later")  # its wake-up cannot be heard
    d.tick()
    assert [name for name, _ in sender.sent] == ["later"]
    assert store.get_delayed("later").state == "sent"
    beat_store.close()


def test_a_rejected_login_is_logged_once_as_such_and_recovers(server, store, admin, logs):
    admin.execute_command("ACL", "SETUSER", "beat", "on", ">pw", "~*", "&*", "+@all")
    store.upsert(every("e", 60))
    due = make_due(admin, store, "e", 10)
    sender = Sender()
    beat_store = acl_store(server, password="new-pw")
    d = dispatcher(beat_store, sender)
    assert all(d.tick() > 0 for _ in range(3))
    [line] = errors(logs)
    assert "rejected the login (WRONGPASS invalid username-password pair" in line
    admin.execute_command("ACL", "SETUSER", "beat", ">new-pw")
    d.tick()
    assert sender.sent == [("e", due)]
    assert "(it was rejecting the login)" in lines(logs, "answers normally again")[0]
    beat_store.close()


# -- real beats --------------------------------------------------------------------------------


def test_a_beat_process_rides_out_a_wrong_type_key_and_running_out_of_memory(
    server, admin, prefix, beats_for
):
    store = store_for(server, prefix)
    beats: Beats = beats_for(server, prefix)
    [beat] = beats.start(1)
    wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register")
    start = store.now_ms() + 1 * SECOND
    plan = add_interval_entries(store, 5, [1], start)
    wait_until(lambda: store.now_ms() > start + 2 * SECOND, 10, "some sends")
    # (trouble began, the beat said it was over), Redis clock. An occurrence due in the second
    # before the trouble may still be waiting for its send on a loaded host: the refusals then
    # coalesce it into the next (catch_up="once"), so the window opens that second earlier.
    windows = []
    # While Redis surely refused: from just after the trouble began to just before it ended.
    # An occurrence due at the edges may be sent on its own (before the trouble took hold, or
    # once the beat is back), so a slow test process must not count those as inside.
    refusing = []

    def episode(begin: Callable[[], None], code: str, end: Callable[[], None]) -> None:
        began = store.now_ms()
        refused = error_count(admin, code)
        begin()
        held = store.now_ms()
        # Refused on three retries of the beat's (0.5, 1, 2 s...) backoff.
        wait_until(lambda: error_count(admin, code) - refused >= 3, 20, f"three {code}s")
        refusing.append((held, store.now_ms()))
        end()
        wait_until(
            lambda: beat.output().count("answers normally again") == len(windows) + 1,
            20,
            "the beat to resume",
        )
        windows.append((began - 1 * SECOND, store.now_ms()))

    schedule = store.keys.schedule
    episode(lambda: break_key(admin, schedule), "WRONGTYPE", lambda: repair_key(admin, schedule))
    episode(lambda: make_oom(admin), "OOM", lambda: free_memory(admin))
    end = store.now_ms() + 2 * SECOND
    wait_until(lambda: store.now_ms() > end + 1 * SECOND, 10, "some sends after")
    assert beat.process.poll() is None, beat.output()
    beats.stop_all()
    assert beat.process.returncode == 0
    output = beat.output()
    assert output.count(f"WRONGTYPE redisbeat: key {schedule} is not a zset") == 1, output
    assert output.count("out of memory (maxmemory reached)") == 1, output
    assert output.count("OOM command not allowed") == 1, output
    sent = [s for s in read_queue(broker(server)) if start <= s.due_ms < end]
    counts = Counter((s.entry, s.due_ms) for s in sent)
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    # Outside the episodes every occurrence is sent; while Redis refuses, one per entry at most
    # (catch_up="once").
    edges = [start, *(t for window in windows for t in window), end]
    want: set[tuple[str, int]] = set()
    for i in range(0, len(edges), 2):
        want |= expected(plan, edges[i], edges[i + 1])
    assert not want - set(counts), sorted(want - set(counts))[:5]
    for held, ended in refusing:
        for name in plan:
            assert len([d for n, d in counts if n == name and held <= d < ended]) <= 1


def test_script_flushes_under_two_beat_processes_lose_and_double_nothing(
    server, admin, prefix, beats_for
):
    store = store_for(server, prefix)
    beats: Beats = beats_for(server, prefix)
    beats.start(2)
    wait_until(lambda: len(store.beats()) == 2, 30, "two beats to register")
    start = store.now_ms() + 1 * SECOND
    plan = add_interval_entries(store, 20, [0.5, 1], start)
    end = start + 5 * SECOND

    def flush() -> bool:
        admin.script_flush()
        return store.now_ms() > end

    wait_until(flush, 20, "the window to pass", interval=0.05)
    assert error_count(admin, "NOSCRIPT") > 10  # the beats really met missing scripts
    wait_until(lambda: store.now_ms() > end + 2 * SECOND, 10, "the last sends")
    beats.stop_all()
    sent = [s for s in read_queue(broker(server)) if start <= s.due_ms < end]
    counts = Counter((s.entry, s.due_ms) for s in sent)
    assert max(counts.values()) == 1 and set(counts) == expected(plan, start, end)
    for beat in beats.beats:
        assert beat.process.returncode == 0 and "ERROR" not in beat.output(), beat.output()
