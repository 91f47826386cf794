"""What the demo saw: task executions, one line each, and the checks over all of them.

The worker appends one JSON line per task run to a file; everything after reading it is a
pure function of those records.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: Occurrences due less than this before the beats were stopped may rightly be unsent.
TAIL_SLACK_MS = 2000
#: How long the beats may take to start before an interval entry's first run is due.
STARTUP_MS = 3000
#: Below this many seconds of running, one beat doing all the work is no failure.
SHARING_MIN_SECONDS = 20.0


@dataclass(frozen=True)
class Execution:
    """One task run, as the worker recorded it (see ``orders/executions.py``)."""

    task_id: str
    task: str
    started_ms: int
    entry: str | None
    due_ms: int | None
    beat: str | None

    @classmethod
    def from_json(cls, line: str) -> Execution:
        data: dict[str, Any] = json.loads(line)
        due = data.get("due_ms")
        return cls(
            task_id=str(data.get("task_id")),
            task=str(data.get("task")),
            started_ms=int(data["started_ms"]),
            entry=data.get("entry"),
            due_ms=None if due is None else int(due),
            beat=data.get("beat"),
        )


class EventTail:
    """Reads the executions the worker appended to its events file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[Execution]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        return [Execution.from_json(line.decode()) for line in lines if line.strip()]


def beat_pid(beat_id: str | None) -> int | None:
    """The pid in a redisbeat beat id (``host:pid:random``)."""
    parts = (beat_id or "").split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def beat_host_pid(beat_id: str) -> str:
    return ":".join(beat_id.split(":")[:-1])


def clock(ms: int) -> str:
    """``12:00:03.002`` in local time."""
    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S.%f")[:-3]


def describe(ex: Execution, labels: dict[int, str]) -> str:
    """The line printed for one execution."""
    head = f"{clock(ex.started_ms)}  {ex.task:<24}"
    if ex.entry is None or ex.due_ms is None or ex.beat is None:
        return f"{head}  (not sent by a beat)  id={ex.task_id}"
    label = labels.get(beat_pid(ex.beat) or -1, "another beat")
    return (
        f"{head}  entry={ex.entry:<26}  due={clock(ex.due_ms)}  "
        f"sent by {label} ({beat_host_pid(ex.beat)})  late {ex.started_ms - ex.due_ms} ms"
    )


@dataclass
class Summary:
    """The numbers the demo reports and the verdict on them."""

    seconds: float
    sent_by: dict[str, int]
    logged_sent: dict[str, int]
    executed: int
    duplicates: int
    missed: int
    web_status: int | None
    web_url: str
    not_executed: int = 0
    ignored: int = 0
    details: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "beats": self.sent_by,
            "beats_sending": sum(1 for n in self.sent_by.values() if n),
            "logged_sent": self.logged_sent,
            "executed": self.executed,
            "duplicates": self.duplicates,
            "missed": self.missed,
            "not_executed": self.not_executed,
            "ignored": self.ignored,
            "web_status": self.web_status,
            "details": self.details,
            "failures": self.failures,
            "ok": self.ok,
        }

    def text(self, beat_ids: dict[str, str]) -> str:
        lines = [f"Summary: {self.seconds:.1f} s, {len(self.sent_by)} beats, 1 worker"]
        for label, count in self.sent_by.items():
            logged = self.logged_sent.get(label, 0)
            lines.append(
                f"  {label} ({beat_ids.get(label, '?')}): sent {count} occurrences"
                f" (its log says {logged})"
            )
        lines.append(f"  occurrences executed: {self.executed}")
        if self.ignored:
            lines.append(f"  executions not sent by these beats (ignored): {self.ignored}")
        lines.append(f"  duplicates: {self.duplicates}")
        lines.append(f"  missed: {self.missed}")
        if self.not_executed:
            lines.append(f"  sent but not executed: {self.not_executed}")
        web = f"answered {self.web_status}" if self.web_status else "did not answer"
        lines.append(f"  admin page {self.web_url}: {web}")
        lines += [f"  - {d}" for d in self.details]
        verdict = "OK" if self.ok else "FAILED: " + "; ".join(self.failures)
        lines.append(f"  result: {verdict}")
        return "\n".join(lines)


