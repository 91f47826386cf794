"""The admin's Backfill form: a past range of a task's runs, sent once each."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from test_django_admin import make, texts
from test_django_admin import viewer as viewer  # a fixture

from redisbeat.schedule.clock import from_ms

pytestmark = pytest.mark.django_db(transaction=True)


def backfill_url(row: object) -> str:
    return reverse("admin:redisbeat_django_periodictask_backfill", args=[row.pk])  # type: ignore[attr-defined]


def test_the_backfill_form_queues_a_past_range_and_refuses_a_future_one(
    admin_client, viewer, rb_store
):
    row = make("report", every=600)
    page = admin_client.get(reverse("admin:redisbeat_django_periodictask_change", args=[row.pk]))
    assert backfill_url(row) in page.content.decode()  # the button on the task's page
    form = admin_client.get(backfill_url(row))
    assert form.status_code == 200 and 'name="start"' in form.content.decode()
    now = from_ms(rb_store.now_ms())
    local = "%Y-%m-%d %H:%M:%S"
    start = timezone.localtime(now - timedelta(hours=1)).strftime(local)
    end = timezone.localtime(now - timedelta(seconds=1)).strftime(local)
    done = admin_client.post(
        backfill_url(row), {"start": start, "end": end, "rate": "5"}, follow=True
    )
    [said] = texts(done)
    # A 600 s grid over an hour: six runs, or five when one fell in the last second left out.
    queued = rb_store.count_pending("backfill:report")
    assert 5 <= queued <= 7
    assert said.startswith(f"Backfilling report: {queued} run(s)") and "backfill:report" in said
    future = timezone.localtime(now + timedelta(hours=1)).strftime(local)
    refused = admin_client.post(backfill_url(row), {"start": start, "end": future, "rate": "5"})
    assert refused.status_code == 200
    assert any("field 'end': is in the future" in said for said in texts(refused))
    assert viewer.get(backfill_url(row)).status_code == 403
