"""Fixtures for the redisbeat_django tests: the test Celery app's store on a private Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browsing import FAST_HASHERS, TIMEOUT, chromium_executable
from django.test import override_settings
from playwright.sync_api import Browser, Page, sync_playwright

from redisbeat import ScheduleStore
from redisbeat_django import outbox
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
    outbox.retrier.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module.

    Playwright's sync API keeps an event loop in this thread, so Django would refuse ORM
    calls from the tests (and from pytest-django's database flushes) as "async unsafe";
    nothing here runs concurrently with them, so they are allowed for the whole module.
    Passwords use a fast hasher: the default takes about a second per login.
    """
    with pytest.MonkeyPatch.context() as mp, override_settings(PASSWORD_HASHERS=FAST_HASHERS):
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_executable(),
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
            yield browser
            browser.close()


@pytest.fixture
def page(browser: Browser, live_server, rb_store) -> Iterator[Page]:
    """A fresh browser context (no cookies) on the live server, Redis pointed at rb_store."""
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1400, "height": 900}, locale="en-US"
    )
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    yield page
    context.close()
