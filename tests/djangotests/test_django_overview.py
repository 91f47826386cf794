"""The admin's deployment overview against a real Redis: the numbers ``status --json`` shows,
the hour of summaries the beats keep, and the page itself."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from click.testing import CliRunner
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from redisbeat import Entry, ScheduleStore
from redisbeat.cli import main
from redisbeat.schedule.kinds import Interval
from redisbeat.store.activity_log import LOG_CAP, LOG_TTL_S, LoggedSummary
from redisbeat_django.glance import MINUTE_MS, per_minute
from redisbeat_django.timetext import relative
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer

pytestmark = pytest.mark.django_db(transaction=True)

OVERVIEW = reverse("admin:redisbeat_django_periodictask_overview")
LIVE = reverse("admin:redisbeat_django_periodictask_overview_live")
DATA = reverse("admin:redisbeat_django_periodictask_overview_json")
BEAT = "host-1:4242:abc"
SUMMARY = {
    "seconds": 60.0,
    "sent": 120,
    "late_p50_ms": 2,
    "late_p99_ms": 9,
    "late_max_ms": 31,
    "recovered": 1,
    "skipped": 0,
    "failed": 0,
    "handed_back": 0,
    "missed": 3,
    "missed_entries": 1,
    "expired": 2,
}


def status_json(server: RedisServer, prefix: str) -> Any:
    """``redisbeat --url ... --prefix ... status --json``, as tests/test_cli.py runs it."""
    result = CliRunner().invoke(
        main, ["--url", server.url(), "--prefix", prefix, "status", "--json"]
    )
    assert result.exit_code in (0, 5), result.output  # 5: no beat alive
    return json.loads(result.stdout)


def a_deployment(store: ScheduleStore) -> None:
    """Entries due later, due long ago, disabled and set aside; delayed tasks; a beat with a
    summary and one without."""
    store.upsert_many(
        [
            Entry("hourly", "proj.ping", Interval(3600)),
            Entry("off", "proj.ping", Interval(60), enabled=False),
            Entry("late", "proj.ping", Interval(3600)),
        ]
    )
    # Due ten minutes ago, as if no beat had run since.
    store.client.zadd(store.keys.schedule, {"late": store.now_ms() - 600_000})
    record = {"definition": "{", "error": "not JSON", "at": 0, "by": BEAT}
    store.client.hset(store.keys.quarantine, "broken", json.dumps(record))
    store.delay_many({"task": "proj.ping", "countdown": 3600 + i} for i in range(7))
    for beat in (BEAT, "host-2:77:def"):
        store.heartbeat(beat)
    store.record_activity(BEAT, SUMMARY, 180)


def test_the_overview_shows_the_numbers_status_json_shows(
    admin_client: Client, rb_store: ScheduleStore, redis_server: RedisServer, prefix: str
):
    a_deployment(rb_store)
    page = admin_client.get(DATA).json()
    status = status_json(redis_server, prefix)
    for counts in (page["counts"], status["counts"]):
        counts.pop("now_ms")
    assert page["counts"] == status["counts"]
    assert page["counts"] == {
        "entries": 3,
        "scheduled": 2,
        "due": 1,
        "overdue": 1,
        "inflight": 0,
        "quarantined": 1,
        "delayed": 7,
    }
    assert [b["beat"]["id"] for b in page["beats"]] == [b["beat"]["id"] for b in status["beats"]]
    assert [b["stats"] for b in page["beats"]] == [b["stats"] for b in status["beats"]]
    assert page["beats"][0]["stats"] == SUMMARY and page["beats"][1]["stats"] is None
    # Each minute is rounded to a tenth; the summary's 60 s span two minutes at most.
    assert sum(m["sent"] for m in page["minutes"]) == pytest.approx(120, abs=0.1)
    assert sum(m["missed"] for m in page["minutes"]) == pytest.approx(3, abs=0.1)
    assert max(m["late_p99_ms"] for m in page["minutes"]) == 9


def test_the_overview_page_shows_the_counts_the_beats_and_three_charts(
    admin_client: Client, rb_store: ScheduleStore
):
    a_deployment(rb_store)
    html = admin_client.get(OVERVIEW).content.decode()
    assert 'data-count="delayed">7<' in html and 'data-count="quarantined">1<' in html
    assert "2 beats alive" in html and BEAT in html and "2 / 9 / 31" in html
    assert 'data-stat="expired">2<' in html
    assert html.count('class="rb-chart"') == 3 and 'class="rb-bar"' in html
    assert f'data-url="{LIVE}"' in html and "overview.js" in html
    live = admin_client.get(LIVE).content.decode()
    assert "<html" not in live and 'data-count="entries">3<' in live
    index = admin_client.get(reverse("admin:app_list", args=["redisbeat_django"]))
    assert OVERVIEW in index.content.decode()
    changelist = admin_client.get(reverse("admin:redisbeat_django_periodictask_changelist"))
    assert OVERVIEW in changelist.content.decode()


def test_the_overview_needs_the_view_permission(rb_store: ScheduleStore):
    user = User.objects.create_user("clerk", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)
    for url in (OVERVIEW, LIVE, DATA):
        assert client.get(url).status_code == 403
    user.user_permissions.add(
        Permission.objects.get(
            codename="view_periodictask", content_type__app_label="redisbeat_django"
        )
    )
    for url in (OVERVIEW, LIVE, DATA):
        assert client.get(url).status_code == 200


def test_the_overview_says_so_when_redis_is_down(
    admin_client: Client, own_store: ScheduleStore, own_redis: RedisServer
):
    own_redis.stop()
    html = admin_client.get(OVERVIEW).content.decode()
    assert "Redis unavailable" in html and "the numbers are not shown" in html
    assert admin_client.get(DATA).status_code == 503


def test_each_summary_a_beat_records_joins_the_deployment_stream_in_one_round_trip(
    rb_store: ScheduleStore,
):
    before = rb_store.now_ms()
    rb_store.record_activity(BEAT, SUMMARY, 180)
    rb_store.record_activity("host-2:77:def", {**SUMMARY, "sent": 5}, 180)
    logged = rb_store.activity_since(before)
    assert [s.beat for s in logged] == [BEAT, "host-2:77:def"]
    assert logged[0].numbers == {k: float(v) for k, v in SUMMARY.items()}
    assert before <= logged[0].at_ms <= logged[1].at_ms <= rb_store.now_ms()
    assert rb_store.activity_since(rb_store.now_ms() + 1) == []
    assert 0 < rb_store.client.ttl(rb_store.keys.activity_log) <= LOG_TTL_S
    assert json.loads(rb_store.client.get(rb_store.keys.activity(BEAT))) == SUMMARY


def test_the_stream_of_summaries_stays_about_its_cap(rb_store: ScheduleStore):
    for _ in range(LOG_CAP + 1000):
        rb_store.record_activity(BEAT, SUMMARY, 180)
    length = rb_store.client.xlen(rb_store.keys.activity_log)
    assert LOG_CAP <= length <= LOG_CAP + 200  # MAXLEN ~ trims whole nodes of 100
    assert len(rb_store.activity_since(0, most=10)) == 10


def logged(at_ms: int, seconds: float, sent: float, p99: float = 0, missed: float = 0) -> Any:
    numbers = {"seconds": seconds, "sent": sent, "late_p99_ms": p99, "missed": missed}
    return LoggedSummary(BEAT, at_ms, numbers)


NOW = 100 * MINUTE_MS + 30_000  # half a minute into minute 100


@pytest.mark.parametrize(
    ("summaries", "sent", "p99", "missed"),
    [
        ([], {}, {}, {}),
        # A minute's summary ending on the minute: all of it in the minute before.
        ([logged(99 * MINUTE_MS, 60, 120, 7, 2)], {98: 120}, {98: 7}, {98: 2}),
        # Two minutes' worth: half in each; the p99 counts for both.
        ([logged(100 * MINUTE_MS, 120, 60, 5)], {98: 30, 99: 30}, {98: 5, 99: 5}, {}),
        # Two beats in one minute: sends add up, the worst p99 shows.
        (
            [logged(99 * MINUTE_MS + 10_000, 1, 3, 4), logged(99 * MINUTE_MS + 20_000, 1, 5, 9)],
            {99: 8},
            {99: 9},
            {},
        ),
        # A summary of nothing sent leaves no lateness; one before the hour is left out.
        ([logged(100 * MINUTE_MS, 1, 0, 50), logged(10 * MINUTE_MS, 60, 9)], {}, {}, {}),
    ],
)
def test_summaries_are_shared_among_the_minutes_they_cover(summaries, sent, p99, missed):
    minutes = per_minute(summaries, NOW)
    assert len(minutes) == 60 and minutes[-1].start_ms == 100 * MINUTE_MS
    by_minute = {m.start_ms // MINUTE_MS: m for m in minutes}
    assert {k: m.sent for k, m in by_minute.items() if m.sent} == pytest.approx(sent)
    assert {k: m.late_p99_ms for k, m in by_minute.items() if m.late_p99_ms} == p99
    assert {k: m.missed for k, m in by_minute.items() if m.missed} == pytest.approx(missed)


NOON = datetime(2030, 1, 1, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (timedelta(seconds=4.5), "in 4 s"),
        (timedelta(seconds=0.3), "now"),
        (timedelta(seconds=-59), "59 s ago"),
        (timedelta(minutes=-2, seconds=-5), "2 min ago"),
        (timedelta(hours=3, minutes=59), "in 3 h"),
        (timedelta(days=-5, hours=-1), "5 d ago"),
    ],
)
def test_times_read_in_one_short_unit(offset, text):
    assert relative(NOON + offset, NOON) == text


def test_a_real_beat_s_summaries_reach_the_overview_and_its_charts(
    admin_client: Client, rb_store: ScheduleStore, redis_server: RedisServer, prefix: str, beats_for
):
    rb_store.upsert(Entry("tick", "proj.ping", Interval(0.2)))
    beats = beats_for(redis_server, prefix, TEST_SUMMARY="1", TEST_HEARTBEAT="0.5")
    beats.start(1)

    def charted() -> Any:
        data = admin_client.get(DATA).json()
        sent = sum(m["sent"] for m in data["minutes"])
        return (
            data
            if data["beats"] and (data["beats"][0]["stats"] or {}).get("sent") and sent
            else None
        )

    data = wait_until(charted, 30, "a beat's summaries in the overview")
    status = status_json(redis_server, prefix)
    assert [b["beat"]["id"] for b in data["beats"]] == [b["beat"]["id"] for b in status["beats"]]
    assert data["counts"]["entries"] == status["counts"]["entries"]
    logged = rb_store.activity_since(0)
    assert logged and {s.beat for s in logged} == {data["beats"][0]["beat"]["id"]}
    assert sum(s.get("sent") for s in logged) >= sum(m["sent"] for m in data["minutes"]) - 0.5
