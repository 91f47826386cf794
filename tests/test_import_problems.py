"""``import`` checks the whole file and reports every problem in one run (each with its line,
entry and field), writes nothing while one remains, and says when nothing would change;
against a real Redis, through click's runner."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from redisbeat import Entry, Interval
from redisbeat.cli import main
from redisbeat_testkit.redis_server import RedisServer

EVERY = {"kind": "interval", "every": 60}
#: Three problems: an unknown field, an hour of 25, and a name used twice.
THREE_PROBLEMS = """[
  {"name": "a", "task": "proj.ping", "schedule": {"kind": "interval", "every": 60}},
  {"name": "b", "task": "proj.ping", "schedule": {"kind": "interval", "every": 60},
   "colour": "red"},
  {"name": "c", "task": "proj.ping", "schedule": {"kind": "cron", "expr": "0 25 * * *"}},
  {"name": "a", "task": "proj.ping", "schedule": {"kind": "interval", "every": 60}}
]
"""
THREE_PROBLEMS_YAML = """\
- name: a
  task: proj.ping
  schedule: {kind: interval, every: 60}
- name: b
  task: proj.ping
  schedule: {kind: interval, every: 60}
  colour: red
- name: c
  task: proj.ping
  schedule: {kind: cron, expr: "0 25 * * *"}
- name: a
  task: proj.ping
  schedule: {kind: interval, every: 60}
"""


@pytest.fixture
def cli(redis_server: RedisServer, prefix: str) -> Any:
    def run(*args: str) -> Result:
        command = ["--url", redis_server.url(), "--prefix", prefix, *args]
        return CliRunner().invoke(main, command, env={"COLUMNS": "250"})

    return run


@pytest.mark.parametrize(
    ("suffix", "text", "lines"),
    [("json", THREE_PROBLEMS, (2, 3, 5, 6)), ("yaml", THREE_PROBLEMS_YAML, (1, 4, 8, 11))],
)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "import"])
def test_every_problem_of_the_file_is_reported_at_once_and_nothing_is_written(
    cli, store, tmp_path, suffix, text, lines, dry_run
):
    path = tmp_path / f"entries.{suffix}"
    path.write_text(text)
    result = cli("import", str(path), *(["--dry-run"] if dry_run else []))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == f"Error: {path}: 3 problems; nothing was written:"
    first, b, c, again = lines
    reported = [line.strip() for line in result.stderr.splitlines()[1:]]
    assert reported[0].startswith(f"line {b}, entry 2: entry 'b': field 'colour': unknown field")
    assert reported[1].startswith(f"line {c}, entry 3: entry 'c': field 'schedule.expr': ")
    assert "0 25 * * *" in reported[1]
    assert reported[2] == (
        f"line {again}, entry 4: entry 'a': field 'name': appears twice (line {first}, entry 1)"
    )
    assert len(store) == 0 and result.stdout == ""


def test_the_json_report_lists_each_problem_with_its_place(cli, store, tmp_path):
    path = tmp_path / "entries.json"
    path.write_text(THREE_PROBLEMS)
    result = cli("import", str(path), "--dry-run", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [(p["index"], p["line"], p["entry"], p["field"]) for p in report["problems"]] == [
        (2, 3, "b", "colour"),
        (3, 5, "c", "schedule.expr"),
        (4, 6, "a", "name"),
    ]
    assert report["problems"][2]["message"] == "appears twice (line 2, entry 1)"
    assert report["message"] == f"{path}: 3 problems; nothing was written"
    assert len(store) == 0


def test_an_entry_another_source_owns_is_reported_with_the_files_other_problems(
    cli, store, tmp_path
):
    store.upsert(Entry("owned", "proj.ping", Interval(60), source="config"))
    path = tmp_path / "entries.json"
    documents = [
        {"name": "owned", "task": "proj.other", "schedule": EVERY},
        {"name": "bad", "task": "proj.ping", "schedule": {"kind": "interval", "every": "often"}},
    ]
    path.write_text(json.dumps(documents))
    result = cli("import", str(path))
    assert result.exit_code == 1
    assert "entry 1: entry 'owned': field 'source': the stored entry belongs to 'config'" in (
        result.stderr
    )
    assert "entry 2: entry 'bad': field 'schedule.every'" in result.stderr
    assert store.get("owned").task == "proj.ping" and "bad" not in store


def test_an_import_with_nothing_to_change_says_so_instead_of_an_empty_table(cli, store, tmp_path):
    path = tmp_path / "entries.json"
    documents = [{"name": n, "task": "proj.ping", "schedule": EVERY} for n in ("a", "b")]
    path.write_text(json.dumps(documents))
    assert cli("import", str(path)).exit_code == 0
    for dry_run in (["--dry-run"], []):
        again = cli("import", str(path), *dry_run)
        assert again.exit_code == 0
        assert again.stdout == "nothing to change: 2 entries already as in the file\n"
        report = json.loads(cli("import", str(path), *dry_run, "--json").stdout)
        assert report["changes"] == {}
        assert report["summary"] == {"added": 0, "updated": 0, "unchanged": 2}
        assert report["message"] == "nothing to change: 2 entries already as in the file"
