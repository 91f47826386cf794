"""Upgrading a running deployment, with real ``celery beat`` processes on one Redis.

The old release is the latest commit that changed what redisbeat stores before the stored
format was recorded (:data:`~redisbeat_testkit.releases.PREVIOUS_FORMAT`), installed from git
in a venv of its own (built once per checkout: ``python -m redisbeat_testkit.releases``).
Its beats run, this release's beats join them, then the old ones stop: every occurrence and
every delayed task goes out once. A beat meeting a format newer than it reads stops, in one
line, and leaves the store as it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from test_beats import broker
from test_formats import one_line, snapshot

from redisbeat import Entry, Interval, ScheduleStore, occurrence_id
from redisbeat.schedule.clock import from_ms
from redisbeat.store.errors import StoreIncompatible
from redisbeat.store.formats import FORMAT
from redisbeat.store.keys import DELAYED_MARK, Keys
from redisbeat_testkit.messages import Sent
from redisbeat_testkit.occurrences import Recorder
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import Beat, Beats
from redisbeat_testkit.redis_server import RedisServer
from redisbeat_testkit.releases import PREVIOUS_FORMAT, python_of, venv_for

ROOT = Path(__file__).resolve().parent.parent
SECOND = 1000
#: The periods of the entries, in seconds.
PERIODS = (0.5, 0.75, 1.0)
#: How long each phase lasts: old beats alone, old and new together, new beats alone (s).
PHASE = 4.0
#: Occurrences due this close to the end may be handed back unsent when the beats stop.
MARGIN_MS = 1500

#: What the old release runs to write entries and delayed tasks: its own API, so that what
#: the new beats find is what the old release wrote.
OLD_WRITER = """
import json, sys
import pytest
import redis
import redisbeat
from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.schedule.clock import from_ms
url, prefix = sys.argv[1], sys.argv[2]
plan = json.load(sys.stdin)
store = ScheduleStore(redis.Redis.from_url(url, decode_responses=True), prefix=prefix)
store.upsert_many(
    Entry(name, "proj.ping", Interval(period / 1000), start_at=from_ms(anchor))
    for name, (anchor, period) in plan["entries"].items()
)
store.delay_many(
    [{"task": "proj.ping", "key": key, "eta": from_ms(due)} for key, due in plan["delayed"].items()]
)
store.close()
print(redisbeat.__file__)
"""


def entries(first: int, count: int, start_ms: int) -> dict[str, tuple[int, int]]:
    """name -> (anchor, period), ms: ``count`` entries anchored over their first period."""
    plan = {}
    for i in range(first, first + count):
        period = int(PERIODS[i % len(PERIODS)] * SECOND)
        plan[f"e{i}"] = (start_ms + (i * 37) % period, period)
    return plan


def occurrences(plan: dict[str, tuple[int, int]], end_ms: int) -> set[tuple[str, int]]:
    return {
        (name, due)
        for name, (anchor, period) in plan.items()
        for due in range(anchor, end_ms, period)
    }


def delays(tag: str, count: int, first_ms: int, step_ms: int) -> dict[str, int]:
    return {f"{tag}{i}": first_ms + i * step_ms for i in range(count)}


def redis_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * SECOND + int(micros) // 1000


def stop(beats: list[Beat]) -> None:
    for beat in beats:
        beat.process.send_signal(signal.SIGTERM)
    for beat in beats:
        beat.process.wait(30)
        assert beat.process.returncode == 0, beat.output()[-3000:]


def senders(sent: list[Sent], beats: list[Beat]) -> list[Sent]:
    """What these beats sent (a beat id is host:pid:random)."""
    pids = {str(b.process.pid) for b in beats}
    return [s for s in sent if s.beat.split(":")[-2] in pids]


def old_release(server: RedisServer, prefix: str, python: Path, plan: dict[str, Any]) -> None:
    """Write ``plan`` through the old release's own store API."""
    done = subprocess.run(
        [str(python), "-c", OLD_WRITER, server.url(0), prefix],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        cwd=python.parent,  # not the checkout, whose redisbeat -c would import
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(python.parent.parent)), done.stdout


