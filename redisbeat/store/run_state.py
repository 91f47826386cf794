"""An entry's run state as the store reads it: its schedule score, the state JSON the
scripts write, a claim on it, a quarantine record, and a pause."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..schedule.clock import from_ms, valid_ms


@dataclass(frozen=True)
class Quarantined:
    """A stored definition that could not be loaded, set aside with the reason."""

    name: str
    definition: str
    error: str
    at: datetime | None
    by: str

    @classmethod
    def from_redis(cls, name: str, raw: str) -> Quarantined:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            return cls(name, raw, "the quarantine record is not what redisbeat writes", None, "")
        at = data.get("at")
        return cls(
            name=name,
            definition=str(data.get("definition", "")),
            error=str(data.get("error", "")),
            at=from_ms(int(at)) if valid_ms(at) else None,
            by=str(data.get("by", "")),
        )


@dataclass(frozen=True)
class Paused:
    """An entry paused by :meth:`ScheduleStore.pause`: until when (None: until resumed),
    why, and since when."""

    until: datetime | None
    note: str
    at: datetime | None

    @classmethod
    def from_record(cls, data: Any) -> Paused | None:
        """From the state's ``paused`` field; None when there is none, or the pause is over
        (a time it was paused until is past: the entry runs again)."""
        if not isinstance(data, dict):
            return None
        until, at = data.get("until"), data.get("at")
        if valid_ms(until) and until <= time.time() * 1000:
            return None
        return cls(
            until=from_ms(int(until)) if valid_ms(until) else None,
            note=str(data.get("note") or ""),
            at=from_ms(int(at)) if valid_ms(at) else None,
        )


#: The outcomes of a run a worker could not start: its task is not registered there
#: (``unregistered``), or it refused the message (``rejected``: a content type it does not
#: accept, a message it cannot read).
NOT_STARTED = ("unregistered", "rejected")
#: The outcomes that ask for a look (the admin shows them as problems).
TROUBLE = ("failed", "revoked", *NOT_STARTED)


@dataclass(frozen=True)
class Outcome:
    """How the entry's last run on a worker ended (the worker hook's record)."""

    task_id: str
    #: ``succeeded``, ``failed``, ``retried`` or ``revoked``; or one of :data:`NOT_STARTED`.
    outcome: str
    exception: str | None
    at: datetime | None
    #: Seconds it ran (None: its start was not recorded).
    runtime: float | None
    #: For a run that could not start: why, in words, and what fixes it.
    detail: str | None = None

    @classmethod
    def from_record(cls, data: Any) -> Outcome | None:
        if not isinstance(data, dict) or not isinstance(data.get("outcome"), str):
            return None
        runtime = data.get("runtime")
        return cls(
            task_id=str(data.get("task_id") or ""),
            outcome=data["outcome"],
            exception=_text_field(data.get("exception")),
            at=_time(data.get("at")),
            runtime=runtime / 1000 if isinstance(runtime, (int, float)) else None,
            detail=_text_field(data.get("detail")),
        )


@dataclass(frozen=True)
class Passed:
    """The last occurrences that were missed (``reason``: ``"late"``) or skipped
    (``"overlap"``): how many, before which due time, and when it was known."""

    count: int
    reason: str
    due: datetime | None
    at: datetime | None

    @classmethod
    def from_record(cls, data: Any) -> Passed | None:
        if not isinstance(data, dict):
            return None
        return cls(
            count=_count(data.get("count")),
            reason=str(data.get("reason") or ""),
            due=_time(data.get("due")),
            at=_time(data.get("at")),
        )


@dataclass(frozen=True)
class Duplicate:
    """The last copy of a run a worker dropped (the worker hook's duplicate check): its task
    id and due time, when and where it was dropped, and how far the first copy had got on
    which worker (``stage``: ``received``, ``started`` or ``ended``)."""

    task_id: str
    due: datetime | None
    at: datetime | None
    worker: str
    stage: str
    first: str

    @classmethod
    def from_record(cls, data: Any) -> Duplicate | None:
        if not isinstance(data, dict):
            return None
        return cls(
            task_id=str(data.get("task_id") or ""),
            due=_time(data.get("due")),
            at=_time(data.get("at")),
            worker=str(data.get("worker") or ""),
            stage=str(data.get("stage") or ""),
            first=str(data.get("first") or ""),
        )


@dataclass(frozen=True)
class EntryState:
    """What Redis knows about an entry's runs."""

    name: str
    next_run_at: datetime | None
    last_run_at: datetime | None = None
    last_sent_at: datetime | None = None
    total_run_count: int = 0
    last_task_id: str | None = None
    last_beat: str | None = None
    #: True while a beat holds a claim on the entry (the occurrence is being sent).
    running: bool = False
    #: Why an occurrence due at :attr:`held_due` waits to be sent at :attr:`next_run_at`:
    #: ``"jitter"``, or ``"overlap"`` (the previous run still goes on); None: none waits.
    held: str | None = None
    held_due: datetime | None = None
    #: Sends refused for the entry in a row (reset by a successful send), and the last reason.
    failures: int = 0
    last_error: str | None = None

    #: What is wrong with what Redis holds for the entry (None: nothing): a due time that
    #: is not a valid time, a run state redisbeat did not write. Reads never raise for it.
    problem: str | None = None
    #: Set when the entry was set aside (a corrupt definition, or too many refused sends).
    quarantined: Quarantined | None = None
    #: Set while the entry is paused (:meth:`ScheduleStore.pause`).
    paused: Paused | None = None
    #: Why the entry left the schedule by itself: ``"max_runs"`` once it has sent that many
    #: (None while it is scheduled).
    stopped: str | None = None
    #: How its last run ended, as the worker hook recorded it (None: not known).
    last_outcome: Outcome | None = None
    #: Occurrences not sent within their grace, in all, and the last of them.
    missed: int = 0
    last_missed: Passed | None = None
    #: Occurrences skipped by the overlap policy (a run still going), and the last of them.
    skipped: int = 0
    last_skipped: Passed | None = None
    #: Copies of a run workers dropped (sent again under its task id), and the last of them.
    duplicates: int = 0
    last_duplicate: Duplicate | None = None

    @classmethod
    def from_redis(
        cls,
        name: str,
        score: float | None,
        raw: str | None,
        claim: str | None,
        quarantined: Quarantined | None = None,
    ) -> EntryState:
        """From the schedule score, the state JSON, the inflight record and the quarantine
        record (any may be absent)."""
        problems: list[str] = []
        next_run_at = None
        if score is not None:
            if valid_ms(score):
                next_run_at = from_ms(int(score))
            else:
                problems.append(
                    f"its due time in Redis is not a valid time ({score}); a beat puts it "
                    "back on its schedule from its definition"
                )
        data = state_fields(raw, problems)
        held, held_due = _held(claim)
        return cls(
            name=name,
            next_run_at=next_run_at,
            last_run_at=_time(data.get("last_run_at")),
            last_sent_at=_time(data.get("last_sent_at")),
            total_run_count=_count(data.get("total_run_count")),
            last_task_id=_text_field(data.get("last_task_id")),
            last_beat=_text_field(data.get("last_beat")),
            running=claim is not None and held is None,
            held=held,
            held_due=held_due,
            failures=_count(data.get("failures")),
            last_error=_text_field(data.get("last_error")),
            problem="; ".join(problems) or None,
            quarantined=quarantined,
            paused=Paused.from_record(data.get("paused")),
            stopped=_text_field(data.get("stopped")) if next_run_at is None else None,
            last_outcome=Outcome.from_record(data.get("last_outcome")),
            missed=_count(data.get("missed")),
            last_missed=Passed.from_record(data.get("last_missed")),
            skipped=_count(data.get("skipped")),
            last_skipped=Passed.from_record(data.get("last_skipped")),
            duplicates=_count(data.get("duplicates")),
            last_duplicate=Duplicate.from_record(data.get("last_duplicate")),
        )


def state_fields(raw: str | None, problems: list[str] | None = None) -> dict[str, Any]:
    """The run state's fields; what is not what redisbeat writes is named in ``problems``."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        if problems is not None:
            problems.append("its run state in Redis is not what redisbeat writes")
        return {}
    wrong = [k for k in _NUMBERS if k in data and not _number(data[k])]
    if wrong and problems is not None:
        problems.append(f"its run state in Redis has invalid {', '.join(wrong)}")
    return {k: v for k, v in data.items() if k not in wrong}


#: The run state's fields that hold numbers.
_NUMBERS = (
    "last_run_at",
    "last_sent_at",
    "total_run_count",
    "failures",
    "missed",
    "skipped",
    "duplicates",
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _count(value: Any) -> int:
    return int(value) if _number(value) and 0 <= value < 2**63 else 0


def _text_field(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _time(value: Any) -> datetime | None:
    return from_ms(int(value)) if valid_ms(value) else None


def claimed_due(claim: str | None, score: float | None) -> int | None:
    """The due time of the occurrence a live claim holds (its lease is the entry's score),
    which its beat sends, or has sent; None when no claim holds one."""
    data = _claim_record(claim)
    if data is None or score is None or not valid_ms(data.get("due")):
        return None
    lease = data.get("lease_until")
    return int(data["due"]) if valid_ms(lease) and lease == score else None


def _held(claim: str | None) -> tuple[str | None, datetime | None]:
    """Why a claim record holds an occurrence back, and its due time (a deferred claim)."""
    data = _claim_record(claim)
    if data is None or not isinstance(data.get("deferred"), str):
        return None, None
    return data["deferred"], _time(data.get("due"))


def _claim_record(claim: str | None) -> dict[str, Any] | None:
    """A claim record's fields; None for none, or for one redisbeat did not write."""
    try:
        data = json.loads(claim) if claim else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
