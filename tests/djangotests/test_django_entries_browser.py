"""The "Entries" page in a real browser, against real beats, a worker and Redis: an entry of
the beats' beat_schedule and one added with the command line are found in the admin, paused
there, and resumed, and the beats send none of their runs while they are paused.

Chromium (Playwright) -> live server -> Redis <- two ``celery beat`` processes and a worker.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browsing import log_in
from playwright.sync_api import Page, expect

from redisbeat import ScheduleStore
from redisbeat.errors import EntryNotFound
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import BEAT_APP, environ_without_django

pytestmark = pytest.mark.django_db(transaction=True)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
#: Seconds to wait for the beats: to start and send, or to send a few more runs.
BEATS_TIMEOUT = 30.0
SCHEDULE = {
    "settings-ping": {"task": "proj.ping", "schedule": 1},
    # Never paused: its runs show the beats went on sending while the others were paused.
    "witness": {"task": "proj.ping", "schedule": 1},
}


def runs(store: ScheduleStore, name: str) -> int:
    """The entry's runs; 0 before it is stored (a beat writes its beat_schedule as it starts,
    after it registers)."""
    try:
        return store.state(name).total_run_count
    except EntryNotFound:
        return 0


def add_with_the_cli(env: dict[str, str], cwd: Path) -> None:
    """``celery -A redisbeat_testkit.proj redisbeat add cli-ping proj.ping --every 1s``."""
    command = [sys.executable, "-m", "celery", "-A", BEAT_APP, "redisbeat", "add"]
    subprocess.run(
        [*command, "cli-ping", "proj.ping", "--every", "1s"],
        env={**environ_without_django(), **env},
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def open_entry(page: Page, name: str, source: str) -> None:
    """From the Entries list: the row of ``name``, its source, and its page."""
    page.goto("/admin/")
    page.get_by_role("link", name="Entries", exact=True).first.click()
    named = page.locator("th a", has_text=re.compile(rf"^{name}$"))
    row = page.locator("#result_list tbody tr").filter(has=named)
    expect(row).to_have_count(1)
    expect(row.locator("td").first).to_have_text(source)
    row.locator("th a").click()
    expect(page.locator("#rb-source")).to_have_text(source)


def control(page: Page, name: str, source: str, button: str, said: str) -> None:
    open_entry(page, name, source)
    if button == "#rb-pause":
        page.fill("#rb-pause-form #id_note", "paused from the browser")
    page.click(button)
    expect(page.locator("ul.messagelist")).to_contain_text(said)


def test_beat_schedule_and_cli_entries_are_paused_and_resumed_from_the_admin(
    page: Page, rb_store: ScheduleStore, redis_server, prefix, beats_for, tmp_path
):
    beats = beats_for(redis_server, prefix, TEST_BEAT_SCHEDULE=json.dumps(SCHEDULE))
    beats.start(2)
    beats.start_worker()
    add_with_the_cli(beats.env, tmp_path)
    paused = {"settings-ping": "beat_schedule", "cli-ping": "API or CLI"}
    names = [*paused, "witness"]
    wait_until(lambda: all(runs(rb_store, n) >= 2 for n in names), BEATS_TIMEOUT, "runs")

    log_in(page)
    open_entry(page, "witness", paused["settings-ping"])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "admin-entry.png"), full_page=True)
    for name, source in paused.items():
        control(page, name, source, "#rb-pause", f"Paused {name}")
        assert rb_store.state(name).paused is not None
    page.locator(".breadcrumbs a", has_text="Entries").click()
    expect(page.locator("#result_list tbody th a", has_text="witness")).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "admin-entries.png"), full_page=True)
    page.locator("#changelist-filter").get_by_role("link", name="paused", exact=True).click()
    shown = page.locator("#result_list tbody th a")
    expect(shown).to_have_count(2)  # paused until resumed: no next run, in no set order
    assert sorted(shown.all_text_contents()) == sorted(paused)

    # A run claimed as the pause came may still finish: count from one witness run later.
    witness = runs(rb_store, "witness")
    wait_until(lambda: runs(rb_store, "witness") > witness, BEATS_TIMEOUT, "a witness run")
    held = {name: runs(rb_store, name) for name in paused}
    witness = runs(rb_store, "witness")
    wait_until(lambda: runs(rb_store, "witness") >= witness + 3, BEATS_TIMEOUT, "3 witness runs")
    assert {name: runs(rb_store, name) for name in paused} == held

    for name, source in paused.items():
        control(page, name, source, "#rb-resume", f"Resumed {name}")
    wait_until(
        lambda: all(runs(rb_store, name) >= held[name] + 2 for name in paused),
        BEATS_TIMEOUT,
        "runs of the resumed entries",
    )
    assert all(rb_store.state(name).paused is None for name in paused)
