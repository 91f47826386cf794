"""``celery -A proj redisbeat ...``: every command against a real Redis, with bad input and
an unreachable Redis, through Celery's own command line and in-process through click."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from test_dispatcher import Recorder, dispatcher, make_due

from redisbeat import Cron, Crontab, Entry, Interval, ScheduleStore
from redisbeat.cli import celery_command, main
from redisbeat.config import Config
from redisbeat.schedule.clock import from_ms
from redisbeat_testkit.ports import free_port, wait_until
from redisbeat_testkit.processes import environ_without_django
from redisbeat_testkit.redis_server import RedisServer


@pytest.fixture
def cli(redis_server: RedisServer, prefix: str) -> Any:
    """cli(*args) -> click's Result of ``redisbeat --url <the test Redis> <args>``."""

    def run(*args: str, input: str | None = None) -> Result:
        runner = CliRunner()
        return runner.invoke(
            main,
            ["--url", redis_server.url(), "--prefix", prefix, *args],
            input=input,
            env={"COLUMNS": "250"},
        )

    return run


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def celery_cli(server: RedisServer, prefix: str, *args: str, **env: str) -> Any:
    """``celery -A redisbeat_testkit.proj redisbeat <args>``, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "redisbeat_testkit.proj", "redisbeat", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **environ_without_django(),
            "TEST_BROKER_URL": server.url(1),
            "TEST_STORE_URL": server.url(0),
            "TEST_PREFIX": prefix,
            "COLUMNS": "250",
            **env,
        },
    )


# -- Celery's command line --------------------------------------------------------------------


def test_celery_runs_the_commands_with_the_apps_settings(redis_server, prefix, store):
    store.upsert(Entry("report", "proj.ping", Interval(60)))
    helped = celery_cli(redis_server, prefix, "--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("list", "show", "add", "status", "quarantine", "export", "import"):
        assert f"  {command} " in helped.stdout
    listed = celery_cli(redis_server, prefix, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["name"] for row in json.loads(listed.stdout)["entries"]] == ["report"]
    table = celery_cli(redis_server, prefix, "list")
    assert "report" in table.stdout and "Every minute" in table.stdout


def test_an_unreachable_redis_is_one_line_and_exit_code_3(prefix):
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = subprocess.run(
        [str(Path(sys.executable).with_name("redisbeat")), "--url", url, "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert result.stderr.startswith("Error: cannot reach Redis")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


#: Arguments that make each command talk to Redis.
SAMPLE_ARGS = {
    "list": [],
    "show": ["a"],
    "add": ["a", "proj.ping", "--every", "10s"],
    "remove": ["a"],
    "enable": ["a"],
    "disable": ["a"],
    "run": ["a"],
    "pause": ["a"],
    "resume": ["a"],
    "history": ["a"],
    "backfill": ["a", "--start", "2026-01-01T00:00:00+00:00", "--end", "2026-01-01T01:00:00+00:00"],
    "status": [],
    "beats": [],
    "quarantine list": [],
    "quarantine show": ["a"],
    "quarantine drop": ["a"],
    "quarantine restore": ["a"],
    "export": ["-"],
    "reshard": ["2"],
    "pending": ["owner"],
    "cancel": ["k"],
}


def test_every_command_says_so_in_one_line_when_redis_is_unreachable(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    document = tmp_path / "entries.json"
    document.write_text(
        '[{"name": "a", "task": "t", "schedule": {"kind": "interval", "every": 5}}]'
    )
    args = {**SAMPLE_ARGS, "import": [str(document)]}
    assert set(args) == {path for path, _ in commands_of(main)}
    for path, extra in args.items():
        result = CliRunner().invoke(main, ["--url", url, *path.split(), *extra])
        assert result.exit_code == 3, (path, result.output)
        assert result.output.startswith("Error: cannot reach Redis"), (path, result.output)
        assert len(result.output.strip().splitlines()) == 1, (path, result.output)


def test_an_app_that_does_not_load_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["-A", "no_such_module_here", "list"])
    assert result.exit_code == 2
    assert "cannot load the Celery app 'no_such_module_here'" in result.output


# -- add, show, list --------------------------------------------------------------------------


def test_a_table_piped_to_another_program_keeps_each_row_on_one_line(redis_server, prefix, store):
    name, task = "nightly-report-" + "x" * 70, "proj.reports." + "y" * 80
    store.upsert(Entry(name, task, Interval(3600)))
    env = {k: v for k, v in environ_without_django().items() if k != "COLUMNS"}
    command = [sys.executable, "-c", "from redisbeat.cli import main; main()"]
    command += ["--url", redis_server.url()]
    result = subprocess.run(
        [*command, "--prefix", prefix, "list"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if name in line]
    assert task in row and "Every hour" in row


def test_add_each_kind_and_show_its_next_runs_in_its_zone_and_in_words(cli, store):
    assert cli("add", "tick", "proj.ping", "--every", "1m30s").exit_code == 0
    added = cli("add", "berlin", "proj.ping", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin")
    assert added.exit_code == 0, added.output
    crontab = cli(
        "add", "nightly", "proj.ping", "--crontab", "30 2 * * *", "--queue", "low",
        "--tz", "Europe/Berlin", "--dst-gap", "skip", "--dst-fold", "twice",
    )  # fmt: skip
    assert crontab.exit_code == 0, crontab.output
    assert store.get("nightly").schedule == Crontab(
        "30", "2", tz="Europe/Berlin", dst_gap="skip", dst_fold="twice"
    )
    assert "no run in the DST gap" in as_json(cli("show", "nightly", "--json"))["schedule"]
    at = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0)
    assert cli("add", "once", "proj.ping", "--at", at.isoformat()).exit_code == 0
    assert store.get("tick").schedule == Interval(90)
    assert store.get("nightly").options == {"queue": "low"}

    shown = as_json(cli("show", "berlin", "--json"))
    assert shown["schedule"] == "At 09:00, Monday through Friday (Europe/Berlin)"
    runs = [datetime.fromisoformat(r) for r in shown["next_runs"]]
    assert len(runs) == 5 and runs == sorted(runs)
    assert all(r.utcoffset() in (timedelta(hours=1), timedelta(hours=2)) for r in runs)
    assert all((r.hour, r.minute) == (9, 0) and r.weekday() < 5 for r in runs)
    once = as_json(cli("show", "once", "--json"))
    assert [datetime.fromisoformat(r) for r in once["next_runs"]] == [at]
    table = cli("show", "tick")
    assert table.exit_code == 0 and "Every 90 seconds" in table.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "61 * * * *"], "entry 'bad': field 'schedule.expr'"),
        (["--every", "-5s"], "is not a duration"),
        (["--every", "0s"], "entry 'bad': field 'schedule.every'"),
        (["--every", "10s", "--args", "[1,"], "entry 'bad': field 'args': is not JSON"),
        (["--every", "10s", "--kwargs", "[1]"], "entry 'bad': field 'kwargs'"),
        (["--crontab", "* * *"], "entry 'bad': field 'schedule': --crontab takes five"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "entry 'bad': field 'schedule.tz'"),
        (["--at", "2030-01-01T09:00:00"], "entry 'bad': field 'schedule.at'"),
        (["--every", "1h", "--dst-gap", "skip"], "--dst-gap and --dst-fold go with --crontab"),
        (["--cron", "* * * * *", "--dst-fold", "3"], "'3' is not one of 'once', 'twice'"),
        ([], "give one schedule"),
    ],
)
def test_add_refuses_bad_input_naming_the_entry_and_field(cli, store, args, message):
    result = cli("add", "bad", "proj.ping", *args)
    assert result.exit_code in (1, 2)
    assert message in result.output
    assert "bad" not in store


def test_pause_and_resume_from_the_command_line(cli, store):
    store.upsert(Entry("e", "proj.ping", Interval(60)))
    paused = cli("pause", "e", "--until", "2031-06-01T12:00:00+00:00", "--note", "summer")
    assert paused.exit_code == 0, paused.output
    assert "e: paused until 2031-06-01T12:00:00+00:00; next run" in paused.output
    assert store.state("e").paused.note == "summer"  # type: ignore[union-attr]
    assert "paused until 2031-06-01T12:00:00+00:00: summer" in cli("show", "e").output
    state = as_json(cli("show", "e", "--json"))["state"]
    assert state["paused"]["note"] == "summer"
    refused = cli("run", "e")
    assert refused.exit_code == 1 and "entry 'e' is paused: resume it first" in refused.output
    assert "e: resumed; next run" in cli("resume", "e").output
    assert store.state("e").paused is None
    assert "e: was not paused" in cli("resume", "e").output
    naive = cli("pause", "e", "--until", "2031-06-01T12:00")
    assert naive.exit_code == 2 and "give the UTC offset" in naive.output
    past = cli("pause", "e", "--until", "2020-01-01T00:00:00+00:00")
    assert past.exit_code == 2 and "2020-01-01T00:00:00+00:00 has passed" in past.output
    assert store.state("e").paused is None
    assert "e: paused until resumed" in cli("pause", "e").output
    assert "no entry named 'nope'" in cli("pause", "nope").output


def test_add_sets_overlap_and_jitter_and_history_shows_sends_with_their_outcomes(
    cli, store, client
):
    added = cli("add", "e", "proj.ping", "--every", "1m", "--overlap", "skip", "--jitter", "20s")
    assert added.exit_code == 0, added.output
    assert (store.get("e").overlap, store.get("e").jitter) == ("skip", 20.0)
    assert "skip / 20 s" in cli("show", "e").output
    assert "no history is kept (set redisbeat_history_size)" in cli("history", "e").output
    store.history_size = 5
    store.upsert(Entry("e", "proj.ping", Interval(60)), force=True)
    make_due(client, store, "e", 5)
    rec = Recorder()
    dispatcher(store, rec).tick()
    [(_, due, task_id)] = rec.sent
    store.run_started("e", task_id, due, "w1@host")
    store.run_ended("e", task_id, due, "w1@host", "failed", "ValueError")
    table = cli("history", "e").output
    assert "sent" in table and "failed (ValueError)" in table and "w1@host" in table
    [run] = as_json(cli("history", "e", "--json"))
    assert (run["task_id"], run["outcome"], run["exception"]) == (task_id, "failed", "ValueError")
    shown = cli("show", "e").output
    assert "failed (ValueError)" in shown and "last run failed: ValueError" in shown
    assert "no entry named 'nope'" in cli("history", "nope").output


def test_backfill_queues_past_occurrences_and_refuses_a_future_end(cli, store):
    store.upsert(Entry("e", "proj.ping", Interval(600)))
    now = store.now_ms()
    start, end = from_ms(now - 3_600_000).isoformat(), from_ms(now - 1).isoformat()
    done = cli("backfill", "e", "--start", start, "--end", end, "--rate", "5")
    assert done.exit_code == 0, done.output
    assert "e: 6 occurrence(s) from" in done.output and "over 1.2 s" in done.output
    assert store.count_pending("backfill:e") == 6
    future = from_ms(now + 60_000).isoformat()
    refused = cli("backfill", "e", "--start", start, "--end", future)
    assert refused.exit_code != 0 and "field 'end': is in the future" in refused.output


def test_add_does_not_replace_without_being_asked(cli, store):
    assert cli("add", "a", "proj.ping", "--every", "10s").exit_code == 0
    again = cli("add", "a", "proj.other", "--every", "20s")
    assert again.exit_code == 1 and "entry 'a' exists" in again.output
    assert store.get("a").task == "proj.ping"
    assert cli("add", "a", "proj.other", "--every", "20s", "--replace").exit_code == 0
    assert store.get("a").task == "proj.other"
    store.upsert(Entry("owned", "proj.ping", Interval(60), source="config"))
    taken = cli("add", "owned", "proj.other", "--every", "20s", "--replace")
    assert taken.exit_code == 1
    assert "entry 'owned' is owned by source 'config': --force takes it over" in taken.output
    assert cli("add", "owned", "proj.other", "--every", "5s", "--replace", "--force").exit_code == 0
    assert store.get("owned").source == "api"


def test_list_is_sorted_by_next_run_and_pages_with_a_cursor(cli, store):
    now = datetime.now(timezone.utc)
    entries = [
        Entry(f"e{i:02d}", "proj.ping", Interval(3600), start_at=now + timedelta(minutes=60 - i))
        for i in range(30)
    ]
    store.upsert_many([*entries, Entry("off", "proj.ping", Interval(5), enabled=False)])
    seen: list[str] = []
    after: list[str] = []
    while True:
        page = as_json(cli("list", "--json", "--limit", "7", *after))
        seen += [row["name"] for row in page["entries"]]
        if page["next"] is None:
            break
        after = ["--after", page["next"]]
    assert seen == [f"e{i:02d}" for i in reversed(range(30))] + ["off"]
    table = cli("list", "--limit", "3")
    assert table.exit_code == 0 and "More entries follow: --after 's:" in table.output
    assert cli("list", "--after", "nonsense").exit_code == 2


def test_list_filters_by_state_source_task_and_name(cli, store):
    store.upsert_many(
        [
            Entry("a.report", "proj.report", Interval(60)),
            Entry("a.ping", "proj.ping", Interval(60), source="config"),
            Entry("b.report", "proj.report", Interval(60), enabled=False),
        ]
    )

    def names(*args: str) -> list[str]:
        return sorted(row["name"] for row in as_json(cli("list", "--json", *args))["entries"])

    assert names("--disabled") == ["b.report"]
    assert names("--enabled") == ["a.ping", "a.report"]
    assert names("--source", "config") == ["a.ping"]
    assert names("--task", "proj.rep*") == ["a.report", "b.report"]
    assert names("--name", "a.*", "--task", "*report") == ["a.report"]


def test_a_list_filtered_by_source_or_name_reads_only_what_can_match(cli, store, client):
    # 3,000 entries, 40 of them the api's: a filter by source reads the 40 through the
    # source's index, one by an exact name reads one, and one that matches nothing reads none.
    now = datetime.now(timezone.utc)
    store.upsert_many(
        Entry(f"c{i:04d}", "proj.ping", Interval(60), source="config") for i in range(3000)
    )
    mine = [Entry(f"a{i:02d}", "proj.ping", Interval(3600), start_at=now) for i in range(38)]
    mine.append(Entry("a.off", "proj.ping", Interval(60), enabled=False))
    mine.append(Entry("a.soon", "proj.ping", Interval(60), start_at=now + timedelta(hours=2)))
    store.upsert_many(mine)

    def listed(*args: str) -> tuple[list[str], int]:
        client.config_resetstat()
        rows = as_json(cli("list", "--json", "--limit", "0", *args))["entries"]
        stats = client.info("commandstats")
        read = sum(v["calls"] for k, v in stats.items() if k in READS)
        return [row["name"] for row in rows], read

    assert listed("--task", "nosuch")[1] > 20  # no index: every entry is read
    names, read = listed("--source", "api")
    assert names == [*(f"a{i:02d}" for i in range(38)), "a.soon", "a.off"]
    assert read < 20, read  # a handful of pipelined reads, not a walk of 3,040 entries
    assert listed("--source", "nosuch") == ([], 0)
    names, read = listed("--name", "c1234")
    assert names == ["c1234"] and read < 10
    names, _ = listed("--source", "api", "--disabled")
    assert names == ["a.off"]
    # Pages of a filtered list go on from their own cursors.
    page = as_json(cli("list", "--json", "--source", "api", "--limit", "39"))
    rest = as_json(cli("list", "--json", "--source", "api", "--after", page["next"]))
    assert [r["name"] for r in rest["entries"]] == ["a.off"]


#: The commands a walk reads entries with (a command counts as a read per call, pipelined or not).
READS = {f"cmdstat_{c}" for c in ("zrangebyscore", "hscan", "hmget", "zmscore", "zscore")}


def test_the_walk_pages_through_shards_and_ties_at_every_cursor(
    sharded_stores, redis_server, prefix
):
    store = sharded_stores(redis_server.url(), prefix, 3)
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    # Many entries due at the same moment: more than a page of one due time in each shard.
    store.upsert_many(
        [Entry(f"t{i:03d}", "proj.ping", Interval(3600), start_at=at) for i in range(40)]
        + [Entry(f"u{i}", "proj.ping", Interval(60), enabled=False) for i in range(9)]
    )
    full = [row.name for row in store.walk(page=4)]
    assert full[:40] == [f"t{i:03d}" for i in range(40)]
    assert sorted(full[40:]) == [f"u{i}" for i in range(9)]
    for position, row in enumerate(store.walk(page=4)):
        rest = [r.name for r in store.walk(row.cursor, page=4)]
        assert rest == full[position + 1 :], row.cursor


# -- remove, enable, disable, run -------------------------------------------------------------


def test_remove_enable_disable_and_run_and_what_a_missing_name_gets(cli, store):
    store.upsert(Entry("a", "proj.ping", Interval(3600)))
    assert cli("disable", "a").exit_code == 0
    assert not store.get("a").enabled and store.state("a").next_run_at is None
    assert cli("enable", "a").exit_code == 0
    assert store.get("a").enabled and store.state("a").next_run_at is not None
    before = store.now_ms()
    assert cli("run", "a").exit_code == 0
    due = store.state("a").next_run_at
    assert due is not None and due.timestamp() * 1000 <= before + 1000
    for command in ("disable", "enable", "run", "show", "remove"):
        result = cli(command, "nope")
        assert result.exit_code == 4, (command, result.output)
        assert "no entry named 'nope'" in result.output
    assert cli("remove", "a").exit_code == 0 and "a" not in store


# -- status, beats ----------------------------------------------------------------------------


def test_status_counts_entries_and_shows_each_beats_last_summary(
    cli, store, redis_server, prefix, beats_for
):
    store.upsert_many(
        [
            Entry("fast", "proj.ping", Interval(0.5)),
            Entry("off", "proj.ping", Interval(1), enabled=False),
            Entry(
                "late",
                "proj.ping",
                Interval(3600),
                start_at=datetime(2000, 1, 1, tzinfo=timezone.utc),
            ),
        ]
    )
    nobody = cli("status")
    assert nobody.exit_code == 5 and "no beat is alive" in nobody.output
    store.run_now("late")
    due = json.loads(cli("status", "--json", "--overdue-after", "0s").stdout)["counts"]
    assert due["due"] >= 1 and due["overdue"] >= 1 and due["inflight"] == 0
    beats = beats_for(redis_server, prefix, TEST_SUMMARY="1", TEST_HEARTBEAT="0.5")
    beats.start(1)

    def summarised() -> Any:
        report = json.loads(cli("status", "--json").stdout or "{}")
        alive = report.get("beats", [])
        return report if alive and (alive[0]["stats"] or {}).get("sent") else None

    report = wait_until(summarised, 30, "a beat's summary in status")
    # The beat's own beat_schedule (Celery's backend_cleanup) is counted too.
    assert report["counts"]["entries"] == len(store) == 4
    assert report["counts"]["scheduled"] == 3
    assert report["counts"]["quarantined"] == 0
    stats = report["beats"][0]["stats"]
    assert stats["late_p99_ms"] >= stats["late_p50_ms"] >= 0
    assert stats["expired"] == 0
    table = cli("status")
    assert table.exit_code == 0 and "1 beat(s) alive" in table.output
    listed = as_json(cli("beats", "--json"))
    assert [b["id"] for b in listed] == [report["beats"][0]["beat"]["id"]]


# -- quarantine -------------------------------------------------------------------------------


def quarantine_one(store: ScheduleStore, name: str, definition: str) -> None:
    """What a beat does with a definition it cannot load."""
    store.client.hset(store.keys.entries, name, definition)
    assert store.quarantine(name, definition, "field 'task': is missing", "beat-1")


def test_quarantine_lists_shows_restores_after_a_fix_and_drops(cli, store, tmp_path):
    broken = json.dumps({"name": "q", "schedule": {"kind": "interval", "every": 60}})
    quarantine_one(store, "q", broken)
    listed = as_json(cli("quarantine", "list", "--json"))
    assert [(q["name"], q["by"]) for q in listed] == [("q", "beat-1")]
    shown = as_json(cli("quarantine", "show", "q", "--json"))
    assert shown["definition"] == broken
    for command in (("show", "q"), ("enable", "q")):  # where it went, and how to see why
        gone = cli(*command)
        assert gone.exit_code == 4 and "no entry named 'q': it was set aside" in gone.output
        assert "'quarantine show q' says why" in gone.output
    assert "set aside" not in cli("show", "nothing").output
    # Restoring it as it is fails the same check, and keeps it where it is.
    again = cli("quarantine", "restore", "q")
    assert again.exit_code == 1 and "entry 'q': field 'task': is missing" in again.output
    assert "q" in store.quarantined()
    fixed = tmp_path / "q.json"
    fixed.write_text(json.dumps({**json.loads(broken), "task": "proj.ping"}))
    restored = cli("quarantine", "restore", "q", "--file", str(fixed))
    assert restored.exit_code == 0, restored.output
    assert store.get("q").task == "proj.ping" and "q" not in store.quarantined()
    assert store.state("q").next_run_at is not None
    quarantine_one(store, "q2", "{not json")
    assert cli("quarantine", "drop", "q2").exit_code == 0
    assert store.quarantined() == {} and "q2" not in store
    assert cli("quarantine", "show", "q2").exit_code == 4


# -- export, import ---------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_export_then_import_elsewhere_gives_the_same_entries_and_again_changes_nothing(
    cli, store, redis_server, tmp_path, suffix
):
    made = [
        Entry("a", "proj.ping", Interval(60), args=[1, "x"], kwargs={"k": None}),
        Entry("b", "proj.ping", Cron("0 9 * * *", tz="Europe/Berlin"), enabled=False),
    ]
    store.upsert_many(made)
    path = tmp_path / f"entries.{suffix}"
    assert cli("export", str(path)).exit_code == 0
    other_prefix = f"{store.keys.prefix}-other"
    runner = CliRunner()

    def other(*args: str) -> Result:
        return runner.invoke(main, ["--url", redis_server.url(), "--prefix", other_prefix, *args])

    dry = as_json(other("import", str(path), "--dry-run", "--json"))
    assert dry["summary"] == {"added": 2, "updated": 0, "unchanged": 0}
    target = ScheduleStore.from_config(Config(redis_server.url(), key_prefix=other_prefix))
    try:
        assert len(target) == 0  # a dry run writes nothing
        assert as_json(other("import", str(path), "--json"))["summary"]["added"] == 2
        assert sorted(target, key=lambda e: e.name) == made
        assert as_json(other("import", str(path), "--json"))["summary"]["unchanged"] == 2
    finally:
        target.close()


def test_import_writes_nothing_when_one_entry_is_bad_and_names_it(cli, store, tmp_path):
    good = {"name": "good", "task": "proj.ping", "schedule": {"kind": "interval", "every": 5}}
    bad = {"name": "bad", "task": "proj.ping", "schedule": {"kind": "interval", "every": "often"}}
    path = tmp_path / "entries.json"
    path.write_text(json.dumps([good, bad]))
    result = cli("import", str(path))
    assert result.exit_code == 1
    assert "entry 'bad': field 'schedule.every'" in result.output
    assert len(store) == 0
    path.write_text(json.dumps([good, {**good, "colour": "red"}]))
    assert "field 'colour': unknown field" in cli("import", str(path)).output
    path.write_text(json.dumps([good, good]))
    assert "entry 'good': field 'name': appears twice" in cli("import", str(path)).output
    path.write_text("[{")
    assert "not valid JSON" in cli("import", str(path)).output
    assert len(store) == 0


def test_a_file_that_cannot_be_opened_is_one_line_naming_it(cli, store, tmp_path):
    missing = tmp_path / "nowhere" / "entries.json"
    for args in (("import", str(missing)), ("export", str(missing))):
        result = cli(*args)
        assert result.exit_code == 2, result.output
        assert f"cannot open {missing}: No such file or directory" in result.output
        assert "Traceback" not in result.output


def test_import_refuses_to_take_over_another_sources_entry_unless_forced(cli, store, tmp_path):
    store.upsert(Entry("owned", "proj.ping", Interval(60), source="config"))
    path = tmp_path / "entries.json"
    path.write_text(
        json.dumps(
            [{"name": "owned", "task": "proj.other", "schedule": {"kind": "interval", "every": 60}}]
        )
    )
    refused = cli("import", str(path))
    assert refused.exit_code == 1 and "belongs to 'config'" in refused.output
    dry = cli("import", str(path), "--dry-run", "--force")
    assert dry.exit_code == 0 and "owned" in dry.output and "1 would be updated" in dry.output
    assert store.get("owned").task == "proj.ping"
    assert cli("import", str(path), "--force").exit_code == 0
    assert store.get("owned").task == "proj.other" and store.get("owned").source == "api"


# -- the reference page -----------------------------------------------------------------------


def commands_of(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from commands_of(command, f"{path} ")
        else:
            yield path, command


def test_the_reference_documents_every_command_and_each_of_its_options():
    page = (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = {
        name.strip(): body
        for heading, body in re.findall(r"^### (.+?)\n(.*?)(?=^##)", page + "\n##", re.S | re.M)
        for name in heading.split(",")
    }
    for path, command in commands_of(main):
        assert path in sections, f"no section for {path}"
        for param in command.params:
            for option in (o for o in param.opts if o.startswith("--")):
                assert option in sections[path], f"{path} {option}"
    assert set(commands_of(celery_command)) == set(commands_of(main))
