"""The exceptions redisbeat raises: one root, a small family under it.

Also :class:`RedisTrouble`, which sorts a failed Redis command by what an operator has to do
(Redis unreachable, out of memory, a read-only replica, an ACL denial, a key of the wrong type).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import redis


class RedisBeatError(Exception):
    """Root of every error redisbeat raises on purpose."""


class ConfigurationError(RedisBeatError):
    """A setting is missing, malformed or conflicts with another one."""


class InvalidSchedule(RedisBeatError, ValueError):
    """A schedule is malformed; ``field`` names the part that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidEntry(RedisBeatError, ValueError):
    """An entry is malformed; the message names the entry and the field."""

    def __init__(self, name: str, field: str, message: str) -> None:
        super().__init__(f"entry {name!r}: field {field!r}: {message}")
        self.name = name
        self.field = field
        self.message = message


class CorruptEntry(InvalidEntry):
    """A definition stored in Redis cannot be loaded."""


class EntryNotFound(RedisBeatError, KeyError):
    """No entry of that name is stored."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no entry named {self.name!r}"


class MessageRefused(RedisBeatError):
    """The message of one entry cannot be built, or was refused for that entry (arguments the
    task's signature rejects, an option Celery refuses, a queue that does not exist).

    Unlike a broker failure, sending the same occurrence again would fail the same way: the
    occurrence is recorded as failed rather than handed back.
    """

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"entry {name!r} cannot be sent: {reason}")
        self.name = name
        self.reason = reason


class NotReplicated(RedisBeatError, redis.ConnectionError):
    """A write reached the master but too few replicas acknowledged it in time.

    It stays on the master, and a failover now could lose it. Writing the same again is
    safe, which is what callers that retry on a Redis error do.
    """


class OwnershipError(RedisBeatError):
    """An entry belongs to another source (config, django, api) than the writer."""

    def __init__(self, name: str, owner: str, writer: str) -> None:
        super().__init__(
            f"entry {name!r} is owned by source {owner!r}; "
            f"source {writer!r} may not change it (pass force=True to take it over)"
        )
        self.name = name
        self.owner = owner
        self.writer = writer


# -- Redis failures, sorted by what an operator has to do --------------------------------------

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
#: The key named by the scripts' own WRONGTYPE error (lua/prelude.lua).
_KEY_IN_TEXT = re.compile(r"^WRONGTYPE redisbeat: key (\S+) ")


@dataclass(frozen=True)
class RedisTrouble:
    """A failed Redis command, sorted by what an operator has to do about it.

    ``kind`` is one of ``unavailable`` (no connection, or no answer in time), ``auth`` (the
    login was rejected), ``oom`` (maxmemory reached), ``readonly`` (a read-only replica),
    ``noperm`` (an ACL denial), ``wrongtype`` (a key holds the wrong type) and ``refused``
    (any other error reply). ``reply`` is Redis's own error text, verbatim, or the
    connection error; ``key`` is the key a WRONGTYPE is about, when redisbeat's scripts
    could name it.
    """

    kind: str
    reply: str
    key: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> RedisTrouble:
        if isinstance(exc, redis.exceptions.AuthenticationError):
            return cls("auth", _reply_text(exc))
        if not isinstance(exc, redis.exceptions.ResponseError):
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
        }.get(self.kind, "refusing a command")


def _reply_text(exc: BaseException) -> str:
    """Redis's error reply as Redis sent it, code first (redis-py strips some codes off)."""
    text = str(exc)
    code = getattr(exc, "status_code", None) or _CODES.get(type(exc))
    if code and not text.startswith(f"{code} "):
        return f"{code} {text}"
    return text
