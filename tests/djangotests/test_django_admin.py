"""The PeriodicTask admin against a real Redis: form, change list, actions, beats page."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from redis.connection import Connection

from redisbeat import Entry
from redisbeat.schedule.kinds import Cron, Interval
from redisbeat_django.models import PeriodicTask, SyncStatus

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = reverse("admin:redisbeat_django_periodictask_changelist")
ADD = reverse("admin:redisbeat_django_periodictask_add")
BEATS = reverse("admin:redisbeat_django_periodictask_beats")


def change_url(row: PeriodicTask) -> str:
    return reverse("admin:redisbeat_django_periodictask_change", args=[row.pk])


def run_now_url(row: PeriodicTask) -> str:
    return reverse("admin:redisbeat_django_periodictask_run_now", args=[row.pk])


def make(name: str = "report", **fields: object) -> PeriodicTask:
    values: dict[str, object] = {"task": "reports.daily", "kind": "interval", "every": 30}
    values.update(fields)
    return PeriodicTask.objects.create(name=name, **values)


def form_data(**overrides: str) -> dict[str, str]:
    """Everything the add form posts, for an interval task; ``overrides`` change fields."""
    data = {
        "name": "report",
        "task": "reports.daily",
        "args": "[]",
        "kwargs": "{}",
        "enabled": "on",
        "description": "",
        "kind": "interval",
        "every": "30",
        "period": "seconds",
        **dict.fromkeys(("minute", "hour", "day_of_week", "day_of_month", "month_of_year"), "*"),
        "cron_expression": "",
        "timezone": "",
        "solar_event": "",
        "latitude": "",
        "longitude": "",
        "catch_up": "once",
        "grace_seconds": "",
        "overlap": "allow",
        "jitter": "",
        "queue": "",
        "exchange": "",
        "routing_key": "",
        "priority": "",
        "headers": "{}",
        "expire_seconds": "",
    }
    for field in ("clocked_at", "start_at", "end_at"):
        data[f"{field}_0"] = data[f"{field}_1"] = ""
    data.update(overrides)
    return data


def action(client: Client, name: str, *rows: PeriodicTask) -> object:
    data = {"action": name, "_selected_action": [str(r.pk) for r in rows]}
    return client.post(CHANGELIST, data, follow=True)


def texts(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


@pytest.fixture
def viewer(db: None) -> Client:
    """A staff user who may only view periodic tasks."""
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(
            codename="view_periodictask", content_type__app_label="redisbeat_django"
        )
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def round_trips(redis_server: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the requests sent to the session's redis-server (a pipeline is one)."""
    sent: list[int] = []
    original = Connection.send_packed_command
    port = redis_server.port  # type: ignore[attr-defined]

    def counting(self: Connection, command: object, check_health: bool = True) -> None:
        if self.port == port:
            sent.append(1)
        original(self, command, check_health)  # type: ignore[arg-type]

    monkeypatch.setattr(Connection, "send_packed_command", counting)
    yield sent


def test_the_add_form_creates_a_row_that_reaches_redis(admin_client, rb_store):
    data = form_data(args='[1, "a"]', kwargs='{"k": true}', queue="reports")
    response = admin_client.post(ADD, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    row = PeriodicTask.objects.get(name="report")
    assert row.args == [1, "a"] and row.sync_status == SyncStatus.SYNCED
    stored = rb_store.get("report")
    assert stored.schedule == Interval(30.0) and stored.options == {"queue": "reports"}


def test_a_name_another_source_uses_is_refused_on_the_name_field(admin_client, rb_store):
    rb_store.upsert(Entry("report", "reports.daily", Interval(5), source="config"))
    response = admin_client.post(ADD, form_data())
    assert "source 'config'" in response.context["adminform"].form.errors["name"][0]
    assert rb_store.get("report").source == "config"


@pytest.mark.parametrize(
    ("expression", "message"),
    [("0 0 31 2 *", "never fires"), ("bad cron", "expected 5 fields")],
)
def test_a_cron_string_that_is_bad_or_never_fires_is_an_error_on_its_field(
    admin_client, rb_store, expression, message
):
    response = admin_client.post(ADD, form_data(kind="cron", cron_expression=expression))
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["cron_expression"]
    assert message in errors["cron_expression"][0]
    assert not PeriodicTask.objects.exists()


def test_invalid_json_args_are_reported_with_their_position(admin_client, rb_store):
    response = admin_client.post(ADD, form_data(args="[1 2]"))
    errors = response.context["adminform"].form.errors
    assert errors["args"] == ["Invalid JSON: Expecting ',' delimiter at line 1, column 4"]
    assert "[1 2]" in response.content.decode()  # the text stays as typed


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [("kwargs", "[1]", "JSON object"), ("headers", '"x"', "JSON object"), ("args", "{}", "array")],
)
def test_json_fields_must_have_the_right_type(admin_client, rb_store, field, value, expected):
    response = admin_client.post(ADD, form_data(**{field: value}))
    assert expected in response.context["adminform"].form.errors[field][0]


