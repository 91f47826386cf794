"""A send rewrites an entry's run state and checks its claim from the spelling the scripts
write (store/lua/spelled.lua) without decoding them; every other spelling of the same JSON
takes the decoding path. Both must leave the same state and report the same problems."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.store.records import Outcome

#: What every send writes first, in the order the scripts write it.
HOT = ("last_run_at", "last_sent_at", "total_run_count", "last_task_id", "last_beat")
SENT = {
    "last_run_at": 1_790_000_000_000,
    "last_sent_at": 1_790_000_000_012,
    "total_run_count": 41,
    "last_task_id": "3f2a1c4e-9d8b-4c7a-b6e5-1a2b3c4d5e6f",
    "last_beat": "host:12:ab",
}
MISSED = {"missed": 3, "last_missed": {"at": 5, "due": 4, "count": 3, "reason": "paused"}}

STATES: dict[str, dict[str, Any] | None] = {
    "none yet": None,
    "sent before": SENT,
    "with counters": {**SENT, **MISSED, "skipped": 2, "note": "kept"},
    "failing": {**SENT, "failures": 2, "last_error": "refused"},
    "paused till past": {**SENT, "paused": {"until": 1, "missed": 4}},
    "stopped": {**SENT, "stopped": "max_runs"},
    "garbage counter": {**SENT, "missed": "many"},
    "garbage count": {**SENT, "total_run_count": "x"},
    "odd beat": {**SENT, "last_beat": 'a"b\\c/d'},
    "odd task id": {**SENT, "last_task_id": 'x"y'},
    "garbage run time": {**SENT, "last_run_at": "soon"},
    "fractional count": {**SENT, "total_run_count": 4.5},
    "escape after the ids": {**SENT, "note": 'a\\b"c'},
}


def spelled(state: dict[str, Any] | None, hot_first: bool) -> str | None:
    """``state`` as JSON: the hot fields first in the scripts' order, or every field sorted
    (which no script writes, so it is decoded)."""
    if state is None:
        return None
    if not hot_first:
        return json.dumps(state, sort_keys=True)
    ordered = {k: state[k] for k in HOT if k in state}
    ordered.update((k, v) for k, v in state.items() if k not in HOT)
    return json.dumps(ordered, separators=(",", ":"))


def send_once(
    store: ScheduleStore,
    client: redis.Redis,
    raw: str | None,
    task_id: str,
    beat: str,
    missed: int = 0,
    why: str = "",
) -> tuple[dict[str, Any], dict[str, str], str]:
    """One claim and its 'sent' finish of entry ``e`` over the stored ``raw`` run state (the
    send found ``missed`` occurrences missed before it, for ``why``): the state after it, the
    problems reported, and the state as stored."""
    store.upsert(Entry("e", "proj.ping", Interval(60)))
    client.hdel(store.keys.state, "e")
    if raw is not None:
        client.hset(store.keys.state, "e", raw)
    client.zadd(store.keys.schedule, {"e": store.now_ms() - 5})
    batch = store.claim(beat, 30_000, 10)
    [claim] = batch.claims
    outcome = Outcome(
        "e", "sent", claim.due_ms, claim.due_ms + 60_000, task_id, error=why, missed=missed
    )
    result = store.finish(beat, batch.lease_until_ms, [outcome])
    assert result.finished == 1
    stored = client.hget(store.keys.state, "e")
    state = json.loads(stored)
    # The times of this send: compared here, as two sends have their own.
    assert state.pop("last_run_at") == claim.due_ms
    assert 0 <= state.pop("last_sent_at") - claim.due_ms < 60_000
    for field in ("last_missed", "last_skipped"):
        if isinstance(state.get(field), dict) and state[field]["due"] == claim.due_ms:
            state[field].update(due="this send's", at="this send's")
    return state, dict(result.garbled), stored


@pytest.mark.parametrize("case", sorted(STATES))
@pytest.mark.parametrize(
    ("task_id", "beat"),
    [
        ("tid-1", "host:1:ab"),
        ('t"id\\1', "host:1:ab"),
        ("t\tid", "host:1:ab"),
        ("tâche-1", "host:1:ab"),
        ("tid-1", "bé:1"),
    ],
)
def test_a_send_leaves_the_same_run_state_whichever_way_it_was_spelled(
    store, client, case, task_id, beat
):
    fast, fast_problems, stored = send_once(
        store, client, spelled(STATES[case], True), task_id, beat
    )
    slow, slow_problems, _ = send_once(store, client, spelled(STATES[case], False), task_id, beat)
    assert fast_problems == slow_problems
    assert fast == slow
    assert fast["last_task_id"] == task_id and fast["last_beat"] == beat
    # Written back in the scripts' order, so the next send reads it without decoding.
    assert list(json.loads(stored))[: len(HOT)] == list(HOT)


def test_one_odd_task_id_in_a_batch_is_spelled_as_json_beside_plain_ones(store, client):
    """A beat's task ids are UUIDs, which the finish spells without checking; a batch with
    any other (a quote, a control character) has each checked."""
    names = ["plain", "quote", "tab"]
    ids = {"plain": "3f2a1c4e-9d8b-4c7a-b6e5-1a2b3c4d5e6f", "quote": 'a"b', "tab": "a\tb"}
    for name in names:
        store.upsert(Entry(name, "proj.ping", Interval(60)))
        client.zadd(store.keys.schedule, {name: store.now_ms() - 5})
    batch = store.claim("b", 30_000, 10)
    outcomes = [
        Outcome(c.name, "sent", c.due_ms, c.due_ms + 60_000, ids[c.name]) for c in batch.claims
    ]
    assert store.finish("b", batch.lease_until_ms, outcomes).finished == 3
    for name in names:
        state = json.loads(client.hget(store.keys.state, name))
        assert state["last_task_id"] == ids[name] and state["total_run_count"] == 1
        assert store.state(name).last_task_id == ids[name]


def test_a_send_counts_on_from_the_state_it_found(store, client):
    for expected in (1, 2, 3):
        state, problems, _ = send_once(store, client, client.hget(store.keys.state, "e"), "t", "b")
        assert state["total_run_count"] == expected and problems == {}


@pytest.mark.parametrize("case", sorted(STATES))
@pytest.mark.parametrize("why", ["late", 'odd "reason"'])
def test_a_send_that_found_occurrences_missed_counts_them_whichever_way_it_was_spelled(
    store, client, case, why
):
    """A beat behind schedule counts missed occurrences at nearly every send: the count sits
    right after the fields every send writes, and is added to without decoding the state."""
    fast, fast_problems, stored = send_once(
        store, client, spelled(STATES[case], True), "tid-1", "host:1:ab", 2, why
    )
    slow, slow_problems, _ = send_once(
        store, client, spelled(STATES[case], False), "tid-1", "host:1:ab", 2, why
    )
    assert fast_problems == slow_problems
    assert fast == slow
    before = STATES[case] or {}
    counted = before.get("missed") if isinstance(before.get("missed"), int) else 0
    held = before["paused"]["missed"] if "paused" in before else 0  # a pause that ended
    assert fast["missed"] == counted + held + 2
    assert fast["last_missed"] == {
        "at": "this send's",
        "due": "this send's",
        "count": 2,
        "reason": why,
    }
    if why == "late":  # spelled for the next send to add to without decoding
        assert list(json.loads(stored))[: len(HOT) + 2] == [*HOT, "missed", "last_missed"]


def test_missed_occurrences_add_up_send_after_send(store, client):
    for missed, total, last in ((3, 3, 3), (0, 3, 3), (2, 5, 2), (1, 6, 1)):
        raw = client.hget(store.keys.state, "e")
        state, problems, _ = send_once(
            store, client, raw, "t", "b", missed, "late" if missed else ""
        )
        assert problems == {} and state["missed"] == total
        assert state["last_missed"]["count"] == last
