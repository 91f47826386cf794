"""The claim protocol and one beat's loop step, in-process against real Redis."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone

import pytest
import redis

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id, signals
from redisbeat.beat.loop import Dispatcher
from redisbeat.config import Config
from redisbeat.errors import ConfigurationError
from redisbeat.schedule.timing import from_ms
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer

UTC = timezone.utc


class Recorder:
    """A publish callable that remembers what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str]] = []
        self.fail = False

    def __call__(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        self.sent.append((entry.name, due_ms, task_id))


class Unbuffered:
    """A Sender made of a send callable (and a flush callable, for one that buffers)."""

    #: It never builds a message, so none expires.
    expired = 0

    def __init__(
        self,
        send: Callable[[Entry, str, int, int], None],
        flush: Callable[[], Mapping[str, str | None]] | None = None,
    ) -> None:
        self._send = send
        self._flush = flush

    def send(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        self._send(entry, task_id, due_ms, now_ms)

    def flush(self) -> Mapping[str, str | None]:
        return {} if self._flush is None else self._flush()

    def probe(self) -> None:
        # The broker answers unless the send callable says it is down (a Recorder's fail).
        if getattr(self._send, "fail", False):
            raise ConnectionError("broker down")


def dispatcher(
    store: ScheduleStore, publish: Callable[[Entry, str, int, int], None], **config: object
) -> Dispatcher:
    # The kit's servers keep nothing on disk: the start-up warning would be noise here.
    config = {"persistence_warning": False, **config}
    cfg = Config(redis_url="redis://unused", key_prefix=store.keys.prefix, **config)  # type: ignore[arg-type]
    return Dispatcher(store, cfg, Unbuffered(publish))


@pytest.fixture
def quiet(own_redis: RedisServer, prefix: str) -> Iterator[tuple[ScheduleStore, redis.Redis]]:
    """A store and a client on a server of this test's own, for counting the commands a beat
    sends: the shared server also serves whatever other tests left running."""
    client = redis.Redis.from_url(own_redis.url(), decode_responses=True)
    store = ScheduleStore(
        redis.Redis.from_url(own_redis.url(), decode_responses=True), prefix=prefix
    )
    yield store, client
    store.close()
    client.close()


def make_due(client: redis.Redis, store: ScheduleStore, name: str, ms_ago: int) -> int:
    due = store.now_ms() - ms_ago
    client.zadd(store.keys.schedule, {name: due})
    return due


def every(name: str, seconds: float = 60, **kw: object) -> Entry:
    return Entry(name, "proj.ping", Interval(seconds), **kw)  # type: ignore[arg-type]


def test_a_due_entry_is_sent_once_with_its_occurrence_id_and_rescheduled_on_its_grid(store, client):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 10)
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert rec.sent == [("e", due, occurrence_id(store.keys.prefix, "e", due))]
    assert client.zscore(store.keys.schedule, "e") == due + 60_000
    state = store.state("e")
    assert state.total_run_count == 1 and state.last_task_id == rec.sent[0][2]
    assert client.hlen(store.keys.inflight) == 0


def test_two_beats_claiming_at_once_never_claim_the_same_occurrence(store, client):
    store.upsert_many([every(f"e{i}") for i in range(500)])
    now = store.now_ms()
    client.zadd(store.keys.schedule, {f"e{i}": now - 1 for i in range(500)})
    claimed: list[list[str]] = [[], []]

    def claim(i: int) -> None:
        while batch := store.claim(f"beat-{i}", 30_000, 7).claims:
            claimed[i] += [c.name for c in batch]

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed[0] + claimed[1]) == sorted(f"e{i}" for i in range(500))
    assert claimed[0] and claimed[1]


