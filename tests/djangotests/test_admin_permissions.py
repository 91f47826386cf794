"""The admin without change permission changes nothing, in the database or in Redis.

test_django_admin.py shows a view-only user gets 403 from the change form and the run-now
URL and cannot disable a task. Here: every action (enable, disable, run now, sync), Redis
checked as well as the table, a user with add and delete but no change permission, and
staff with no permission or no staff status at all.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from redisbeat import ScheduleStore
from redisbeat.schedule.kinds import Interval
from redisbeat.store.run_state import EntryState
from redisbeat_django.models import PeriodicTask

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = reverse("admin:redisbeat_django_periodictask_changelist")


def change_url(row: PeriodicTask) -> str:
    return reverse("admin:redisbeat_django_periodictask_change", args=[row.pk])


def run_now_url(row: PeriodicTask) -> str:
    return reverse("admin:redisbeat_django_periodictask_run_now", args=[row.pk])


def client_for(name: str, *codenames: str, staff: bool = True) -> Client:
    user = User.objects.create_user(name, password="pw", is_staff=staff)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="redisbeat_django")
        )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(params=["view-only", "add-and-delete-but-not-change"])
def no_change(request: pytest.FixtureRequest, db: None) -> Client:
    """A staff user who may see periodic tasks but not change them."""
    if request.param == "view-only":
        return client_for("viewer", "view_periodictask")
    return client_for("adder", "view_periodictask", "add_periodictask", "delete_periodictask")


def snapshot(store: ScheduleStore) -> tuple[dict[str, tuple[object, ...]], list[EntryState]]:
    """Everything the admin could change: the rows, and each entry's definition and state."""
    rows: dict[str, tuple[object, ...]] = {
        r.name: (r.enabled, r.every, r.sync_status, store.get(r.name).dumps())
        for r in PeriodicTask.objects.order_by("name")
    }
    return rows, store.states(sorted(rows))


def make_rows(store: ScheduleStore) -> list[PeriodicTask]:
    """An enabled row, a disabled row, and a row whose Redis copy differs (so sync would push)."""
    enabled = PeriodicTask.objects.create(name="enabled", task="reports.daily", every=3600)
    disabled = PeriodicTask.objects.create(
        name="disabled", task="reports.daily", every=3600, enabled=False
    )
    drifted = PeriodicTask.objects.create(name="drifted", task="reports.daily", every=3600)
    store.upsert(replace(store.get("drifted"), schedule=Interval(5)), force=True)
    next_run = store.states(["enabled"])[0].next_run_at
    assert isinstance(next_run, datetime) and store.states(["disabled"])[0].next_run_at is None
    return [enabled, disabled, drifted]


def test_no_action_changes_anything_without_change_permission(
    no_change: Client, admin_client: Client, rb_store: ScheduleStore
) -> None:
    for action in ("enable_tasks", "disable_tasks", "run_now", "sync_tasks"):
        PeriodicTask.objects.all().delete()  # and from Redis
        rows = make_rows(rb_store)
        before = snapshot(rb_store)
        data = {"action": action, "_selected_action": [str(r.pk) for r in rows], "index": "0"}
        assert no_change.post(CHANGELIST, data, follow=True).status_code == 200
        listing = no_change.get(CHANGELIST).content.decode()
        assert f'value="{action}"' not in listing, f"{action} is offered"
        assert snapshot(rb_store) == before, f"{action} changed something"
        # The same request from a user with change permission does change something.
        admin_client.post(CHANGELIST, data, follow=True)
        assert snapshot(rb_store) != before, f"{action} changed nothing even for an admin"


def test_the_change_form_and_run_now_url_refuse_without_change_permission(
    no_change: Client, admin_client: Client, rb_store: ScheduleStore
) -> None:
    rows = make_rows(rb_store)
    before = snapshot(rb_store)
    for row in rows:
        form = {"name": row.name, "task": "evil.task", "kind": "interval", "every": "1"}
        assert no_change.post(change_url(row), form).status_code == 403
        assert no_change.post(run_now_url(row)).status_code == 403
    assert snapshot(rb_store) == before
    assert admin_client.post(run_now_url(rows[0])).status_code == 302
    assert snapshot(rb_store) != before  # with change permission, the same POST runs it


def test_staff_without_permissions_and_non_staff_users_reach_nothing(
    db: None, rb_store: ScheduleStore
) -> None:
    rows = make_rows(rb_store)
    before = snapshot(rb_store)
    staff = client_for("staff", staff=True)
    outsider = client_for("outsider", "change_periodictask", staff=False)
    login = reverse("admin:login")
    row = rows[0]
    for url in (CHANGELIST, change_url(row)):
        assert staff.get(url).status_code == 403
        assert outsider.get(url).url.startswith(login)  # type: ignore[attr-defined]
    assert staff.post(change_url(row), {"name": "x"}).status_code == 403
    assert staff.post(run_now_url(row)).status_code == 403
    run_now = {"action": "run_now", "_selected_action": [str(row.pk)], "index": "0"}
    assert staff.post(CHANGELIST, run_now).status_code == 403
    for url in (run_now_url(row), CHANGELIST):
        response = outsider.post(url, run_now)
        assert response.status_code == 302 and response.url.startswith(login)  # type: ignore[attr-defined]
    assert snapshot(rb_store) == before
