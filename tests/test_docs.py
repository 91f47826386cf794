"""The documentation: its examples run against the real code and its links resolve."""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from click.testing import CliRunner

from redisbeat import Interval, ScheduleStore
from redisbeat.cli import main as redisbeat_cli
from redisbeat.schedule.from_celery import config_entries
from redisbeat_testkit.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUICKSTART = DOCS / "examples" / "quickstart.py"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
#: The Redis URL the examples are written against; the tests swap in the session server.
EXAMPLE_URL = "redis://localhost:6379/0"
#: Databases of the session redis-server kept for these tests (the other tests use 0 and 1).
QUICKSTART_DB = 2
FIRST_PAGE_DB = 3
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.M | re.S)
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def code_blocks(page: Path) -> list[tuple[str, str, int]]:
    """(language, code, line of the first code line) of every fenced block on a page."""
    text = page.read_text(encoding="utf-8")
    return [(m[1], m[2], text.count("\n", 0, m.start()) + 2) for m in FENCE.finditer(text)]


def fresh_db(server: RedisServer, db: int) -> str:
    client = redis.Redis.from_url(server.url(db))
    client.flushdb()
    client.close()
    return server.url(db)


def redis_now(url: str) -> datetime:
    client = redis.Redis.from_url(url)
    seconds, micros = client.time()
    client.close()
    return datetime.fromtimestamp(seconds + micros / 1e6, timezone.utc)


@pytest.mark.parametrize("page", [ROOT / "README.md", DOCS / "index.md"], ids=lambda p: p.name)
def test_the_quickstart_shown_is_the_example_file(page: Path) -> None:
    python_blocks = [code for lang, code, _ in code_blocks(page) if lang == "python"]
    assert QUICKSTART.read_text(encoding="utf-8") in python_blocks


def test_the_quickstart_example_adds_an_entry_and_prints_its_state(
    redis_server: RedisServer,
) -> None:
    url = fresh_db(redis_server, QUICKSTART_DB)
    before = redis_now(url)
    result = subprocess.run(
        [sys.executable, str(QUICKSTART)],
        env={**os.environ, "REDIS_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    match = re.fullmatch(r"next run of report: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", first)
    assert match, first
    next_run = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    five_minutes = before + timedelta(minutes=5)
    assert five_minutes - timedelta(seconds=1) <= next_run <= five_minutes + timedelta(seconds=30)
    assert second == "runs so far: 0"
    store = ScheduleStore(redis.Redis.from_url(url, decode_responses=True))
    assert store.get("report").schedule == Interval(300)
    assert store.names("api") == {"report"}
    store.close()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_example_on_the_page_runs(page: Path, redis_server: RedisServer) -> None:
    """Python blocks run and pycon blocks are doctests, in order, in one namespace per page."""
    # Emptied first: pages may share a database (Redis has 16).
    url = fresh_db(redis_server, FIRST_PAGE_DB + PAGES.index(page) % (16 - FIRST_PAGE_DB))
    quickstart = QUICKSTART.read_text(encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    parser = doctest.DocTestParser()
    ran = 0
    for lang, code, line in code_blocks(page):
        if lang not in ("python", "pycon", "console") or code == quickstart:
            continue  # the quickstart runs above
        if lang == "console" and f"$ {CELERY_COMMAND}" not in code:
            continue  # a shell session of other commands, shown only
        code = code.replace(EXAMPLE_URL, url)
        where = f"{page.name}:{line}"
        if lang == "console":
            run_console(code, url, where)
        elif lang == "python":
            exec(compile(code, where, "exec"), namespace)
        else:
            test = parser.get_doctest(code, namespace, where, str(page), line - 1)
            report: list[str] = []
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test, out=report.append, clear_globs=False)
            assert not runner.failures, "".join(report)
            namespace.update(test.globs)  # a DocTest runs in a copy of the namespace
        for value in list(namespace.values()):
            if isinstance(value, Celery):
                config_entries(value)  # a beat would accept every beat_schedule shown
        ran += 1
    assert ran, f"{page.name} has no example that runs"


#: How a console example names the deployment: the tests run it on the page's database.
CELERY_COMMAND = "celery -A proj redisbeat "


def run_console(code: str, url: str, where: str) -> None:
    """``$ celery -A proj redisbeat ...`` lines run in order; each must succeed and print
    what follows it (``...`` matches anything, as in a doctest)."""
    checker = doctest.OutputChecker()
    steps = re.findall(r"^\$ (.+)\n((?:(?!\$ ).*\n)*)", code, re.M)
    assert steps, f"{where}: no $ command"
    for command, expected in steps:
        assert command.startswith(CELERY_COMMAND), f"{where}: {command}"
        args = shlex.split(command.removeprefix(CELERY_COMMAND))
        result = CliRunner().invoke(redisbeat_cli, ["--url", url, *args], env={"COLUMNS": "200"})
        assert result.exit_code == 0, f"{where}: {command}\n{result.output}"
        assert checker.check_output(expected, result.output, doctest.ELLIPSIS), (
            f"{where}: {command}\nexpected:\n{expected}\ngot:\n{result.output}"
        )


def test_the_mkdocs_nav_lists_every_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = re.findall(r"^ +- [^:\n]+: (\S+\.md) *$", config, re.M)
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md"))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (mkdocs) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in HEADING.findall(text)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page: Path) -> None:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an external address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.is_file(), f"{page.name}: {target}: no such file"
        if anchor:
            assert anchor in anchors(file), f"{page.name}: {target}: no such heading"
