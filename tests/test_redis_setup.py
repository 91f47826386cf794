"""A Redis set up otherwise than the settings say, and one that keeps nothing on disk.

No password where the server wants one, a wrong one, a database the server does not have, a
server nobody answers at: each is one line that names the URL (its password masked) and the
fix, with an exit code of its own on the command line; a beat stops on the first three after
a few attempts. A Redis that keeps nothing on disk is said once, as a WARNING, by a beat at
its start and by ``status``. Real redis-server processes, the real command line, real beats.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result
from test_cli import celery_cli
from test_dispatcher import Recorder, dispatcher

from redisbeat import ScheduleStore, StoreError, StoreRefused, StoreUnavailable
from redisbeat.beat.outage import FATAL_ATTEMPTS, FATAL_RETRY_SECONDS, GaveUp
from redisbeat.cli import main
from redisbeat.config import Config
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.ports import free_port, wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer

#: The password of the locked server's default user, and of its ACL user "app".
PASSWORD = secrets.token_hex(8)
#: What a wrong password is (it must never be printed).
WRONG = "wrong-" + secrets.token_hex(4)
SAID_ONCE = "keeps nothing on disk"


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that requires a password, with 4 databases and an ACL user "app"."""
    server = RedisServer(
        tmp_path_factory.mktemp("locked"),
        extra_args=["--requirepass", PASSWORD, "--databases", "4"],
        client_kwargs={"password": PASSWORD},
    ).start()
    admin = redis.Redis(port=server.port, password=PASSWORD)
    admin.execute_command("ACL", "SETUSER", "app", "on", f">{PASSWORD}", "~*", "&*", "+@all")  # type: ignore[no-untyped-call]
    admin.close()
    yield server
    server.stop()


def url(server: RedisServer, login: str = "", db: int = 0) -> str:
    return f"redis://{login}{'@' if login else ''}127.0.0.1:{server.port}/{db}"


def redisbeat(target: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["--url", target, *args], env={"COLUMNS": "250"})


# -- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("login", "db", "code", "masked", "said", "fix"),
    [
        ("", 0, 7, "", "requires a password and none was given (NOAUTH", "put it in the URL"),
        (
            f":{WRONG}",
            0,
            8,
            ":***@",
            "rejected the login (WRONGPASS invalid username-password pair",
            "check them in the URL or in redisbeat_redis_options",
        ),
        (
            f"app:{WRONG}",
            0,
            8,
            "app:***@",
            "rejected the login (WRONGPASS invalid username-password pair",
            "check them in the URL or in redisbeat_redis_options",
        ),
        (
            f":{PASSWORD}",
            9,
            11,
            ":***@",
            "has no such database (ERR DB index is out of range)",
            "must be below the server's 'databases' setting",
        ),
    ],
    ids=["no password", "a wrong password", "a wrong password of an ACL user", "no such database"],
)
def test_each_setup_error_is_one_line_naming_the_masked_url_and_the_fix_with_its_own_exit_code(
    locked: RedisServer, login: str, db: int, code: int, masked: str, said: str, fix: str
) -> None:
    for command in (["status"], ["list"], ["add", "a", "proj.ping", "--every", "10s"]):
        result = redisbeat(url(locked, login, db), *command)
        assert result.exit_code == code, result.output
        [line] = result.output.strip().splitlines()
        where = f"redis://{masked}127.0.0.1:{locked.port}/{db}"
        assert line.startswith(f"Error: Redis at {where} {said}"), line
        assert fix in line and WRONG not in line and PASSWORD not in line


def test_a_server_nobody_answers_at_is_exit_code_3_naming_the_url_and_what_to_check() -> None:
    target = f"redis://:{WRONG}@127.0.0.1:{free_port()}/0"
    result = redisbeat(target, "status")
    assert result.exit_code == 3, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"Error: cannot reach Redis at {target.replace(WRONG, '***')} ")
    assert "Connection refused" in line and "check the host and port" in line
    assert WRONG not in line


