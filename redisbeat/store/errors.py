"""Redis and connection errors as they leave the store, sorted by what an operator has to do.

Every public method of the store raises :class:`StoreError` (never a bare redis-py error or
``OSError``), carrying a :class:`RedisTrouble` (:mod:`.trouble`) that names the kind of
trouble, and the URL of the Redis it is about (without its password). A translated
error is still an instance of the redis-py class it replaces (a ``redis.ConnectionError``
stays one), so code written against redis-py keeps catching it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

import redis
from redis.exceptions import ClusterDownError, RedisClusterException, TryAgainError

from ..errors import Incompatible, RedisBeatError
from .trouble import RedisTrouble as RedisTrouble  # re-exported: its home before

P = ParamSpec("P")
R = TypeVar("R")


class StoreError(RedisBeatError, redis.RedisError):
    """A Redis command of the store failed; ``trouble`` says how (see :class:`RedisTrouble`)."""

    trouble: RedisTrouble
    #: The Redis the failed call went to: its URL with the password masked (or, for a store
    #: made from a client, its host, port and database); None where not known.
    where: str | None = None

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.trouble = RedisTrouble.of(self)

    def describe(self) -> str:
        """One line: what is wrong with which Redis, and what to do."""
        return self.trouble.describe(self.where or "the URL configured")


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
                raise translate(exc, _where(args)) from exc

        return generator  # type: ignore[return-value]

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except _RAISED as exc:
            raise translate(exc, _where(args)) from exc

    return call


def _where(args: Sequence[Any]) -> str | None:
    """Where the store whose method failed connects (its ``where``), for the message."""
    where = getattr(args[0], "where", None) if args else None
    return where if isinstance(where, str) else None


def translate(exc: BaseException, where: str | None = None) -> StoreError:
    """The store's error for a redis-py error or ``OSError`` (a StoreError is kept), naming
    ``where`` the call went (a URL without its password)."""
    if isinstance(exc, StoreError):
        if exc.where is None:
            exc.where = where
        return exc
    cls = _store_class(type(exc)) if isinstance(exc, redis.RedisError) else StoreUnavailable
    trouble = RedisTrouble.of(exc)
    args = exc.args if isinstance(exc, redis.RedisError) else (f"{type(exc).__name__}: {exc}",)
    new = cls.__new__(cls)
    Exception.__init__(new, *args)
    new.__dict__.update(getattr(exc, "__dict__", {}))
    new.trouble = trouble
    new.where = where
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


class LayoutChanged(Exception):
    """A write script found the shard in another layout than the writer followed: a reshard
    began or ended meanwhile. Never leaves the store: the writer reads the layout again."""
