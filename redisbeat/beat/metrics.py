"""Prometheus metrics of one beat, served on ``redisbeat_metrics_port`` (the ``metrics``
extra installs prometheus-client).

Several beats on one host share one port in prometheus-client's multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR`` set for every beat): each beat writes its samples to that
directory, and whichever beat holds the port serves them all, counters summed and the
deployment's gauges as last read; when it stops, another beat takes the port at its next
reading of the gauges.

Labels stay few whatever the schedule's size: task name and source, never the entry, so a
million entries make as many series as a handful. The gauges of the deployment (entries,
due, quarantined, beats alive) are read at the beat's heartbeat, a few commands every
``redisbeat_heartbeat_seconds``, and only while metrics are served; so is the count of runs
the workers could not start (the worker hook keeps it in Redis: a worker serves no metrics
of its own), which each beat serves as a counter of the deployment, as it last read it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from ..config import Config
from ..errors import ConfigurationError
from ..store.listing import Counts

log = logging.getLogger(__name__)

LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
#: An entry due for longer than this (seconds) and not claimed counts as overdue.
OVERDUE_AFTER = 60.0
#: Where prometheus-client's multiprocess mode keeps every process's samples.
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


class Metrics:
    """The beat's metrics, in a registry of their own, and the HTTP server that serves them."""

    def __init__(self, port: int, address: str = "0.0.0.0") -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise ConfigurationError(
                "redisbeat_metrics_port is set but prometheus-client is not installed: "
                "pip install 'celery-redisbeat[metrics]'"
            ) from None
        self._prom, self._port, self._address = prom, port, address
        self.shared = bool(os.environ.get(MULTIPROC_DIR))
        self.registry = prom.CollectorRegistry()
        self._define(prom)
        served = self.registry
        if self.shared:  # every beat's samples, from the directory
            from prometheus_client import multiprocess

            served = prom.CollectorRegistry()
            multiprocess.MultiProcessCollector(served)  # type: ignore[no-untyped-call]
        self._served = served
        self._not_started = NotStartedCount()
        served.register(self._not_started)
        self._server: Any = None
        self._thread: Any = None
        self._told = False
        self.keep_served()

    def keep_served(self) -> None:
        """Serve on the port, unless already; shared, a port another beat holds is no error
        (that beat serves this one's samples too), and is tried again next time."""
        if self._server is not None:
            return
        try:
            self._server, self._thread = self._prom.start_http_server(
                self._port, addr=self._address, registry=self._served
            )
        except OSError as exc:
            if not self.shared:
                raise ConfigurationError(
                    f"redisbeat_metrics_port: cannot serve metrics on {self._address}:"
                    f"{self._port}: {exc}; for several beats on one host, set "
                    f"{MULTIPROC_DIR} for them all to share the port, or give each its own"
                ) from None
            if not self._told:
                self._told = True
                log.info(
                    "redisbeat: another process serves this host's beats' metrics on port %d",
                    self._port,
                )
            return
        log.info("redisbeat: serving metrics on http://%s:%d/metrics", self._address, self._port)

    def _define(self, prom: Any) -> None:
        registry = self.registry
        self.sent = prom.Counter(
            "redisbeat_sent", "Occurrences sent.", ["task", "source"], registry=registry
        )
        self.lateness = prom.Histogram(
            "redisbeat_send_lateness_seconds",
            "From an occurrence's due time to its send, by the Redis clock.",
            buckets=LATENESS_BUCKETS,
            registry=registry,
        )
        self.batch = prom.Histogram(
            "redisbeat_claim_batch_size",
            "Occurrences claimed by one claim (empty claims are not counted).",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.missed = prom.Counter(
            "redisbeat_missed_occurrences",
            "Occurrences not sent within their grace.",
            ["task", "source"],
            registry=registry,
        )
        self.expired = prom.Counter(
            "redisbeat_expired_messages",
            "Messages sent after their expiry had passed (to live 0 s: workers discard them).",
            registry=registry,
        )
        self.recovered = prom.Counter(
            "redisbeat_recovered", "Occurrences re-sent after a lease ran out.", registry=registry
        )
        self.redis_errors = prom.Counter(
            "redisbeat_redis_errors", "Redis calls that failed.", ["kind"], registry=registry
        )
        # The same on every beat: shared, the one read last stands.
        gauge = {"registry": registry, "multiprocess_mode": "mostrecent"}
        self.entries = prom.Gauge("redisbeat_entries", "Entries stored.", **gauge)
        self.due = prom.Gauge("redisbeat_due", "Entries due and not claimed.", **gauge)
        self.overdue = prom.Gauge(
            "redisbeat_overdue",
            f"Entries due for over {OVERDUE_AFTER:g} s and not claimed.",
            **gauge,
        )
        self.quarantined = prom.Gauge("redisbeat_quarantined", "Definitions set aside.", **gauge)
        self.beats_alive = prom.Gauge(
            "redisbeat_beats_alive", "Beats with a recent heartbeat.", **gauge
        )

    @classmethod
    def maybe(cls, config: Config) -> Metrics | None:
        """The metrics ``config`` asks for (None: ``redisbeat_metrics_port`` is not set)."""
        if config.metrics_port is None:
            return None
        return cls(config.metrics_port, config.metrics_address)

    def deployment(self, counts: Counts, beats_alive: int) -> None:
        self.entries.set(counts.entries)
        self.due.set(counts.due)
        self.overdue.set(counts.overdue)
        self.quarantined.set(counts.quarantined)
        self.beats_alive.set(beats_alive)

    def not_started(self, counts: dict[tuple[str, str], int]) -> None:
        """The runs the workers could not start, by (outcome, task), as just read."""
        self._not_started.counts = counts

    def close(self) -> None:
        if self.shared:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class NotStartedCount:
    """``redisbeat_runs_not_started_total``: the deployment's runs the workers could not
    start, by task and outcome, as counted in Redis (a collector: the value is the count
    read last, not one this beat adds to)."""

    def __init__(self) -> None:
        from prometheus_client.core import CounterMetricFamily  # the metrics extra's

        self._family = CounterMetricFamily
        #: (outcome, task) -> count, as last read (replaced whole: the server's thread reads).
        self.counts: dict[tuple[str, str], int] = {}

    def collect(self) -> Iterator[Any]:
        family = self._family(
            "redisbeat_runs_not_started",
            "Runs the workers (with redisbeat_track_runs) could not start: the task is not "
            "registered there (unregistered), or the message was refused (rejected).",
            labels=["task", "outcome"],
        )
        for (outcome, task), count in sorted(self.counts.items()):
            family.add_metric([task, outcome], count)
        yield family
