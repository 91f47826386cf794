"""Overlap and jitter through the model and the admin's form, and what became of the runs
(outcomes, missed runs, history) in the change list and on the change page, read from a real
Redis that an in-process beat and the worker hook's calls wrote."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from test_dispatcher import Recorder, dispatcher, make_due
from test_django_admin import ADD, CHANGELIST, change_url, form_data, make

from redisbeat import ScheduleStore
from redisbeat.refusals import unregistered
from redisbeat.schedule.ids import jitter_ms
from redisbeat.schedule.timing import to_ms
from redisbeat.store.receipts import Delivery
from redisbeat_django.describe import next_runs, preview, with_defaults
from redisbeat_django.models import PeriodicTask

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2024, 3, 30, 12, 0, tzinfo=timezone.utc)


def send(store: ScheduleStore, name: str, ms_ago: int = 5) -> tuple[int, str]:
    """Make ``name`` due ``ms_ago`` ago and let a beat in this process send it."""
    make_due(store.client, store, name, ms_ago)
    recorder = Recorder()
    dispatcher(store, recorder).tick()
    [(due, task_id)] = [(due, task_id) for sent, due, task_id in recorder.sent if sent == name]
    return due, task_id


def finish(store: ScheduleStore, name: str, sent: tuple[int, str], *outcome: str) -> None:
    """What a worker with the hook records for the run of ``sent``."""
    due, task_id = sent
    store.run_started(name, task_id, due, "worker-1@host")
    store.run_ended(name, task_id, due, "worker-1@host", *outcome)


# -- the form and the model ---------------------------------------------------------------


def test_the_form_saves_overlap_and_jitter_to_redis_and_clearing_them_removes_them(
    admin_client, rb_store
):
    response = admin_client.post(ADD, form_data(overlap="skip", jitter="20"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    stored = rb_store.get("report")
    assert (stored.overlap, stored.jitter) == ("skip", 20.0)
    row = PeriodicTask.objects.get()
    response = admin_client.post(change_url(row), form_data(overlap="allow", jitter="0"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    stored = rb_store.get("report")
    assert (stored.overlap, stored.jitter) == ("allow", None)  # 0 is no jitter


def test_the_form_offers_overlap_and_jitter_beside_the_other_policies(admin_client, rb_store):
    html = admin_client.get(ADD).content.decode()
    assert html.index('name="catch_up"') < html.index('name="overlap"') < html.index("id_jitter")
    assert '<option value="buffer_one">' in html and "never past the next run" in html


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"jitter": "-1"}, "jitter", "greater than or equal to 0"),
        ({"overlap": "sometimes"}, "overlap", "Select a valid choice"),
    ],
)
def test_a_bad_overlap_or_jitter_is_an_error_on_its_field(
    admin_client, rb_store, fields, field, message
):
    response = admin_client.post(ADD, form_data(**fields))
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field] and message in errors[field][0]
    assert not PeriodicTask.objects.exists() and "report" not in rb_store


@pytest.mark.parametrize(
    ("fields", "field"), [({"jitter": -1.0}, "jitter"), ({"overlap": "x"}, "overlap")]
)
def test_the_entry_the_row_stands_for_refuses_them_on_their_field_too(fields, field):
    # The model's clean() builds the entry: what the Entry refuses names the model's field.
    task = PeriodicTask(name="r", task="t", kind="interval", every=5, **fields)
    with pytest.raises(ValidationError) as info:
        task.clean()
    assert list(info.value.message_dict) == [field]


def test_the_preview_says_what_overlap_and_jitter_do_and_its_times_include_the_jitter():
    task = PeriodicTask(name="poll", task="t", kind="interval", every=60, overlap="skip", jitter=20)
    notes = preview(task, None)["notes"]
    assert any(n.startswith("Skips a run falling due while the previous one") for n in notes)
    assert any("redisbeat_track_runs" in n for n in notes)
    assert any(n.startswith("Waits up to 20 s after each due time (jitter)") for n in notes)
    entry = with_defaults(task.to_entry())
    runs = next_runs(entry, "UTC", 3, first=NOW, now=NOW)
    due = to_ms(NOW)
    delays = [to_ms(run) - (due + 60_000 * i) for i, run in enumerate(runs)]
    assert delays == [jitter_ms("poll", due + 60_000 * i, 20, 60_000) for i in range(3)]
    assert all(0 <= d <= 20_000 for d in delays) and any(delays)
    plain = PeriodicTask(name="poll", task="t", kind="interval", every=60)
    assert not any("jitter" in n or "worker hook" in n for n in preview(plain, None)["notes"])


def test_the_previews_run_times_are_the_ones_the_store_gives(rb_store):
    row = make(every=60, jitter=30)
    first = rb_store.state("report").next_run_at
    entry = with_defaults(row.to_entry())
    assert next_runs(entry, "UTC", 5, first=first) == rb_store.next_runs("report", 5)


# -- the change list -----------------------------------------------------------------------


def test_the_list_shows_the_last_outcome_and_the_missed_runs_from_redis(admin_client, rb_store):
    make("late", every=5)
    make("fine", every=60)
    make("quiet", every=3600)
    late = send(rb_store, "late", 52_500)  # ten runs missed, coalesced into the last one
    finish(rb_store, "late", late, "failed", "ValueError")
    finish(rb_store, "fine", send(rb_store, "fine"), "succeeded")
    missed = rb_store.state("late").missed
    assert missed >= 10
    html = admin_client.get(CHANGELIST).content.decode()
    assert ">Last outcome</" in html and ">Missed</" in html
    cells = {name: row_of(html, name) for name in ("late", "fine", "quiet")}
    assert "failed (ValueError)" in cells["late"] and f">{missed}</span>" in cells["late"]
    assert f'title="last: {missed} before' in cells["late"] and "(late)" in cells["late"]
    assert "succeeded" in cells["fine"] and '<td class="field-missed">0</td>' in cells["fine"]
    assert '<td class="field-last_outcome">—</td>' in cells["quiet"]


def row_of(html: str, name: str) -> str:
    """The change list's table row of the task ``name``."""
    start = html.index(f">{name}</a>")
    return html[html.rindex("<tr", 0, start) : html.index("</tr>", start)]


