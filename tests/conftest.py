from __future__ import annotations

import contextlib
import signal
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from celery import signals as celery_signals

from redisbeat import ScheduleStore, signals
from redisbeat.config import Config
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import OPENED, RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _close_tracked_clients() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().close()


#: The signals whose receivers change what a beat does (the fast path, the heartbeats' reads).
WATCHED = [getattr(signals, name) for name in signals.__all__] + [
    celery_signals.before_task_publish,
    celery_signals.after_task_publish,
]


@pytest.fixture(autouse=True)
def _no_receiver_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """A receiver a test leaves connected changes the beats of every later test in its
    process: it is disconnected, and the test that left it fails, named."""
    before = {id(s): list(s.receivers) for s in WATCHED}
    yield
    left = []
    for s in WATCHED:
        added = [r for r in s.receivers if r not in before[id(s)] and _local(r[1])]
        if added:
            left.append(s.name)
            s.receivers[:] = [r for r in s.receivers if r not in added]
            s.sender_receivers_cache.clear()
    assert not left, f"{request.node.nodeid} left receivers connected to {left}"


def _local(ref: object) -> bool:
    """Whether a receiver is alive and was made in a test (those connected by importing a
    module, as the test kit's app connects its own, are meant to stay)."""
    receiver = ref() if isinstance(ref, weakref.ReferenceType) else ref
    return receiver is not None and "<locals>" in getattr(receiver, "__qualname__", "")


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    yield c
    c.close()


@pytest.fixture
def store(redis_server: RedisServer, prefix: str) -> Iterator[ScheduleStore]:
    c = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    s = ScheduleStore(c, prefix=prefix, timezone="UTC")
    yield s
    s.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A persistent redis-server of this test's own, free to be restarted."""
    server = RedisServer(tmp_path / "redis", persistent=True)
    server.directory.mkdir()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def beats_for(tmp_path: Path) -> Iterator[object]:
    """Factory: beats_for(server, prefix, **env) -> Beats; every beat is stopped at the end."""
    made: list[Beats] = []

    def make(server: RedisServer, prefix: str, **env: str) -> Beats:
        beats = Beats(
            tmp_path,
            {
                "TEST_BROKER_URL": server.url(1),
                "TEST_STORE_URL": server.url(0),
                "TEST_PREFIX": prefix,
                **env,
            },
        )
        made.append(beats)
        return beats

    yield make
    for beats in made:
        beats.stop_all()
    # What the beats sent is not left in the broker for a later test's queue readers.
    for url in {beats.env["TEST_BROKER_URL"] for beats in made}:
        with contextlib.suppress(redis.RedisError):
            broker = redis.Redis.from_url(url)
            broker.flushdb()
            broker.close()


@pytest.fixture
def stores() -> Iterator[object]:
    """Factory: stores(server, prefix) -> ScheduleStore, closed before the servers stop."""
    made: list[ScheduleStore] = []

    def make(server: RedisServer, prefix: str) -> ScheduleStore:
        client = redis.Redis.from_url(server.url(0), decode_responses=True)
        made.append(ScheduleStore(client, prefix=prefix))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def sharded_stores() -> Iterator[Callable[[str, str, int], ScheduleStore]]:
    """Factory: sharded_stores(url, prefix, shards) -> a ScheduleStore with that
    ``redisbeat_shards``, closed at the end of the test."""
    made: list[ScheduleStore] = []

    def make(url: str, prefix: str, shards: int) -> ScheduleStore:
        made.append(ScheduleStore.from_config(Config(url, key_prefix=prefix, shards=shards)))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """In-process schedulers install SIGTERM/SIGINT handlers; put pytest's back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _load_hypothesis_profile() -> None:
    """The same examples on every CI run (CI set in the environment), fresh ones elsewhere."""
    import os

    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None, deadline=None)
    settings.load_profile("ci" if os.environ.get("CI") else "default")


_load_hypothesis_profile()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRig]:
    """A Redis Cluster of 3 masters without replicas, for the tests of one module."""
    with ClusterRig(parent=tmp_path_factory.mktemp("cluster")) as rig:
        yield rig


@pytest.fixture(scope="module")
def server_without_zmscore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server without ZMSCORE (renamed away), which redisbeat calls: it stands for a
    server redisbeat cannot work with, as Redis 6.0 is."""
    server = RedisServer(
        tmp_path_factory.mktemp("no-zmscore"), extra_args=["--rename-command", "ZMSCORE", ""]
    )
    server.start()
    yield server
    server.stop()