def test_old_and_new_beats_together_then_new_ones_alone_send_everything_exactly_once(
    redis_server: RedisServer, prefix: str, beats_for: Any
) -> None:
    old_python = python_of(venv_for(ROOT, PREVIOUS_FORMAT))  # built here when missing
    client = redis.Redis.from_url(redis_server.url(0), decode_responses=True)
    keys = Keys(prefix)
    queue = broker(redis_server)
    queue.delete("celery")
    sent = Recorder(queue)
    beats: Beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="1", PYTHONPATH="")
    beats.python = str(old_python)
    old = beats.start(2)
    wait_until(lambda: client.zcard(keys.beats) == 2, 60, "the old beats to register")

    # The old release writes the schedule and delayed tasks, and sends them alone.
    start = redis_ms(client) + 3 * SECOND
    plan = entries(0, 30, start)
    delayed = delays("old", 200, start + 300, 80)
    old_release(redis_server, prefix, old_python, {"entries": plan, "delayed": delayed})
    # Occurrences due before the entries were written are not this test's business.
    written = redis_ms(client)
    sent.until(lambda: redis_ms(client) > start + PHASE * SECOND, 30, "the old beats alone")
    assert client.hget(keys.layout, "format") is None, "the old release records no format"
    assert client.hget(keys.layout, "shards") == "1"

    # New beats join: the first to touch the store records its format, under load.
    beats.python = sys.executable
    new = beats.start(2)
    wait_until(lambda: client.zcard(keys.beats) == 4, 60, "the new beats to register")
    assert client.hget(keys.layout, "format") == str(FORMAT)
    store = ScheduleStore(client, prefix=prefix)
    joined = redis_ms(client)
    later = entries(30, 6, joined + SECOND)
    store.upsert_many(
        Entry(name, "proj.ping", Interval(period / SECOND), start_at=from_ms(anchor))
        for name, (anchor, period) in later.items()
    )
    delayed.update(delays("new", 100, joined + 300, 60))
    store.delay_many(
        [
            {"task": "proj.ping", "key": key, "eta": from_ms(due)}
            for key, due in delayed.items()
            if key.startswith("new")
        ]
    )
    sent.until(lambda: redis_ms(client) > joined + PHASE * SECOND, 30, "old and new together")

    # The old beats stop; the new ones carry on alone.
    stop(old)
    alone = redis_ms(client)
    last_due = max([*delayed.values(), alone + int(PHASE * SECOND)])
    sent.until(lambda: redis_ms(client) > last_due + MARGIN_MS, 30, "the new beats alone")
    end = redis_ms(client)
    stop(new)
    sent.drain()

    cutoff = end - MARGIN_MS
    want = occurrences(plan, cutoff) | occurrences(later, cutoff)
    periodic = Counter((s.entry, s.due_ms) for s in sent.sent if s.key is None)
    missing = {o for o in want if o[1] >= written} - set(periodic)
    assert not missing, f"{len(missing)} occurrences never sent, e.g. {sorted(missing)[:3]}"
    twice = [o for o, n in periodic.items() if n > 1]
    assert not twice, f"{len(twice)} occurrences sent more than once, e.g. {twice[:3]}"
    late = Counter((s.key, s.due_ms) for s in sent.sent if s.key is not None)
    assert late == Counter(delayed.items()), "every delayed task once, at its time"
    for s in sent.sent:
        name = s.entry if s.key is None else DELAYED_MARK + s.key
        assert s.task_id == occurrence_id(prefix, name, s.due_ms)
    # Each release sent both kinds, and the new beats every entry the old release wrote.
    for group in (old, new):
        mine = senders(sent.sent, group)
        assert {s.key is None for s in mine} == {True, False}, "periodic and delayed sends"
    assert {s.entry for s in senders(sent.sent, new)} >= set(plan)
    assert client.hget(keys.layout, "format") == str(FORMAT)


def test_a_beat_meeting_a_newer_format_stops_in_one_line_and_changes_nothing(
    redis_server: RedisServer, prefix: str, beats_for: Any, stores: Any
) -> None:
    store = stores(redis_server, prefix)
    store.upsert_many(Entry(f"e{i}", "proj.ping", Interval(1)) for i in range(5))
    store.delay("proj.ping", key="later", countdown=3600)
    store.heartbeat("a-beat-of-a-newer-release")
    client = store.client
    newer = str(FORMAT + 1)
    client.hset(store.keys.layout, "format", newer)
    before = snapshot(client, prefix)
    beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="1")
    [beat] = beats.start(1)
    beat.process.wait(60)
    output = beat.output()
    assert beat.process.returncode == StoreIncompatible.exit_code != 0, output[-3000:]
    line = one_line(newer, store)
    assert output.count(line) == 1, output[-3000:]
    assert f"CRITICAL/MainProcess] redisbeat: {line}\n" in output
    assert "Traceback" not in output
    assert snapshot(client, prefix) == before


def test_a_checkout_without_the_old_commit_fails_saying_so() -> None:
    missing = "0123456789abcdef" * 2 + "01234567"
    with pytest.raises(RuntimeError, match=r"not in the git history .* shallow clone"):
        venv_for(ROOT, missing)
    assert not (ROOT / ".venv-upgrade" / missing).exists()
