"""What cannot work is refused at once, in one line: a Redis server without a command
redisbeat calls (a real redis-server with ZMSCORE renamed away stands for Redis 6.0), and a
kombu whose Redis transport refuses the installed redis-py (a real venv with redis-py 5.3.1).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import redis
from test_cli import celery_cli

from redisbeat import Incompatible, ScheduleStore, StoreIncompatible
from redisbeat.config import Config
from redisbeat.store.server import NEWER_COMMANDS, Server, refusal
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer

WHERE = "10.0.0.5:6379 db=0"
#: A beat that sends every second, were it to run.
EVERY_SECOND = json.dumps({"tick": {"task": "proj.ping", "schedule": 1}})


def server_name(server: RedisServer) -> str:
    """The server as the refusal names it ("Redis 7.0.15"; a Valkey if the kit runs one)."""
    client = redis.Redis(port=server.port, decode_responses=True, protocol=2)  # needs no HELLO
    try:
        return str(Server.from_fields(client.info("server")))
    finally:
        client.close()


def named(server: RedisServer) -> str:
    """How a refusal names the server: "Redis 7.0.15 at 127.0.0.1:PORT db=0"."""
    return f"{server_name(server)} at 127.0.0.1:{server.port} db=0"


def user_url(server: RedisServer, user: str) -> str:
    return f"redis://{user}:pw@127.0.0.1:{server.port}/0"


def raw_commands(client: redis.Redis, *args: str) -> Any:
    """A COMMAND subcommand's reply as Redis sends it (redis-py's parsing expects a table)."""
    client.set_response_callback("COMMAND", lambda reply, **_: reply)
    return client.execute_command("COMMAND", *args)


def as_map(reply: Any) -> dict[str, Any]:
    """A RESP3 map, or the RESP2 array that spells it."""
    return dict(reply) if isinstance(reply, dict) else dict(zip(*[iter(reply)] * 2, strict=True))


# -- the decision -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "missing", "expected"),
    [
        ({"redis_version": "6.0.9"}, ["ZMSCORE"], "Redis 6.0.9 at 10.0.0.5:6379 db=0 is too old"),
        ({"redis_version": "6.0.9"}, [], "Redis 6.0.9 at 10.0.0.5:6379 db=0 is too old"),
        ({"redis_version": "6.2.14"}, [], None),
        ({"redis_version": "7.0.15"}, [], None),
        (
            {"redis_version": "7.0.15"},
            ["ZMSCORE"],
            "Redis 7.0.15 at 10.0.0.5:6379 db=0 has no ZMSCORE command (Redis 6.2+)",
        ),
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"}, [], None),
        (
            {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"},
            ["ZMSCORE"],
            "Valkey 9.1.2 at 10.0.0.5:6379 db=0 has no ZMSCORE command (Redis 6.2+)",
        ),
        # HELLO's reply, where Redis 6.2 and later say it (every user may ask).
        ({"server": "redis", "version": "7.0.15", "mode": "standalone"}, [], None),
        (
            {"server": "valkey", "version": "9.1.2"},
            ["ZMSCORE"],
            "Valkey 9.1.2 at 10.0.0.5:6379 db=0 has no ZMSCORE command (Redis 6.2+)",
        ),
        (None, [], None),  # INFO and COMMAND denied: nothing to go by
        (None, ["ZMSCORE"], "the server at 10.0.0.5:6379 db=0 has no ZMSCORE command"),
    ],
)
def test_the_server_is_refused_by_its_version_and_commands_in_words_that_name_it(
    info: dict[str, str] | None, missing: list[str], expected: str | None
):
    server = None if info is None else Server.from_fields(info)
    said = refusal(server, missing, WHERE)
    if expected is None:
        assert said is None
        return
    assert said is not None and said.startswith(expected) and "\n" not in said
    if "too old" in said:
        assert "needs Redis 6.2 or later" in said and "upgrade the server" in said
    else:
        assert "rename-command" in said and "6.2" in said


def test_info_and_hello_name_redis_and_valkey_by_their_own_versions():
    assert str(Server.from_fields({"redis_version": "6.0.9"})) == "Redis 6.0.9"
    info = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"}
    hello = {"server": "valkey", "version": "9.1.2", "mode": "cluster"}
    for fields in (info, hello):
        assert str(Server.from_fields(fields)) == "Valkey 9.1.2"
        assert Server.from_fields(fields).redis_release == (7, 2)
    assert Server.from_fields(hello).mode == "cluster"
    assert (
        Server.from_fields({"redis_version": "7.0.15", "redis_mode": "cluster"}).mode == "cluster"
    )


def test_the_newer_commands_declared_are_those_redisbeat_calls_that_redis_6_0_lacks(
    redis_server: RedisServer,
):
    store = files("redisbeat.store")
    scripts = (store / "lua").iterdir()
    words = {w for s in scripts for w in re.findall(r"['\"]([A-Z]+)['\"]", s.read_text())}
    # And what the store's modules call through redis-py (``pipe.zmscore(...)``): a method
    # that is no Redis command has no COMMAND DOCS entry.
    modules = [m for m in store.iterdir() if m.name.endswith(".py")]
    words |= {w.upper() for m in modules for w in re.findall(r"\.([a-z]+)\(", m.read_text())}
    client = redis.Redis(port=redis_server.port, decode_responses=True)
    try:
        docs = raw_commands(client, "DOCS", *sorted(words))  # when each command came
    except redis.ResponseError:
        pytest.skip("this server has no COMMAND DOCS (Redis 7.0 brought it)")
    finally:
        client.close()
    since = {name.upper(): as_map(doc)["since"] for name, doc in as_map(docs).items()}
    assert "ZADD" in since  # the scripts are read: a command, not an argument, is found
    assert "ZMSCORE" in since  # and the modules
    release = {name: tuple(int(n) for n in s.split(".")[:2]) for name, s in since.items()}
    newer = {name: f"{r[0]}.{r[1]}" for name, r in release.items() if r > (6, 0)}
    assert newer == NEWER_COMMANDS


# -- the store --------------------------------------------------------------------------------


def test_a_store_on_a_server_without_a_command_refuses_every_call_in_one_line(
    server_without_zmscore: RedisServer, prefix: str
):
    store = ScheduleStore.from_config(Config(server_without_zmscore.url(), key_prefix=prefix))
    try:
        for _ in range(2):  # asked once; the refusal stays
            with pytest.raises(StoreIncompatible) as caught:
                len(store)
            said = str(caught.value)
            assert said.startswith(named(server_without_zmscore))
            assert "ZMSCORE" in said and "6.2" in said and "\n" not in said
            assert caught.value.trouble.kind == "incompatible"
    finally:
        store.close()


def test_where_hello_takes_no_bare_call_info_names_the_server(tmp_path: Path, prefix: str):
    """Redis 6.0 answers HELLO only with a protocol version: INFO says what it is. (Here
    HELLO is gone altogether, and the client speaks RESP2, which needs none.)"""
    server = RedisServer(
        tmp_path,
        extra_args=["--rename-command", "HELLO", "", "--rename-command", "ZMSCORE", ""],
        client_kwargs={"protocol": 2},
    ).start()
    store = ScheduleStore.from_config(
        Config(server.url(), key_prefix=prefix, redis_options={"protocol": 2})
    )
    try:
        with pytest.raises(StoreIncompatible) as caught:
            len(store)
        assert str(caught.value).startswith(f"{named(server)} has no ZMSCORE command")
    finally:
        store.close()
        server.stop()


def test_a_user_denied_command_skips_that_part_of_the_check_and_is_not_stopped(
    redis_server: RedisServer, server_without_zmscore: RedisServer, prefix: str
):
    user = f"limited-{prefix}"
    servers = (redis_server, server_without_zmscore)
    for server in servers:
        with redis.Redis(port=server.port) as admin:
            admin.acl_setuser(
                user,
                enabled=True,
                passwords=["+pw"],
                keys=["*"],
                channels=["*"],
                commands=["+@all", "-info", "-command"],
            )
    try:
        for server in servers:  # nothing to go by but HELLO: the store works as before
            store = ScheduleStore.from_config(Config(user_url(server, user), key_prefix=prefix))
            try:
                assert len(store) == 0
            finally:
                store.close()
        with redis.Redis(port=server_without_zmscore.port) as admin:
            admin.acl_setuser(user, enabled=True, commands=["+command|info"])
        url = user_url(server_without_zmscore, user)
        store = ScheduleStore.from_config(Config(url, key_prefix=prefix))
        try:
            with pytest.raises(StoreIncompatible) as caught:
                len(store)
            assert str(caught.value).startswith(f"{named(server_without_zmscore)} has no ZMSCORE")
        finally:
            store.close()
    finally:
        for server in servers:
            with redis.Redis(port=server.port) as admin:
                admin.acl_deluser(user)


# -- a beat, the command line -----------------------------------------------------------------


def test_a_beat_on_a_server_without_a_command_stops_at_once_in_one_line_having_sent_nothing(
    server_without_zmscore: RedisServer, prefix: str, beats_for: Any
):
    server = server_without_zmscore
    beats = beats_for(server, prefix, TEST_BEAT_SCHEDULE=EVERY_SECOND)
    [beat] = beats.start(1)
    wait_until(lambda: beat.process.poll() is not None, 15, "the beat to stop")
    output = beat.output()
    assert beat.process.returncode == Incompatible.exit_code, output
    [line] = [line for line in output.splitlines() if "ZMSCORE" in line]
    assert "CRITICAL" in line and named(server) in line and "6.2" in line
    assert "Traceback" not in output
    store, broker = redis.Redis(port=server.port), redis.Redis(port=server.port, db=1)
    try:
        assert store.keys(f"*{prefix}*") == []  # not registered, no beat_schedule written
        assert broker.llen("celery") == 0  # nothing sent
    finally:
        store.close()
        broker.close()


def test_the_command_line_says_it_in_one_line_with_an_exit_code_of_its_own(
    server_without_zmscore: RedisServer, prefix: str
):
    result = celery_cli(server_without_zmscore, prefix, "list")
    assert result.returncode == Incompatible.exit_code, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {named(server_without_zmscore)} ")
    assert "has no ZMSCORE command (Redis 6.2+)" in line and result.stdout == ""


# -- kombu and redis-py -----------------------------------------------------------------------

#: The redis-py kombu 5.7's Redis transport refuses (PyJWT: what it imports).
OLD_REDIS_PY = ["redis==5.3.1", "PyJWT==2.9.0"]


def venv_with_old_redis_py(directory: Path) -> Path:
    """A venv that runs this checkout with the dev venv's packages, but redis-py 5.3.1."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", directory], check=True)
    paths = {"base": str(directory), "platbase": str(directory)}
    own = Path(sysconfig.get_path("purelib", vars=paths))
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--target",
            own,
            *OLD_REDIS_PY,
        ],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, f"pip could not install {OLD_REDIS_PY}: {installed.stderr}"
    # After its own site-packages, so that its redis-py is the one imported.
    dev = sysconfig.get_path("purelib")
    (own / "dev-venv.pth").write_text(f"import site; site.addsitedir({dev!r})\n")
    return directory / "bin" / "python"


