"""Plain records the store returns: run state, beats, claims, quarantined definitions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Action = Literal["sent", "skipped", "release"]


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


@dataclass(frozen=True)
class BeatInfo:
    """A live beat process, from its heartbeat."""

    id: str
    hostname: str
    pid: int
    last_seen: datetime


@dataclass(frozen=True)
class Quarantined:
    """A stored definition that could not be loaded, set aside with the reason."""

    name: str
    definition: str
    error: str
    at: datetime
    by: str


@dataclass(frozen=True)
class Claim:
    """One occurrence a beat has claimed: send it, then finish it."""

    name: str
    definition: str
    due_ms: int
    #: True when a beat that claimed this occurrence earlier died before finishing it.
    recovered: bool


@dataclass(frozen=True)
class ClaimBatch:
    now_ms: int
    lease_until_ms: int
    #: The earliest score left in the schedule after the claim (None: the schedule is empty).
    next_due_ms: int | None
    claims: list[Claim]


@dataclass(frozen=True)
class FinishResult:
    #: How many claims were still this beat's (the rest had been taken over).
    finished: int
    now_ms: int
    #: The earliest score left in the schedule (None: the schedule is empty).
    next_due_ms: int | None


@dataclass(frozen=True)
class Outcome:
    """How a beat finished one claim."""

    name: str
    action: Action
    due_ms: int
    next_due_ms: int | None = None
    task_id: str = ""


@dataclass(frozen=True)
class SyncReport:
    """What a source sync changed."""

    added: list[str]
    updated: list[str]
    removed: list[str]
    unchanged: int
    #: Names the source asked for that another source owns (left untouched).
    foreign: list[str]