def test_a_claim_left_by_a_dead_beat_is_sent_again_with_the_same_id_after_its_lease(store, client):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 5)
    dead = store.claim("dead-beat", 300, 10)  # claimed, never finished
    assert [c.due_ms for c in dead.claims] == [due]
    rec = Recorder()
    d = dispatcher(store, rec)
    d.tick()
    assert rec.sent == []  # leased to the dead beat
    wait_until(lambda: store.now_ms() > dead.lease_until_ms, 5, "the lease to expire")
    d.tick()
    assert rec.sent == [("e", due, occurrence_id(store.keys.prefix, "e", due))]
    # The dead beat's late finish changes nothing.
    assert store.finish("dead-beat", dead.lease_until_ms, []).finished == 0


def test_a_late_claim_of_a_dead_beat_is_sent_again_as_the_occurrence_it_stood_for(store, client):
    # Claimed 30 periods late, the dead beat sent the last occurrence due by its claim: the
    # beat that takes over sends that one again (same task id), however much later it is.
    store.upsert(every("e", 0.1))
    make_due(client, store, "e", 3_000)
    dead = store.claim("dead-beat", 400, 10)
    [claim] = dead.claims
    stood_for = store.get("e").latest_due_ms(claim.due_ms, claim.claimed_ms)
    assert stood_for > claim.due_ms
    wait_until(lambda: store.now_ms() > dead.lease_until_ms, 5, "the lease to expire")
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert rec.sent[0] == ("e", stood_for, occurrence_id(store.keys.prefix, "e", stood_for))


def test_occurrences_due_while_a_dead_beats_claim_was_stuck_are_caught_up_after_it(store, client):
    # The re-sent occurrence may have run already (same id, dropped downstream), so it must
    # not also stand in for the ones that fell due meanwhile: one send catches those up.
    store.upsert(every("e", 0.1))
    due = make_due(client, store, "e", 5)
    dead = store.claim("dead-beat", 400, 10)
    wait_until(lambda: store.now_ms() > dead.lease_until_ms, 5, "the lease to expire")
    rec = Recorder()
    d = dispatcher(store, rec)
    d.tick()
    assert rec.sent[0] == ("e", due, occurrence_id(store.keys.prefix, "e", due))
    assert client.zscore(store.keys.schedule, "e") == due + 100  # the next on the grid
    claimed = store.now_ms()
    d.tick()
    # The rest coalesce into one send: the last occurrence due by then, under its own id.
    assert len(rec.sent) == 2
    late = rec.sent[1][1]
    assert (late - due) % 100 == 0 and dead.lease_until_ms - 100 < late <= claimed + 100
    assert rec.sent[1][2] == occurrence_id(store.keys.prefix, "e", late) != rec.sent[0][2]
    assert client.zscore(store.keys.schedule, "e") == late + 100


def test_finishing_does_not_resurrect_an_entry_removed_meanwhile(store, client):
    store.upsert(every("e"))
    make_due(client, store, "e", 5)
    batch = store.claim("b", 30_000, 10)
    store.remove("e")
    from redisbeat.store.records import Outcome

    store.finish("b", batch.lease_until_ms, [Outcome("e", "sent", 0, store.now_ms() + 1000, "x")])
    assert client.zscore(store.keys.schedule, "e") is None and "e" not in store


def test_finishing_does_not_overwrite_an_edit_made_meanwhile(store, client):
    store.upsert(every("e"))
    make_due(client, store, "e", 5)
    batch = store.claim("b", 30_000, 10)
    store.upsert(every("e", 3600))
    edited = client.zscore(store.keys.schedule, "e")
    from redisbeat.store.records import Outcome

    store.finish("b", batch.lease_until_ms, [Outcome("e", "sent", 0, store.now_ms() + 1000, "x")])
    assert client.zscore(store.keys.schedule, "e") == edited


def test_catch_up_once_coalesces_missed_occurrences_into_one_send(store, client):
    store.upsert(every("e", 1))
    due = make_due(client, store, "e", 30_000)
    rec = Recorder()
    dispatcher(store, rec).tick()
    # One send, as the last occurrence due by the claim (its due time, its task id).
    [(_, sent_due, task_id)] = rec.sent
    now = store.now_ms()
    assert (sent_due - due) % 1000 == 0 and now - 2000 < sent_due <= now
    assert task_id == occurrence_id(store.keys.prefix, "e", sent_due)
    assert client.zscore(store.keys.schedule, "e") == sent_due + 1000
    assert store.state("e").last_run_at == from_ms(sent_due)


