"""The store's way to Redis: one server, the master Sentinel names, or a Redis Cluster.

A :class:`Connection` holds the client the settings describe and answers, for a key, which
server serves it. On one server that is always the same client; on a cluster it is the node
that owns the key's slot, so a script and the ``WAIT`` after it share one connection, as
``WAIT`` requires. Before its first command, a connection looks once at the server (each
master of a cluster): one redisbeat cannot work with is refused (:mod:`.server`). Log lines
name the server without its password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import AskError, ClusterDownError, MovedError
from redis.sentinel import Sentinel, SentinelConnectionPool

from ..config import Config
from ..urls import ClusterURL, redact
from . import server
from .errors import StoreIncompatible

T = TypeVar("T")
#: How many MOVED or ASK replies one call follows (a slot moves once; a second is rare).
MAX_REDIRECTS = 3


class Connection:
    """The store's client, made on first use: a cluster client asks the cluster for its
    slots when it is made, and a beat must start (and wait) while Redis is down."""

    def __init__(
        self,
        client: Any = None,
        *,
        make: Callable[[], Any] | None = None,
        sentinel: Any = None,
        url: str | None = None,
    ) -> None:
        self._client = client
        self._make = make
        #: The URL the settings name, its password masked (None: a client was given).
        self.url = url
        #: The Sentinel client a sentinel:// URL made (closed with the connection).
        self.sentinel: Sentinel | None = sentinel
        #: Whether the server passed the look at it (:meth:`check_server`), and the line that
        #: refused it, if it did not.
        self._checked = False
        self._refused: str | None = None

    @classmethod
    def from_config(cls, config: Config) -> Connection:
        # Bytes that are not UTF-8 (a hostile or broken definition) decode to lone surrogates
        # rather than fail the whole reply; Entry.loads rejects them, and they encode back to
        # the same bytes, so the quarantine script still recognises the definition.
        options = {"encoding_errors": "surrogateescape", **dict(config.redis_options)}
        url = redact(config.redis_url)
        cluster = config.cluster
        if cluster is not None:
            return cls(make=lambda: _cluster_client(cluster, options), url=url)
        target = config.sentinel
        if target is None:
            client = redis.Redis.from_url(config.redis_url, decode_responses=True, **options)
            return cls(client, url=url)
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(target.addresses), sentinel_kwargs=dict(config.sentinel_options)
        )
        credentials = {"username": target.username, "password": target.password}
        client = sentinel.master_for(  # type: ignore[no-untyped-call]
            config.sentinel_master,
            decode_responses=True,
            **{"db": target.db, **{k: v for k, v in credentials.items() if v}, **options},
        )
        return cls(client, sentinel=sentinel, url=url)

    @property
    def client(self) -> redis.Redis:
        """The client (a cluster's speaks the same commands for keys of one slot), once the
        server passed the look at it: every command of the store comes through here."""
        if not self._checked:
            self.check_server()
        return self._made()

    def _made(self) -> redis.Redis:
        if self._client is None:
            assert self._make is not None
            self._client = self._make()
        return cast(redis.Redis, self._client)

    @property
    def is_cluster(self) -> bool:
        return isinstance(self._client, RedisCluster) or self._make is not None

    def node(self, key: str) -> redis.Redis:
        """A client of the one server that serves ``key`` (on one server: the client)."""
        client = self.client
        if isinstance(client, RedisCluster):
            return client.get_redis_connection(client.get_node_from_key(key))
        return client

    def on_node(self, key: str, read: Callable[[redis.Redis, bool], T]) -> T:
        """``read(node, asking)`` on the server that serves ``key``; again on the server a
        MOVED or ASK names (after ASK, each command of ``key``'s slot goes after an ASKING:
        the node importing the slot answers MOVED back without it). On a cluster, a lost
        connection makes it learn the slots again and read once more, from a promoted
        replica (reads only: running one twice is harmless)."""
        node, asking = self.node(key), False
        lost = False
        for _ in range(MAX_REDIRECTS):
            try:
                return read(node, asking)
            except AskError as exc:
                node, asking = self.redirected(exc), not isinstance(exc, MovedError)
            except (redis.ConnectionError, redis.TimeoutError, ClusterDownError):
                if lost or not self.is_cluster:
                    raise
                lost = True
                self.refresh()
                node, asking = self.node(key), False
        return read(node, asking)

    def refresh(self) -> None:
        """Learn a cluster's slots again (a failover or a slot moved); nothing on one server."""
        client = self._client
        if isinstance(client, RedisCluster):
            client.nodes_manager.initialize()

    def redirected(self, exc: AskError) -> redis.Redis:
        """After MOVED or ASK: learn the slots again; a client of the server named."""
        client = self.client
        if not isinstance(client, RedisCluster):
            raise exc  # one server that answers MOVED is a cluster node: see errors.py
        self.refresh()
        node = client.get_node(host=exc.host, port=exc.port)
        if node is None:
            node = ClusterNode(exc.host, exc.port)
        return client.get_redis_connection(node)

    def check_server(self) -> None:
        """Once per connection, at its first contact that answers: refuse a server redisbeat
        cannot work with (:class:`~.errors.StoreIncompatible`, raised again at every later
        call without asking again) and a Redis Cluster node named by a ``redis://`` URL.
        Unreachable, it raises the connection error and looks again at the next call."""
        if self._refused is not None:
            raise StoreIncompatible(self._refused)
        plain = not self.is_cluster and self.sentinel is None
        try:
            for node, where in self.masters():
                server.check(node, where, plain=plain)
        except StoreIncompatible as exc:
            self._refused = str(exc)
            raise
        self._checked = True

    def masters(self) -> list[tuple[redis.Redis, str]]:
        """A client of each server that holds the store (each master of a cluster), with its
        name for log lines."""
        client = self._made()
        if not isinstance(client, RedisCluster):
            return [(client, self.describe())]
        where = self.describe()
        return [
            (client.get_redis_connection(n), f"{_host_port(n.host, n.port)} in {where}")
            for n in client.get_primaries()
        ]

    def decodes_responses(self) -> bool:
        client = self._client
        if client is None:
            return True  # made by from_config, always with decode_responses
        if isinstance(client, RedisCluster):
            kwargs = client.get_connection_kwargs()  # type: ignore[no-untyped-call]
            return bool(kwargs.get("decode_responses"))
        return bool(client.connection_pool.connection_kwargs.get("decode_responses"))

    def describe(self) -> str:
        """Where the client connects, for log lines (no password)."""
        client = self._client
        if client is None or isinstance(client, RedisCluster):
            nodes = (
                [(n.host, n.port) for n in client.get_primaries()]  # type: ignore[no-untyped-call]
                if isinstance(client, RedisCluster)
                else []
            )
            return f"redis cluster {','.join(_host_port(h, p) for h, p in nodes) or '(not yet)'}"
        pool = client.connection_pool
        kw = pool.connection_kwargs
        where = kw.get("path") or _host_port(kw.get("host", "?"), kw.get("port", "?"))
        if isinstance(pool, SentinelConnectionPool):
            via = ",".join(
                _host_port(
                    s.connection_pool.connection_kwargs.get("host", "?"),
                    s.connection_pool.connection_kwargs.get("port", "?"),
                )
                for s in pool.sentinel_manager.sentinels
            )
            where = f"sentinel master {pool.service_name} via {via}"
        return f"{where} db={kw.get('db', 0)}"

    def target(self) -> str:
        """The Redis this connection is for, as an error names it: the URL of the settings
        with its password masked, else (a client was given) :meth:`describe`."""
        return self.url or self.describe()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            if self._make is not None:
                self._client = None  # made again on next use
        if self.sentinel is not None:
            self.sentinel.close()
            self.sentinel = None


def _cluster_client(url: ClusterURL, options: dict[str, Any]) -> RedisCluster:
    kwargs: dict[str, Any] = {"decode_responses": True, **options}
    if url.tls:
        kwargs.setdefault("ssl", True)
    if url.username is not None:
        kwargs["username"] = url.username
    if url.password is not None:
        kwargs["password"] = url.password
    seeds = [ClusterNode(host, port) for host, port in url.seeds]  # type: ignore[no-untyped-call]
    return RedisCluster(startup_nodes=seeds, **kwargs)


def _host_port(host: Any, port: Any) -> str:
    host = str(host)
    return f"{f'[{host}]' if ':' in host else host}:{port}"
