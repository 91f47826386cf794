"""RedisScheduler: Celery's beat ``Scheduler`` interface over a :class:`ScheduleStore`.

Run it with ``celery -A proj beat -S redisbeat.RedisScheduler`` (or set
``beat_scheduler = "redisbeat.RedisScheduler"``). Any number of beats may run at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from dataclasses import replace
from functools import cached_property
from types import FrameType
from typing import Any, NoReturn

from celery.beat import Scheduler

from ..config import Config
from ..errors import ConfigurationError, Incompatible
from ..schedule.bad_items import BadItem
from ..schedule.entry import Entry
from ..schedule.from_celery import read_config
from ..schedule.task_names import registered_tasks
from ..sending import Publisher
from ..store import ScheduleStore
from ..store.base import usual_or
from .collector import Collector
from .deploys import BeatSchedule
from .drivers import broker_timeouts, check_broker_driver
from .loop import Dispatcher, make_beat_id
from .outage import GaveUp

log = logging.getLogger(__name__)

#: app -> (pid, beat id): one id per beat process, whichever scheduler object asks (Celery
#: makes a second one just to print the banner).
_BEAT_IDS: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()


def process_beat_id(app: Any) -> str:
    """This process's beat id for ``app``: the same in the banner, headers and ``beats()``."""
    known = _BEAT_IDS.get(app)
    if known is None or known[0] != os.getpid():  # a forked child is a beat of its own
        known = _BEAT_IDS[app] = (os.getpid(), make_beat_id())
    return known[1]


class RedisScheduler(Scheduler):
    """Celery beat scheduler whose entries live in Redis, shared by every beat."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        try:
            config = Config.from_app(app)
        except ConfigurationError as exc:
            _stop_on(exc)
        #: What the store fills into a Crontab or Cron written without it (setup_schedule
        #: runs inside Scheduler.__init__, before the store exists).
        self._fill = (config.timezone, *usual_or(config.dst_gap, config.dst_fold))
        self._config_entries: list[Entry] = []
        self._bad_items: list[BadItem] = []
        self._beat_schedule: BeatSchedule | None = None
        self._busy = False
        self.stop_requested = False
        #: The exit status of a beat stopped by what it runs with (a store in a newer format,
        #: a password Redis rejects): None while it runs.
        self._stopped_with: int | None = None
        super().__init__(app, *args, **kwargs)
        # `celery beat --max-interval` reaches the scheduler, not the settings.
        self.config = replace(config, max_loop_interval=float(self.max_interval or 300))
        try:
            self.store = ScheduleStore.from_config(self.config)
        except ConfigurationError as exc:
            _stop_on(exc)
        beat_id = process_beat_id(app)
        # Through one producer, the scheduler's (Celery may make a new one after close()).
        self.publisher = Publisher(
            app, lambda: self.producer, beat_id, self.config.entry_cache_size
        )
        self.dispatcher = Dispatcher(
            self.store,
            self.config,
            self.publisher,
            beat_id=beat_id,
            on_heartbeat=self._on_heartbeat,
        )
        self.collector = Collector()

    # -- Celery's interface -------------------------------------------------------------------

    def setup_schedule(self) -> None:
        # Pushing the static entries to Redis waits for the first tick, which survives an
        # unreachable Redis; so does reporting the bad items (one line each, set aside in the
        # quarantine), which stop nothing. Filled as the store fills what it writes, so that
        # the digests (the deployment's version) change with the defaults: Celery's
        # timezone, redisbeat_dst_gap and _fold.
        # Checked against the tasks Celery's beat imported (and not sent to fail on a worker).
        entries, self._bad_items = read_config(self.app, tasks=registered_tasks(self.app))
        self._config_entries = [e.with_defaults(*self._fill) for e in entries]
        try:
            check_broker_driver(self.app)  # no I/O: a redis-py kombu refuses fails every send
        except Incompatible as exc:
            log.critical("redisbeat: %s", exc)  # one line: it says what to do
            raise SystemExit(exc.exit_code) from None  # Celery's loop has not begun
        self._install_signal_handlers()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        self.collector.start()
        self._busy = True
        try:
            self.dispatcher.stop_requested = self.stop_requested
            delay = self.dispatcher.tick()
        except (Incompatible, GaveUp) as exc:
            # One line, not a traceback: it says what to do. Celery's loop takes SystemExit
            # as a stop; close() turns it into a failing exit status.
            log.critical("redisbeat: %s", exc)
            self._stopped_with = exc.exit_code
            raise SystemExit(exc.exit_code) from None
        finally:
            self._busy = False
        if self.stop_requested:
            raise SystemExit()
        # The wait happens here rather than in Celery's loop so a change can cut it short.
        self.dispatcher.wait(self.collector.before_wait(delay))
        return 0

    @property
    def schedule(self) -> dict[str, Any]:
        # Entries stay in Redis: a beat never holds the whole schedule in memory.
        return {}

    @schedule.setter
    def schedule(self, value: Any) -> None:
        pass

    def sync(self) -> None:
        pass  # every change is written to Redis as it happens

    @cached_property
    def connection(self) -> Any:
        # Celery's, with a Redis broker's reply waited for as long as the store's (kombu
        # waits forever): a send that never ends would keep its batch from every beat.
        options = broker_timeouts(self.app, self.config)
        return self.app.connection_for_write(transport_options=options)

    def close(self) -> None:
        self.dispatcher.close()
        super().close()
        if self._stopped_with is not None:
            # Celery's beat exits with status 0 after a SystemExit from tick(); raised here,
            # past its handler, the status says the beat failed.
            raise SystemExit(self._stopped_with)

    @property
    def info(self) -> str:
        # Celery prints this under "scheduler" in the banner, at any log level.
        return "\n".join(
            [
                f"    . redisbeat -> {self.store.describe()}",
                f"    . beat id -> {self.dispatcher.beat_id}",
                "    . note -> beats only send tasks: a Celery worker runs them. Each send",
                "      is logged at --loglevel=INFO, with a summary line every "
                f"{self.config.summary_seconds:g} s.",
            ]
        )

    def _on_heartbeat(self, recorded: str | None) -> None:
        # Made at the first heartbeat: setup_schedule runs before the store exists.
        if self._beat_schedule is None:
            self._beat_schedule = BeatSchedule(
                self.store,
                self.dispatcher.beat_id,
                self._config_entries,
                grace=3 * self.config.heartbeat_seconds,
                bad=self._bad_items,
            )
        self._beat_schedule.heartbeat(recorded)

    # -- graceful stop ------------------------------------------------------------------------

    def _install_signal_handlers(self) -> None:
        # Celery's handler raises SystemExit wherever the beat is, which could cut a batch
        # in half; ours lets the batch in hand finish first.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_stop_signal)
            signal.signal(signal.SIGINT, self._on_stop_signal)

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True
        dispatcher = getattr(self, "dispatcher", None)
        if dispatcher is not None:
            dispatcher.stop_requested = True
        if not self._busy:
            raise SystemExit()


def _stop_on(exc: ConfigurationError) -> NoReturn:
    """A setting the beat cannot work with: one line that says what to change, at CRITICAL,
    and exit status 1, as on the command line; not Celery's traceback (SystemExit passes
    its handler), for no restart mends it."""
    log.critical("redisbeat: %s", exc)
    raise SystemExit(1) from None
