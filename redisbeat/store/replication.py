"""``WAIT`` for replicas after writes, and what a short count means.

The script runner (:mod:`.scripts`) adds the ``WAIT`` to the round trip of each write; this
module says how long it waits and judges the answer, asking Sentinel whether the master that
took the write is being replaced.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import redis
from redis.client import Pipeline
from redis.sentinel import MasterNotFoundError, SentinelConnectionPool

from .client import Connection
from .errors import NotReplicated, StoreUnavailable

log = logging.getLogger(__name__)

#: While replicas lag, how long (ms) a beat's WAIT gives them: enough for a healthy replica
#: on a local network to answer (so the episode ends), short enough to keep the beat's pace.
PEEK_MS = 50


class Replicas:
    """``WAIT`` for replicas after writes (``count`` 0: never), and what a short count means.

    ``strict`` writes (the API's) raise :class:`NotReplicated` when too few replicas
    acknowledge. A beat's claims and finishes are not acted on (:class:`StoreUnavailable`)
    while enough replicas are connected but behind; while too few are connected at all they
    carry on, with one warning per episode: a failover then can at worst make an occurrence
    be sent again under the same task id. Either way, when Sentinel is failing the master
    over, the write is not acted on.
    """

    def __init__(
        self,
        connection: Connection,
        count: int,
        timeout: float,
        describe: Callable[[], str],
        on_moved: Callable[[], None],
    ) -> None:
        self.connection = connection
        self.count = count
        self.timeout_ms = max(1, int(timeout * 1000))
        self._describe = describe
        self._on_moved = on_moved
        #: Too few replicas acknowledge lenient writes: an episode, warned about once.
        self._short = False
        #: No replica is connected to acknowledge: a beat only peeks (WAIT up to PEEK_MS).
        self._peek = False
        self._roleless = False

    def add_wait(self, pipe: Pipeline, strict: bool) -> int | None:
        """Put a WAIT at the end of a pipeline of writes; how long it waits (ms), or None
        when no replica is waited for."""
        if not self.count:
            return None
        timeout_ms = min(self.timeout_ms, PEEK_MS) if self._peek and not strict else self.timeout_ms
        pipe.wait(self.count, timeout_ms)
        return timeout_ms

    def acknowledged(self, acked: Any, strict: bool, waited_ms: int, node: redis.Redis) -> None:
        """Note how many replicas acknowledged a write; warn once while too few do.

        A beat acts on a write too few replicas acknowledged only when too few replicas are
        connected at all: any connected one could be promoted without it. ``node`` is the
        server that took the write."""
        if isinstance(acked, Exception):
            raise acked
        if int(acked) >= self.count:
            self._peek = False
            if self._short:
                self._short = False
                log.warning(
                    "redisbeat: %d replica(s) of %s acknowledge writes again",
                    acked,
                    self._describe(),
                )
            return
        # Every short write asks the sentinels (a few fast round trips): one that lands on a
        # master being replaced must not be acted on, or it is undone with the master.
        self._check_master(node)
        if strict:
            raise NotReplicated(
                f"only {acked} of {self.count} replica(s) of {self._describe()} "
                f"acknowledged the write within {waited_ms} ms; it is on the master, "
                "but a failover now could lose it (writing it again is safe)"
            )
        online = self._online_replicas(node)
        if online is not None and online >= self.count:
            # Replicas that are connected but behind: the next write gives them the whole
            # timeout, and this one is not acted on.
            self._peek = False
            raise StoreUnavailable(
                f"{online} replica(s) of {self._describe()} are connected but acknowledged "
                f"no write within {waited_ms} ms; not acting on it"
            )
        self._peek = True
        if not self._short:
            self._short = True
            log.warning(
                "redisbeat: only %d of %d replica(s) of %s acknowledged a write within %d ms, "
                "and %s connected; carrying on (a failover now could lose the last writes)",
                acked,
                self.count,
                self._describe(),
                waited_ms,
                "too few are" if online is not None else "it cannot tell how many are",
            )

    def _online_replicas(self, node: redis.Redis) -> int | None:
        """How many replicas are connected and in sync (``ROLE``); None if it cannot tell."""
        try:
            role: Any = node.role()
        except redis.ResponseError as exc:  # an ACL without +role: as before WAIT had it
            if not self._roleless:
                self._roleless = True
                log.warning("redisbeat: cannot list the replicas of %s: %s", self._describe(), exc)
            return None
        return len(role[2]) if role and role[0] == "master" else 0

    def _check_master(self, node: redis.Redis) -> None:
        """Raise ConnectionError if Sentinel is failing over (or has failed over) the master
        that just took a write: that write may be lost, so it must not be acted on.

        Every sentinel is asked: one that is failing the master over (or finds it down) is
        enough; otherwise the one with the newest configuration (highest epoch) says where
        the master is, as sentinels that have not heard of a failover yet still name the old
        one."""
        pool = node.connection_pool
        if not isinstance(pool, SentinelConnectionPool) or pool.master_address is None:
            return
        ours = (str(pool.master_address[0]), int(pool.master_address[1]))
        why = None
        newest: tuple[int, tuple[str, int]] | None = None
        for sentinel in pool.sentinel_manager.sentinels:
            try:
                state = sentinel.sentinel_master(pool.service_name)
            except redis.RedisError:
                continue  # a sentinel that cannot answer has no say
            raw = state.get("flags", "")  # a string with RESP2, a set with RESP3
            flags = set(raw) if isinstance(raw, (set, list)) else set(str(raw).split(","))
            if "failover_in_progress" in flags or "o_down" in flags:
                why = "a sentinel is failing the master over"
                break
            view = (int(state.get("config-epoch", 0)), (str(state["ip"]), int(state["port"])))
            if newest is None or view[0] > newest[0]:
                newest = view
        if why is None and newest is not None and newest[1] != ours:
            why = f"the sentinels moved the master to {newest[1][0]}:{newest[1][1]}"
        if why is None:
            return
        with contextlib.suppress(MasterNotFoundError):
            # Drops the idle connections to the old master, if it moved.
            pool.get_master_address()  # type: ignore[no-untyped-call]
        self._on_moved()
        raise StoreUnavailable(
            f"too few replicas acknowledged a write to {ours[0]}:{ours[1]} and {why}; "
            "not acting on it"
        )
