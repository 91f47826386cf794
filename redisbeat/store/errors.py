"""Redis and connection errors as they leave the store, sorted by what an operator has to do.

Every public method of the store raises :class:`StoreError` (never a bare redis-py error or
``OSError``), carrying a :class:`RedisTrouble` that names the kind of trouble. A translated
error is still an instance of the redis-py class it replaces (a ``redis.ConnectionError``
stays one), so code written against redis-py keeps catching it.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import redis
from redis.exceptions import (
    AskError,
    ClusterCrossSlotError,
    ClusterDownError,
    RedisClusterException,
    TryAgainError,
)

from ..errors import Incompatible, RedisBeatError

P = ParamSpec("P")
R = TypeVar("R")


class StoreError(RedisBeatError, redis.RedisError):
    """A Redis command of the store failed; ``trouble`` says how (see :class:`RedisTrouble`)."""

    trouble: RedisTrouble

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.trouble = RedisTrouble.of(self)


class StoreUnavailable(StoreError, redis.ConnectionError):
    """Redis cannot be reached, or did not answer in time (retrying later is the remedy)."""


class StoreRefused(StoreError, redis.ResponseError):
    """Redis answered with an error (out of memory, read-only, an ACL denial, a wrong type)."""


class NotReplicated(StoreUnavailable):
    """A write reached the master but too few replicas acknowledged it in time.

    It stays on the master, and a failover now could lose it. Writing the same again is
    safe, which is what callers that retry on a Redis error do.
    """


class StoreIncompatible(StoreError, Incompatible):
    """This redisbeat cannot work with the store it reached (the store holds a newer format
    than this release understands, say): retrying does not help, so a beat stops rather than
    back off, having changed nothing. The message is one line that says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.trouble = RedisTrouble("incompatible", message)


#: What redis-py raises: its errors, the socket's, and the cluster client's own (not a
#: RedisError: e.g. no seed node answers, or the server is not in cluster mode).
_RAISED = (redis.RedisError, OSError, RedisClusterException)
#: Cluster replies that mean "not now" (slots uncovered during a failover, a slot half
#: moved): as unavailable as a lost connection, and as worth retrying.
_TRANSIENT = (ClusterDownError, TryAgainError)


def translated(method: Callable[P, R]) -> Callable[P, R]:
    """Raise a :class:`StoreError` for every redis-py error or ``OSError`` of ``method``."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except _RAISED as exc:
                raise translate(exc) from exc

        return generator  # type: ignore[return-value]

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except _RAISED as exc:
            raise translate(exc) from exc

    return call


def translate(exc: BaseException) -> StoreError:
    """The store's error for a redis-py error or ``OSError`` (a StoreError is kept)."""
    if isinstance(exc, StoreError):
        return exc
    cls = _store_class(type(exc)) if isinstance(exc, redis.RedisError) else StoreUnavailable
    trouble = RedisTrouble.of(exc)
    args = exc.args if isinstance(exc, redis.RedisError) else (f"{type(exc).__name__}: {exc}",)
    new = cls.__new__(cls)
    Exception.__init__(new, *args)
    new.__dict__.update(getattr(exc, "__dict__", {}))
    new.trouble = trouble
    return new


_CLASSES: dict[type[redis.RedisError], type[StoreError]] = {
    redis.ResponseError: StoreRefused,
    redis.ConnectionError: StoreUnavailable,
    redis.RedisError: StoreError,
}


def _store_class(cls: type[redis.RedisError]) -> type[StoreError]:
    """A StoreError class that is also ``cls`` (made once per redis-py class)."""
    known = _CLASSES.get(cls)
    if known is None:
        refused = issubclass(cls, redis.ResponseError) and not issubclass(cls, _TRANSIENT)
        base = StoreRefused if refused else StoreUnavailable
        attrs = {"__module__": __name__, "__doc__": cls.__doc__}
        known = _CLASSES[cls] = type(cls.__name__, (base, cls), attrs)
    return known


# -- what the trouble is ------------------------------------------------------------------------

#: The error code redis-py strips off the reply text, for redis-py versions that do not keep
#: it in ``status_code``.
_CODES: dict[type[BaseException], str] = {
    redis.exceptions.OutOfMemoryError: "OOM",
    redis.exceptions.ReadOnlyError: "READONLY",
    redis.exceptions.NoPermissionError: "NOPERM",
    redis.exceptions.NoScriptError: "NOSCRIPT",
}
#: Reply code -> kind of trouble. Codes are also looked for inside the text, where an older
#: Redis wraps a script's error as ``ERR Error running script ... -OOM ...``.
_KINDS = {"OOM": "oom", "READONLY": "readonly", "NOPERM": "noperm", "WRONGTYPE": "wrongtype"}
_CODE_IN_TEXT = re.compile(r"\b(OOM|READONLY|NOPERM|WRONGTYPE)\b")
#: How Redis 7.0 words an ACL denial inside a script (an ``ERR`` reply): a command, key, channel.
_SCRIPT_ACL_DENIAL = "The user executing the script can't"
#: How Redis refuses a command a cluster node does not take (``SELECT``, pub/sub aside).
_CLUSTER_ONLY = "not allowed in cluster mode"
#: How redis-py's cluster client says a seed node is a plain server.
_NOT_CLUSTER = "Cluster mode is not enabled"
#: The key named by the scripts' own WRONGTYPE error (lua/prelude.lua).
_KEY_IN_TEXT = re.compile(r"^WRONGTYPE redisbeat: key (\S+) ")


