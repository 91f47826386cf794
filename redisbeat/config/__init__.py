"""Settings: a frozen object built once from Celery's configuration."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from ..urls import (
    CLUSTER_SCHEMES,
    REDIS_SCHEMES,
    SENTINEL_SCHEME,
    ClusterURL,
    SentinelURL,
    from_broker,
    redact,
)
from .names import reject_unknown_settings

#: Setting name (without the ``redisbeat_`` prefix) -> default.
DEFAULTS: dict[str, Any] = {
    "redis_url": None,
    "key_prefix": "redisbeat",
    "lease_seconds": 5.0,
    "batch_size": 100,
    "heartbeat_seconds": 60.0,
    "socket_timeout": 10.0,
    "socket_connect_timeout": 5.0,
    "redis_options": {},
    "sentinel_master": None,
    "sentinel_options": {},
    "wait_replicas": 0,
    "wait_timeout": 0.5,
    "entry_cache_size": 10_000,
    "quarantine_after": 3,
    "shards": 1,
    "claim_ahead_seconds": 0.02,
    "delayed_retention_seconds": 86_400.0,
    "spent_retention_seconds": 86_400.0,
    "summary_seconds": 60.0,
    "metrics_port": None,
    "metrics_address": "0.0.0.0",
    "dst_gap": "shift",
    "dst_fold": "once",
    "catch_up_limit": 100,
    "history_size": 0,
    "track_runs": False,
    "run_expiry_seconds": 3600.0,
    "duplicate_window_seconds": 600.0,
    "check_task_names": True,
    "persistence_warning": True,
}
#: The settings :meth:`Config.from_app` works the connection out from.
CONNECTION_SETTINGS = frozenset(
    {
        "redis_url",
        "redis_options",
        "sentinel_master",
        "sentinel_options",
        "socket_timeout",
        "socket_connect_timeout",
    }
)
#: The settings that take one of a few words, and those words (the schedule kinds' DST
#: policies: a wall time a spring-forward gap skips, one a fall-back overlap repeats).
CHOICES: dict[str, tuple[str, ...]] = {"dst_gap": ("shift", "skip"), "dst_fold": ("once", "twice")}
#: The most shards a deployment may be split into.
MAX_SHARDS = 1024
#: The integer settings: the lowest and highest value, and how an error says so.
INTEGERS: dict[str, tuple[int, float, str]] = {
    "batch_size": (1, math.inf, "a positive integer"),
    "entry_cache_size": (0, math.inf, "a non-negative integer"),
    "quarantine_after": (0, math.inf, "a non-negative integer"),
    "catch_up_limit": (1, math.inf, "a positive integer"),
    "history_size": (0, 10_000, "an integer from 0 to 10000"),
    "shards": (1, MAX_SHARDS, f"an integer from 1 to {MAX_SHARDS}"),
}


@dataclass(frozen=True)
class Config:
    """Everything the store and the scheduler need to know, validated."""

    redis_url: str
    key_prefix: str = "redisbeat"
    lease_seconds: float = 5.0
    batch_size: int = 100
    heartbeat_seconds: float = 60.0
    max_loop_interval: float = 300.0
    timezone: str = "UTC"
    redis_options: Mapping[str, Any] = field(default_factory=dict)
    #: The master name the sentinels monitor; only with a ``sentinel://`` URL.
    sentinel_master: str | None = None
    #: Keyword arguments for the connections to the sentinels themselves.
    sentinel_options: Mapping[str, Any] = field(default_factory=dict)
    #: After each claim, finish and API write, WAIT for this many replicas (0: do not wait).
    wait_replicas: int = 0
    #: The most seconds one WAIT blocks.
    wait_timeout: float = 0.5
    #: How many parsed entry definitions (and their prepared messages) a beat keeps.
    entry_cache_size: int = 10_000
    #: Set an entry aside after this many of its sends in a row failed (0: never).
    quarantine_after: int = 3
    #: How many shards (hash tags, so cluster slots) the entries are split into.
    shards: int = 1
    #: A claim also takes what falls due this soon, sent when due (fewer, larger batches).
    claim_ahead_seconds: float = 0.02
    #: How long what became of a sent delayed task is kept (its key, task id, time).
    delayed_retention_seconds: float = 86_400.0
    #: How long an API entry that will never fire again is kept once it fired (one-offs).
    spent_retention_seconds: float = 86_400.0
    #: How often a beat logs (and keeps in Redis, for ``status``) what it did lately.
    summary_seconds: float = 60.0
    #: Serve Prometheus metrics on this port (None: no metrics), on this address.
    metrics_port: int | None = None
    metrics_address: str = "0.0.0.0"
    #: What a Crontab or Cron without its own DST policies gets when it is written.
    dst_gap: str = "shift"
    dst_fold: str = "once"
    #: The most missed occurrences a ``catch_up="all"`` entry sends after downtime.
    catch_up_limit: int = 100
    #: How many runs each entry's history keeps (0: none; it costs a command per send).
    history_size: int = 0
    #: A worker records the runs of what redisbeat sent (:mod:`redisbeat.worker`).
    track_runs: bool = False
    #: The longest a run counts as running when its worker never reports its end.
    run_expiry_seconds: float = 3600.0
    #: How long a worker with the hook remembers a run, to drop copies of it (0: no check).
    duplicate_window_seconds: float = 600.0
    #: Writers that know the app refuse a task name it does not register (task_names.py).
    check_task_names: bool = True
    #: Warn once (a beat at start-up, ``status``) when the store's Redis keeps nothing on disk.
    persistence_warning: bool = True

    def __post_init__(self) -> None:
        schemes = (*REDIS_SCHEMES, SENTINEL_SCHEME, *CLUSTER_SCHEMES)
        if not isinstance(self.redis_url, str) or not self.redis_url.startswith(schemes):
            raise ConfigurationError(
                f"redisbeat_redis_url must start with one of {', '.join(schemes)}; "
                f"got {redact(str(self.redis_url))!r}"
            )
        self._check_sentinel()
        _ = self.cluster  # a malformed cluster URL stops start-up here
        self._check_wait()
        if not self.key_prefix or any(c in self.key_prefix for c in "{}"):
            raise ConfigurationError(
                f"redisbeat_key_prefix must be non-empty and contain no braces: {self.key_prefix!r}"
            )
        self._check_positive()
        self._check_metrics()
        for name in ("track_runs", "check_task_names", "persistence_warning"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"redisbeat_{name} must be True or False: {getattr(self, name)!r}"
                )
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigurationError(
                    f"redisbeat_{name} must be one of {', '.join(allowed)}: {getattr(self, name)!r}"
                )
        for name, (low, high, wording) in INTEGERS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ConfigurationError(f"redisbeat_{name} must be {wording}: {value!r}")
        ahead = self.claim_ahead_seconds
        number = isinstance(ahead, (int, float)) and not isinstance(ahead, bool)
        if not number or not 0 <= ahead <= self.lease_seconds / 4:
            raise ConfigurationError(
                "redisbeat_claim_ahead_seconds must be a number from 0 to a quarter of "
                f"redisbeat_lease_seconds ({self.lease_seconds / 4:g}): {ahead!r}"
            )

    def _check_metrics(self) -> None:
        port = self.metrics_port
        if port is not None and (
            not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535
        ):
            raise ConfigurationError(
                f"redisbeat_metrics_port must be a TCP port (0 to 65535) or None: {port!r}"
            )
        if not isinstance(self.metrics_address, str):
            raise ConfigurationError(
                f"redisbeat_metrics_address must be a host or IP address: {self.metrics_address!r}"
            )

    def _check_positive(self) -> None:
        for name in (
            "lease_seconds",
            "heartbeat_seconds",
            "max_loop_interval",
            "delayed_retention_seconds",
            "spent_retention_seconds",
            "summary_seconds",
            "run_expiry_seconds",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"redisbeat_{name} must be a positive number: {value!r}")
        window = self.duplicate_window_seconds
        if not (window == 0 or (_positive(window) and window >= 2 * self.lease_seconds)):
            raise ConfigurationError(
                "redisbeat_duplicate_window_seconds must be 0 (no duplicate check) or at least "
                f"twice redisbeat_lease_seconds ({2 * self.lease_seconds:g}): {window!r}"
            )

    def _check_sentinel(self) -> None:
        if self.sentinel is not None:
            if not isinstance(self.sentinel_master, str) or not self.sentinel_master:
                raise ConfigurationError(
                    "redisbeat_sentinel_master must be set to the name the sentinels monitor "
                    "(their 'sentinel monitor <name> ...' line) when redisbeat_redis_url is a "
                    f"sentinel:// URL; got {self.sentinel_master!r}"
                )
        elif self.sentinel_master is not None:
            raise ConfigurationError(
                "redisbeat_sentinel_master is set but redisbeat_redis_url "
                f"({redact(self.redis_url)}) is not a sentinel:// URL"
            )
        for name in ("redis_options", "sentinel_options"):
            if not isinstance(getattr(self, name), Mapping):
                raise ConfigurationError(
                    f"redisbeat_{name} must be a dict: {type(getattr(self, name)).__name__}"
                )

    def _check_wait(self) -> None:
        replicas, timeout = self.wait_replicas, self.wait_timeout
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ConfigurationError(
                f"redisbeat_wait_replicas must be a non-negative integer: {replicas!r}"
            )
        if not _positive(timeout):
            raise ConfigurationError(
                f"redisbeat_wait_timeout must be a positive number: {timeout!r}"
            )
        socket_timeout: Any = self.redis_options.get("socket_timeout")
        if replicas and _positive(socket_timeout) and timeout >= socket_timeout:
            raise ConfigurationError(
                f"redisbeat_wait_timeout ({timeout} s) must be shorter than the socket timeout "
                f"({socket_timeout} s), or every WAIT that runs out would look like an outage"
            )

    @property
    def sentinel(self) -> SentinelURL | None:
        """The parsed ``sentinel://`` URL, or None for a plain Redis URL."""
        if not self.redis_url.startswith(SENTINEL_SCHEME):
            return None
        return SentinelURL.parse(self.redis_url)

    @property
    def cluster(self) -> ClusterURL | None:
        """The parsed ``redis-cluster://`` URL, or None for one server or Sentinel."""
        if not self.redis_url.startswith(CLUSTER_SCHEMES):
            return None
        return ClusterURL.parse(self.redis_url)

    @property
    def lease_ms(self) -> int:
        return int(self.lease_seconds * 1000)

    @property
    def claim_ahead_ms(self) -> int:
        return int(self.claim_ahead_seconds * 1000)

    @classmethod
    def from_app(cls, app: Any) -> Config:
        """Read the ``redisbeat_*`` settings (and the broker URL as a default) from a Celery app."""
        conf = app.conf
        reject_unknown_settings(conf, DEFAULTS)

        def get(name: str) -> Any:
            return conf.get(f"redisbeat_{name}", DEFAULTS[name])

        options = _mapping("redis_options", get("redis_options"))
        url = get("redis_url")
        master = get("sentinel_master")
        sentinel_options = _mapping("sentinel_options", get("sentinel_options"))
        if not url:
            url, options, master, sentinel_options = from_broker(
                conf, options, master, sentinel_options
            )
        options.setdefault("socket_timeout", get("socket_timeout"))
        options.setdefault("socket_connect_timeout", get("socket_connect_timeout"))
        # Without these a sentinel that stopped answering would block a beat for ever.
        sentinel_options.setdefault("socket_timeout", get("socket_timeout"))
        sentinel_options.setdefault("socket_connect_timeout", get("socket_connect_timeout"))
        tz = getattr(app.timezone, "key", None) or "UTC"
        # The settings read as they are: every one but those worked out above.
        plain = {name: get(name) for name in DEFAULTS if name not in CONNECTION_SETTINGS}
        return cls(
            redis_url=url,
            max_loop_interval=float(conf.beat_max_loop_interval or 300.0),
            timezone=tz,
            redis_options=options,
            sentinel_master=master,
            sentinel_options=sentinel_options,
            **plain,
        )


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"redisbeat_{name} must be a dict: {type(value).__name__}")
    return dict(value)


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