def test_catch_up_skip_resumes_at_the_next_future_occurrence(store, client):
    # Down 30 s: the last occurrence due (10 s ago) is later than the 5 s grace.
    store.upsert(every("e", 20, catch_up="skip"))
    due = make_due(client, store, "e", 30_000)
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert rec.sent == []
    assert client.zscore(store.keys.schedule, "e") == due + 40_000


def test_catch_up_skip_sends_the_last_occurrence_when_it_is_within_the_grace(store, client):
    # Down 30 s, due every second: the last occurrence is under a second late.
    store.upsert(every("e", 1, catch_up="skip"))
    due = make_due(client, store, "e", 30_000)
    rec = Recorder()
    dispatcher(store, rec).tick()
    [(_, sent_due, _)] = rec.sent
    assert (sent_due - due) % 1000 == 0 and sent_due > store.now_ms() - 2000


def test_catch_up_all_sends_every_missed_occurrence_oldest_first_each_under_its_own_id(
    store, client
):
    store.upsert(every("e", 1, catch_up="all"))
    due = make_due(client, store, "e", 5_500)  # six occurrences due: -5.5 s ... -0.5 s
    rec = Recorder()
    beat = dispatcher(store, rec, claim_ahead_seconds=0)
    deadline = time.monotonic() + 10
    while len(rec.sent) < 6 and time.monotonic() < deadline:
        beat.tick()
    sent_dues = [d for _, d, _ in rec.sent]
    assert sent_dues[:6] == [due + i * 1000 for i in range(6)]
    assert [t for _, _, t in rec.sent] == [
        occurrence_id(store.keys.prefix, "e", d) for d in sent_dues
    ]
    assert store.state("e").total_run_count == len(rec.sent)
    # Caught up: the next one is in the future, on the same grid.
    score = client.zscore(store.keys.schedule, "e")
    assert score > store.now_ms() - 1000 and (score - due) % 1000 == 0


@pytest.mark.parametrize(
    ("grace", "limit", "expected"), [(None, 3, 3), (2.9, 100, 3), (None, 100, 30)]
)
def test_catch_up_all_sends_only_the_newest_within_the_grace_and_the_limit(
    store, client, grace, limit, expected
):
    store.upsert(every("e", 1, catch_up="all", grace=grace))
    due = make_due(client, store, "e", 29_500)  # thirty due
    rec = Recorder()
    beat = dispatcher(store, rec, claim_ahead_seconds=0, catch_up_limit=limit)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (not rec.sent or rec.sent[-1][1] < due + 29_000):
        beat.tick()
    sent_dues = [d for _, d, _ in rec.sent]
    assert sent_dues[:expected] == [due + (30 - expected + i) * 1000 for i in range(expected)]


def test_max_runs_sends_that_many_then_the_entry_leaves_the_schedule_until_raised(store, client):
    store.upsert(every("e", 0.2, max_runs=3))
    rec = Recorder()
    beat = dispatcher(store, rec, claim_ahead_seconds=0)
    wait_until(
        lambda: (
            beat.tick() is not None
            and len(rec.sent) >= 3
            and (client.zscore(store.keys.schedule, "e") is None)
        ),
        10,
        "three sends",
    )
    assert len(rec.sent) == 3
    state = store.state("e")
    assert state.total_run_count == 3 and state.stopped == "max_runs"
    assert state.next_run_at is None and store.next_runs("e") == []
    store.upsert(every("e", 0.2, max_runs=3, description="an edit that keeps the limit"))
    assert client.zscore(store.keys.schedule, "e") is None
    store.upsert(every("e", 0.2, max_runs=5))
    assert len(store.next_runs("e", 10)) == 2 and store.state("e").stopped is None
    wait_until(
        lambda: (
            beat.tick() is not None
            and len(rec.sent) >= 5
            and (client.zscore(store.keys.schedule, "e") is None)
        ),
        10,
        "two more sends",
    )
    assert len(rec.sent) == 5 and len({t for _, _, t in rec.sent}) == 5


