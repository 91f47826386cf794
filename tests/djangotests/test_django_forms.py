"""The admin's form fields, schedule descriptions and run-time previews (no Redis needed)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from redisbeat_django import forms
from redisbeat_django.describe import describe, next_runs, preview, with_defaults
from redisbeat_django.models import PeriodicTask

NOW = datetime(2024, 3, 30, 12, 0, tzinfo=timezone.utc)  # the night before Europe's DST


def row(**fields: object) -> PeriodicTask:
    values: dict[str, object] = {"name": "report", "task": "reports.daily", "kind": "interval"}
    values.update(fields)
    return PeriodicTask(**values)


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"every": 1, "period": "hours"}, "Every hour"),
        ({"every": 30, "period": "seconds"}, "Every 30 seconds"),
        ({"every": None}, "Interval (no period set)"),
        (
            {"kind": "crontab", "minute": "*/15", "hour": "9-17", "day_of_week": "mon-fri"},
            "Every 15 minutes, between 09:00 and 17:59, Monday through Friday (UTC)",
        ),
        (
            {
                "kind": "crontab",
                "minute": "0",
                "hour": "0",
                "day_of_month": "1",
                "day_of_week": "1",
            },
            "At 00:00, on day 1 of the month, only on Monday (UTC)",
        ),
        (
            {"kind": "cron", "cron_expression": "0 9 1 * mon", "timezone": "Europe/Berlin"},
            "At 09:00, on day 1 of the month or on Monday (Europe/Berlin)",
        ),
        ({"kind": "cron", "cron_expression": "@daily"}, "At 00:00 (UTC)"),
        (
            {"kind": "cron", "cron_expression": "30 2 * * *", "dst_gap": "skip"},
            "At 02:30 (UTC; no run in the DST gap)",
        ),
        (
            {"kind": "crontab", "minute": "*/30", "dst_gap": "shift", "dst_fold": "twice"},
            "Every 30 minutes (UTC; both passes of the DST overlap)",
        ),
        ({"kind": "cron", "cron_expression": "*/5 * * * * *"}, "Every 5 seconds (UTC)"),
        ({"kind": "cron", "cron_expression": "not cron"}, "cron not cron (UTC)"),
        (
            {"kind": "clocked", "clocked_at": datetime(2030, 1, 1, 10, tzinfo=timezone.utc)},
            "Once, at Tue 2030-01-01 10:00:00 UTC",
        ),
        (
            {
                "kind": "solar",
                "solar_event": "dusk_civil",
                "latitude": Decimal("-33.9"),
                "longitude": Decimal("18.4"),
            },
            "At civil dusk, seen from 33.9°S 18.4°E",
        ),
    ],
)
def test_a_schedule_is_described_in_plain_english(fields, text):
    assert describe(row(**fields)) == text


def test_next_runs_follow_the_zone_across_a_dst_change():
    entry = row(kind="cron", cron_expression="0 9 * * *", timezone="Europe/Berlin").to_entry()
    runs = next_runs(entry, "Europe/Berlin", 3, now=NOW)
    assert [r.isoformat() for r in runs] == [
        "2024-03-31T09:00:00+02:00",
        "2024-04-01T09:00:00+02:00",
        "2024-04-02T09:00:00+02:00",
    ]


@pytest.mark.parametrize(
    ("policies", "runs", "note"),
    [
        (
            {},
            ["03-31T03:00:00+02:00", "04-01T02:30:00+02:00", "04-02T02:30:00+02:00"],
            "Daylight saving: a run whose time the clocks skip in spring runs as they go "
            "forward; a run whose time the clocks repeat in autumn runs once, before they go "
            "back.",
        ),
        (
            {"dst_gap": "skip"},
            ["04-01T02:30:00+02:00", "04-02T02:30:00+02:00", "04-03T02:30:00+02:00"],
            "Daylight saving: a run whose time the clocks skip in spring is skipped that day; "
            "a run whose time the clocks repeat in autumn runs once, before they go back.",
        ),
    ],
)
def test_the_preview_follows_the_dst_policies_and_says_what_they_do(policies, runs, note):
    task = row(kind="cron", cron_expression="30 2 * * *", timezone="Europe/Berlin", **policies)
    got = next_runs(with_defaults(task.to_entry()), "Europe/Berlin", 3, now=NOW)
    assert [r.isoformat()[5:] for r in got] == runs
    assert note in preview(task, None)["notes"]


def test_next_runs_start_from_the_live_next_run_and_respect_the_end():
    first = datetime(2024, 3, 30, 12, 0, 10, tzinfo=timezone.utc)
    end = datetime(2024, 3, 30, 12, 1, tzinfo=timezone.utc)
    entry = row(every=20, end_at=end).to_entry()
    runs = next_runs(entry, "UTC", first=first, now=NOW)
    assert [r.strftime("%H:%M:%S") for r in runs] == ["12:00:10", "12:00:30", "12:00:50"]


def test_a_one_off_or_clocked_task_runs_once_even_when_overdue():
    assert len(next_runs(row(every=5, one_off=True).to_entry(), "UTC", now=NOW)) == 1
    at = datetime(2020, 1, 1, tzinfo=timezone.utc)
    assert next_runs(row(kind="clocked", clocked_at=at).to_entry(), "UTC", now=NOW) == [at]


def test_json_syntax_errors_name_line_and_column():
    with pytest.raises(ValidationError) as caught:
        forms.JSONObjectField().clean('{\n  "a": 1,\n}')
    assert caught.value.messages == [
        "Invalid JSON: Expecting property name enclosed in double quotes at line 3, column 1"
    ]


def test_json_fields_check_the_type_and_read_empty_as_empty():
    assert forms.JSONArrayField(required=False).clean("") == []
    assert forms.JSONObjectField(required=False).clean("  ") == {}
    assert forms.JSONArrayField().clean('[1, {"a": null}]') == [1, {"a": None}]
    with pytest.raises(ValidationError, match="JSON array"):
        forms.JSONArrayField().clean('{"a": 1}')
    with pytest.raises(ValidationError, match="JSON object"):
        forms.JSONObjectField().clean("3")


def test_the_task_input_suggests_names_but_takes_any_text():
    html = forms.DatalistInput(["a.task", "b<task"]).render("task", "other", {"id": "id_task"})
    assert 'list="id_task_suggestions"' in html and 'value="other"' in html
    assert '<option value="a.task"><option value="b&lt;task">' in html
    assert "datalist" not in forms.DatalistInput([]).render("task", "x")


def test_the_form_falls_back_to_a_plain_input_when_tasks_cannot_be_listed(monkeypatch):
    def broken() -> list[str]:
        raise RuntimeError("no celery app")

    monkeypatch.setattr(forms, "task_names", broken)
    html = str(forms.PeriodicTaskForm()["task"])
    assert "<input" in html and "datalist" not in html


def test_the_time_zone_choices_start_with_the_celery_zone_then_every_zone_sorted():
    choices = forms.timezone_choices()
    assert choices[0] == ("", "Celery time zone (UTC)")
    zones = [value for value, _ in choices[1:]]
    assert zones == sorted(zones) and "America/New_York" in zones
