"""Which redisbeat and which Redis server the tests run against.

``make matrix`` runs the tests on a wheel installed in a venv of their own, and ``make
servers`` on other servers (tests/matrix); the environment says which, and these tests fail
a run that would test something else: the source tree instead of the wheel, another server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import redis
from matrix.servers import label

import redisbeat
from redisbeat_testkit.processes import environ_without_django
from redisbeat_testkit.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
#: The floor the README claims.
OLDEST_REDIS = (6, 2)


def test_redisbeat_is_imported_from_where_this_run_installed_it(tmp_path: Path) -> None:
    installed = Path(os.environ.get("REDISBEAT_TEST_INSTALLED_AT", ROOT)).resolve()
    imported = Path(redisbeat.__file__).resolve()
    assert imported.is_relative_to(installed), f"{imported} is not under {installed}"
    # A beat is a process of its own, started as the test kit starts one: the same redisbeat.
    beat = subprocess.run(
        [sys.executable, "-c", "import redisbeat; print(redisbeat.__file__)"],
        cwd=tmp_path,
        env=environ_without_django(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(beat.stdout.strip()).resolve() == imported


def test_the_redis_server_is_the_one_this_run_chose(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url())
    info = {k: str(v) for k, v in client.info("server").items()}
    client.close()
    wanted = os.environ.get("REDISBEAT_TEST_SERVER_IS")
    if wanted:
        assert label(info) == wanted
    major, minor = (int(part) for part in info["redis_version"].split(".")[:2])
    assert (major, minor) >= OLDEST_REDIS, info["redis_version"]