@dataclass(frozen=True)
class RedisTrouble:
    """A failed Redis command, sorted by what an operator has to do about it.

    ``kind`` is one of ``unavailable`` (no connection, or no answer in time), ``auth`` (the
    login was rejected), ``oom`` (maxmemory reached), ``readonly`` (a read-only replica),
    ``noperm`` (an ACL denial), ``wrongtype`` (a key holds the wrong type), ``cluster`` (a
    Redis Cluster node reached by a ``redis://`` URL), ``not-cluster`` (a plain server named
    by a ``redis-cluster://`` URL), ``incompatible`` (:class:`StoreIncompatible`: the reply
    is its message) and ``refused`` (any other error reply). ``reply`` is
    Redis's own error text, verbatim, or the connection error; ``key`` is the key a
    WRONGTYPE is about, when redisbeat's scripts could name it.
    """

    kind: str
    reply: str
    key: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> RedisTrouble:
        known = exc.__dict__.get("trouble")
        if isinstance(known, RedisTrouble):
            return known
        if isinstance(exc, redis.exceptions.AuthenticationError):
            return cls("auth", _reply_text(exc))
        if isinstance(exc, (AskError, ClusterCrossSlotError)) or _CLUSTER_ONLY in str(exc):
            return cls("cluster", _reply_text(exc))
        if isinstance(exc, RedisClusterException) and _NOT_CLUSTER in str(exc):
            return cls("not-cluster", f"{type(exc).__name__}: {exc}")
        if not isinstance(exc, redis.exceptions.ResponseError):
            if isinstance(exc, StoreError) and exc.args:
                return cls("unavailable", str(exc))
            return cls("unavailable", f"{type(exc).__name__}: {exc}")
        text = _reply_text(exc)
        kind = _KINDS.get(text.split(" ", 1)[0])
        if kind is None:
            found = _CODE_IN_TEXT.search(text)
            kind = _KINDS[found[1]] if found else None
        if kind is None:
            kind = "noperm" if _SCRIPT_ACL_DENIAL in text else "refused"
        key = _KEY_IN_TEXT.match(text)
        return cls(kind, text, key[1] if key else None)

    def describe(self, where: str) -> str:
        """One log line: what is wrong with the Redis at ``where`` and what to do."""
        what = {
            "unavailable": f"is unavailable ({self.reply})",
            "auth": f"rejected the login ({self.reply}); check the user and password in the URL",
            "oom": (
                f"is out of memory (maxmemory reached) and refuses writes ({self.reply}); "
                "free memory or raise maxmemory"
            ),
            "readonly": (
                f"is a read-only replica ({self.reply}); point redisbeat at the primary, or "
                "promote this server"
            ),
            "noperm": (
                f"denied a command: the ACL user lacks a permission ({self.reply}); "
                "see docs/security.md#acl"
            ),
            "wrongtype": (
                f"holds a key of the wrong type ({self.reply}); an operator must delete or "
                "repair the key"
            ),
            "cluster": (
                f"is a Redis Cluster node ({self.reply}); set redisbeat_redis_url to "
                "redis-cluster://host:port[,host:port...] (rediss-cluster:// for TLS)"
            ),
            "not-cluster": (
                f"is not a Redis Cluster ({self.reply}); a redis-cluster:// URL needs "
                "cluster-enabled servers: use redis:// (or rediss://) for one server"
            ),
        }.get(self.kind, f"refused a command ({self.reply})")
        return f"Redis at {where} {what}"

    @property
    def was(self) -> str:
        """What the trouble was, for the line that says it is over."""
        return {
            "unavailable": "unavailable",
            "auth": "rejecting the login",
            "oom": "out of memory",
            "readonly": "a read-only replica",
            "noperm": "denying a command",
            "wrongtype": f"holding {self.key or 'a key'} with the wrong type",
            "cluster": "a cluster node reached by a redis:// URL",
            "not-cluster": "not a cluster",
        }.get(self.kind, "refusing a command")


def _reply_text(exc: BaseException) -> str:
    """Redis's error reply as Redis sent it, code first (redis-py strips some codes off)."""
    text = str(exc)
    code = getattr(exc, "status_code", None) or _CODES.get(type(exc))
    if code is None:
        code = next((c for k, c in _CODES.items() if isinstance(exc, k)), None)
    if code and not text.startswith(f"{code} "):
        return f"{code} {text}"
    return text


class LayoutChanged(Exception):
    """A write script found the shard in another layout than the writer followed: a reshard
    began or ended meanwhile. Never leaves the store: the writer reads the layout again."""
