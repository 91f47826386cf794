"""The store's Redis URL taken apart: one server, Sentinel, or a Redis Cluster's seed nodes,
or lent by a Redis broker.

Each error names the setting and says what is wrong, without the password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from .errors import ConfigurationError

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
SENTINEL_SCHEME = "sentinel://"
CLUSTER_SCHEMES = ("redis-cluster://", "rediss-cluster://")
#: The port a ``sentinel://`` address without one means (Redis Sentinel's own default).
SENTINEL_PORT = 26379
#: The port a cluster seed without one means (redis-server's default).
REDIS_PORT = 6379
#: A password given in the query (``?password=...``), which redis-py's from_url reads too.
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")


@dataclass(frozen=True)
class SentinelURL:
    """A ``sentinel://`` URL taken apart: where the sentinels are, and how to use the master."""

    addresses: tuple[tuple[str, int], ...]
    db: int = 0
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelURL:
        """Parse kombu's format: ``sentinel://[user:password@]host[:port][/db]``, several
        separated by ``;``. The user, password and database may be given on any of the
        addresses; given on several, they must agree."""
        addresses: list[tuple[str, int]] = []
        found: dict[str, set[Any]] = {"db": set(), "username": set(), "password": set()}
        for part in (p.strip() for p in url.split(";")):
            if not part:
                continue
            if not part.startswith(SENTINEL_SCHEME):
                raise bad_url(url, f"every address must start with {SENTINEL_SCHEME}")
            split = urlsplit(part)
            if split.query or split.fragment:
                raise bad_url(url, "a sentinel:// URL takes no query; use redisbeat_redis_options")
            try:
                port = split.port or SENTINEL_PORT
            except ValueError:
                raise bad_url(url, "the port must be a number") from None
            if not split.hostname:
                raise bad_url(url, "every address needs a host")
            addresses.append((split.hostname, port))
            path = split.path.strip("/")
            if path:
                if not path.isdigit():
                    raise bad_url(url, f"the database must be a number, not {path!r}")
                found["db"].add(int(path))
            if split.username:
                found["username"].add(unquote(split.username))
            if split.password is not None:
                found["password"].add(unquote(split.password))
        if not addresses:
            raise bad_url(url, "no sentinel address")
        for what, values in found.items():
            if len(values) > 1:
                raise bad_url(url, f"the addresses disagree on the {what}")
        return cls(
            tuple(addresses),
            db=next(iter(found["db"]), 0),
            username=next(iter(found["username"]), None),
            password=next(iter(found["password"]), None),
        )


@dataclass(frozen=True)
class ClusterURL:
    """A ``redis-cluster://`` URL: seed nodes to discover the cluster from, and the login."""

    seeds: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False

    @classmethod
    def parse(cls, url: str) -> ClusterURL:
        """Parse ``redis-cluster://[user:password@]host:port[,host:port...]`` (and
        ``rediss-cluster://`` for TLS). A cluster has only database 0."""
        scheme = next((s for s in CLUSTER_SCHEMES if url.startswith(s)), None)
        if scheme is None:
            raise bad_url(url, f"a cluster URL starts with {' or '.join(CLUSTER_SCHEMES)}")
        rest = url[len(scheme) :]
        rest, _, path = rest.partition("/")
        if path.strip("/") not in ("", "0") or "?" in url or "#" in url:
            raise bad_url(
                url,
                "a Redis Cluster has database 0 only, and the URL takes no query "
                "(use redisbeat_redis_options)",
            )
        login, _, hosts = rest.rpartition("@")
        username, _, password = login.partition(":")
        seeds = tuple(_seed(url, part) for part in hosts.split(",") if part.strip())
        if not seeds:
            raise bad_url(url, "no seed node: give at least one host:port")
        return cls(
            seeds,
            username=unquote(username) or None,
            password=unquote(password) if ":" in login else None,
            tls=scheme == "rediss-cluster://",
        )


def _seed(url: str, part: str) -> tuple[str, int]:
    split = urlsplit(f"//{part.strip()}")
    try:
        port = split.port or REDIS_PORT
    except ValueError:
        raise bad_url(url, f"the port of {part.strip()!r} must be a number") from None
    if not split.hostname:
        raise bad_url(url, f"seed {part.strip()!r} has no host")
    return split.hostname, port


def bad_url(url: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"redisbeat_redis_url {redact(url)!r} is not valid: {why}")


def redact(url: str) -> str:
    """Hide a password in a URL (or in each of several, ``;``-separated) before it reaches an
    error message."""
    if ";" in url:
        return ";".join(redact(part) for part in url.split(";"))
    url = _QUERY_PASSWORD.sub(r"\1***", url)
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


def from_broker(
    conf: Any, options: dict[str, Any], master: str | None, sentinel_options: dict[str, Any]
) -> tuple[str, dict[str, Any], str | None, dict[str, Any]]:
    """The store's URL and options lent by a Redis broker, for when none is set."""
    url: str = conf.broker_url or ""
    if not url.startswith((*REDIS_SCHEMES, SENTINEL_SCHEME)):
        raise ConfigurationError(
            "redisbeat_redis_url is not set and the broker URL "
            f"({redact(url) or 'unset'}) is not a Redis URL: set redisbeat_redis_url "
            "to the Redis server that holds the schedule"
        )
    # A Redis broker over TLS usually needs the same certificate options.
    if url.startswith("rediss://") and isinstance(conf.broker_use_ssl, Mapping):
        options = {**conf.broker_use_ssl, **options}
    if url.startswith(SENTINEL_SCHEME):
        # As kombu does: the master name and the sentinels' own connection options
        # come from the transport options, TLS to the master from broker_use_ssl.
        transport = conf.broker_transport_options or {}
        if master is None:
            master = transport.get("master_name")
        if "redisbeat_sentinel_options" not in conf:
            sentinel_options = dict(transport.get("sentinel_kwargs") or {})
        if isinstance(conf.broker_use_ssl, Mapping):
            options = {"ssl": True, **conf.broker_use_ssl, **options}
    return url, options, master, sentinel_options
