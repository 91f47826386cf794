"""The exceptions redisbeat raises: one root, a small family under it.

The store's own errors (a Redis command that failed, sorted by what an operator has to do)
are in :mod:`redisbeat.store.errors`, the one package that talks to Redis.
"""

from __future__ import annotations


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


class EntryPaused(RedisBeatError):
    """The entry is paused: what was asked (run it now) would end the pause."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"entry {self.name!r} is paused: resume it first"


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


class Incompatible(RedisBeatError):
    """What redisbeat runs with cannot work, and no retry mends it: a Redis server older than
    6.2 or without a command it calls, a kombu whose Redis transport refuses the
    installed redis-py. The message is one line that names what, and the fix.

    A beat stops on it (one line, no traceback) rather than retry forever, and so does the
    command line, both with :attr:`exit_code`.
    """

    #: The exit status of a beat, and of ``celery -A proj redisbeat``, stopped by it.
    exit_code = 6
