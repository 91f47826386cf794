"""The admin's "Delayed tasks" pages: in a real browser (list, search, pages, cancel,
reschedule), and what a user without the change permission may do."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from browsing import log_in
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from playwright.sync_api import Page, expect

from redisbeat import ScheduleStore
from redisbeat.schedule.clock import to_ms
from redisbeat_django import delayed_admin
from redisbeat_django.models import DelayedCall
from redisbeat_testkit.ports import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/redisbeat_django/delayedtask/"
UTC = timezone.utc


def task_url(key: str) -> str:
    return reverse("admin:redisbeat_django_delayedtask_change", args=[key])


def delay_five(store: ScheduleStore) -> None:
    """Five tasks, due 1 to 5 hours from now: three of owner "user:1", two of "user:2"."""
    for hours, owner in enumerate(["user:1", "user:2", "user:1", "user:2", "user:1"], start=1):
        store.delay("reports.daily", [hours], countdown=hours * 3600, key=f"t{hours}", owner=owner)


def keys_shown(page: Page) -> list[str]:
    return [t.strip() for t in page.locator("#result_list tbody th a").all_text_contents()]


def test_the_list_pages_in_due_order_and_searches_by_owner_and_key(
    page: Page, rb_store, monkeypatch
):
    monkeypatch.setattr(delayed_admin, "PER_PAGE", 2)
    delay_five(rb_store)
    log_in(page)
    page.goto("/admin/")
    page.get_by_role("link", name="Delayed tasks").click()
    expect(page.locator(".rb-count")).to_have_text(re.compile(r"^\s*5 pending\s*$"))
    assert keys_shown(page) == ["t1", "t2"]
    page.click("#rb-next-page")
    expect(page.locator("#result_list tbody th a").first).to_have_text("t3")
    assert keys_shown(page) == ["t3", "t4"]
    page.click("#rb-next-page")
    expect(page.locator("#result_list tbody th a").first).to_have_text("t5")
    assert keys_shown(page) == ["t5"]
    expect(page.locator("#rb-next-page")).to_have_count(0)
    page.click("#rb-first-page")
    expect(page.locator("#result_list tbody th a").first).to_have_text("t1")

    # An owner's link lists that owner's tasks, paged the same way.
    page.locator("#result_list tbody tr").first.get_by_role("link", name="user:1").click()
    expect(page.locator(".rb-count")).to_contain_text("3 pending for user:1")
    assert keys_shown(page) == ["t1", "t3"]
    page.click("#rb-next-page")
    expect(page.locator("#result_list tbody th a").first).to_have_text("t5")

    # A key, exactly.
    page.goto(LIST)
    page.fill("#rb-key", "t4")
    page.click("#rb-delayed-search input[type=submit]")
    expect(page.locator("#result_list tbody th a")).to_have_text(["t4"])
    page.fill("#rb-key", "t")
    page.click("#rb-delayed-search input[type=submit]")
    expect(page.locator("#content-main")).to_contain_text("No delayed task with key t")


def test_cancel_selected_tasks_from_the_list(page: Page, rb_store):
    delay_five(rb_store)
    log_in(page)
    page.goto(LIST)
    for key in ("t2", "t4"):
        page.get_by_label(f"Select {key}").check()
    page.click("#rb-cancel-selected")
    expect(page.locator(".messagelist")).to_contain_text("Cancelled 2 delayed task(s).")
    assert keys_shown(page) == ["t1", "t3", "t5"]
    assert rb_store.get_delayed("t2") is None and rb_store.get_delayed("t4") is None
    assert [t.key for t in rb_store.pending("user:2")] == []


def test_reschedule_and_cancel_on_the_task_page(page: Page, rb_store):
    delay_five(rb_store)
    before = rb_store.get_delayed("t3")
    assert before is not None
    log_in(page)
    page.goto(LIST)
    page.get_by_role("link", name="t3", exact=True).click()
    expect(page.locator("#rb-delayed-task")).to_contain_text("reports.daily")

    page.fill("#id_by", "-2:00:00")
    page.click("input[name=_reschedule]")
    expect(page.locator(".messagelist")).to_contain_text("Rescheduled t3")
    moved = rb_store.get_delayed("t3")
    assert moved is not None and moved.eta == before.eta - timedelta(hours=2)

    page.fill("#id_eta", "2031-01-02T03:04:05")  # the admin's zone is UTC
    page.click("input[name=_reschedule]")
    expect(page.locator(".messagelist")).to_contain_text("Rescheduled t3")
    moved = rb_store.get_delayed("t3")
    assert moved is not None and moved.eta == datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    expect(page.locator("#rb-eta")).to_contain_text("2031-01-02 03:04:05")

    page.fill("#id_by", "1:00:00")
    page.fill("#id_eta", "2031-01-02T03:04:05")
    page.click("input[name=_reschedule]")
    expect(page.locator(".errorlist")).to_contain_text("not both")

    page.click("#rb-cancel")
    expect(page.locator(".messagelist")).to_contain_text("Cancelled t3")
    assert rb_store.get_delayed("t3") is None
    expect(page.locator("#content-main")).to_contain_text("No delayed task has the key")


def test_calls_waiting_for_redis_are_shown_and_pushed_from_the_admin(page: Page, rb_store):
    arguments = {"task": "reports.daily", "at_ms": to_ms(datetime(2031, 1, 1, tzinfo=UTC))}
    DelayedCall.objects.create(op="delay", key="waiting", arguments=arguments)
    log_in(page)
    page.goto(LIST)
    page.get_by_role("link", name="1 delayed call waiting for Redis").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    page.locator("#result_list tbody input.action-select").check()
    page.select_option("select[name=action]", "push_now")
    page.click("#changelist-form button[name=index]")
    expect(page.locator(".messagelist")).to_contain_text("Pushed 1 call(s) to Redis.")
    wait_until(lambda: rb_store.get_delayed("waiting") is not None, 10, "the call pushed")


def viewer() -> Client:
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_delayedtask"))
    client = Client()
    client.force_login(user)
    return client


def test_a_user_who_may_only_view_sees_the_tasks_and_changes_nothing(rb_store):
    rb_store.delay("reports.daily", countdown=3600, key="k", owner="o")
    client = viewer()
    listing = client.get(LIST)
    assert listing.status_code == 200
    assert b"k</a>" in listing.content and b"_selected_key" not in listing.content
    assert client.post(LIST, {"_selected_key": ["k"]}).status_code == 403
    assert client.post(task_url("k"), {"_cancel": "1"}).status_code == 403
    assert client.post(task_url("k"), {"by": "-1:00:00"}).status_code == 403
    task = rb_store.get_delayed("k")
    assert task is not None and task.state == "pending"
    nobody = User.objects.create_user("nobody", password="pw", is_staff=True)
    client.force_login(nobody)
    assert client.get(LIST).status_code == 403
    assert client.get(task_url("k")).status_code == 403


def test_the_pages_render_with_redis_down(own_store, own_redis, admin_user):
    own_store.delay("reports.daily", countdown=3600, key="k")
    own_redis.stop()
    client = Client()
    client.force_login(admin_user)
    listing = client.get(LIST)
    assert listing.status_code == 200 and b"Redis unavailable" in listing.content
    detail = client.get(task_url("k"))
    assert detail.status_code == 200 and b"Redis unavailable" in detail.content
