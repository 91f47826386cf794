"""The Django admin in a real browser: Chromium (Playwright) -> live server -> Redis."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from browsing import AT_CHANGELIST, CHANGELIST, TIMEOUT, log_in
from django.utils import formats, timezone
from playwright.sync_api import Locator, Page, expect

from redisbeat.schedule.kinds import Cron
from redisbeat_django.models import PeriodicTask
from redisbeat_testkit.ports import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
#: How long to poll Redis, in seconds.
REDIS_TIMEOUT = 10.0
DASH = "\u2014"


def column(page: Page, header: str) -> int:
    """Index of the change list column whose header reads exactly ``header``.

    Waits for the header first, so it is safe right after a click that loads a new page.
    """
    headers = page.locator("#result_list thead th")
    expect(headers.filter(has_text=re.compile(rf"^\s*{re.escape(header)}\s*$"))).to_have_count(1)
    texts = [t.strip() for t in headers.all_text_contents()]
    return texts.index(header)


def cell(page: Page, name: str, header: str) -> Locator:
    """The change list cell of task ``name`` in column ``header``."""
    row = page.locator("#result_list tbody tr").filter(has=page.locator("a", has_text=name))
    return row.locator(":scope > td, :scope > th").nth(column(page, header))


def shown(moment: datetime) -> list[str]:
    """Texts that show this time: ISO-like date and HH:MM, Django's localized forms, HH:MM."""
    local = timezone.localtime(moment)
    return [
        local.strftime("%Y-%m-%d %H:%M"),
        formats.localize(local),
        formats.date_format(local, "TIME_FORMAT"),
        local.strftime("%H:%M"),
    ]


def test_log_in_and_open_the_change_list(page: Page, rb_store):
    PeriodicTask.objects.create(name="report", task="reports.daily", every=30)
    page.goto(CHANGELIST)
    expect(page).to_have_url(re.compile(r"/admin/login/\?next="))  # not logged in yet
    log_in(page)
    expect(page.locator("#content h1")).to_contain_text("periodic task", ignore_case=True)
    expect(page.locator("#user-tools")).to_contain_text("admin", ignore_case=True)
    expect(cell(page, "report", "Task")).to_have_text("reports.daily")
    expect(cell(page, "report", "Next run")).not_to_have_text(DASH)


def test_a_cron_task_added_in_the_form_reaches_redis_and_shows_its_next_run(page: Page, rb_store):
    log_in(page)
    page.goto(f"{CHANGELIST}add/")
    page.fill("#id_name", "five-minutely report")
    fill_task(page, "reports.daily")
    expect(page.locator("#id_dst_fold")).to_be_hidden()  # an interval has no DST policy
    choose_kind(page, "cron")
    page.fill("#id_cron_expression", "*/5 * * * *")
    page.select_option("#id_dst_fold", "twice")
    saved_at = timezone.now().replace(microsecond=0)
    page.click("input[name=_save]")
    expect(page).to_have_url(AT_CHANGELIST)

    wait_until(lambda: "five-minutely report" in rb_store, REDIS_TIMEOUT, "the entry in Redis")
    entry = rb_store.get("five-minutely report")
    assert entry.task == "reports.daily"
    # The Celery app's zone, and the DST policy chosen (the other: the deployment's).
    assert entry.schedule == Cron("*/5 * * * *", tz="UTC", dst_fold="twice")
    due = rb_store.state("five-minutely report").next_run_at
    assert due is not None and saved_at < due <= saved_at + timedelta(minutes=5)
    assert due.minute % 5 == 0 and due.second == 0 and due.microsecond == 0

    page.reload()
    next_run = cell(page, "five-minutely report", "Next run")
    expect(next_run).not_to_have_text(DASH, timeout=TIMEOUT)
    expect(next_run).not_to_be_empty(timeout=TIMEOUT)
    text = next_run.inner_text()  # "in 4 min", the exact time in the title
    assert re.match(r"^in \d+ (s|min)$", text.strip()), text
    title = next_run.locator("time").get_attribute("title") or ""
    assert any(form in title for form in shown(due)), (title, shown(due))


