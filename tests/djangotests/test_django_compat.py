"""The admin on a Redis server redisbeat cannot work with (ZMSCORE renamed away, as on Redis
6.0): every page renders and says so in the store's own one line, not as Redis being down."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest
import redis
from conftest import point_store_at
from django.test import Client
from django.urls import reverse

from redisbeat.store.server import Server
from redisbeat_django.conf import reset_store
from redisbeat_django.models import PeriodicTask, SyncStatus
from redisbeat_testkit.redis_server import RedisServer

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = reverse("admin:redisbeat_django_periodictask_changelist")
BEATS = reverse("admin:redisbeat_django_periodictask_beats")


@pytest.fixture
def refusal(server_without_zmscore: RedisServer, prefix: str) -> Iterator[str]:
    """The Django app's store on the server; yields how the refusal begins."""
    point_store_at(server_without_zmscore, prefix)
    client = redis.Redis(port=server_without_zmscore.port, decode_responses=True)
    name = Server.from_fields(client.info("server"))
    client.close()
    yield (
        f"{name} at 127.0.0.1:{server_without_zmscore.port} db=0 has no ZMSCORE command "
        "(Redis 6.2+)"
    )
    reset_store()


def texts(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


def test_every_admin_page_shows_the_servers_refusal_in_its_own_words(
    admin_client: Client, refusal: str
):
    row = PeriodicTask.objects.create(name="report", task="reports.daily", every=30)
    row.refresh_from_db()  # the push after commit was refused
    assert row.sync_status == SyncStatus.PENDING and row.sync_error.startswith(refusal)
    listing = admin_client.get(CHANGELIST)
    assert listing.status_code == 200
    [said] = texts(listing)
    assert said.startswith(refusal) and "Redis unavailable" not in said
    page = admin_client.get(reverse("admin:redisbeat_django_periodictask_change", args=[row.pk]))
    assert page.status_code == 200
    assert html.unescape(page.content.decode()).count(refusal) >= 2  # live state, history
    beats = admin_client.get(BEATS)
    assert beats.status_code == 200 and any(t.startswith(refusal) for t in texts(beats))
    data = {"action": "sync_tasks", "_selected_action": [str(row.pk)]}
    synced = admin_client.post(CHANGELIST, data, follow=True)
    assert any(t.startswith(f"Nothing was synced: {refusal}") for t in texts(synced))
