"""Entry: one periodic task's definition. A plain value: JSON in and out, no I/O."""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from ..errors import CorruptEntry, InvalidEntry, InvalidSchedule
from .clock import to_ms
from .codec import from_json as schedule_from_json
from .codec import to_json as schedule_to_json
from .kinds import Clocked, Interval, Schedule, as_schedule, fixed_offset, with_default_tz
from .timing import last_due_ms, next_due_ms

MAX_NAME_LENGTH = 200
MAX_TASK_LENGTH = 255
CATCH_UP_POLICIES = ("once", "skip")
#: How late (seconds) an occurrence of a ``catch_up="skip"`` entry may be and still be sent.
DEFAULT_SKIP_GRACE = 5.0
#: Options redisbeat sets itself on every send.
RESERVED_OPTIONS = frozenset({"task_id"})


@dataclass(frozen=True)
class Entry:
    """A periodic task: what to send, when, and how to catch up after downtime.

    ``schedule`` takes anything :func:`redisbeat.schedules.as_schedule` accepts (a Celery
    ``schedule``/``crontab``/``solar``, a ``timedelta``, seconds, or a redisbeat schedule).
    ``start_at`` is the first occurrence and anchors an interval's phase; ``end_at`` is the
    last moment an occurrence may be due. ``catch_up`` decides what happens to occurrences
    missed while no beat ran: ``"once"`` sends one for all of them, ``"skip"`` resumes at the
    next future one. ``grace`` (seconds) is the most an occurrence may be late and still be
    sent (default: unlimited for ``"once"``, 5 s for ``"skip"``).
    """

    name: str
    task: str
    schedule: Schedule
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    start_at: datetime | None = None
    end_at: datetime | None = None
    one_off: bool = False
    catch_up: str = "once"
    grace: float | None = None
    source: str = "api"
    description: str = ""

    def __post_init__(self) -> None:
        self._validate(decoded=False)

    def _validate(self, decoded: bool) -> None:
        """Check every field; ``decoded``: args, kwargs and options are fresh out of JSON
        (without NaN or Infinity), so JSON can hold them: that check, the dearest, is left
        out when a beat loads a definition."""
        name = self.name
        if not isinstance(name, str) or not name.strip():
            raise InvalidEntry(str(name), "name", "must be a non-empty string")
        if len(name) > MAX_NAME_LENGTH or not name.isprintable():
            raise InvalidEntry(
                name, "name", f"must be printable and at most {MAX_NAME_LENGTH} characters"
            )
        if not isinstance(self.task, str) or not self.task.strip():
            raise InvalidEntry(name, "task", "must be a non-empty task name")
        if len(self.task) > MAX_TASK_LENGTH:
            raise InvalidEntry(name, "task", f"must be at most {MAX_TASK_LENGTH} characters")
        try:
            object.__setattr__(self, "schedule", as_schedule(self.schedule))
        except InvalidSchedule as exc:
            raise InvalidEntry(name, exc.field, exc.message) from None
        self._check_json(decoded)
        self._check_times()
        if self.catch_up not in CATCH_UP_POLICIES:
            raise InvalidEntry(name, "catch_up", f"must be one of {CATCH_UP_POLICIES}")
        if self.grace is not None and not _non_negative(self.grace):
            raise InvalidEntry(name, "grace", "must be a non-negative number of seconds")
        for flag in ("enabled", "one_off"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidEntry(name, flag, "must be True or False")
        if not isinstance(self.source, str) or not self.source or len(self.source) > 64:
            raise InvalidEntry(name, "source", "must be a short non-empty string")
        if not isinstance(self.description, str):
            raise InvalidEntry(name, "description", "must be a string")

    def _check_json(self, decoded: bool) -> None:
        if isinstance(self.args, (str, bytes)) or not isinstance(self.args, Sequence):
            raise InvalidEntry(self.name, "args", "must be a list or tuple")
        object.__setattr__(self, "args", tuple(self.args))
        for name in ("kwargs", "options"):
            value = getattr(self, name)
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise InvalidEntry(self.name, name, "must be a mapping with string keys")
            if not decoded:
                object.__setattr__(self, name, dict(value))
        if not decoded:
            self._check_serialisable()
        reserved = RESERVED_OPTIONS & set(self.options)
        if reserved:
            raise InvalidEntry(self.name, "options", f"may not set {sorted(reserved)}")

    def _check_serialisable(self) -> None:
        try:
            _dumps([self.args, self.kwargs, self.options])
        except (TypeError, ValueError, RecursionError):
            # Encoded separately only to name the field.
            for name in ("args", "kwargs", "options"):
                try:
                    _dumps(getattr(self, name))
                except (TypeError, ValueError, RecursionError) as exc:
                    raise InvalidEntry(
                        self.name, name, f"is not JSON-serialisable: {exc}"
                    ) from None

    def _check_times(self) -> None:
        for name in ("start_at", "end_at"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, datetime) or value.utcoffset() is None:
                raise InvalidEntry(self.name, name, "must be a time-zone aware datetime")
            try:
                # Kept as an offset, as JSON keeps it, so a loaded entry equals this one.
                object.__setattr__(self, name, fixed_offset(value))
            except ValueError as exc:
                raise InvalidEntry(self.name, name, str(exc)) from None
        if self.start_at and self.end_at and self.end_at < self.start_at:
            raise InvalidEntry(self.name, "end_at", "is before start_at")

    # -- JSON ---------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "schedule": schedule_to_json(self.schedule),
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "options": dict(self.options),
            "enabled": self.enabled,
            "start_at": self.start_at.isoformat() if self.start_at else None,
            "end_at": self.end_at.isoformat() if self.end_at else None,
            "one_off": self.one_off,
            "catch_up": self.catch_up,
            "grace": self.grace,
            "source": self.source,
            "description": self.description,
        }

    def dumps(self) -> str:
        """The canonical stored form: equal entries give identical strings."""
        return _dumps(self.to_json())

    @classmethod
    def loads(cls, raw: str | bytes, name: str) -> Entry:
        """Load a stored definition; anything wrong raises :class:`CorruptEntry`."""
        if isinstance(raw, str) and not _is_utf8(raw):
            # Bytes that were not UTF-8, kept as lone surrogates by the store's client.
            raise CorruptEntry(name, "definition", "is not UTF-8 text")
        try:
            text = raw if isinstance(raw, str) else raw.decode()
            data = json.loads(text)
        # RecursionError: nested too deeply; ValueError: UnicodeDecodeError too
        except (ValueError, RecursionError) as exc:
            raise CorruptEntry(name, "definition", f"is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CorruptEntry(name, "definition", "is not a JSON object")
        if data.get("name") != name:
            raise CorruptEntry(name, "name", f"does not match the key: {data.get('name')!r}")
        # Keys a newer release may add are ignored, so a rolling upgrade never quarantines.
        values = {k: v for k, v in data.items() if k in ENTRY_FIELDS}
        if "task" not in values:  # the one required field nothing below names
            raise CorruptEntry(name, "task", "is missing")
        try:
            values["schedule"] = schedule_from_json(data.get("schedule"))
            for key in ("start_at", "end_at"):
                if values.get(key) is not None:
                    values[key] = _parse_time(name, key, values[key])
            # NaN and Infinity are read, but are not JSON: checked as the constructor checks.
            return cls._decoded(values, "NaN" not in text and "Infinity" not in text)
        except InvalidSchedule as exc:
            raise CorruptEntry(name, exc.field, exc.message) from None
        except InvalidEntry as exc:
            raise CorruptEntry(name, exc.field, exc.message) from None
        except TypeError as exc:
            raise CorruptEntry(name, "definition", str(exc)) from None

    @classmethod
    def _decoded(cls, values: dict[str, Any], plain: bool) -> Entry:
        """An entry from a definition's decoded fields, checked as the constructor checks
        (``plain``: they hold nothing JSON cannot, which needs no check)."""
        entry = cls.__new__(cls)  # loads saw to name, task and schedule
        # Frozen: the fields go straight into the instance, as the constructor would put them.
        vars(entry).update(_DEFAULTS, kwargs={}, options={})
        vars(entry).update(values)
        entry._validate(decoded=plain)
        return entry

    # -- time ---------------------------------------------------------------------------------

    def with_default_tz(self, tz: str) -> Entry:
        """This entry with its schedule's zone filled in where it has none."""
        schedule = with_default_tz(self.schedule, tz)
        return self if schedule == self.schedule else replace(self, schedule=schedule)

    def timing_key(self) -> tuple[Any, ...]:
        """What decides when the entry is due: an edit that keeps it keeps the next due time."""
        return (self.schedule, self.start_at, self.end_at, self.enabled, self.one_off)

    def first_due_ms(self, now_ms: int, tz: str = "UTC") -> int | None:
        """When a newly written entry is first due (None: never)."""
        if not self.enabled:
            return None
        schedule = self.schedule
        start = to_ms(self.start_at) if self.start_at else None
        if isinstance(schedule, Clocked):
            due: int | None = to_ms(schedule.at)
        elif isinstance(schedule, Interval):
            if start is not None and start >= now_ms:
                due = start
            else:
                due = next_due_ms(schedule, now_ms, anchor_ms=start)
        else:
            after = now_ms if start is None else max(now_ms, start - 1)
            due = next_due_ms(schedule, after, tz=tz)
        return self._bounded(due)

    def next_due_ms(self, due_ms: int, now_ms: int, tz: str = "UTC") -> int | None:
        """The next due time after the occurrence due at ``due_ms`` is handled at ``now_ms``.

        Interval entries stay on their grid (anchored at ``start_at``, else at the occurrence
        just handled), so they never drift; occurrences already past coalesce.
        """
        if self.one_off or not self.enabled or isinstance(self.schedule, Clocked):
            return None
        anchor = to_ms(self.start_at) if self.start_at else due_ms
        return self._bounded(
            next_due_ms(self.schedule, max(now_ms, due_ms), anchor_ms=anchor, tz=tz)
        )

    def latest_due_ms(self, due_ms: int, now_ms: int, tz: str = "UTC") -> int:
        """The occurrence a claim of the one due at ``due_ms`` stands for at ``now_ms``: the
        last one due by then (and not after ``end_at``). Those before it coalesce into it.

        A late send thus carries the newest missed occurrence's due time and task id, which
        no beat can have sent yet: had the oldest been kept, a failover that undid the finish
        of an occurrence already sent would make the catch-up send repeat it, and downstream
        deduplication would drop the occurrences that only it stood for.
        """
        if self.one_off or not self.enabled or isinstance(self.schedule, Clocked):
            return due_ms
        until = now_ms if self.end_at is None else min(now_ms, to_ms(self.end_at))
        anchor = to_ms(self.start_at) if self.start_at else due_ms
        return last_due_ms(self.schedule, due_ms, until, anchor_ms=anchor, tz=tz)

    def is_missed(self, due_ms: int, now_ms: int) -> bool:
        """True when an occurrence is too late to send under this entry's catch-up policy."""
        grace = self.grace
        if grace is None:
            grace = math.inf if self.catch_up == "once" else DEFAULT_SKIP_GRACE
        return now_ms - due_ms > grace * 1000

    def _bounded(self, due: int | None) -> int | None:
        if due is None or (self.end_at is not None and due > to_ms(self.end_at)):
            return None
        return due


#: The keys of a stored definition (and of a document) that are the entry's fields.
ENTRY_FIELDS = frozenset(f.name for f in fields(Entry))
#: The defaults of the fields a definition may leave out (kwargs and options: a new dict).
_DEFAULTS = {f.name: None if f.default is MISSING else f.default for f in fields(Entry)}


#: The canonical form: keys sorted, no spaces, no NaN or Infinity (not JSON).
_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _non_negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf


def _parse_time(name: str, key: str, value: Any) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise CorruptEntry(name, key, f"is not an ISO 8601 time: {value!r}") from None
    return parsed


#: Namespace of occurrence ids (UUID5), fixed forever so ids stay stable across releases.
OCCURRENCE_NAMESPACE = uuid.UUID("6f1c2b5e-8d3a-4e0f-9b7a-2c4d6e8f0a1b")
_NAMESPACE_BYTES = OCCURRENCE_NAMESPACE.bytes


def occurrence_id(prefix: str, name: str, due_ms: int) -> str:
    """The task id of the occurrence of entry ``name`` due at ``due_ms``.

    Every beat derives the same id for the same occurrence, so a re-send after a crash
    carries the id of the first send and can be dropped downstream. It is
    ``str(uuid.uuid5(OCCURRENCE_NAMESPACE, f"{prefix}\\x00{name}\\x00{due_ms}"))``, worked out
    without the UUID object (a beat makes one per send).
    """
    digest = bytearray(
        hashlib.sha1(_NAMESPACE_BYTES + f"{prefix}\x00{name}\x00{due_ms}".encode()).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
