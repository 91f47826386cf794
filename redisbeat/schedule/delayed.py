"""Delayed one-off tasks: what is asked for, what is stored for one, what is read back.

A delayed task is a Celery task to send once, at a time by the Redis clock, under a key the
caller may use to replace, reschedule or cancel it, and optionally an owner whose pending
tasks can be listed and cancelled together. It is stored as a small JSON record, not as a
periodic entry; its fields are checked as an entry's are, and an error names the key and
the field.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from ..errors import CorruptEntry, InvalidEntry
from .clock import MAX_MS, from_ms, to_ms
from .entry import MAX_NAME_LENGTH, Entry
from .kinds import Clocked, Interval

#: Where a delayed task is: waiting for its time, held by a beat that is sending it (a
#: cancel or reschedule now comes too late), or sent, or refused by Celery for itself
#: (these two kept for ``redisbeat_delayed_retention_seconds``, then forgotten).
State = Literal["pending", "sending", "sent", "failed"]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


@dataclass(frozen=True)
class Delay:
    """One task to delay, checked: what :meth:`ScheduleStore.delay` writes.

    ``at_ms`` is the due time; or ``countdown_ms`` from the Redis clock when it is written.
    """

    key: str
    task: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    options: Mapping[str, Any]
    owner: str | None
    at_ms: int | None
    countdown_ms: int | None
    #: A past occurrence of a periodic entry that :meth:`ScheduleStore.backfill` sends: the
    #: entry's name and the occurrence's due time (its message carries both, and its id).
    backfill: tuple[str, int] | None = None

    @classmethod
    def of(
        cls,
        task: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        eta: datetime | None = None,
        countdown: float | timedelta | None = None,
        key: str | None = None,
        owner: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Delay:
        """Check one delay's arguments (``task``: a name, a Celery task or a signature)."""
        key = uuid.uuid4().hex if key is None else key
        name, args, kwargs, options = _task_parts(key, task, args, kwargs or {}, options or {})
        # The fields an entry has are checked as an entry's are: the same rules, the same
        # errors naming the key and the field.
        try:
            checked = Entry(key, name, Interval(60), args=args, kwargs=kwargs, options=options)
        except InvalidEntry as exc:
            what = "key" if exc.field == "name" else exc.field
            raise InvalidEntry(key, what, exc.message) from None
        _check_owner(key, owner)
        at_ms, countdown_ms = when(key, eta, countdown)
        return cls(
            key,
            checked.task,
            tuple(checked.args),
            checked.kwargs,
            checked.options,
            owner,
            at_ms,
            countdown_ms,
        )

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Delay:
        """One item of :meth:`ScheduleStore.delay_many`: a mapping of ``delay``'s arguments."""
        if not isinstance(item, Mapping) or "task" not in item:
            raise InvalidEntry(str(item)[:80], "task", "each item must be a mapping with a task")
        unknown = set(item) - _ITEM_FIELDS
        if unknown:
            key = str(item.get("key", "?"))
            raise InvalidEntry(key, sorted(unknown)[0], "is not an argument of delay()")
        rest = {k: v for k, v in item.items() if k not in ("task", "args", "kwargs")}
        return cls.of(item["task"], item.get("args", ()), item.get("kwargs"), **rest)

    def record(self) -> dict[str, Any]:
        """The stored record's fields: only what is not empty."""
        record: dict[str, Any] = {"task": self.task}
        for name in ("args", "kwargs", "options", "owner"):
            value = getattr(self, name)
            if value:
                record[name] = list(value) if name == "args" else value
        if self.backfill is not None:
            record["backfill"] = {"entry": self.backfill[0], "due": self.backfill[1]}
        return record

    def definition(self) -> str:
        """The stored record, as JSON."""
        return _dumps(self.record())


_ITEM_FIELDS = frozenset({"task", "args", "kwargs", "eta", "countdown", "key", "owner", "options"})


@dataclass(frozen=True)
class DelayedTask:
    """A delayed task as read back from Redis."""

    key: str
    task: str
    #: When it is (or was) due, by the Redis clock.
    eta: datetime
    owner: str | None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    state: State = "pending"
    #: Once sent (or failed): the Celery task id, when it went out, and why it failed.
    task_id: str | None = None
    sent_at: datetime | None = None
    error: str | None = None
    #: Once sent: copies of its run that workers with the hook dropped (sent again under
    #: its task id after a beat was killed).
    duplicates: int = 0


#: The ``source`` of the Entry a beat sends a delayed task as (its message names the key).
SOURCE = "delayed"
#: The ``source`` of the Entry a beat sends a backfilled occurrence as: its name is the
#: periodic entry's and its schedule the occurrence's due time.
BACKFILL_SOURCE = "backfill"


