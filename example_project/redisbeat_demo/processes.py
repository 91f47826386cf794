"""The demo's child processes: each in its own process group, its output in a log file.

Every child gets a session (and so a process group) of its own, so that a Ctrl-C in the
terminal reaches only the runner, which stops them in order; stopping a child ends with
SIGKILL to its whole group, which takes any grandchild (the worker's pool) with it. On
Linux each child also gets SIGTERM if the runner itself dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; best effort, Linux only.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    """One started process."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    #: Set once the whole process group is known to be gone.
    swept: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill_group(self) -> None:
        """SIGKILL whatever is left in the child's process group, then reap the child."""
        if self.swept:
            return  # the group id may belong to someone else by now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)
        # Orphaned grandchildren die a moment later, once init reaps them. Linux does not
        # hand out a process group's id again while any process is still in that group.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                os.killpg(self.pid, 0)
            except (ProcessLookupError, PermissionError):
                self.swept = True
                return
            time.sleep(0.02)


class Children:
    """The processes started so far, recorded in a pids file as they start."""

    def __init__(self, pids_file: Path, env: dict[str, str], cwd: Path) -> None:
        self.pids_file = pids_file
        self.env = env
        self.cwd = cwd
        self.started: list[Child] = []

    def start(self, name: str, argv: list[str], log: Path) -> Child:
        with log.open("wb") as handle:
            popen = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        child = Child(name, popen, log)
        self.started.append(child)
        self._write_pids()
        return child

    def python(self, name: str, args: list[str], log: Path) -> Child:
        return self.start(name, [sys.executable, *args], log)

    def _write_pids(self) -> None:
        data = {
            "runner": os.getpid(),
            "processes": {c.name: {"pid": c.pid, "pgid": c.pid} for c in self.started},
        }
        self.pids_file.write_text(json.dumps(data, indent=2))

    def stop(
        self, children: list[Child], grace: float, hurry: Callable[[], bool] = lambda: False
    ) -> None:
        """SIGTERM these children, wait up to ``grace`` seconds, then SIGKILL their groups."""
        for child in children:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(c.alive() for c in children) and time.monotonic() < deadline and not hurry():
            time.sleep(0.05)
        for child in children:
            child.kill_group()

    def stop_all(self, grace: float) -> None:
        """Stop, newest first, every child still running; sweep every group."""
        self.stop(list(reversed(self.started)), grace)


def run_to_end(
    child: Child, timeout: float, interrupted: Callable[[], bool], children: Children
) -> int:
    """Wait for a short-lived child (a setup command); stop it if the runner is asked to stop."""
    deadline = time.monotonic() + timeout
    while child.alive():
        if interrupted() or time.monotonic() > deadline:
            children.stop([child], 2.0)
            return -1
        time.sleep(0.05)
    child.kill_group()
    return int(child.popen.returncode)