@pytest.mark.parametrize(
    ("policy", "grace", "late_s", "sent"),
    [
        ("skip", None, 1, True),
        ("skip", 60, 30, True),
        ("once", 10, 30, False),
        ("once", 60, 30, True),
        ("all", 10, 30, False),
        ("all", None, 30, True),
    ],
)
def test_the_grace_window_decides_whether_a_late_occurrence_is_sent(
    store, client, policy, grace, late_s, sent
):
    store.upsert(every("e", 3600, catch_up=policy, grace=grace))
    make_due(client, store, "e", late_s * 1000)
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert bool(rec.sent) is sent


def test_a_clocked_one_off_is_sent_once_and_then_leaves_the_schedule(store, client):
    from redisbeat import Clocked

    store.upsert(Entry("once", "proj.ping", Clocked(datetime.now(UTC) - timedelta(seconds=1))))
    rec = Recorder()
    d = dispatcher(store, rec)
    d.tick()
    d.tick()
    assert len(rec.sent) == 1
    assert client.zscore(store.keys.schedule, "once") is None
    assert store.state("once").total_run_count == 1
    assert store.upsert(Entry("once", "proj.ping", store.get("once").schedule)) is False


def test_a_failed_send_hands_the_claim_back_to_be_sent_by_any_beat(store, client):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 5)
    rec = Recorder()
    rec.fail = True
    assert dispatcher(store, rec).tick() > 0  # backs off
    assert client.zscore(store.keys.schedule, "e") == due
    rec.fail = False
    dispatcher(store, rec).tick()
    assert [s[1] for s in rec.sent] == [due]


def test_a_corrupt_definition_is_quarantined_once_and_other_entries_keep_firing(
    store, client, caplog
):
    store.upsert(every("good"))
    client.hset(store.keys.entries, "bad", '{"name": "bad", "task": 1')
    make_due(client, store, "bad", 5)
    due = make_due(client, store, "good", 5)
    rec = Recorder()
    with caplog.at_level(logging.ERROR, logger="redisbeat"):
        dispatcher(store, rec).tick()
    assert [s[1] for s in rec.sent] == [due]
    q = store.quarantined()
    assert list(q) == ["bad"] and "not valid JSON" in q["bad"].error
    assert "bad" not in store and client.zscore(store.keys.schedule, "bad") is None
    [line] = [r.message for r in caplog.records if "set aside" in r.message]
    assert "field 'definition'" in line
    assert "quarantine restore bad --file FIXED.json" in line
    store.upsert(every("bad"))
    assert store.quarantined() == {}


def test_an_unknown_schedule_kind_in_redis_is_quarantined_naming_the_field(store, client):
    raw = every("odd").dumps().replace('"kind":"interval"', '"kind":"lunar"')
    client.hset(store.keys.entries, "odd", raw)
    make_due(client, store, "odd", 5)
    dispatcher(store, Recorder()).tick()
    assert "schedule.kind" in store.quarantined()["odd"].error


def test_heartbeats_register_the_beat_and_close_deregisters_it(redis_server, prefix):
    store = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    d = dispatcher(store, Recorder())
    d.tick()
    assert [b.id for b in store.beats()] == [d.beat_id] and store.beats()[0].pid > 0
    d.close()  # closes the store too
    reader = ScheduleStore(
        redis.Redis.from_url(redis_server.url(), decode_responses=True), prefix=prefix
    )
    assert reader.beats() == []
    reader.close()