def entry_of(key: str, raw: str, due_ms: int) -> Entry:
    """The one-off entry a beat sends a stored task as, due at ``due_ms``; a record that
    cannot be one raises :class:`CorruptEntry`, naming the key and the field."""
    try:
        record = json.loads(raw)
    except ValueError as exc:
        raise CorruptEntry(key, "definition", f"is not valid JSON: {exc}") from None
    if not isinstance(record, dict):
        raise CorruptEntry(key, "definition", "is not a JSON object")
    backfill = record.get("backfill")
    is_backfill = isinstance(backfill, dict) and isinstance(backfill.get("entry"), str)
    if isinstance(backfill, dict) and is_backfill:
        occurrence = backfill.get("due")
        if not isinstance(occurrence, int) or not 0 <= occurrence <= MAX_MS:
            raise CorruptEntry(key, "backfill", "has no valid due time")
        key, due_ms = backfill["entry"], occurrence
    try:
        return Entry(
            key,
            record.get("task"),  # type: ignore[arg-type]
            Clocked(from_ms(due_ms)),
            args=record.get("args", ()),
            kwargs=record.get("kwargs", {}),
            options=record.get("options", {}),
            one_off=True,
            source=BACKFILL_SOURCE if is_backfill else SOURCE,
        )
    except InvalidEntry as exc:
        raise CorruptEntry(key, exc.field, exc.message) from None


def read_definition(raw: str) -> dict[str, Any]:
    """A stored record's fields; a record redisbeat did not write reads as its task alone."""
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("task"), str):
        return {"task": "", "args": [], "kwargs": {}, "options": {}}
    return record


def _task_parts(
    key: str,
    task: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
) -> tuple[str, tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """A task name, or a Celery task (its name), or a signature (its name, with its
    arguments before ``args``, and its keyword arguments and options under the given)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise InvalidEntry(key, "args", "must be a list or tuple")
    if isinstance(task, str):
        return task, tuple(args), dict(kwargs), dict(options)
    if isinstance(task, Mapping) and "task" in task:  # a Celery signature is a dict
        return (
            task["task"],
            (*task.get("args", ()), *args),
            {**task.get("kwargs", {}), **kwargs},
            {**task.get("options", {}), **options},
        )
    name = getattr(task, "name", None)
    if isinstance(name, str):
        return name, tuple(args), dict(kwargs), dict(options)
    raise InvalidEntry(key, "task", f"must be a task name, a Celery task or a signature: {task!r}")


def _check_owner(key: str, owner: object) -> None:
    if owner is None:
        return
    if not isinstance(owner, str) or not owner or not owner.isprintable():
        raise InvalidEntry(key, "owner", "must be a non-empty printable string")
    if len(owner) > MAX_NAME_LENGTH:
        raise InvalidEntry(key, "owner", f"must be at most {MAX_NAME_LENGTH} characters")


def when(key: str, eta: object, countdown: object) -> tuple[int | None, int | None]:
    """The due time (ms) or the countdown (ms) of the task ``key``: exactly one of ``eta``
    (an aware datetime) and ``countdown`` (seconds or a timedelta) is given."""
    if (eta is None) == (countdown is None):
        raise InvalidEntry(key, "eta", "give exactly one of eta and countdown")
    if eta is not None:
        if not isinstance(eta, datetime) or eta.utcoffset() is None:
            raise InvalidEntry(key, "eta", f"must be a time-zone aware datetime: {eta!r}")
        at = to_ms(eta)
        if not 0 <= at <= MAX_MS:
            raise InvalidEntry(key, "eta", "must be after 1970")
        return at, None
    seconds = countdown.total_seconds() if isinstance(countdown, timedelta) else countdown
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise InvalidEntry(
            key, "countdown", f"must be a non-negative number of seconds: {countdown!r}"
        )
    return None, round(seconds * 1000)


def change_of(
    key: str, eta: object = None, countdown: object = None, by: object = None
) -> tuple[str, int]:
    """A reschedule's move, checked: ('at', due ms), ('in', ms from now) or ('by', ms
    from its due time, negative: sooner); exactly one of ``eta``, ``countdown`` and ``by``
    (a timedelta) is given."""
    check_key(key)
    if sum(v is not None for v in (eta, countdown, by)) != 1:
        raise InvalidEntry(key, "eta", "give exactly one of eta, countdown and by")
    if by is not None:
        if not isinstance(by, timedelta):
            raise InvalidEntry(key, "by", f"must be a timedelta: {by!r}")
        return "by", round(by.total_seconds() * 1000)
    at_ms, countdown_ms = when(key, eta, countdown)
    return ("at", at_ms) if at_ms is not None else ("in", countdown_ms or 0)


def check_key(key: object) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_NAME_LENGTH:
        raise InvalidEntry(
            str(key)[:80],
            "key",
            f"must be a non-empty string of at most {MAX_NAME_LENGTH} characters",
        )
