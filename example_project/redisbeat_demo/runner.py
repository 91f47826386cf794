"""The demo: a private Redis, two beats, a worker and the Django admin, and what they do.

Environment:

- ``DEMO_SECONDS``: run this long, then stop and exit non-zero if a check failed; unset,
  run until Ctrl-C (SIGINT) or SIGTERM.
- ``DEMO_HTTP_PORT``: the Django server's port (default 8000).
- ``DEMO_STATE_DIR``: the database, logs, pids and summary (default ``example_project/.demo``).
- ``REDIS_URL``: use this Redis instead of starting a private one.
- ``DATABASE_URL``: a PostgreSQL database instead of SQLite (needs psycopg).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from .processes import Child, Children, run_to_end
from .redis_server import DemoError, PrivateRedis, wait_for_redis
from .report import EventTail, Execution, Summary, beat_pid, describe, summarize

PROJECT = Path(__file__).resolve().parent.parent
BEATS = 2
SENT_LOG_LINE = "Scheduler: Sending due task"
USERNAME, PASSWORD = "admin", "redisbeat-demo"
SETUP = ("migrate", "demo_setup")
WORKER_ARGS = ["-m", "celery", "-A", "shop", "worker", "--loglevel", "INFO", "--concurrency", "2"]
WORKER_ARGS += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-n", "demo@%h"]
BEAT_ARGS = ["-m", "celery", "-A", "shop", "beat", "-S", "redisbeat.RedisScheduler"]
BEAT_ARGS += ["--loglevel", "INFO", "--pidfile", ""]


@dataclass(frozen=True)
class Options:
    """What the environment asks for (see the module docstring)."""

    seconds: float | None
    http_port: int
    state_dir: Path
    redis_url: str | None

    @classmethod
    def from_env(cls) -> Options:
        raw = os.environ.get("DEMO_SECONDS", "").strip()
        try:
            seconds = float(raw) if raw else None
            port = int(os.environ.get("DEMO_HTTP_PORT", "8000"))
        except ValueError as exc:
            raise DemoError(f"DEMO_SECONDS and DEMO_HTTP_PORT must be numbers ({exc})") from None
        if seconds is not None and seconds <= 0:
            raise DemoError(f"DEMO_SECONDS must be positive, got {raw}")
        state = Path(os.environ.get("DEMO_STATE_DIR") or PROJECT / ".demo").resolve()
        return cls(seconds, port, state, os.environ.get("REDIS_URL") or None)


class Demo:
    """One run: start everything, show the task runs, stop everything, check what ran."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.state = options.state_dir
        self.events_file = self.state / "events.jsonl"
        self.stop_reason = ""
        self.force = False
        self.children = Children(self.state / "pids.json", {}, PROJECT)
        self.redis = PrivateRedis(self.children, self.state / "redis.log")
        self.events = EventTail(self.events_file)
        self.beats: list[Child] = []
        self.labels: dict[int, str] = {}
        self.executions: list[Execution] = []
        self.web_status: int | None = None
        self.web_url = f"http://127.0.0.1:{options.http_port}/admin/login/"
        self.start_ms = self.stop_ms = 0
        self.problem = ""

    # -- signals ------------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_reason:
            self.force = True  # a second Ctrl-C: stop without waiting
        self.stop_reason = signal.Signals(signum).name

    def interrupted(self) -> bool:
        return bool(self.stop_reason)

    # -- the whole run ------------------------------------------------------------------------

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        self.state.mkdir(parents=True, exist_ok=True)
        periods: dict[str, float] = {}
        try:
            self.check_port()
            url = self.start_redis()
            self.children.env = self.child_env(url)
            periods = self.setup_django()
            if not self.interrupted():
                self.start_services()
            if self.beats:
                self.watch()
                self.stop_ms = int(time.time() * 1000)
                self.shutdown()
        except DemoError as exc:
            say(f"\ndemo: {exc}", err=True)
            return 2
        finally:
            self.children.stop_all(grace=0.5 if self.force else 5.0)
            self.redis.remove()
        if not self.beats:
            say(f"demo: stopped ({self.stop_reason}) before the beats started")
            return 130
        summary = self.summarize(periods)
        say("\n" + summary.text(self.beat_ids()))
        return 0 if summary.ok else 1

    def check_port(self) -> None:
        port = self.options.http_port
        with socket.socket() as s:
            # As the Django server does, so a connection in TIME_WAIT does not count.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                raise DemoError(
                    f"port {port} for the Django server is not free ({exc.strerror}); "
                    "set DEMO_HTTP_PORT to another port"
                ) from None

    # -- Redis --------------------------------------------------------------------------------

    def start_redis(self) -> str:
        if self.options.redis_url:
            wait_for_redis(self.options.redis_url, 3.0, self.interrupted)
            say(f"Redis: {self.options.redis_url} (from REDIS_URL)")
            return self.options.redis_url
        url = self.redis.start(self.interrupted)
        pid = self.redis.child.pid if self.redis.child else "?"
        say(f"Redis: private redis-server at {url} (pid {pid})")
        return url

    def child_env(self, redis_url: str) -> dict[str, str]:
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "DEMO_EVENTS_FILE": str(self.events_file),
            "DJANGO_SETTINGS_MODULE": "shop.settings",
            "PYTHONUNBUFFERED": "1",
        }
        env.setdefault("SQLITE_PATH", str(self.state / "db.sqlite3"))
        return env

    # -- Django -------------------------------------------------------------------------------

    def setup_django(self) -> dict[str, float]:
        periods_file = self.state / "periods.json"
        steps = [
            ("migrate", ["manage.py", "migrate", "--noinput"]),
            ("demo_setup", ["manage.py", "demo_setup", "--periods", str(periods_file)]),
        ]
        for name, args in steps:
            child = self.children.python(name, args, self.state / f"{name}.log")
            code = run_to_end(child, 120.0, self.interrupted, self.children)
            if self.interrupted():
                return {}
            if code != 0:
                raise DemoError(f"manage.py {name} failed (exit {code}):\n{child.tail()}")
        say(f"Django: database ready; admin login {USERNAME} / {PASSWORD}")
        periods: dict[str, float] = json.loads(periods_file.read_text())
        return periods

    # -- the services -------------------------------------------------------------------------

    def start_services(self) -> None:
        self.events_file.write_bytes(b"")
        worker = self.children.python(
            "worker",
            WORKER_ARGS,
            self.state / "worker.log",
        )
        self.children.python(
            "web",
            ["manage.py", "runserver", f"127.0.0.1:{self.options.http_port}", "--noreload"],
            self.state / "web.log",
        )
        self.wait_for_log(worker, " ready.", 60.0)
        if self.interrupted():
            return
        for n in range(1, BEATS + 1):
            beat = self.children.python(
                f"beat-{n}",
                [*BEAT_ARGS, "--schedule", str(self.state / f"beat-{n}-unused-schedule")],
                self.state / f"beat-{n}.log",
            )
            self.beats.append(beat)
            self.labels[beat.pid] = beat.name
        self.start_ms = int(time.time() * 1000)
        started = ", ".join(f"{b.name} (pid {b.pid})" for b in self.beats)
        say(f"Celery: worker (pid {worker.pid}), {started}; logs in {self.state}")
        until = f"for {self.options.seconds:g} s" if self.options.seconds else "until Ctrl-C"
        say(f"Running {until}. Each line is one task run, with the beat that sent it.\n")

    def wait_for_log(self, child: Child, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in child.log.read_text(errors="replace"):
            if not child.alive():
                raise DemoError(f"process {child.name!r} exited at start:\n{child.tail()}")
            if time.monotonic() > deadline:
                raise DemoError(
                    f"process {child.name!r} did not start in {timeout:g} s:\n{child.tail()}"
                )
            if self.interrupted():
                return
            time.sleep(0.05)

    def watch(self) -> None:
        """Print executions as they come, until the time is up, a signal, or a child dies."""
        end = time.monotonic() + self.options.seconds if self.options.seconds else None
        next_web_try = 0.0
        while not self.interrupted() and (end is None or time.monotonic() < end):
            self.read_events(show=True)
            dead = [c for c in self.children.started if c.name not in SETUP and not c.alive()]
            if dead:
                child = dead[0]
                self.problem = f"process {child.name!r} exited (code {child.popen.returncode})"
                say(f"\n{self.problem}; its log {child.log} ends with:\n{child.tail()}")
                break
            if self.web_status != 200 and time.monotonic() >= next_web_try:
                self.check_web()
                next_web_try = time.monotonic() + 1.0
            time.sleep(0.1)
        reason = self.problem or self.stop_reason or f"after {self.options.seconds:g} s"
        say(f"\nStopping ({reason}) ...")

    def check_web(self) -> None:
        try:
            with urllib.request.urlopen(self.web_url, timeout=2) as response:
                self.web_status = response.status
        except urllib.error.HTTPError as exc:
            self.web_status = exc.code
        except (urllib.error.URLError, OSError):
            return
        if self.web_status == 200:
            say(
                f"Admin: http://127.0.0.1:{self.options.http_port}/admin/ "
                f"(login {USERNAME} / {PASSWORD}), answered 200"
            )

    def read_events(self, show: bool) -> None:
        for execution in self.events.read():
            self.executions.append(execution)
            if show:
                say(describe(execution, self.labels))

    # -- stopping -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Beats first (graceful), then let the worker run what they sent, then the rest."""
        self.children.stop(self.beats, 10.0, hurry=lambda: self.force)
        logged = sum(self.logged_sent().values())
        deadline = time.monotonic() + 10.0
        while not self.force and time.monotonic() < deadline:
            self.read_events(show=True)
            if sum(1 for e in self.executions if beat_pid(e.beat) in self.labels) >= logged:
                break
            time.sleep(0.05)
        # Redis last (with the rest, by run()): the worker's warm shutdown still talks to it.
        services = [c for c in self.children.started if c.name in ("worker", "web")]
        self.children.stop(services, 10.0, hurry=lambda: self.force)
        self.read_events(show=True)

    def logged_sent(self) -> dict[str, int]:
        counts = {}
        for beat in self.beats:
            with contextlib.suppress(OSError):
                counts[beat.name] = beat.log.read_text(errors="replace").count(SENT_LOG_LINE)
        return counts

    def beat_ids(self) -> dict[str, str]:
        """beat-1 -> ``host:pid``, from the executions (the beat id names the host)."""
        ids = {label: f"pid {pid}" for pid, label in self.labels.items()}
        for e in self.executions:
            pid = beat_pid(e.beat)
            if e.beat and pid in self.labels:
                ids[self.labels[pid]] = ":".join(e.beat.split(":")[:-1])
        return ids

    def summarize(self, periods: dict[str, float]) -> Summary:
        self.read_events(show=False)
        summary = summarize(
            self.executions,
            labels=self.labels,
            logged_sent=self.logged_sent(),
            periods=periods,
            start_ms=self.start_ms,
            stop_ms=self.stop_ms or int(time.time() * 1000),
            web_status=self.web_status,
            web_url=self.web_url,
        )
        if self.problem:
            summary.failures.append(self.problem)
        (self.state / "summary.json").write_text(json.dumps(summary.as_dict(), indent=2))
        return summary


def say(text: str, *, err: bool = False) -> None:
    """Print a line; a closed pipe (``make demo | head``) must not cut the clean-up short."""
    stream = sys.stderr if err else sys.stdout
    try:
        print(text, file=stream, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())


def main() -> int:
    try:
        options = Options.from_env()
    except DemoError as exc:
        say(f"demo: {exc}", err=True)
        return 2
    return Demo(options).run()
