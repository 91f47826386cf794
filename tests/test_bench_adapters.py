"""The benchmark adapters against real beats: what they load and add is sent, clear empties."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from benchmarks.bench.adapters import (
    ADAPTERS,
    Adapter,
    DjangoCeleryBeatAdapter,
    RedbeatAdapter,
    RedisbeatAdapter,
    Spec,
    available,
    now_ms,
)
from redisbeat_testkit.processes import environ_without_django, stop_process
from redisbeat_testkit.redis_server import RedisServer


@pytest.fixture(scope="module")
def bench_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of this module's own: the adapters flush their databases on it."""
    server = RedisServer(tmp_path_factory.mktemp("bench-redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=sorted(ADAPTERS))
def adapter(
    request: pytest.FixtureRequest,
    bench_redis: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Adapter]:
    reason = available()[request.param]
    if reason:
        pytest.skip(reason)
    made = ADAPTERS[request.param](tmp_path_factory.mktemp("bench"), bench_redis.url(0))
    made.setup()
    yield made
    made.teardown()


@dataclass
class Queue:
    """The broker's ``celery`` list, popped as a worker would: (task, entry) per message."""

    client: redis.Redis
    log: Path
    sent: list[tuple[str, str]] = field(default_factory=list)

    def count(self, entry: str) -> int:
        return sum(1 for _, name in self.sent if name == entry)

    def wait(self, done: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise AssertionError(f"timed out waiting for {what}; beat log:\n{tail}")
            raw = self.client.rpop("celery")
            if raw is None:
                time.sleep(0.02)
            else:
                self.sent.append(decode(raw))


def decode(raw: bytes) -> tuple[str, str]:
    """A kombu Redis-transport message: the task name and the ``entry`` keyword argument."""
    message = json.loads(raw)
    body = message["body"]
    if message.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    _args, kwargs, _embed = json.loads(body)
    return message["headers"]["task"], kwargs["entry"]


@contextmanager
def beat(adapter: Adapter, directory: Path) -> Iterator[Queue]:
    """One ``celery -A benchmarks.bench.app beat`` of the adapter's scheduler."""
    client = redis.Redis.from_url(adapter.redis_url)
    client.delete("celery")
    # pytest-django exports the tests' DJANGO_SETTINGS_MODULE; the adapter sets its own.
    env = environ_without_django()
    log = directory / f"beat-{adapter.name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "benchmarks.bench.app", "beat"),
                *("-S", adapter.scheduler, "--loglevel", "INFO", "--pidfile", ""),
                *("--schedule", str(directory / "unused-schedule")),
            ],
            cwd=directory,
            env={**env, **adapter.beat_env()},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield Queue(client, log)
    finally:
        stop_process(process)
        client.close()


def grid(count: int, prefix: str = "e") -> list[Spec]:
    """``count`` entries every second, each first due within the next two seconds."""
    start = now_ms()
    return [Spec(f"{prefix}{i}", 1.0, start + 1000 + 40 * i) for i in range(count)]


def test_a_beat_sends_every_loaded_entry_and_every_added_one(
    adapter: Adapter, tmp_path: Path
) -> None:
    adapter.clear()
    specs = grid(20)
    adapter.load(specs)
    names = {s.name for s in specs}
    with beat(adapter, tmp_path) as queue:
        queue.wait(lambda: names <= {name for _, name in queue.sent}, "every loaded entry")
        adapter.add(Spec("added", 1.0, now_ms()))
        queue.wait(lambda: queue.count("added") > 0, "the added entry")
        if isinstance(adapter, RedbeatAdapter):
            with pytest.raises(NotImplementedError):
                adapter.add_via_admin(Spec("admin", 1.0, now_ms()))
        else:
            adapter.add_via_admin(Spec("admin", 1.0, now_ms()))
            queue.wait(lambda: queue.count("admin") > 0, "the entry added through the admin")
    assert {task for task, _ in queue.sent} == {"bench.tick"}
    assert {name for _, name in queue.sent} <= names | {"added", "admin"}
    adapter.clear()


def test_after_clear_a_beat_sends_nothing_that_was_loaded_before(
    adapter: Adapter, tmp_path: Path
) -> None:
    adapter.clear()
    adapter.load(grid(20))
    adapter.clear()
    adapter.load(grid(1, prefix="after-clear-"))
    with beat(adapter, tmp_path) as queue:
        # Every cleared entry would have been due at least once by the second send.
        queue.wait(lambda: queue.count("after-clear-0") >= 2, "two sends of the new entry")
    assert Counter(name for _, name in queue.sent) == {"after-clear-0": len(queue.sent)}
    adapter.clear()


@pytest.mark.skipif(available()["celery-redbeat"] is not None, reason="celery-redbeat missing")
def test_redbeat_bulk_load_writes_what_entry_save_writes(
    bench_redis: RedisServer, tmp_path: Path
) -> None:
    redbeat = RedbeatAdapter(tmp_path, bench_redis.url(0))
    redbeat.setup()
    try:
        client = redbeat.client()
        key = redbeat.app.redbeat_conf.schedule_key
        spec = Spec("same", 7.0, now_ms() + 60_000)  # first due: the anchor, either way

        def stored() -> tuple[dict[str, str], float | None]:
            entry = redbeat.entry(spec)
            return client.hgetall(entry.key), client.zscore(key, entry.key)

        redbeat.clear()
        redbeat.load([spec])
        loaded, loaded_score = stored()
        redbeat.clear()
        redbeat.add(spec)  # RedBeatSchedulerEntry.save()
        saved, saved_score = stored()
        assert loaded == saved
        assert set(saved) == {"definition", "meta"}
        # redbeat scores an entry from the clock at the moment it is written.
        assert loaded_score is not None and saved_score is not None
        assert abs(loaded_score - saved_score) <= 1
        redbeat.clear()
    finally:
        redbeat.teardown()


def test_redisbeat_beats_keep_their_schedule_where_the_store_url_says(tmp_path: Path) -> None:
    default = RedisbeatAdapter(tmp_path, "redis://127.0.0.1:7000/0")
    assert default.beat_env()["BENCH_REDISBEAT_URL"] == "redis://127.0.0.1:7000/1"
    url = "redis-cluster://127.0.0.1:7001,127.0.0.1:7002"
    on_cluster = RedisbeatAdapter(tmp_path, "redis://127.0.0.1:7000/0", store_url=url)
    assert on_cluster.beat_env()["BENCH_REDISBEAT_URL"] == url


def test_django_celery_beat_takes_whole_seconds_only() -> None:
    with pytest.raises(ValueError, match="whole seconds"):
        DjangoCeleryBeatAdapter.seconds(Spec("half", 1.5, 0))
    assert DjangoCeleryBeatAdapter.seconds(Spec("two", 2.0, 0)) == 2


def test_the_first_occurrence_is_the_next_point_of_the_grid() -> None:
    assert Spec("e", 10.0, anchor_ms=5_000).first_due_ms(now_ms=5_000) == 15_000
    assert Spec("e", 10.0, anchor_ms=5_000).first_due_ms(now_ms=27_000) == 35_000
    assert Spec("e", 10.0, anchor_ms=50_000).first_due_ms(now_ms=27_000) == 50_000
