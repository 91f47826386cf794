"""The admin's "Entries" page: every entry in Redis whatever its source (beat_schedule, the
API, a Django row, a quarantined definition), its filters, search and cursor pages, an
entry's page, the runtime controls and the permissions they need, against a real Redis."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from test_django_bad_entries import fail_sends

from redisbeat import Entry, ScheduleStore
from redisbeat.schedule.kinds import Interval
from redisbeat_django.console import listing
from redisbeat_django.models import PeriodicTask

pytestmark = pytest.mark.django_db(transaction=True)

LIST = reverse("admin:redisbeat_django_entry_changelist")
UTC = timezone.utc


def entry_url(name: str) -> str:
    return reverse("admin:redisbeat_django_entry_change", args=[name])


def control_url(name: str) -> str:
    return reverse("admin:redisbeat_django_entry_control", args=[name])


def names_on(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [cell["row"].name for cell in response.context["rows"]]


def client_for(name: str, *codenames: str) -> Client:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="redisbeat_django")
        )
    client = Client()
    client.force_login(user)
    return client


def quarantine_corrupt(store: ScheduleStore, name: str) -> None:
    """A definition that does not load, set aside as a beat sets it aside."""
    raw = '{"task": 5, "schedule": "never"}'
    store.client.hset(store.shard(name).keys.entries, name, raw)
    assert store.quarantine(name, raw, "field 'task': must be a string", "beat-test")


def four_sources(store: ScheduleStore) -> None:
    """A beat_schedule entry, an API entry, a Django row and a quarantined definition."""
    store.sync_source(
        "config",
        [Entry("from-settings", "proj.cleanup", Interval(600), source="config")],
    )
    store.upsert(Entry("from-api", "proj.report", Interval(60)))
    PeriodicTask.objects.create(name="from-django", task="reports.daily", every=30)
    quarantine_corrupt(store, "set-aside")


def test_the_list_shows_every_entry_whatever_its_source_and_the_quarantined(admin_client, rb_store):
    four_sources(rb_store)
    response = admin_client.get(LIST)
    # Soonest first (30 s, 60 s, 600 s), then the quarantined definition with no entry.
    assert names_on(response) == ["from-django", "from-api", "from-settings", "set-aside"]
    html = response.content.decode()
    assert "beat_schedule" in html and "API or CLI" in html
    assert "Every 10 minutes" in html and "proj.cleanup" in html
    assert "must be a string" in html  # the quarantined one's error
    row = PeriodicTask.objects.get(name="from-django")
    assert reverse("admin:redisbeat_django_periodictask_change", args=[row.pk]) in html
    assert "3 entries in Redis" in html and "1 quarantined" in html


def test_the_admin_index_lists_the_entries_page(admin_client, rb_store):
    html = admin_client.get("/admin/").content.decode()
    assert f'href="{LIST}"' in html and ">Entries<" in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"source": "config"}, ["from-settings"]),
        ({"source": "django"}, ["from-django"]),
        ({"source": "api"}, ["from-api", "paused-one", "off"]),
        ({"state": "paused"}, ["paused-one"]),
        ({"state": "disabled"}, ["off"]),
        ({"state": "quarantined"}, ["set-aside"]),
        ({"state": "failing"}, ["from-api"]),
        ({"state": "finished"}, ["ended"]),
        ({"state": "enabled", "source": "config"}, ["from-settings"]),
        ({"q": "from-api"}, ["from-api"]),
        ({"q": "*REPORT*"}, ["from-django", "from-api", "paused-one"]),
        ({"q": "from-*", "source": "django"}, ["from-django"]),
    ],
)
def test_filters_and_search_show_the_entries_they_match(admin_client, rb_store, query, expected):
    four_sources(rb_store)
    rb_store.upsert(Entry("paused-one", "proj.report", Interval(120)))
    rb_store.pause("paused-one", None, "maintenance")
    rb_store.upsert(Entry("off", "proj.other", Interval(60), enabled=False))
    past = datetime.now(UTC) - timedelta(days=1)
    rb_store.upsert(Entry("ended", "proj.other", Interval(60), end_at=past, source="import"))
    fail_sends(rb_store, "from-api", 1)
    assert sorted(names_on(admin_client.get(LIST, query))) == sorted(expected)


def test_a_large_source_is_filtered_by_walking_every_entry_instead_of_its_index(
    admin_client, rb_store, monkeypatch
):
    monkeypatch.setattr(listing, "SMALL_SOURCE", 1)
    four_sources(rb_store)
    rb_store.upsert(Entry("from-api-too", "proj.report", Interval(900)))
    response = admin_client.get(LIST, {"source": "api"})
    assert names_on(response) == ["from-api", "from-api-too"]
    assert response.context["page"].scanned == 4  # every entry but the set-aside one


def test_an_exact_name_not_found_offers_a_search_of_names_and_tasks(admin_client, rb_store):
    four_sources(rb_store)
    response = admin_client.get(LIST, {"q": "settings"})
    assert names_on(response) == []
    assert "No entry is named" in response.content.decode()
    assert names_on(admin_client.get(response.context["wider_url"])) == ["from-settings"]


def test_pages_of_100_follow_cursors_through_250_entries_and_back(admin_client, rb_store):
    rb_store.upsert_many(
        Entry(f"e{i:03d}", "proj.ping", Interval(1000 + i * 10)) for i in range(250)
    )
    first = admin_client.get(LIST)
    assert names_on(first) == [f"e{i:03d}" for i in range(100)]
    second = admin_client.get(first.context["next_url"])
    assert names_on(second) == [f"e{i:03d}" for i in range(100, 200)]
    third = admin_client.get(second.context["next_url"])
    assert names_on(third) == [f"e{i:03d}" for i in range(200, 250)]
    assert third.context["next_url"] == ""
    back = admin_client.get(third.context["previous_url"])
    assert names_on(back) == names_on(second)
    assert names_on(admin_client.get(back.context["previous_url"])) == names_on(first)
    assert names_on(admin_client.get(third.context["first_url"])) == names_on(first)


def test_a_pattern_looks_at_a_bounded_number_of_entries_a_page_and_says_so(
    admin_client, rb_store, monkeypatch
):
    monkeypatch.setattr(listing, "SCAN_LIMIT", 100)
    rb_store.upsert_many(
        Entry(f"e{i:03d}", "proj.ping", Interval(1000 + i * 10)) for i in range(250)
    )
    response = admin_client.get(LIST, {"q": "e2?5"})
    assert response.context["page"].bounded and names_on(response) == []
    assert "Looked at 100 entries" in response.content.decode()
    response = admin_client.get(response.context["next_url"])
    assert names_on(response) == []
    response = admin_client.get(response.context["next_url"])
    assert names_on(response) == ["e205", "e215", "e225", "e235", "e245"]
    assert not response.context["page"].bounded and response.context["next_url"] == ""


def test_a_bad_cursor_shows_the_first_page_with_an_error(admin_client, rb_store):
    four_sources(rb_store)
    response = admin_client.get(LIST, {"after": "x:nonsense"})
    assert names_on(response)[0] == "from-django"
    assert "not one this list wrote" in response.content.decode()


def test_an_entry_page_says_where_it_is_defined_with_its_live_panels(admin_client, rb_store):
    four_sources(rb_store)
    html = admin_client.get(entry_url("from-settings")).content.decode()
    assert "beat_schedule of the Celery app" in html and "proj.cleanup" in html
    assert "Every 10 minutes" in html and "Next runs (UTC)" in html
    assert "Live state (Redis)" in html and "History is off" in html
    row = PeriodicTask.objects.get(name="from-django")
    html = admin_client.get(entry_url("from-django")).content.decode()
    assert reverse("admin:redisbeat_django_periodictask_change", args=[row.pk]) in html
    html = admin_client.get(entry_url("set-aside")).content.decode()
    assert "Quarantined" in html and "must be a string" in html and "Release" in html
    assert admin_client.get(entry_url("no-such-entry")).status_code == 404


def test_each_control_changes_the_store(admin_client, rb_store):
    rb_store.upsert(Entry("api-job", "proj.report", Interval(3600)))

    def post(action: str, **data: str) -> str:
        response = admin_client.post(
            control_url("api-job"), {"action": action, **data}, follow=True
        )
        assert response.redirect_chain == [(entry_url("api-job"), 302)]
        return " ".join(str(m) for m in response.context["messages"])

    assert "Disabled api-job" in post("disable")
    assert rb_store.get("api-job").enabled is False
    assert rb_store.state("api-job").next_run_at is None
    assert "Enabled api-job" in post("enable")
    assert rb_store.get("api-job").enabled is True

    assert "Paused api-job" in post("pause", note="deploy")
    paused = rb_store.state("api-job").paused
    assert paused is not None and paused.note == "deploy" and paused.until is None
    assert "paused; resume it first" in post("run_now")
    assert "Resumed api-job" in post("resume")
    assert rb_store.state("api-job").paused is None
    assert "was not paused" in post("resume")

    assert "Made api-job due now" in post("run_now")
    due = rb_store.state("api-job").next_run_at
    assert due is not None and due <= datetime.now(UTC) + timedelta(seconds=1)

    now = datetime.now(UTC).replace(microsecond=0)
    start, end = now - timedelta(hours=3), now - timedelta(minutes=1)
    said = post(
        "backfill", start=f"{start:%Y-%m-%d %H:%M:%S}", end=f"{end:%Y-%m-%d %H:%M:%S}", rate="10"
    )
    assert "Backfilling api-job:" in said
    assert rb_store.count_pending("backfill:api-job") >= 2
    assert "Not backfilled" in post("backfill", start="yesterday")


def test_releasing_a_quarantined_entry_puts_it_back_on_the_schedule(admin_client, rb_store):
    rb_store.upsert(Entry("flaky", "proj.report", Interval(3600)))
    fail_sends(rb_store, "flaky", 3)  # three refused sends in a row: set aside
    assert "flaky" not in rb_store and "flaky" in rb_store.quarantined()
    assert names_on(admin_client.get(LIST, {"state": "quarantined"})) == ["flaky"]
    page = admin_client.get(entry_url("flaky")).content.decode()
    assert "saving this periodic task" not in page  # not a row: the control releases it
    response = admin_client.post(control_url("flaky"), {"action": "release"})
    assert response.status_code == 302
    assert "flaky" in rb_store and "flaky" not in rb_store.quarantined()
    assert rb_store.state("flaky").next_run_at is not None

    quarantine_corrupt(rb_store, "broken")
    response = admin_client.post(control_url("broken"), {"action": "release"}, follow=True)
    assert "still does not load" in response.content.decode()
    assert "broken" in rb_store.quarantined()


def test_disabling_a_django_entry_changes_its_row_and_so_redis(admin_client, rb_store):
    row = PeriodicTask.objects.create(name="nightly", task="reports.daily", every=30)
    admin_client.post(control_url("nightly"), {"action": "disable"})
    row.refresh_from_db()
    assert row.enabled is False and rb_store.get("nightly").enabled is False
    admin_client.post(control_url("nightly"), {"action": "enable"})
    row.refresh_from_db()
    assert row.enabled is True and rb_store.state("nightly").next_run_at is not None


def test_enabling_a_django_entry_needs_the_permission_to_change_its_row(rb_store):
    row = PeriodicTask.objects.create(name="nightly", task="reports.daily", every=30)
    operator = client_for("operator", "view_entry", "control_entry")
    response = operator.post(control_url("nightly"), {"action": "disable"}, follow=True)
    assert "needs the permission to change periodic tasks" in response.content.decode()
    row.refresh_from_db()
    assert row.enabled is True and rb_store.get("nightly").enabled is True
    editor = client_for("editor", "view_entry", "control_entry", "change_periodictask")
    editor.post(control_url("nightly"), {"action": "disable"})
    row.refresh_from_db()
    assert row.enabled is False and rb_store.get("nightly").enabled is False


CONTROLS = [
    ("disable", {}),
    ("enable", {}),
    ("pause", {"note": "x"}),
    ("resume", {}),
    ("run_now", {}),
    ("backfill", {"start": "2020-01-01 00:00", "end": "2020-01-01 01:00", "rate": "10"}),
    ("release", {}),
]


def test_viewing_needs_the_view_permission(rb_store):
    four_sources(rb_store)
    nobody = client_for("nobody")
    assert nobody.get(LIST).status_code == 403
    assert nobody.get(entry_url("from-api")).status_code == 403
    controller = client_for("controller", "control_entry")
    assert controller.get(LIST).status_code == 403
    viewer = client_for("viewer", "view_entry")
    assert names_on(viewer.get(LIST))[:3] == ["from-django", "from-api", "from-settings"]
    html = viewer.get(entry_url("from-api")).content.decode()
    assert "proj.report" in html and 'id="rb-controls"' not in html


@pytest.mark.parametrize(("action", "data"), CONTROLS)
def test_each_control_needs_the_control_permission(rb_store, action, data):
    rb_store.upsert(Entry("guarded", "proj.report", Interval(3600)))
    before = (rb_store.get("guarded").dumps(), rb_store.state("guarded"))
    for client in (client_for("nobody"), client_for("viewer", "view_entry")):
        response = client.post(control_url("guarded"), {"action": action, **data})
        assert response.status_code == 403
    assert (rb_store.get("guarded").dumps(), rb_store.state("guarded")) == before
    assert rb_store.count_pending("backfill:guarded") == 0

    allowed = client_for("operator", "view_entry", "control_entry")
    response = allowed.post(control_url("guarded"), {"action": action, **data}, follow=True)
    assert response.status_code == 200
    assert re.search(
        r"Disabled|Enabled|Paused|was not paused|Made|Backfilling|not quarantined",
        response.content.decode(),
    )


def test_a_control_without_the_csrf_token_is_refused(rb_store):
    rb_store.upsert(Entry("guarded", "proj.report", Interval(3600)))
    user = User.objects.create_superuser("root", "r@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(control_url("guarded"), {"action": "disable"}).status_code == 403
    assert rb_store.get("guarded").enabled is True
    assert client.get(control_url("guarded")).status_code == 405


def test_with_redis_down_the_pages_render_with_the_error(admin_client, own_store, own_redis):
    own_store.upsert(Entry("api-job", "proj.report", Interval(3600)))
    own_redis.stop()
    response = admin_client.get(LIST)
    assert response.status_code == 200 and "Redis unavailable" in response.content.decode()
    response = admin_client.get(entry_url("api-job"))
    assert response.status_code == 200 and "Redis unavailable" in response.content.decode()
    response = admin_client.post(control_url("api-job"), {"action": "run_now"}, follow=True)
    assert "Not done: Redis unavailable" in response.content.decode()