# -- the store API ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("login", "db", "kind", "classes"),
    [
        ("", 0, "noauth", (StoreUnavailable, redis.AuthenticationError)),
        (f":{WRONG}", 0, "auth", (StoreUnavailable, redis.AuthenticationError)),
        (f":{PASSWORD}", 9, "db", (StoreRefused, redis.ResponseError)),
    ],
    ids=["no password", "a wrong password", "no such database"],
)
def test_the_store_api_raises_what_it_raised_with_the_trouble_and_the_masked_url(
    locked: RedisServer, prefix: str, login: str, db: int, kind: str, classes: tuple[type, ...]
) -> None:
    store = ScheduleStore.from_config(Config(url(locked, login, db), key_prefix=prefix))
    try:
        with pytest.raises(StoreError) as raised:
            store.get("a")
    finally:
        store.close()
    assert isinstance(raised.value, classes)
    assert raised.value.trouble.kind == kind
    assert raised.value.where == url(locked, login, db).replace(WRONG, "***").replace(
        PASSWORD, "***"
    )
    assert raised.value.describe().startswith(f"Redis at {raised.value.where} ")


# -- a beat -------------------------------------------------------------------------------------


def test_a_beat_stops_on_a_login_or_database_retrying_cannot_mend_in_one_critical_line(
    locked: RedisServer, redis_server: RedisServer, beats_for: Any, prefix: str
) -> None:
    beats: Beats = beats_for(redis_server, prefix)  # its broker is the open server
    cases = {
        7: ("", 0, "requires a password and none was given"),
        8: (f":{WRONG}", 0, "rejected the login (WRONGPASS"),
        11: (f":{PASSWORD}", 9, "has no such database"),
    }
    started = {
        code: beats.start(1, TEST_STORE_URL=url(locked, login, db))[0]
        for code, (login, db, _) in cases.items()
    }
    for code, beat in started.items():
        wait_until(lambda b=beat: b.process.poll() is not None, 60, f"the beat to exit {code}")
    for code, beat in started.items():
        output = beat.output()
        assert beat.process.returncode == code, output
        [error] = [x for x in output.splitlines() if "ERROR/" in x]
        [critical] = [x for x in output.splitlines() if "CRITICAL/" in x]
        login, db, said = cases[code]
        where = url(locked, login, db).replace(WRONG, "***").replace(PASSWORD, "***")
        assert f"Redis at {where} {said}" in critical, critical
        assert f"{FATAL_ATTEMPTS} attempts in all, then this beat stops" in error
        assert f"still so after {FATAL_ATTEMPTS} attempts over" in critical
        assert "Traceback" not in output and WRONG not in output and PASSWORD not in output
        assert "stopped without reaching Redis" not in output


def test_a_dispatcher_gives_up_on_a_rejected_login_at_its_last_attempt_and_not_before(
    locked: RedisServer, prefix: str
) -> None:
    store = ScheduleStore.from_config(Config(url(locked, f":{WRONG}"), key_prefix=prefix))
    d = dispatcher(store, Recorder())
    for _ in range(FATAL_ATTEMPTS - 1):
        assert d.tick() == FATAL_RETRY_SECONDS
    with pytest.raises(GaveUp) as stopped:
        d.tick()
    assert stopped.value.exit_code == 8
    d.close()


# -- persistence --------------------------------------------------------------------------------


def test_a_beat_on_a_redis_that_keeps_nothing_on_disk_warns_once_at_start_naming_what_is_lost(
    redis_server: RedisServer, beats_for: Any, prefix: str
) -> None:
    beats: Beats = beats_for(redis_server, prefix, TEST_HEARTBEAT="0.5")
    [warned] = beats.start(1)
    [silenced] = beats.start(1, TEST_PREFIX=f"{prefix}-2", TEST_NO_PERSISTENCE_WARNING="1")
    store = ScheduleStore(redis.Redis(port=redis_server.port, decode_responses=True), prefix=prefix)
    try:
        wait_until(lambda: store.beats(), 30, "the beat to heartbeat")
        first = store.beats()[0].last_seen
        # Two more heartbeats (0.5 s apart): the warning is not said again.
        wait_until(lambda: (store.beats()[0].last_seen - first).total_seconds() >= 1, 10, "beats")
    finally:
        store.close()
    wait_until(lambda: " started on " in silenced.output(), 30, "the silenced beat to start")
    beats.stop_all()
    [line] = [x for x in warned.output().splitlines() if SAID_ONCE in x]
    assert "WARNING/" in line and f"Redis at 127.0.0.1:{redis_server.port} db=0" in line
    for lost in ("store API", "pending delayed task", "run state and history", "appendonly yes"):
        assert lost in line, line
    assert "redisbeat_persistence_warning = False" in line
    assert SAID_ONCE not in silenced.output()


