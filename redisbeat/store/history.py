"""An entry's history as the store API reads it: the finish pushes each send (and skip,
failure or missed occurrences), the worker hook each run's outcome, both newest first in one
list; :func:`join_history` joins them by task id into :class:`Run` rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..schedule.clock import from_ms, valid_ms
from .records import text


@dataclass(frozen=True)
class Run:
    """One occurrence in an entry's history: how the beats dealt with it and, with the
    worker hook, what became of its run (``outcome`` None: not known, or still running)."""

    task_id: str
    due: datetime | None
    #: ``sent``, ``skipped`` (``reason`` says why), ``failed`` (the message was refused),
    #: ``run`` for a run whose send the history no longer holds, or ``duplicate``: a copy of
    #: the run a worker dropped (``reason`` says how far the first got, and where).
    result: str
    sent_at: datetime | None = None
    beat: str = ""
    reason: str = ""
    #: Occurrences missed (not sent within their grace) just before this one.
    missed: int = 0
    outcome: str | None = None
    exception: str | None = None
    started: datetime | None = None
    ended: datetime | None = None
    #: Seconds from the run's start to its end, by the Redis clock.
    runtime: float | None = None
    worker: str = ""
    #: For a run the worker could not start: why, in words, and what fixes it.
    detail: str | None = None

    @property
    def late(self) -> float | None:
        """Seconds from the due time to the send."""
        if self.due is None or self.sent_at is None:
            return None
        return (self.sent_at - self.due).total_seconds()


def join_history(records: list[dict[str, Any]]) -> list[Run]:
    """Runs from a history's records (newest first): each send with its run's outcome."""
    outcomes: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") == "run":
            # The last try's: a retry can end on one worker process before the try it
            # retries has recorded its own end on another.
            task_id = str(r.get("task_id", ""))
            if task_id not in outcomes or _try(r) > _try(outcomes[task_id]):
                outcomes[task_id] = r
    runs: list[Run] = []
    told = {str(r.get("task_id") or "") for r in records if r.get("kind") == "send"}
    for r in records:
        task_id = str(r.get("task_id") or "")
        if r.get("kind") == "send":
            runs.append(_run(r, outcomes.get(task_id) if task_id else None))
        elif r.get("kind") == "run" and task_id not in told and outcomes.get(task_id) is r:
            # An outcome whose send was trimmed, or came from a run the beats did not send.
            runs.append(_run({"task_id": task_id, "due": r.get("due"), "result": "run"}, r))
        elif r.get("kind") == "duplicate":
            runs.append(_duplicate(r))
    runs.sort(key=lambda run: run.sent_at or run.ended or run.due or _EPOCH, reverse=True)
    return runs


def _try(run: dict[str, Any]) -> int:
    """Which try of its task a run record is (0: the first; records before tries were
    counted are first tries)."""
    retries = run.get("retries")
    return retries if isinstance(retries, int) and not isinstance(retries, bool) else 0


def _run(send: dict[str, Any], run: dict[str, Any] | None) -> Run:
    run = run or {}
    runtime = run.get("runtime")
    return Run(
        task_id=str(send.get("task_id") or ""),
        due=time_of(send.get("due")),
        result=str(send.get("result", "")),
        sent_at=time_of(send.get("at")),
        beat=str(send.get("beat") or ""),
        reason=str(send.get("reason") or ""),
        missed=int(ms_of(send.get("missed"), 0)),
        outcome=str(run["outcome"]) if run.get("outcome") else None,
        exception=str(run["exception"]) if run.get("exception") else None,
        started=time_of(run.get("started")),
        ended=time_of(run.get("ended")),
        runtime=runtime / 1000 if isinstance(runtime, (int, float)) else None,
        worker=str(run.get("worker") or ""),
        detail=str(run["detail"]) if run.get("detail") else None,
    )


#: How far the first copy of a run had got when a worker dropped another (a copy's reason).
_STAGES = {"received": "already received", "started": "already running", "ended": "already ran"}


def _duplicate(copy: dict[str, Any]) -> Run:
    """A copy a worker dropped: a row of its own (the run's outcome stays its send's)."""
    reason = _STAGES.get(str(copy.get("stage")), "already seen")
    first = str(copy.get("first") or "")
    return Run(
        task_id=str(copy.get("task_id") or ""),
        due=time_of(copy.get("due")),
        result="duplicate",
        reason=f"{reason} on {first}" if first else reason,
        outcome="duplicate",
        ended=time_of(copy.get("at")),
        worker=str(copy.get("worker") or ""),
    )


_EPOCH = from_ms(0)


def json_record(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        data = json.loads(text(raw))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def ms_of(value: Any, default: int) -> int:
    return int(value) if valid_ms(value) else default


def time_of(value: Any) -> datetime | None:
    return from_ms(int(value)) if valid_ms(value) else None
