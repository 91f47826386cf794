"""A private PostgreSQL server, in a temporary directory on a free port."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ports import free_port


def bindir() -> Path:
    """Where initdb and pg_ctl live: $PG_BINDIR, Debian's versioned dir, or the PATH."""
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if debian:
        return Path(debian[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError(
        "PostgreSQL's initdb was not found: install PostgreSQL (Debian/Ubuntu: "
        "sudo apt-get install postgresql) or set PG_BINDIR, then run the tests again"
    )


def _version(path: str) -> int:
    return int(Path(path).parent.parent.name) if Path(path).parent.parent.name.isdigit() else 0


@dataclass
class PostgresServer:
    """initdb + pg_ctl in ``directory``; as root, the server runs as the ``postgres`` user."""

    directory: Path
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        kwargs: dict[str, Any] = {}
        if os.geteuid() == 0:
            kwargs["user"] = "postgres"  # initdb refuses to run as root
        result = subprocess.run(
            [str(bindir() / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **kwargs,
        )
        if result.returncode:
            raise RuntimeError(f"{args[0]} failed: {result.stdout}{result.stderr}")

    def start(self) -> PostgresServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        data = str(self.directory / "data")
        self._run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", data, "-o", options, "-l", f"{self.directory}/log", "-w", "start")
        return self

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "-w", "stop")
