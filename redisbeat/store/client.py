"""The store's Redis client: made from the settings (plain, or through Sentinel), and named
in log lines without its password."""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import Sentinel, SentinelConnectionPool

from ..config import Config


def connect(config: Config) -> tuple[redis.Redis, Sentinel | None]:
    """A client of the store's Redis (the master, with a sentinel:// URL) and its Sentinel."""
    # Bytes that are not UTF-8 (a hostile or broken definition) decode to lone surrogates
    # rather than fail the whole reply; Entry.loads rejects them, and they encode back to
    # the same bytes, so the quarantine script still recognises the definition.
    options = {"encoding_errors": "surrogateescape", **dict(config.redis_options)}
    target = config.sentinel
    if target is None:
        return redis.Redis.from_url(config.redis_url, decode_responses=True, **options), None
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(target.addresses), sentinel_kwargs=dict(config.sentinel_options)
    )
    credentials = {"username": target.username, "password": target.password}
    client = sentinel.master_for(  # type: ignore[no-untyped-call]
        config.sentinel_master,
        decode_responses=True,
        **{"db": target.db, **{k: v for k, v in credentials.items() if v}, **options},
    )
    return client, sentinel


def describe(client: redis.Redis) -> str:
    """Where a client connects, for log lines (no password)."""
    pool = client.connection_pool
    kw = pool.connection_kwargs
    where = kw.get("path") or f"{kw.get('host', '?')}:{kw.get('port', '?')}"
    if isinstance(pool, SentinelConnectionPool):
        via = ",".join(
            _host_port(s.connection_pool.connection_kwargs) for s in pool.sentinel_manager.sentinels
        )
        where = f"sentinel master {pool.service_name} via {via}"
    return f"{where} db={kw.get('db', 0)}"


def _host_port(kwargs: dict[str, Any]) -> str:
    host = str(kwargs.get("host", "?"))
    return f"{f'[{host}]' if ':' in host else host}:{kwargs.get('port', '?')}"
