"""Fixtures for the redisbeat_django tests: the test Celery app's store on a private Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from redisbeat import ScheduleStore
from redisbeat_django.conf import get_store, reset_store
from redisbeat_django.sync import retrier
from redisbeat_testkit.djangosite.celery_app import app as celery_app
from redisbeat_testkit.redis_server import RedisServer


def point_store_at(server: RedisServer, prefix: str) -> ScheduleStore:
    """Make the Django app's store use this server and key prefix."""
    celery_app.conf.redisbeat_redis_url = server.url()
    celery_app.conf.redisbeat_key_prefix = prefix
    celery_app.conf.broker_url = server.url()
    reset_store()
    return get_store()


@pytest.fixture
def rb_store(redis_server: RedisServer, prefix: str) -> Iterator[ScheduleStore]:
    """The store the Django app pushes to, on the session's redis-server."""
    store = point_store_at(redis_server, prefix)
    yield store
    reset_store()


@pytest.fixture
def own_store(own_redis: RedisServer, prefix: str) -> Iterator[ScheduleStore]:
    """The store on a redis-server of this test's own, free to be stopped and started."""
    store = point_store_at(own_redis, prefix)
    yield store
    reset_store()


@pytest.fixture(autouse=True)
def _no_retry_left_running() -> Iterator[None]:
    """A background retry must not outlive its test and push into the next one's store."""
    yield
    retrier.stop()
