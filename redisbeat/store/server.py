"""What redisbeat needs of a Redis server, and the look at it each connection takes once.

The scripts (``lua/``) call commands that Redis 6.0 lacks: on such a server every finish
fails with "Unknown Redis command called from Lua script", which no retry mends. So at its
first contact that answers, a connection reads the server's name, version and mode
(``HELLO``, which every user may run) and asks whether it knows those commands (``COMMAND
INFO``), and a server that cannot work is refused in one line
(:class:`~.errors.StoreIncompatible`). The mode tells a Redis Cluster node reached by a
``redis://`` URL too. Redis 6.0 and 6.1 answer ``HELLO`` only with a protocol version: ``INFO
server`` says the same there. A user whose ACL denies ``COMMAND INFO`` (or, there, ``INFO``)
skips that part of the look: a beat must not stop over a permission it needs nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from .errors import RedisTrouble, StoreIncompatible, StoreRefused

#: The oldest Redis redisbeat runs on.
MINIMUM = (6, 2)
#: The commands redisbeat calls (in its scripts, or from the store's modules) that Redis 6.0
#: lacks, and the release that brought each (the tests read ``lua/*.lua`` and the store's
#: modules so that this cannot fall behind them).
NEWER_COMMANDS: dict[str, str] = {"ZMSCORE": "6.2"}
#: Every Valkey is a fork of Redis 7.2, whatever its own version.
VALKEY_IS_REDIS = (7, 2)

_RELEASE = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class Server:
    """A server as it names itself: "Redis 7.0.15", "Valkey 9.1.2"."""

    name: str
    version: str
    #: The Redis release its commands match; None when it does not say.
    redis_release: tuple[int, int] | None
    #: "standalone", "cluster" or "sentinel" ("" when it does not say).
    mode: str = ""

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Server:
        """From ``HELLO``'s reply (server, version, mode) or ``INFO server`` (redis_version,
        and a fork's server_name and own version, e.g. valkey_version; redis_mode)."""
        own = str(fields.get("server_name") or fields.get("server") or "redis").lower()
        name = "Redis" if own == "redis" else own.capitalize()
        version = fields.get(f"{own}_version") or fields.get("version")
        version = str(version or fields.get("redis_version") or "of unknown version")
        compatible = fields.get("redis_version") or (version if own == "redis" else "")
        found = _RELEASE.match(str(compatible))
        release = (int(found[1]), int(found[2])) if found else None
        if release is None and own == "valkey":
            release = VALKEY_IS_REDIS
        return cls(
            name, version, release, str(fields.get("mode") or fields.get("redis_mode") or "")
        )

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def refusal(server: Server | None, missing: Collection[str], where: str) -> str | None:
    """Why redisbeat cannot work with the server at ``where``, in one line that names the
    server, what it lacks and the fix; None when it can. ``server`` is None where it would
    not say; ``missing`` are the :data:`NEWER_COMMANDS` it does not know."""
    least = ".".join(map(str, MINIMUM))
    release = server.redis_release if server is not None else None
    if release is not None and release < MINIMUM:
        return (
            f"{server} at {where} is too old: redisbeat needs Redis {least} or later (it "
            f"calls {', '.join(NEWER_COMMANDS)}); upgrade the server, or point "
            f"redisbeat_redis_url at one that is Redis {least} or later"
        )
    if not missing:
        return None
    names = sorted(missing)
    since = max(NEWER_COMMANDS[n] for n in names)
    what = f"{server} at {where}" if server is not None else f"the server at {where}"
    fix = (
        "it was renamed or disabled (rename-command): restore it in the server's configuration"
        if release is not None
        else f"upgrade it to Redis {least} or later, or restore a command renamed or disabled "
        "by rename-command"
    )
    return (
        f"{what} has no {', '.join(names)} command{'s' if len(names) > 1 else ''} (Redis "
        f"{since}+), which redisbeat calls; {fix}"
    )


def check(node: redis.Redis, where: str, *, plain: bool) -> None:
    """Refuse the server ``node`` talks to when redisbeat cannot work with it
    (:class:`~.errors.StoreIncompatible`), or when ``plain`` (a ``redis://`` URL) and it is a
    Redis Cluster node (:class:`~.errors.StoreRefused`). One round trip (two on Redis 6.0)."""
    fields, commands = _look(node)
    server = Server.from_fields(fields) if fields is not None else None
    missing = []
    if isinstance(commands, list) and len(commands) == len(NEWER_COMMANDS):
        missing = [n for n, c in zip(NEWER_COMMANDS, commands, strict=True) if not c]
    why = refusal(server, missing, where)
    if why is not None:
        raise StoreIncompatible(why)
    if plain and server is not None and server.mode == "cluster":
        # It answers for its own slots only, and a failover would leave the beats talking to
        # a replica.
        exc = StoreRefused(f"{where} runs in cluster mode")
        exc.trouble = RedisTrouble("cluster", str(exc))
        raise exc


def _look(node: redis.Redis) -> tuple[Any, Any]:
    """``HELLO``'s reply (``INFO server`` where HELLO wants arguments) and ``COMMAND INFO``
    of :data:`NEWER_COMMANDS`; None for either the server refused (an ACL denial, a proxy
    without the command)."""
    probe = redis.Redis(connection_pool=node.connection_pool)
    # The replies as Redis sends them: redis-py's parsing of COMMAND fails on the nil that
    # stands for an unknown command. A client of its own, so that no other's parsing changes.
    for command in ("HELLO", "COMMAND"):
        probe.set_response_callback(command, _as_sent)
    pipe = probe.pipeline(transaction=False)
    pipe.execute_command("HELLO")  # type: ignore[no-untyped-call]  # no version: it stays
    pipe.execute_command("COMMAND", "INFO", *NEWER_COMMANDS)  # type: ignore[no-untyped-call]
    hello, commands = (_unless_refused(r) for r in pipe.execute(raise_on_error=False))
    if hello is None:
        try:
            return probe.info("server"), commands
        except redis.ResponseError:
            return None, commands
    return _as_map(hello), commands


def _unless_refused(reply: Any) -> Any:
    return None if isinstance(reply, redis.ResponseError) else reply


def _as_map(reply: Any) -> dict[str, Any]:
    """A RESP3 map, or the RESP2 array that spells it."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _as_sent(reply: Any, **_options: Any) -> Any:
    return reply
