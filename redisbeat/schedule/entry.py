"""Entry: one periodic task's definition. A plain value: JSON in and out, no I/O."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from ..errors import CorruptEntry, InvalidEntry, InvalidSchedule
from .clock import parse_iso
from .codec import from_json as schedule_from_json
from .codec import to_json as schedule_to_json
from .kinds import Schedule, as_schedule, fixed_offset, with_defaults
from .occurrences import Occurrences

MAX_NAME_LENGTH = 200
MAX_TASK_LENGTH = 255
CATCH_UP_POLICIES = ("once", "skip", "all")
OVERLAP_POLICIES = ("allow", "skip", "buffer_one")
#: Options redisbeat sets itself on every send.
RESERVED_OPTIONS = frozenset({"task_id"})


@dataclass(frozen=True)
class Entry(Occurrences):
    """A periodic task: what to send, when, and how to catch up after downtime.

    ``schedule`` takes anything :func:`redisbeat.schedules.as_schedule` accepts (a Celery
    ``schedule``/``crontab``/``solar``, a ``timedelta``, seconds, or a redisbeat schedule).
    ``start_at`` is the first occurrence and anchors an interval's phase; ``end_at`` is the
    last moment an occurrence may be due. ``catch_up`` decides what happens to occurrences
    missed while no beat ran: ``"once"`` sends one for all of them, ``"skip"`` resumes at the
    next future one, ``"all"`` sends each of them, oldest first (see
    :mod:`redisbeat.schedule.catch_up`). ``grace`` (seconds) is the most an occurrence may
    be late and still be sent (default: unlimited for ``"once"`` and ``"all"``, 5 s for
    ``"skip"``). ``overlap`` decides what an occurrence does while the entry's previous one
    still runs on a worker (``"allow"``, ``"skip"`` or ``"buffer_one"``; it needs the worker
    hook, :mod:`redisbeat.worker`); ``jitter`` (seconds) delays each occurrence by a stable
    amount up to it, never past the next one.
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
    max_runs: int | None = None
    overlap: str = "allow"
    jitter: float | None = None

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
        runs = self.max_runs
        if runs is not None and (not isinstance(runs, int) or isinstance(runs, bool) or runs < 1):
            raise InvalidEntry(name, "max_runs", "must be a positive integer or None")
        if self.overlap not in OVERLAP_POLICIES:
            raise InvalidEntry(name, "overlap", f"must be one of {OVERLAP_POLICIES}")
        if self.jitter is not None and not _non_negative(self.jitter):
            raise InvalidEntry(name, "jitter", "must be a non-negative number of seconds or None")
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
            # Left out while unset: definitions stored before it existed dump as they did.
            **({} if self.max_runs is None else {"max_runs": self.max_runs}),
            **({} if self.overlap == "allow" else {"overlap": self.overlap}),
            **({} if not self.jitter else {"jitter": self.jitter}),
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
        return self.with_defaults(tz)

    def with_defaults(
        self, tz: str, dst_gap: str | None = None, dst_fold: str | None = None
    ) -> Entry:
        """This entry with its schedule's zone, and DST policies where given, filled in
        where it has none (a Crontab or Cron's: the deployment's)."""
        schedule = with_defaults(self.schedule, tz, dst_gap, dst_fold)
        return self if schedule == self.schedule else replace(self, schedule=schedule)

    def timing_key(self) -> tuple[Any, ...]:
        """What decides when the entry is due: an edit that keeps it keeps the next due time."""
        return (
            self.schedule,
            self.start_at,
            self.end_at,
            self.enabled,
            self.one_off,
            self.max_runs,
        )


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
        parsed = parse_iso(value)
    except (TypeError, AttributeError, ValueError):
        raise CorruptEntry(name, key, f"is not an ISO 8601 time: {value!r}") from None
    return parsed