def test_the_add_form_suggests_registered_tasks_and_lists_time_zones(admin_client, rb_store):
    html = admin_client.get(ADD).content.decode()
    assert 'list="id_task_suggestions"' in html
    assert '<option value="reports.daily">' in html and "celery.backend_cleanup" not in html
    assert '<option value="" selected>Celery time zone (UTC)</option>' in html
    assert '<option value="Europe/Berlin">Europe/Berlin</option>' in html


def test_the_change_form_previews_the_schedule_and_shows_live_state(admin_client, rb_store):
    row = make(kind="cron", cron_expression="30 9 * * mon-fri", timezone="Europe/Berlin")
    html = admin_client.get(change_url(row)).content.decode()
    assert "At 09:30, Monday through Friday (Europe/Berlin)" in html
    assert html.count("09:30:00 CE") == 5 + 1  # five next runs, and the live next run
    assert "Run now" in html and run_now_url(row) in html


def test_the_change_list_shows_live_state_from_redis(admin_client, rb_store):
    row = make(every=3600)
    due = rb_store.states(["report"])[0].next_run_at
    html = admin_client.get(CHANGELIST).content.decode()
    for header in ("Next run", "Last run", "Runs", "Last outcome", "Missed", "Sync"):
        assert f">{header}</" in html
    assert due.strftime("%Y-%m-%d %H:%M:%S") in html
    assert "Every 3600 seconds" in html
    assert row.name in html and "Live beats" in html


def test_the_change_list_reads_redis_once_and_queries_the_database_a_constant_number_of_times(
    admin_client, rb_store, round_trips
):
    counts = []
    for total in (10, 200):
        PeriodicTask.objects.bulk_create(
            PeriodicTask(name=f"t{total}-{i:03d}", task="reports.daily", every=60)
            for i in range(total - PeriodicTask.objects.count())
        )
        round_trips.clear()
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(CHANGELIST)
        assert response.status_code == 200
        assert len(round_trips) == 1
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert response.content.decode().count('class="action-select"') == 100


def test_disabling_removes_the_next_run_and_enabling_restores_it(admin_client, rb_store):
    row = make()
    response = action(admin_client, "disable_tasks", row)
    assert "Disabled 1 periodic task(s)." in texts(response)
    assert rb_store.states(["report"])[0].next_run_at is None
    action(admin_client, "enable_tasks", row)
    assert rb_store.states(["report"])[0].next_run_at is not None
    assert PeriodicTask.objects.get().enabled


def test_run_now_makes_the_selected_tasks_due_at_once(admin_client, rb_store):
    row = make(every=3600)
    PeriodicTask.objects.filter(pk=row.pk).update(sync_status="pending")  # synced first
    response = action(admin_client, "run_now", row)
    assert any(m.startswith("Made due now") for m in texts(response))
    assert any("No beat is running" in m for m in texts(response))
    due = rb_store.states(["report"])[0].next_run_at
    assert due <= datetime.now(timezone.utc)


def pause_url(row: PeriodicTask, what: str = "pause") -> str:
    return reverse(f"admin:redisbeat_django_periodictask_{what}", args=[row.pk])


def test_the_pause_form_pauses_until_a_time_and_the_page_shows_it(admin_client, rb_store):
    row = make(every=3600)
    form = admin_client.get(pause_url(row))
    assert form.status_code == 200 and 'name="until"' in form.content.decode()
    bad = admin_client.post(pause_url(row), {"until": "next tuesday", "note": ""})
    assert bad.status_code == 200 and "Enter a valid date/time." in bad.content.decode()
    response = admin_client.post(
        pause_url(row), {"until": "2031-06-01 12:00", "note": "summer break"}, follow=True
    )
    assert any(m.startswith("Paused report until 2031-06-01 12:00") for m in texts(response))
    paused = rb_store.state("report").paused
    assert paused.until == datetime(2031, 6, 1, 12, tzinfo=timezone.utc)  # the site's zone: UTC
    assert paused.note == "summer break"
    page = admin_client.get(change_url(row)).content.decode()
    assert "Paused until" in page and "summer break" in page and pause_url(row, "resume") in page
    listing = admin_client.get(CHANGELIST).content.decode()
    assert "paused until" in listing
    # Saving the task, or a sync, leaves it paused; run now refuses it.
    assert "Paused (resume them first): report." in texts(action(admin_client, "run_now", row))
    action(admin_client, "sync_tasks", row)
    assert rb_store.state("report").paused is not None
    assert admin_client.get(pause_url(row, "resume")).status_code == 405
    resumed = admin_client.post(pause_url(row, "resume"), follow=True)
    assert "Resumed: report." in texts(resumed)
    assert rb_store.state("report").paused is None


