"""Settings: a frozen object built once from Celery's configuration."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigurationError

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

#: Setting name (without the ``redisbeat_`` prefix) -> default.
DEFAULTS: dict[str, Any] = {
    "redis_url": None,
    "key_prefix": "redisbeat",
    "lease_seconds": 30.0,
    "batch_size": 100,
    "heartbeat_seconds": 10.0,
    "socket_timeout": 10.0,
    "socket_connect_timeout": 5.0,
    "redis_options": {},
}


@dataclass(frozen=True)
class Config:
    """Everything the store and the scheduler need to know, validated."""

    redis_url: str
    key_prefix: str = "redisbeat"
    lease_seconds: float = 30.0
    batch_size: int = 100
    heartbeat_seconds: float = 10.0
    max_loop_interval: float = 300.0
    timezone: str = "UTC"
    redis_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.redis_url.startswith(REDIS_SCHEMES):
            raise ConfigurationError(
                f"redisbeat_redis_url must start with one of {', '.join(REDIS_SCHEMES)}; "
                f"got {_redact(self.redis_url)!r}"
            )
        if not self.key_prefix or any(c in self.key_prefix for c in "{}"):
            raise ConfigurationError(
                f"redisbeat_key_prefix must be non-empty and contain no braces: {self.key_prefix!r}"
            )
        for name in ("lease_seconds", "heartbeat_seconds", "max_loop_interval"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"redisbeat_{name} must be a positive number: {value!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigurationError(
                f"redisbeat_batch_size must be a positive integer: {self.batch_size!r}"
            )

    @property
    def lease_ms(self) -> int:
        return int(self.lease_seconds * 1000)

    @classmethod
    def from_app(cls, app: Any) -> Config:
        """Read the ``redisbeat_*`` settings (and the broker URL as a default) from a Celery app."""
        conf = app.conf
        _reject_unknown_settings(conf)

        def get(name: str) -> Any:
            return conf.get(f"redisbeat_{name}", DEFAULTS[name])

        options = dict(get("redis_options") or {})
        url = get("redis_url")
        if not url:
            url = conf.broker_url or ""
            if not url.startswith(REDIS_SCHEMES):
                raise ConfigurationError(
                    "redisbeat_redis_url is not set and the broker URL "
                    f"({_redact(url) or 'unset'}) is not a Redis URL: set redisbeat_redis_url "
                    "to the Redis server that holds the schedule"
                )
            # A Redis broker over TLS usually needs the same certificate options.
            if url.startswith("rediss://") and isinstance(conf.broker_use_ssl, Mapping):
                options = {**conf.broker_use_ssl, **options}
        options.setdefault("socket_timeout", get("socket_timeout"))
        options.setdefault("socket_connect_timeout", get("socket_connect_timeout"))
        tz = getattr(app.timezone, "key", None) or "UTC"
        return cls(
            redis_url=url,
            key_prefix=get("key_prefix"),
            lease_seconds=get("lease_seconds"),
            batch_size=get("batch_size"),
            heartbeat_seconds=get("heartbeat_seconds"),
            max_loop_interval=float(conf.beat_max_loop_interval or 300.0),
            timezone=tz,
            redis_options=options,
        )


def _reject_unknown_settings(conf: Any) -> None:
    known = {f"redisbeat_{name}" for name in DEFAULTS}
    for key in list(conf.keys()):
        # Lower case only: upper-case REDISBEAT_* names are Django settings of redisbeat_django,
        # which Celery sees too when it is configured from django.conf:settings.
        if isinstance(key, str) and key.startswith("redisbeat_") and key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigurationError(f"unknown setting {key}{hint}")


def _redact(url: str) -> str:
    """Hide a password in a URL before it reaches an error message."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url