def duplicates(executions: list[Execution]) -> tuple[int, list[str]]:
    """Extra runs of one occurrence: the same entry and due time, or the same task id."""
    by_occurrence = Counter((e.entry, e.due_ms) for e in executions)
    by_id = Counter(e.task_id for e in executions)
    details = [
        f"{entry} due {clock(due or 0)} ran {n} times"
        for (entry, due), n in by_occurrence.items()
        if n > 1
    ]
    details += [f"task id {tid} ran {n} times" for tid, n in by_id.items() if n > 1]
    extra = max(sum(n - 1 for n in by_occurrence.values()), sum(n - 1 for n in by_id.values()))
    return extra, details


def missed(
    executions: list[Execution], periods: dict[str, float], start_ms: int, stop_ms: int
) -> tuple[int, list[str]]:
    """Occurrences of interval entries that never ran between the beats' start and stop.

    A gap between consecutive due times longer than the period is a miss, except before the
    first occurrence of this run (a catch-up of older ones may precede it). An entry whose
    last run is more than a period before the stop missed its tail; one that never ran, from
    when the first task ran (the beats take longer to start on a busy machine).
    """
    total, details = 0, []
    first_run = min((e.started_ms for e in executions), default=start_ms)
    sending_from = max(start_ms + STARTUP_MS, first_run)
    for name, period in sorted(periods.items()):
        period_ms = period * 1000
        dues = sorted({e.due_ms for e in executions if e.entry == name and e.due_ms is not None})
        for before, after in itertools.pairwise(dues):
            if before >= start_ms and after - before > 1.5 * period_ms:
                lost = round((after - before) / period_ms) - 1
                total += lost
                details.append(f"{name}: {lost} missed between {clock(before)} and {clock(after)}")
        last = dues[-1] if dues else sending_from
        tail = math.floor((stop_ms - TAIL_SLACK_MS - last) / period_ms)
        if tail > 0:
            total += tail
            details.append(f"{name}: {tail} missed after {clock(last)}")
    return total, details


def summarize(
    executions: list[Execution],
    *,
    labels: dict[int, str],
    logged_sent: dict[str, int],
    periods: dict[str, float],
    start_ms: int,
    stop_ms: int,
    web_status: int | None,
    web_url: str,
) -> Summary:
    """Count and check the executions of occurrences the demo's beats sent."""
    ours = [e for e in executions if beat_pid(e.beat) in labels and e.due_ms is not None]
    sent_by = {label: 0 for label in labels.values()}
    for e in ours:
        sent_by[labels[beat_pid(e.beat) or -1]] += 1
    dup_count, dup_details = duplicates(ours)
    miss_count, miss_details = missed(ours, periods, start_ms, stop_ms)
    not_executed = sum(max(0, logged_sent.get(b, 0) - n) for b, n in sent_by.items())
    seconds = (stop_ms - start_ms) / 1000
    summary = Summary(
        seconds=seconds,
        sent_by=sent_by,
        logged_sent=logged_sent,
        executed=len(ours),
        duplicates=dup_count,
        missed=miss_count,
        web_status=web_status,
        web_url=web_url,
        not_executed=not_executed,
        ignored=len(executions) - len(ours),
        details=dup_details + miss_details,
    )
    if dup_count:
        summary.failures.append(f"{dup_count} duplicate runs")
    if miss_count:
        summary.failures.append(f"{miss_count} missed occurrences")
    if not_executed:
        summary.failures.append(f"{not_executed} sent occurrences never ran")
    sending = sum(1 for n in sent_by.values() if n)
    if seconds >= SHARING_MIN_SECONDS and sending < 2:
        summary.failures.append(f"only {sending} of {len(sent_by)} beats sent anything")
    if web_status != 200:
        summary.failures.append("the admin page did not answer 200")
    return summary