# -- the change page -----------------------------------------------------------------------


def test_the_change_page_shows_the_history_with_outcomes_and_the_live_counts(
    admin_client, rb_store
):
    rb_store.history_size = 20
    row = make(every=5)
    first = send(rb_store, "report", 17_500)  # three runs missed before it
    finish(rb_store, "report", first, "succeeded")
    second = send(rb_store, "report")
    finish(rb_store, "report", second, "failed", "KeyError")
    html = admin_client.get(change_url(row)).content.decode()
    assert "Last runs (Redis)" in html and "History is off" not in html
    table = html[
        html.index('<table class="rb-history">') : html.index("</table>", html.index("rb-history"))
    ]
    assert table.count("<tr") == 1 + 2  # the header, and a line a run
    assert table.index("failed (KeyError)") < table.index("succeeded")  # newest first
    assert "worker-1@host" in table and "3 missed before it" in table and "sent" in table
    assert second[1][:8] in table and first[1][:8] in table
    live = html[html.index('<table class="rb-live">') :]
    assert "failed (KeyError)" in live and "ran " in live
    missed = rb_store.state("report").missed
    assert f'<th scope="row">Missed</th><td>{missed}; last: 3 before' in live


def test_a_run_skipped_by_its_overlap_policy_shows_on_the_change_page(admin_client, rb_store):
    rb_store.history_size = 20
    row = make(every=60, overlap="skip")
    rb_store.run_started("report", "the-previous-run", None, "worker-1@host")  # still going
    make_due(rb_store.client, rb_store, "report", 5)
    recorder = Recorder()
    dispatcher(rb_store, recorder).tick()
    assert recorder.sent == [] and rb_store.state("report").skipped == 1
    html = admin_client.get(change_url(row)).content.decode()
    assert '<th scope="row">Skipped (overlap)</th><td>1; last: 1 before' in html
    assert "<td>skipped (overlap)</td>" in html


