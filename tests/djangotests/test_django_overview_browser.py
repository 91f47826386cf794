"""The overview and the change list in a real browser, with a real beat sending: Chromium
(Playwright) -> live server -> Redis <- ``celery beat``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from browsing import CHANGELIST, TIMEOUT, log_in
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from redisbeat import ScheduleStore
from redisbeat_django.models import PeriodicTask
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer

pytestmark = pytest.mark.django_db(transaction=True)

OVERVIEW = f"{CHANGELIST}overview/"
#: Seconds to wait for a beat to send and summarise.
BEAT_TIMEOUT = 30.0
RELATIVE = re.compile(r"^(now|in \d+ (s|min|h|d)|\d+ (s|min|h|d) ago)$")
#: The exact time a title starts with (the last run's goes on with its task id and beat).
EXACT = re.compile(r"^\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3})? \w+(;|$)")


@pytest.fixture
def sending(rb_store: ScheduleStore, redis_server: RedisServer, prefix: str, beats_for: Any):
    """A beat summarising every second, and rows like a real deployment's (long names and
    dotted task paths, every kind, one disabled, one paused), some sent every second."""
    kinds: list[dict[str, Any]] = [
        {"kind": "interval", "every": 1, "period": "seconds"},
        {
            "kind": "cron",
            "cron_expression": "*/5 * * * *",
            "timezone": "America/Argentina/Buenos_Aires",
        },
        {"kind": "crontab", "minute": "30", "hour": "9", "day_of_week": "mon-fri"},
        {"kind": "clocked", "clocked_at": timezone.now() + timedelta(days=3)},
    ]
    for i in range(16):
        PeriodicTask.objects.create(
            name=f"finance-department-nightly-reconciliation-report-{i:02d}",
            task="proj.ping" if i % 4 == 0 else "myproject.reports.tasks.generate_daily_summary",
            enabled=i != 5,
            **kinds[i % 4],
        )
    rb_store.pause("finance-department-nightly-reconciliation-report-01", note="quarter close")
    beats = beats_for(redis_server, prefix, TEST_SUMMARY="1", TEST_HEARTBEAT="0.5")
    beats.start(1)
    wait_until(
        lambda: all(
            s.last_run_at
            for s in rb_store.states(
                [f"finance-department-nightly-reconciliation-report-{i:02d}" for i in (0, 4, 8)]
            )
        ),
        BEAT_TIMEOUT,
        "the beat to send the every-second rows",
    )
    return beats


def test_the_overview_shows_live_numbers_and_a_chart_with_data(page: Page, sending: Any):
    log_in(page)
    page.locator("a", has_text="Overview").first.click()
    expect(page).to_have_url(re.compile(re.escape(OVERVIEW) + "$"))
    expect(page.locator("#content h1")).to_have_text("Deployment overview")
    expect(page.locator('[data-count="entries"]')).to_have_text(re.compile(r"^\d+$"))
    assert int(page.locator('[data-count="entries"]').inner_text()) >= 16
    expect(page.locator('[data-count="delayed"]')).to_have_text("0")
    expect(page.locator("#rb-overview-beats h2")).to_have_text("1 beat alive")
    # The page refreshes itself (no reload here) until the chart of sends has bars.
    live = page.locator("#rb-overview-live")
    expect(live).not_to_have_attribute("data-refreshed", "0", timeout=int(BEAT_TIMEOUT * 1000))
    sent = page.locator("#rb-chart-sent svg.rb-chart")
    expect(sent).not_to_have_attribute("data-bars", "0", timeout=int(BEAT_TIMEOUT * 1000))
    expect(sent.locator("rect.rb-bar").first).to_be_visible()
    expect(page.locator('#rb-overview-beats [data-stat="sent"]')).to_have_text(
        re.compile(r"^[1-9]\d*$")
    )
    assert page.locator("svg.rb-chart").count() == 3


def contexts(browser: Browser, base_url: str) -> Iterator[tuple[str, Page]]:
    """A 1,280 x 800 page in the light scheme, then one in the dark."""
    for scheme in ("light", "dark"):
        context = browser.new_context(
            base_url=base_url,
            viewport={"width": 1280, "height": 800},
            locale="en-US",
            color_scheme=scheme,  # type: ignore[arg-type]
        )
        context.set_default_timeout(TIMEOUT)
        try:
            yield scheme, context.new_page()
        finally:
            context.close()


def no_horizontal_scroll(page: Page) -> tuple[int, int]:
    return page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )


def test_the_change_list_fits_1280_pixels_in_light_and_dark_mode(
    browser: Browser, live_server: Any, sending: Any
):
    for scheme, page in contexts(browser, live_server.url):
        if scheme == "light":
            log_in(page)
        else:
            log_in_again(page)
        expect(page.locator("#result_list tbody tr")).to_have_count(16)
        expect(page.locator("#result_list td.field-last_run time").first).to_be_visible()
        scroll, client = no_horizontal_scroll(page)
        assert scroll <= client, (scheme, scroll, client)
        headers = [t.strip() for t in page.locator("#result_list thead th").all_text_contents()]
        assert headers[-1] == "Sync" and "Last outcome" in headers
        inner = page.evaluate(
            "() => { const r = document.querySelector('#changelist .results');"
            " return [r.scrollWidth, r.clientWidth]; }"
        )
        # Every column on screen, up to the last one: the list's own box does not scroll
        # either (the admin lets a table too wide for it scroll inside it).
        assert inner[0] <= inner[1], (scheme, "inside the list", inner)
        right = page.locator("#result_list thead th").last.bounding_box()
        assert right is not None and right["x"] + right["width"] <= 1280
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        dark = sum(int(v) for v in re.findall(r"\d+", background)[:3]) < 3 * 128
        assert dark == (scheme == "dark"), (scheme, background)
        # A time reads "in 4 s" or "2 min ago", its exact time in the title.
        for field in ("next_run", "last_run"):
            when = page.locator(f"#result_list td.field-{field} time").first
            assert RELATIVE.match(when.inner_text().strip()), when.inner_text()
            assert EXACT.match(when.get_attribute("title") or ""), when.get_attribute("title")
        # The overview fits too, its charts coloured from the admin's theme.
        page.goto(OVERVIEW)
        expect(page.locator("svg.rb-chart")).to_have_count(3)
        scroll, client = no_horizontal_scroll(page)
        assert scroll <= client, (scheme, "overview", scroll, client)


def log_in_again(page: Page) -> None:
    """Log in as the superuser the first context created."""
    page.goto(f"/admin/login/?next={CHANGELIST}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    expect(page.locator("#result_list")).to_be_visible()