def test_a_cron_string_that_never_fires_is_refused_next_to_its_field(page: Page, rb_store):
    log_in(page)
    page.goto(f"{CHANGELIST}add/")
    page.fill("#id_name", "leap day")
    fill_task(page, "reports.daily")
    choose_kind(page, "cron")
    page.fill("#id_cron_expression", "0 0 31 2 *")
    page.click("input[name=_save]")

    error = page.locator(".field-cron_expression .errorlist")
    expect(error).to_contain_text("never fires", timeout=TIMEOUT)
    expect(page.locator("#id_cron_expression")).to_have_value("0 0 31 2 *")
    assert not PeriodicTask.objects.exists()
    assert rb_store.names("django") == set()
    assert "leap day" not in rb_store


def test_disabled_tasks_leave_the_schedule(page: Page, rb_store):
    for name in ("by action", "by form"):
        PeriodicTask.objects.create(
            name=name, task="reports.daily", kind="cron", cron_expression="*/5 * * * *"
        )
    assert rb_store.state("by action").next_run_at is not None
    assert rb_store.state("by form").next_run_at is not None
    log_in(page)
    expect(cell(page, "by action", "Next run")).not_to_have_text(DASH)

    # The change list action.
    page.locator("#result_list tbody tr").filter(
        has=page.locator("a", has_text="by action")
    ).locator("input.action-select").check()
    page.select_option("select[name=action]", "disable_tasks")
    page.click("#changelist-form button[name=index]")
    wait_until(
        lambda: rb_store.state("by action").next_run_at is None,
        REDIS_TIMEOUT,
        "the disabled entry to leave the schedule",
    )
    assert rb_store.get("by action").enabled is False
    expect(cell(page, "by action", "Next run")).to_have_text(DASH, timeout=TIMEOUT)
    expect(cell(page, "by form", "Next run")).not_to_have_text(DASH)

    # The change form's checkbox.
    page.locator("#result_list a", has_text="by form").click()
    page.uncheck("#id_enabled")
    page.click("input[name=_save]")
    wait_until(
        lambda: rb_store.state("by form").next_run_at is None,
        REDIS_TIMEOUT,
        "the disabled entry to leave the schedule",
    )
    page.goto(CHANGELIST)
    expect(cell(page, "by form", "Next run")).to_have_text(DASH, timeout=TIMEOUT)


def test_a_screenshot_of_the_change_list(page: Page, rb_store):
    PeriodicTask.objects.create(
        name="cleanup every 30 s",
        task="cleanup.sessions",
        kind="interval",
        every=30,
        period="seconds",
    )
    PeriodicTask.objects.create(
        name="daily report", task="reports.daily", kind="crontab", minute="0", hour="7"
    )
    PeriodicTask.objects.create(
        name="five-minutely report",
        task="reports.daily",
        kind="cron",
        cron_expression="*/5 * * * *",
    )
    PeriodicTask.objects.create(
        name="paused report",
        task="reports.daily",
        kind="cron",
        cron_expression="0 * * * *",
        enabled=False,
    )
    page.set_viewport_size({"width": 1920, "height": 1080})  # every column, none scrolled off
    log_in(page)
    for name in ("cleanup every 30 s", "daily report", "five-minutely report"):
        expect(cell(page, name, "Next run")).not_to_have_text(DASH)
    expect(cell(page, "paused report", "Next run")).to_have_text(DASH)

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "admin-changelist.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def choose_kind(page: Page, kind: str) -> None:
    """The schedule kind: radio buttons inside ``#id_kind``, or a select."""
    field = page.locator("#id_kind")
    if field.evaluate("el => el.tagName") == "SELECT":
        field.select_option(kind)
    else:
        field.locator(f"input[type=radio][value={kind}]").check()


def fill_task(page: Page, task: str) -> None:
    """The task field: a select of registered tasks, or a text input (maybe with a datalist)."""
    field = page.locator("#id_task")
    if field.evaluate("el => el.tagName") == "SELECT":
        field.select_option(task)
    else:
        field.fill(task)