def test_an_idle_beat_heartbeats_cheaply_and_does_the_housekeeping_every_tenth_time(
    quiet, monkeypatch
):
    store, client = quiet
    # Nobody watches here (a beat_joined receiver another test left would make each
    # heartbeat read the beats alive too, as it should).
    for signal in (signals.beat_joined, signals.beat_left):
        monkeypatch.setattr(signal, "receivers", [])
    # What an idle beat asks of Redis is its heartbeats: the ordinary ones only refresh what
    # must be fresh; one in ten also forgets beats silent too long.
    store.upsert(every("later", 3600))
    d = dispatcher(store, Recorder(), heartbeat_seconds=0.01)
    d.tick()  # the first heartbeat does the housekeeping
    assert not d.observer.watching
    client.zadd(store.keys.beats, {"dead:1:x": 1})  # silent since 1970
    client.config_resetstat()
    # The heartbeats alone: whether a tick claims too is the next test's matter.
    for _ in range(9):
        d.heartbeats.next_at = 0.0
        d.heartbeats.maybe()
    stats = client.info("commandstats")
    assert stats["cmdstat_zadd"]["calls"] == 9 and stats["cmdstat_time"]["calls"] == 9
    assert "cmdstat_zremrangebyscore" not in stats and "cmdstat_zrangebyscore" not in stats
    assert "dead:1:x" in client.zrange(store.keys.beats, 0, -1)
    d.heartbeats.next_at = 0.0
    d.heartbeats.maybe()  # the tenth
    assert client.zrange(store.keys.beats, 0, -1) == [d.beat_id]


def test_run_now_during_a_claim_sends_a_new_occurrence_not_the_claimed_one(store, client):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 5)
    store.claim("busy-beat", 30_000, 10)  # alive, still sending `due`
    store.run_now("e")
    rec = Recorder()
    dispatcher(store, rec).tick()
    assert len(rec.sent) == 1 and rec.sent[0][1] > due


def test_a_beat_that_stops_heartbeating_ages_out(store, client):
    stale = store.now_ms() - store.beat_ttl_ms - 1000
    client.zadd(store.keys.beats, {"gone:1:abcd": stale})
    assert store.beats() == []
    d = dispatcher(store, Recorder())
    d.tick()  # any live beat's heartbeat sweeps the dead ones away
    assert client.zrange(store.keys.beats, 0, -1) == [d.beat_id]


def test_a_claim_handed_back_wakes_the_other_beats(store, client):
    store.upsert(every("e"))
    make_due(client, store, "e", 5)
    store.subscribe()
    rec = Recorder()
    rec.fail = True
    dispatcher(store, rec).tick()
    assert store.wait_for_change(2) is True


def test_a_beat_woken_for_its_heartbeat_claims_only_when_something_may_be_due(quiet):
    store, client = quiet

    def claims() -> int:
        # Each claim reads the earliest score left (ZRANGE); a heartbeat never does.
        return int(client.info("commandstats").get("cmdstat_zrange", {}).get("calls", 0))

    store.upsert(every("later", 3600))
    rec = Recorder()
    d = dispatcher(store, rec, heartbeat_seconds=0.05)
    d.tick()
    d.wait(0.01)  # subscribed from here on
    before = claims()
    beats = store.client.zscore(store.keys.beats, d.beat_id)
    for _ in range(5):
        time.sleep(d.tick())  # the beat's own wait: until its next heartbeat
    assert store.client.zscore(store.keys.beats, d.beat_id) > beats  # it did heartbeat...
    assert claims() == before  # ...but nothing is due for an hour: no claim
    store.upsert(every("now", 60))
    store.run_now("now")
    d.wait(5)  # the change wakes it at once...
    d.tick()  # ...and it claims
    assert claims() > before and [s[0] for s in rec.sent] == ["now"]


