"""Retry a push to Redis in a background thread, with backoff, until Redis takes it.

Both pushes of the app use one: the PeriodicTask sync (:mod:`.sync`) and the delayed-call
outbox (:mod:`.outbox`). A retry is one thread per process at most; kicking a running one
does nothing, as its next attempt pushes whatever is waiting by then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, close_old_connections

from redisbeat.errors import Incompatible, RedisBeatError

log = logging.getLogger(__name__)

RETRY_MIN_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0


class Retrier:
    """Calls ``attempt`` in a background thread, with backoff, until it raises nothing.

    ``attempt`` returns what it did, for the log. A Redis error or a database error (a
    busy or locked database, a deadlock: as passing as a Redis outage) means "later"; a
    server redisbeat cannot work with ends the retry, said once (the next push kicks it).
    """

    def __init__(self, name: str, attempt: Callable[[], str]) -> None:
        self.name = name
        self._attempt = attempt
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.min_seconds = RETRY_MIN_SECONDS
        self.max_seconds = RETRY_MAX_SECONDS

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def kick(self) -> None:
        with self._lock:
            if self.running:
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name=f"redisbeat-django-{self.name}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        delay = self.min_seconds
        try:
            while not self._stop.wait(delay):
                try:
                    done = self._attempt()
                except Incompatible as exc:
                    log.error("redisbeat: %s stopped: %s", self.name, exc)
                    return
                except RedisBeatError as exc:
                    log.debug("redisbeat: %s: Redis still unavailable: %s", self.name, exc)
                    delay = min(delay * 2, self.max_seconds)
                    continue
                except DatabaseError as exc:
                    log.warning(
                        "redisbeat: %s failed on the database, will retry: %s", self.name, exc
                    )
                    close_old_connections()
                    delay = min(delay * 2, self.max_seconds)
                    continue
                log.info("redisbeat: Redis available again; %s", done)
                return
        finally:
            close_old_connections()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop retrying (the thread is a daemon; this is for orderly shutdown and tests)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
