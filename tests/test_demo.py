"""The demo runner (``make demo``) end to end, with its private redis-server, beats and worker."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redisbeat_demo.report import Execution, summarize

from redisbeat_testkit.ports import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "example_project" / "demo.py"

#: Variables of the caller's environment that would point the demo at something else.
FOREIGN = ("REDIS_URL", "DATABASE_URL", "SQLITE_PATH", "DEMO_SECONDS")


def demo_env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env.update(DEMO_STATE_DIR=str(state), DEMO_HTTP_PORT=str(free_port()), **extra)
    return env


def started(state: Path) -> dict[str, dict[str, int]]:
    """name -> {pid, pgid} of every process the runner started, from its pids file."""
    try:
        data: dict[str, Any] = json.loads((state / "pids.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    processes: dict[str, dict[str, int]] = data["processes"]
    return processes


def still_running(state: Path) -> list[tuple[str, int, int]]:
    """(name, pid, pgid) of live processes in the demo's process groups (not zombies)."""
    groups = {info["pgid"]: name for name, info in started(state).items()}
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        state_char, _ppid, pgrp = text.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) in groups and state_char != "Z":
            found.append((groups[int(pgrp)], int(stat.parent.name), int(pgrp)))
    return found


def kill_leftovers(state: Path) -> None:
    for pgid in {pgid for _, _, pgid in still_running(state)}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """The demo's state directory; whatever the demo left running is killed at the end."""
    yield tmp_path / "demo"
    kill_leftovers(tmp_path / "demo")


def run(entry: str, due_ms: int, beat_pid: int = 101, task_id: str = "") -> Execution:
    return Execution(
        task_id=task_id or f"{entry}@{due_ms}",
        task="orders.send_digest",
        started_ms=due_ms + 5,
        entry=entry,
        due_ms=due_ms,
        beat=f"host:{beat_pid}:abcd1234",
    )


def check(runs: list[Execution], stop_ms: int = 30_000) -> dict[str, Any]:
    summary = summarize(
        runs,
        labels={101: "beat-1", 102: "beat-2"},
        logged_sent={"beat-1": sum(1 for r in runs if r.beat and ":101:" in r.beat)},
        periods={"digest": 2.0},
        start_ms=0,
        stop_ms=stop_ms,
        web_status=200,
        web_url="http://127.0.0.1:8000/admin/login/",
    )
    return summary.as_dict()


EVERY_2S = [run("digest", ms) for ms in range(4_000, 30_000, 2_000)]


def test_the_summary_passes_runs_that_share_the_work_once_each() -> None:
    runs = [run(r.entry or "", r.due_ms or 0, 101 + i % 2) for i, r in enumerate(EVERY_2S)]
    result = check(runs)
    assert result["ok"], result
    assert result["beats"] == {"beat-1": 7, "beat-2": 6}


def test_the_summary_counts_a_second_run_of_one_occurrence_as_a_duplicate() -> None:
    result = check([*EVERY_2S, run("digest", 10_000, 102, task_id="other")])
    assert result["duplicates"] == 1
    assert not result["ok"]


def test_the_summary_counts_gaps_and_a_missing_tail_as_missed() -> None:
    gap = [r for r in EVERY_2S if r.due_ms not in (10_000, 12_000)]
    assert check(gap)["missed"] == 2
    # Due at 30, 32, 34, 36 and 38 s, all more than a second before the stop.
    assert check(EVERY_2S, stop_ms=40_000)["missed"] == 5


def test_an_entry_that_never_ran_misses_only_what_fell_due_once_the_beats_sent() -> None:
    # The beats took 8 s to start (a loaded machine): the first run, of another entry, then.
    other = Execution("o", "orders.purge", 8_000, "other", 3_000, "host:101:abcd1234")

    def missed(stop_ms: int) -> int:
        summary = summarize(
            [other],
            labels={101: "beat-1", 102: "beat-2"},
            logged_sent={"beat-1": 1},
            periods={"digest": 2.0, "other": 60.0},
            start_ms=0,
            stop_ms=stop_ms,
            web_status=200,
            web_url="http://127.0.0.1:8000/admin/login/",
        )
        return summary.missed

    assert missed(9_000) == 0
    # Due at 10, 12 and 14 s, more than the slack before the stop: (16 - 2 - 8) / 2.
    assert missed(16_000) == 3


def test_the_summary_ignores_a_catch_up_run_due_before_the_start() -> None:
    assert check([run("digest", -50_000), *EVERY_2S])["missed"] == 0


def test_the_summary_fails_a_long_run_where_one_beat_did_everything() -> None:
    assert check(EVERY_2S)["failures"] == ["only 1 of 2 beats sent anything"]


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find leftover processes"
)


@linux_only
@pytest.mark.timeout(90)
def test_a_timed_demo_shares_the_work_sends_each_occurrence_once_and_cleans_up(
    state: Path,
) -> None:
    started_at = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(DEMO)],
        env=demo_env(state, DEMO_SECONDS="25"),
        capture_output=True,
        text=True,
        timeout=85,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = json.loads((state / "summary.json").read_text())
    assert sorted(summary["beats"]) == ["beat-1", "beat-2"], output
    assert all(count > 0 for count in summary["beats"].values()), output
    assert summary["duplicates"] == 0, output
    assert summary["missed"] == 0, output
    assert summary["executed"] == sum(summary["beats"].values()) > 0, output
    assert summary["web_status"] == 200, output
    assert "result: OK" in result.stdout
    assert "sent by beat-1" in result.stdout and "sent by beat-2" in result.stdout
    assert {"redis", "worker", "web", "beat-1", "beat-2"} <= set(started(state))
    assert still_running(state) == []
    assert time.monotonic() - started_at < 80


@linux_only
@pytest.mark.timeout(90)
def test_sigint_stops_a_running_demo_and_every_process_it_started(state: Path) -> None:
    log = state.parent / "demo-output.txt"
    with log.open("w") as out:
        demo = subprocess.Popen(
            [sys.executable, str(DEMO)],
            env=demo_env(state),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "sent by beat-" in log.read_text() or demo.poll() is not None,
            60,
            "the demo's first task run",
            interval=0.1,
        )
        assert demo.poll() is None, log.read_text()
        demo.send_signal(signal.SIGINT)
        stopping = time.monotonic()
        code = demo.wait(20)
        assert time.monotonic() - stopping < 10, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    output = log.read_text()
    assert code == 0, output
    assert "Stopping (SIGINT)" in output
    assert "duplicates: 0" in output
    assert still_running(state) == []