def private_server(directory: Path, *args: str) -> RedisServer:
    directory.mkdir()
    return RedisServer(directory, extra_args=list(args)).start()


@pytest.mark.parametrize(
    ("args", "user", "warned"),
    [
        ((), None, True),
        (("--appendonly", "yes"), None, False),
        (("--save", "900 1"), None, False),
        ((), "no-config", False),
    ],
    ids=["nothing on disk", "AOF", "RDB snapshots", "CONFIG refused by the ACL"],
)
def test_the_warning_is_said_only_where_the_server_says_it_keeps_nothing(
    tmp_path: Path,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    args: tuple[str, ...],
    user: str | None,
    warned: bool,
) -> None:
    server = private_server(tmp_path / "redis", *args)
    login = ""
    if user is not None:
        admin = redis.Redis(port=server.port)
        rules = ["on", ">pw", "~*", "&*", "+@all", "-config"]
        admin.execute_command("ACL", "SETUSER", user, *rules)  # type: ignore[no-untyped-call]
        admin.close()
        login = f"{user}:pw"
    store = ScheduleStore.from_config(Config(url(server, login), key_prefix=prefix))
    try:
        with caplog.at_level(logging.INFO, logger="redisbeat"):
            d = dispatcher(store, Recorder(), persistence_warning=True)
            d.tick()
            d.tick()
        assert store.volatile_servers() == ([store.connection.describe()] if warned else [])
        d.close()
    finally:
        server.stop()
    said = [r for r in caplog.records if SAID_ONCE in r.getMessage()]
    assert [r.levelno for r in said] == ([logging.WARNING] if warned else [])
    assert any(" started on " in r.getMessage() for r in caplog.records)


def test_status_warns_on_stderr_and_in_its_json_unless_the_setting_silences_it(
    redis_server: RedisServer, own_redis: RedisServer, prefix: str
) -> None:
    result = redisbeat(redis_server.url(), "--prefix", prefix, "status", "--json")
    assert result.exit_code == 5  # no beat: unhealthy, as before
    report = json.loads(result.stdout)
    [warning] = report["warnings"]
    assert SAID_ONCE in warning and f"127.0.0.1:{redis_server.port} db=0" in warning
    assert [x for x in result.stderr.splitlines() if SAID_ONCE in x] == [f"WARNING: {warning}"]
    table = redisbeat(redis_server.url(), "--prefix", prefix, "status")
    assert table.stderr.count(SAID_ONCE) == 1
    silenced = celery_cli(redis_server, prefix, "status", TEST_NO_PERSISTENCE_WARNING="1")
    assert silenced.returncode == 5 and SAID_ONCE not in silenced.stderr, silenced.stderr
    loud = celery_cli(redis_server, prefix, "status")
    assert loud.returncode == 5 and SAID_ONCE in loud.stderr, loud.stderr
    kept = redisbeat(own_redis.url(), "--prefix", prefix, "status", "--json")  # AOF
    assert json.loads(kept.stdout)["warnings"] == [] and SAID_ONCE not in kept.stderr


def test_status_on_a_cluster_warns_for_each_master_that_keeps_nothing_on_disk(
    rig: ClusterRig, prefix: str
) -> None:
    def warned() -> list[str]:
        result = redisbeat(rig.url, "--prefix", prefix, "status", "--json")
        return list(json.loads(result.stdout)["warnings"])

    masters = rig.masters()
    assert len(warned()) == len(masters) == 3
    node = rig.node_client(masters[0])
    node.config_set("appendonly", "yes")
    try:
        said = warned()
    finally:
        node.config_set("appendonly", "no")
        node.close()
    assert len(said) == 2 and not any(f":{masters[0]} in redis cluster" in w for w in said)
    assert all(f":{port} in redis cluster" in " ".join(said) for port in masters[1:])