@pytest.mark.skipif(
    tuple(int(n) for n in version("kombu").split(".")[:2]) < (5, 7),
    reason="kombu before 5.7 does not check redis-py",
)
def test_a_beat_whose_kombu_refuses_its_redis_py_stops_before_the_loop_in_one_line(
    redis_server: RedisServer, prefix: str, beats_for: Any, tmp_path: Path
):
    python = venv_with_old_redis_py(tmp_path / "venv")
    beats = beats_for(redis_server, prefix, TEST_BEAT_SCHEDULE=EVERY_SECOND)
    beats.python = str(python)
    [beat] = beats.start(1)
    wait_until(lambda: beat.process.poll() is not None, 15, "the beat to stop")
    output = beat.output()
    assert beat.process.returncode == Incompatible.exit_code, output
    [line] = [line for line in output.splitlines() if "redis-py" in line]
    kombu = version("kombu")
    assert f"kombu {kombu}'s Redis transport needs redis-py 6.1.0 or later" in line
    assert "this environment has redis-py 5.3.1" in line and "pip install 'redis>=" in line
    assert "CRITICAL" in line and "Traceback" not in output
    store = redis.Redis(port=redis_server.port)
    try:
        assert store.keys(f"*{prefix}*") == []  # the beat never reached Redis
    finally:
        store.close()
