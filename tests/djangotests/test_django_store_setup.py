"""The admin on a Redis its settings do not fit (a wrong password, a database the server does
not have): every page renders and says so in the store's own line, which names the URL with
its password masked and the fix, not as Redis being down."""

from __future__ import annotations

import html
import secrets
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import reverse

from redisbeat_django.conf import get_store, reset_store
from redisbeat_django.models import PeriodicTask, SyncStatus
from redisbeat_testkit.djangosite.celery_app import app as celery_app
from redisbeat_testkit.redis_server import RedisServer

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = reverse("admin:redisbeat_django_periodictask_changelist")
PASSWORD = secrets.token_hex(8)
WRONG = "wrong-" + secrets.token_hex(4)


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that requires a password and has 4 databases."""
    server = RedisServer(
        tmp_path_factory.mktemp("locked"),
        extra_args=["--requirepass", PASSWORD, "--databases", "4"],
        client_kwargs={"password": PASSWORD},
    ).start()
    yield server
    server.stop()


def texts(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("login", "db", "said"),
    [
        (f":{WRONG}", 0, "rejected the login (WRONGPASS"),
        (f":{PASSWORD}", 9, "has no such database (ERR DB index is out of range)"),
    ],
    ids=["a wrong password", "no such database"],
)
def test_the_admin_says_what_to_change_in_the_stores_own_line(
    admin_client: Client, locked: RedisServer, prefix: str, login: str, db: int, said: str
) -> None:
    # As conftest's point_store_at does, with a URL of this test's own.
    celery_app.conf.redisbeat_redis_url = f"redis://{login}@127.0.0.1:{locked.port}/{db}"
    celery_app.conf.redisbeat_key_prefix = prefix
    reset_store()
    get_store()
    where = f"redis://:***@127.0.0.1:{locked.port}/{db}"
    try:
        row = PeriodicTask.objects.create(name="report", task="reports.daily", every=30)
        row.refresh_from_db()  # the push after commit was refused
        assert row.sync_status == SyncStatus.PENDING
        assert row.sync_error.startswith(f"Redis at {where} {said}"), row.sync_error
        listing = admin_client.get(CHANGELIST)
        assert listing.status_code == 200
        [line] = texts(listing)
        assert line.startswith(f"Redis at {where} {said}") and "Redis unavailable" not in line
        page = admin_client.get(
            reverse("admin:redisbeat_django_periodictask_change", args=[row.pk])
        )
        content = html.unescape(page.content.decode())
        assert page.status_code == 200 and f"Redis at {where} {said}" in content
        assert WRONG not in content and PASSWORD not in content
    finally:
        reset_store()