def test_a_claim_takes_what_falls_due_within_its_ahead_time_and_sends_each_when_due(store, client):
    store.upsert_many([every(f"e{i}") for i in range(5)])
    now = store.now_ms()
    # Due at once, in 0.1 s and 0.2 s, then well beyond the claim's 0.3 s ahead.
    dues = [now, now + 100, now + 200, now + 3000, now + 6000]
    client.zadd(store.keys.schedule, {f"e{i}": due for i, due in enumerate(dues)})
    sent: list[tuple[str, int, int]] = []

    def publish(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        sent.append((entry.name, due_ms, store.now_ms()))

    dispatcher(store, publish, claim_ahead_seconds=0.3).tick()
    assert [name for name, _, _ in sent] == ["e0", "e1", "e2"]  # one claim
    assert all(redis_now >= due for _, due, redis_now in sent), "none sent before it was due"
    assert client.zscore(store.keys.schedule, "e3") == dues[3]  # left for a later claim


def test_claiming_ahead_never_takes_over_a_lease_before_it_ends(store, client):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 5)
    dead = store.claim("dead-beat", 300, 10)
    early = store.claim("other", 30_000, 10, ahead_ms=1000)
    assert early.claims == [] and early.next_due_ms == dead.lease_until_ms
    wait_until(lambda: store.now_ms() > dead.lease_until_ms, 5, "the lease to end")
    later = store.claim("other", 30_000, 10, ahead_ms=1000)
    assert [(c.due_ms, c.recovered) for c in later.claims] == [(due, True)]


def test_claim_ahead_is_at_most_a_quarter_of_the_lease():
    with pytest.raises(ConfigurationError, match="redisbeat_claim_ahead_seconds"):
        Config(redis_url="redis://x", lease_seconds=4, claim_ahead_seconds=1.5)
    with pytest.raises(ConfigurationError, match="redisbeat_claim_ahead_seconds"):
        Config(redis_url="redis://x", claim_ahead_seconds="0.1")  # type: ignore[arg-type]
    assert Config(redis_url="redis://x", claim_ahead_seconds=0).claim_ahead_ms == 0


def test_an_entry_changed_while_its_claim_is_held_ahead_is_handed_back_to_the_change(store, client):
    store.upsert_many([every("now"), every("held")])
    now = store.now_ms()
    # "held" falls due 2 s after "now": time enough, on a loaded machine too, for the beat to
    # send "now" and come to "held" before it is due, holding its claim ahead.
    client.zadd(store.keys.schedule, {"now": now, "held": now + 2000})
    sent: list[str] = []

    def publish(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        sent.append(entry.name)
        if entry.name == "now":  # after the claim, before "held" falls due
            store.upsert(every("held", 30))

    beat = dispatcher(store, publish, claim_ahead_seconds=3, lease_seconds=12)
    beat.tick()
    assert sent == ["now"]
    assert beat.outage.failures == 0, "a claim handed back for a change is no broker trouble"
    assert client.zscore(store.keys.schedule, "held") >= now + 30_000  # as the edit put it
    assert client.hlen(store.keys.inflight) == 0


def test_a_beat_behind_claims_only_what_is_due_until_it_has_caught_up(store, client):
    # Waiting for an occurrence claimed ahead would hold back the backlog behind it.
    late = [f"late{i:03d}" for i in range(230)]
    store.upsert_many([every(name, 3600) for name in late] + [every("soon")])
    now = store.now_ms()
    client.zadd(store.keys.schedule, {name: now - 60_000 + i for i, name in enumerate(late)})
    soon = now + 2000
    client.zadd(store.keys.schedule, {"soon": soon})
    ticks: list[list[str]] = []

    def publish(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        ticks[-1].append(entry.name)

    beat = dispatcher(store, publish, batch_size=100, claim_ahead_seconds=3, lease_seconds=20)
    for _ in range(10):
        ticks.append([])
        delay = beat.tick()
        if "soon" in ticks[-1]:
            break
        beat.wait(delay)
    assert sorted(n for t in ticks[:-1] for n in t) == late, "the backlog first, each once"
    assert ticks[-1] == ["soon"], "claimed ahead only once the backlog was sent"
    assert store.now_ms() >= soon
