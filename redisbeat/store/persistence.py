"""Whether the store's Redis keeps anything on disk, and the warning when it keeps nothing.

A Redis that neither appends every write to a file (``appendonly no``) nor takes snapshots
(``save ""``) comes back empty from a restart: the entries added at run time, the pending
delayed tasks, the run history and state are gone. A beat asks once, at its first heartbeat,
and so does ``status``, with ``CONFIG GET`` (each master of a cluster). A server that will
not say is not warned about: a managed Redis without ``CONFIG``, or an ACL user without
``+config|get`` (the documented users lack it: ``CONFIG GET`` reads the server's passwords
too). ``INFO persistence``, the fallback one might think of, tells whether AOF is on but not
whether snapshots are taken, so it cannot tell a server that keeps nothing either.
"""

from __future__ import annotations

from typing import Any

import redis

from .client import Connection

#: Where the warning sends the reader.
SEE = "docs/operations.md#persistence"


def keeps_nothing(node: redis.Redis) -> bool | None:
    """Whether the server ``node`` talks to keeps nothing on disk: True when AOF is off and
    no snapshot is configured; None when it will not say (``CONFIG`` refused or renamed)."""
    pipe = node.pipeline(transaction=False)
    pipe.config_get("appendonly")
    pipe.config_get("save")
    appendonly, save = (_setting(r) for r in pipe.execute(raise_on_error=False))
    if appendonly is None or save is None:
        return None
    return appendonly == "no" and not save.strip()


def _setting(reply: Any) -> str | None:
    """The one value of a ``CONFIG GET`` reply; None for a refusal (an error reply)."""
    if not isinstance(reply, dict) or len(reply) != 1:
        return None
    return str(next(iter(reply.values())))


def volatile(connection: Connection) -> list[str]:
    """Each server that holds the store (each master of a cluster) and keeps nothing on
    disk, named as log lines name it (no password)."""
    connection.client  # noqa: B018  (the look at the server comes first)
    return [where for node, where in connection.masters() if keeps_nothing(node)]


def warning(where: str) -> str:
    """The one line that says the Redis at ``where`` keeps nothing on disk, what a restart
    loses, and what to do."""
    return (
        f"Redis at {where} keeps nothing on disk (appendonly is no and save is empty): a "
        "restart or a failover to a fresh server loses the entries added through the store "
        "API and the command line, every pending delayed task, and each entry's run state "
        "and history (the beat_schedule entries come back from the config, the Django "
        "admin's with its next sync); turn on AOF (appendonly yes, appendfsync everysec) or "
        f"RDB snapshots ({SEE}), or set redisbeat_persistence_warning = False if this is meant"
    )
