"""The Django app on a Redis Cluster: rows are pushed, reconciled and shown live from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.urls import reverse

from redisbeat import ScheduleStore
from redisbeat.schedule.kinds import Interval
from redisbeat_django.conf import get_store, reset_store
from redisbeat_django.models import PeriodicTask, SyncStatus
from redisbeat_django.sync import reconcile
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.djangosite.celery_app import app as celery_app

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = reverse("admin:redisbeat_django_periodictask_changelist")
BEATS = reverse("admin:redisbeat_django_periodictask_beats")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRig]:
    with ClusterRig(parent=Path(tmp_path_factory.mktemp("cluster"))) as rig:
        yield rig


@pytest.fixture
def cluster_store(rig: ClusterRig, prefix: str) -> Iterator[ScheduleStore]:
    conf = celery_app.conf
    before = conf.get("redisbeat_redis_url"), conf.get("redisbeat_key_prefix", "redisbeat")
    conf.redisbeat_redis_url, conf.redisbeat_key_prefix = rig.url, prefix
    reset_store()
    yield get_store()
    reset_store()
    conf.redisbeat_redis_url, conf.redisbeat_key_prefix = before


def test_rows_reach_the_cluster_and_the_admin_shows_their_live_state(
    admin_client, cluster_store: ScheduleStore
):
    row = PeriodicTask.objects.create(
        name="report", task="reports.daily", kind="interval", every=30
    )
    assert cluster_store.get("report").schedule == Interval(30.0)
    row.refresh_from_db()
    assert row.sync_status == SyncStatus.SYNCED
    cluster_store.run_now("report")
    html = admin_client.get(CHANGELIST).content.decode()
    assert "report" in html and "Redis unavailable" not in html
    cluster_store.heartbeat("host-1:4242:abc")
    assert "host-1:4242:abc" in admin_client.get(BEATS).content.decode()
    cluster_store.remove("report", source="django")  # lost from Redis: the reconcile puts it back
    assert reconcile().added == ["report"]
    assert "report" in cluster_store