def test_the_pause_and_resume_actions_apply_to_the_selection(admin_client, viewer, rb_store):
    rows = [make("a"), make("b")]
    assert "Paused: a, b." in texts(action(admin_client, "pause_selected", *rows))
    assert [s.paused is not None for s in rb_store.states(["a", "b"])] == [True, True]
    assert rb_store.states(["a"])[0].next_run_at is None
    assert viewer.post(pause_url(rows[0], "resume")).status_code == 403
    assert viewer.get(pause_url(rows[0])).status_code == 403
    assert "Resumed: a, b." in texts(action(admin_client, "resume_selected", *rows))
    assert rb_store.states(["a"])[0].next_run_at is not None


def test_the_sync_action_pushes_rows_and_reports_what_was_rejected(admin_client, rb_store):
    row = make()
    rb_store.remove("report")
    rb_store.upsert(Entry("taken", "reports.daily", Cron("* * * * *"), source="config"))
    taken = make("taken")
    response = action(admin_client, "sync_tasks", row, taken)
    assert "Synced to Redis: 1 added, 0 updated, 0 unchanged." in texts(response)
    assert any("already used by an entry of source 'config'" in m for m in texts(response))
    assert "report" in rb_store


def test_the_run_now_button_posts_to_its_own_url_with_a_csrf_token(admin_user, rb_store):
    row = make(every=3600)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(run_now_url(row)).status_code == 403
    assert rb_store.states(["report"])[0].next_run_at > datetime.now(timezone.utc)
    admin_client = Client()
    admin_client.force_login(admin_user)
    assert admin_client.get(run_now_url(row)).status_code == 405
    response = admin_client.post(run_now_url(row))
    assert response.status_code == 302 and response.url == change_url(row)
    assert rb_store.states(["report"])[0].next_run_at <= datetime.now(timezone.utc)


def test_a_view_only_user_sees_everything_and_changes_nothing(viewer, rb_store):
    row = make()
    listing = viewer.get(CHANGELIST)
    assert listing.status_code == 200 and row.name in listing.content.decode()
    assert 'name="action"' not in listing.content.decode()
    form = viewer.get(change_url(row)).content.decode()
    assert 'name="_save"' not in form and "Run now" not in form
    assert "Schedule preview" in form
    assert viewer.post(change_url(row), form_data()).status_code == 403
    assert viewer.post(run_now_url(row)).status_code == 403
    assert action(viewer, "disable_tasks", row).status_code == 200
    assert PeriodicTask.objects.get().enabled
    assert viewer.get(BEATS).status_code == 200


def test_the_beats_page_lists_live_beats_and_quarantined_entries(admin_client, rb_store):
    rb_store.heartbeat("host-1:4242:abc")
    rb_store.upsert(Entry("broken", "reports.daily", Interval(5)))
    raw = rb_store.client.hget(rb_store.keys.entries, "broken")
    rb_store.quarantine("broken", raw, "cannot load it", "host-1:4242:abc")
    html = admin_client.get(BEATS).content.decode()
    assert "host-1:4242:abc" in html and "<td>host-1</td><td>4242</td>" in html
    assert "broken" in html and "cannot load it" in html


def test_with_redis_down_every_admin_page_still_renders(admin_client, own_store, own_redis):
    row = make()
    own_redis.stop()
    response = admin_client.get(CHANGELIST)
    assert response.status_code == 200
    assert any(m.startswith("Redis unavailable") for m in texts(response))
    assert row.name in response.content.decode()
    form = admin_client.get(change_url(row))
    assert form.status_code == 200 and "Redis unavailable" in form.content.decode()
    assert admin_client.get(BEATS).status_code == 200
    response = action(admin_client, "run_now", row)
    assert response.status_code == 200
    assert any(m.startswith("Redis unavailable") for m in texts(response))
