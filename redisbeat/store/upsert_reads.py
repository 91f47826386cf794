"""What a write of entries reads before it writes, in one round trip, and what it learns
from it: an entry found off its schedule though not for good goes back on it.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from redis.exceptions import AskError

from ..schedule.entry import Entry
from ..schedule.kinds import Clocked
from .client import Connection
from .keys import Keys
from .pausing import Hold

log = logging.getLogger(__name__)

Read = tuple[int, list[Any], list[Any], list[Any], list[Any], list[Any]]


def read_for_write(connection: Connection, keys: Keys, names: list[str]) -> Read:
    """The Redis clock, the stored definitions, the schedule scores, the run states (for
    their pauses), the claims and when each left its schedule for good, in one round trip
    (to the server of the schedule: its clock is the one the scripts read)."""

    def read(node: redis.Redis, asking: bool) -> list[Any]:
        pipe = node.pipeline(transaction=False)
        pipe.time()
        for command, *args in (
            ("hmget", keys.entries, names),
            *(("zscore", keys.schedule, name) for name in names),
            ("hmget", keys.state, names),
            ("hmget", keys.inflight, names),
            ("zmscore", keys.spent, names),
        ):
            if asking:
                pipe.execute_command("ASKING")  # type: ignore[no-untyped-call]
            getattr(pipe, command)(*args)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        if asking:
            replies = [replies[0], *replies[2::2]]  # less the ASKINGs' OKs
        if isinstance(replies[1], AskError):
            raise replies[1]  # the slot moved: read again where it is
        return replies

    replies = connection.on_node(keys.schedule, read)
    now_reply, olds, *scores, states, claims, spent = replies
    for reply in (now_reply, olds):
        if isinstance(reply, Exception):
            raise reply
    # A schedule, state, inflight or spent key of the wrong type: the scripts name it.
    scores = [None if isinstance(s, Exception) else s for s in scores]
    states, claims, spent = (
        [None] * len(names) if isinstance(r, Exception) else r for r in (states, claims, spent)
    )
    now_ms = int(now_reply[0]) * 1000 + int(now_reply[1]) // 1000
    return now_ms, olds, scores, states, claims, spent


def is_lost(entry: Entry, score: Any, spent: Any, state: str | None) -> bool:
    """Whether ``entry`` is off its schedule though not for good, which nothing redisbeat
    does leaves it (its schedule key was deleted, say). One that left it for good is in the
    spent index, or, once the index has forgotten it, has run its one run (its ``state``)."""
    if score is not None or spent is not None:
        return False
    once = entry.one_off or isinstance(entry.schedule, Clocked)
    return not (once and Hold.of(state, 0).runs)


def said_back(names: list[str]) -> None:
    """One line for the entries a write found off their schedule with runs left, and put
    back on it: nothing redisbeat does leaves them so, something deleted their due times."""
    names = sorted(names)
    log.warning(
        "redisbeat: %d entr%s had no due time in Redis though enabled, with runs left (was "
        "the schedule key deleted?); put back on the schedule from their definitions: %s",
        len(names),
        "y" if len(names) == 1 else "ies",
        ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else ""),
    )
