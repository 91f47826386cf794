"""Data in Redis that redisbeat did not write: reads never raise, beats mend what they can
and say so once, and nothing is lost silently. Real redis-server, garbage written by hand."""

from __future__ import annotations

import json
import logging
import uuid

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dispatcher import Recorder, dispatcher, every, make_due

from redisbeat import ScheduleStore
from redisbeat.schedule.timing import MAX_MS, from_ms, valid_ms


def test_reads_never_raise_for_impossible_scores_or_state_redisbeat_did_not_write(store, client):
    k = store.keys
    for name in ("inf", "minus", "huge", "state", "fields"):
        store.upsert(every(name))
    client.zadd(k.schedule, {"inf": float("inf"), "minus": float("-inf"), "huge": 1e300})
    client.hset(k.state, "state", "{not json")
    client.hset(k.state, "fields", json.dumps({"total_run_count": "x", "last_run_at": 5}))
    client.zadd(k.beats, {"ghost:1:x": float("inf")})
    client.hset(k.quarantine, "q", "[1, 2")
    states = {s.name: s for s in store.states(["inf", "minus", "huge", "state", "fields"])}
    for name in ("inf", "minus", "huge"):
        assert states[name].next_run_at is None
        assert "not a valid time" in str(states[name].problem)
    assert store.state("inf").problem == states["inf"].problem
    assert "not what redisbeat writes" in str(states["state"].problem)
    fields = states["fields"]
    assert "invalid total_run_count" in str(fields.problem)
    assert fields.total_run_count == 0 and fields.last_run_at == from_ms(5)  # kept
    assert store.beats() == []
    assert "not what redisbeat writes" in store.quarantined()["q"].error


def test_an_entry_due_at_minus_infinity_is_rescheduled_and_no_other_entry_waits(
    store, client, caplog
):
    store.upsert(every("broken"))
    store.upsert(every("fine"))
    client.zadd(store.keys.schedule, {"broken": float("-inf")})
    due = make_due(client, store, "fine", 5)
    rec = Recorder()
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        dispatcher(store, rec).tick()
    assert [s[:2] for s in rec.sent] == [("fine", due)]  # "broken" is not sent...
    score = client.zscore(store.keys.schedule, "broken")
    assert valid_ms(score) and score > store.now_ms()  # ...but back on its schedule
    assert caplog.text.count("'broken' had a due time in Redis that is not a valid time") == 1
    assert client.hlen(store.keys.inflight) == 0


def test_an_entry_due_at_plus_infinity_is_found_and_rescheduled_at_the_heartbeat(
    store, client, caplog
):
    store.upsert(every("never"))
    client.hset(store.keys.entries, "corrupt", "{oops")
    client.zadd(store.keys.schedule, {"never": float("inf"), "corrupt": 1e300, "gone": MAX_MS + 1})
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        dispatcher(store, Recorder()).tick()
    assert valid_ms(client.zscore(store.keys.schedule, "never"))
    assert client.zscore(store.keys.schedule, "gone") is None  # no definition
    assert "corrupt" in store.quarantined() and "corrupt" not in store
    assert "'never' had a due time in Redis that is not a valid time (inf); rescheduled" in (
        caplog.text
    )
    assert "'gone' had a due time" in caplog.text and "'corrupt' had a due time" in caplog.text


def test_writing_an_unchanged_entry_whose_due_time_is_impossible_puts_it_back(store, client):
    store.upsert(every("e"))
    client.zadd(store.keys.schedule, {"e": float("inf")})
    assert store.upsert(every("e")) is True  # not "unchanged": its timing was mended
    assert valid_ms(client.zscore(store.keys.schedule, "e"))
    client.zadd(store.keys.schedule, {"e": float("inf")})
    report = store.sync_source("api", [every("e")])
    assert report.updated == ["e"] and report.unchanged == 0


def test_a_run_state_redisbeat_did_not_write_is_logged_once_and_its_valid_fields_kept(
    store, client, caplog
):
    store.upsert(every("e", 1))
    garbage = {"total_run_count": "many", "last_task_id": "kept", "note": "kept too"}
    client.hset(store.keys.state, "e", json.dumps(garbage))
    rec = Recorder()
    d = dispatcher(store, rec)
    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        make_due(client, store, "e", 5)
        d.tick()
        client.hset(store.keys.state, "e", json.dumps({**garbage, "total_run_count": "again"}))
        make_due(client, store, "e", 5)
        d._claim_by = 0  # due again at once: claim now rather than at the next due time
        d.tick()
    assert len(rec.sent) == 2
    assert caplog.text.count("'e': its run state in Redis was not what redisbeat wrote") == 1
    state = json.loads(client.hget(store.keys.state, "e"))
    assert state["total_run_count"] == 1 and state["note"] == "kept too"


SCORES = st.one_of(
    st.floats(allow_nan=False),
    st.sampled_from([float("inf"), float("-inf"), 0.0, -1.0, MAX_MS + 1.0, 1e300]),
)
TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["{}", "[]", "null", '{"due": "x"}', '{"total_run_count": -1}', "{oops"]),
    st.dictionaries(
        st.sampled_from(["due", "at", "beat", "lease_until", "total_run_count", "last_run_at"]),
        st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=5), st.none()),
    ).map(json.dumps),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(score=SCORES, state=TEXT, inflight=TEXT, quarantine=TEXT, beat_score=SCORES)
def test_no_value_written_into_any_key_crashes_a_read_or_a_beat_or_loses_an_entry_silently(
    redis_server, score, state, inflight, quarantine, beat_score
):
    client = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    store = ScheduleStore(client, prefix=f"h{uuid.uuid4().hex[:8]}")
    k = store.keys
    try:
        store.upsert_many([every("a", 1), every("b", 1)])
        client.zadd(k.schedule, {"a": score})
        client.hset(k.state, "a", state)
        client.hset(k.inflight, "a", inflight)
        client.hset(k.quarantine, "q", quarantine)
        client.zadd(k.beats, {"someone": beat_score})
        make_due(client, store, "b", 5)
        store.states(["a", "b"]), store.beats(), store.quarantined(), list(store)
        rec = Recorder()
        d = dispatcher(store, rec, heartbeat_seconds=0.01)
        for _ in range(2):
            assert d.tick() >= 0
            d._claim_by = 0
        assert "b" in {s[0] for s in rec.sent}  # the other entry kept its time
        # "a" is still there: in the schedule with a valid time, or claimed (a garbage
        # inflight record may hold a lease), or sent.
        assert "a" in store
        a_score = client.zscore(k.schedule, "a")
        assert a_score is None or valid_ms(a_score) or "a" in {s[0] for s in rec.sent}
        [a_state] = store.states(["a"])
        assert a_state.next_run_at is None or valid_ms(a_state.next_run_at.timestamp() * 1000)
    finally:
        store.close()