def test_a_copy_of_a_run_a_worker_dropped_shows_in_the_history_and_live_state(
    admin_client, rb_store
):
    rb_store.history_size = 20
    row = make(every=5)
    due, task_id = send(rb_store, "report")
    first = Delivery("periodic", "report", task_id, 0, due, "tag-a", False, "worker-1@host")
    assert rb_store.receive(first, 60_000).run
    finish(rb_store, "report", (due, task_id), "succeeded")
    again = replace(first, tag="tag-b", worker="worker-2@host")  # a killed beat's re-send
    assert not rb_store.receive(again, 60_000).run
    html = admin_client.get(change_url(row)).content.decode()
    assert "<td>duplicate (already ran on worker-1@host)</td><td>duplicate</td>" in html
    live = html[html.index('<table class="rb-live">') :]
    assert '<th scope="row">Duplicates dropped</th><td>1; last: ' in live
    assert f"on worker-2@host, task {task_id} (ended on worker-1@host)" in live
    assert "succeeded" in live  # the run's outcome stands


def test_a_run_a_worker_could_not_start_is_a_problem_with_its_reason_on_every_page(
    admin_client, rb_store
):
    rb_store.history_size = 20
    row = make(every=60)
    due, task_id = send(rb_store, "report")
    sent = Delivery("periodic", "report", task_id, 0, due, "", False, "worker-1@host")
    rb_store.run_not_started(sent, unregistered("reports.daily"))  # as the worker hook does
    why = "the worker does not know the task &#x27;reports.daily&#x27;: import the module"
    cell = '<span class="rb-problem" title="could not start: ' + why
    listed = row_of(admin_client.get(CHANGELIST).content.decode(), "report")
    assert cell in listed and ">unregistered</span>" in listed
    change_page = admin_client.get(change_url(row)).content.decode()
    entries = reverse("admin:redisbeat_django_entry_changelist")
    console = admin_client.get(entries).content.decode()
    assert cell in console and ">unregistered</span>" in console
    failing = admin_client.get(entries, {"state": "failing"})
    assert [c["row"].name for c in failing.context["rows"]] == ["report"]
    entry_page = reverse("admin:redisbeat_django_entry_change", args=["report"])
    for html in (change_page, admin_client.get(entry_page).content.decode()):
        assert f"<strong>The last run could not start (unregistered):</strong> {why}" in html
        live = html[html.index('<table class="rb-live">') :]
        assert '<th scope="row">Last outcome</th><td>unregistered at ' in live
        history = html[html.index('<table class="rb-history">') :]
        assert '<tr class="rb-problem">' in history and f'title="{why}' in history


def test_with_no_history_size_the_change_page_says_history_is_off(admin_client, rb_store):
    assert rb_store.history_size == 0
    row = make(every=1)
    send(rb_store, "report")
    html = admin_client.get(change_url(row)).content.decode()
    assert "History is off" in html and "<code>redisbeat_history_size</code>" in html
    rb_store.history_size = 20
    assert "No runs recorded yet." in admin_client.get(change_url(row)).content.decode()


def test_an_occurrence_held_back_by_its_jitter_shows_in_the_live_state(admin_client, rb_store):
    row = make(every=3600, jitter=3600)
    due = make_due(rb_store.client, rb_store, "report", 1)
    assert jitter_ms("report", due, 3600, 3_600_000) > 0  # so the beat holds it back
    recorder = Recorder()
    dispatcher(rb_store, recorder).tick()
    state = rb_store.state("report")
    assert recorder.sent == [] and state.held == "jitter"
    html = admin_client.get(change_url(row)).content.decode()
    assert "held back by its jitter" in html and "sending now" not in html
    # The preview starts from the held occurrence: its first time is the one it waits for.
    assert state.next_run_at.strftime("%Y-%m-%d %H:%M:%S") in html.split("Next runs (UTC)")[1]


def test_with_redis_down_the_history_panel_says_so(admin_client, own_store, own_redis):
    row = make()
    own_redis.stop()
    html = admin_client.get(change_url(row)).content.decode()
    assert "Last runs (Redis)" in html and html.count("Redis unavailable") >= 2
