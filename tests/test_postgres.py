"""The Django app on PostgreSQL: its test suite run against a private PostgreSQL server."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from redisbeat_testkit.postgres import PostgresServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    # Not pytest's tmp_path: as root the server runs as "postgres", which cannot enter it.
    directory = Path(tempfile.mkdtemp(prefix="redisbeat-pg-"))
    directory.chmod(0o755)
    server = PostgresServer(directory / "pg").start()
    yield server
    server.stop()


#: The Django app's whole suite, one test at a time: about 2 minutes on 2 cores, over 3 on a
#: loaded machine, which the suite's default limit per test (180 s) does not allow.
SUITE_SECONDS = 600


@pytest.mark.timeout(SUITE_SECONDS + 30)
def test_the_django_app_passes_its_tests_on_postgresql(postgres: PostgresServer) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/djangotests",
            "--ignore=tests/djangotests/test_django_browser.py",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env={**os.environ, "TEST_DATABASE_URL": postgres.url},
        capture_output=True,
        text=True,
        timeout=SUITE_SECONDS,
        check=False,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary, summary
