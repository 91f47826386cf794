"""Plain records the store returns (run state, beats, claims, quarantined definitions), and
the text of replies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .timing import from_ms

Action = Literal["sent", "skipped", "failed", "release"]


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
    #: Sends refused for the entry in a row (reset by a successful send), and the last reason.
    failures: int = 0
    last_error: str | None = None

    @classmethod
    def from_redis(
        cls, name: str, score: float | None, raw: str | None, claim: str | None
    ) -> EntryState:
        """From the schedule score, the state JSON and the inflight record (any may be absent)."""
        data: dict[str, Any] = {}
        if raw:
            try:
                data = json.loads(raw)
            except ValueError:
                data = {}

        def ms(key: str) -> datetime | None:
            return from_ms(int(data[key])) if data.get(key) is not None else None

        return cls(
            name=name,
            next_run_at=from_ms(int(score)) if score is not None else None,
            last_run_at=ms("last_run_at"),
            last_sent_at=ms("last_sent_at"),
            total_run_count=int(data.get("total_run_count") or 0),
            last_task_id=data.get("last_task_id"),
            last_beat=data.get("last_beat"),
            running=claim is not None,
            failures=int(data.get("failures") or 0),
            last_error=data.get("last_error"),
        )


@dataclass(frozen=True)
class BeatInfo:
    """A live beat process, from its heartbeat."""

    id: str
    hostname: str
    pid: int
    last_seen: datetime

    @classmethod
    def from_heartbeat(cls, beat_id: str, score: int) -> BeatInfo:
        """From a ``hostname:pid:suffix`` beat id and its last heartbeat (ms)."""
        hostname, pid, _ = ([*beat_id.rsplit(":", 2), "", ""])[:3]
        return cls(
            id=beat_id,
            hostname=hostname,
            pid=int(pid) if pid.isdigit() else 0,
            last_seen=from_ms(score),
        )


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
    #: When the occurrence was first claimed (Redis ms): a late claim stands for the last
    #: occurrence due by then, so every beat that sends it sends the same one.
    claimed_ms: int
    #: True when a beat that claimed this occurrence earlier died before finishing it.
    recovered: bool


@dataclass(frozen=True)
class ClaimBatch:
    now_ms: int
    lease_until_ms: int
    #: The earliest score left in the schedule after the claim (None: the schedule is empty).
    next_due_ms: int | None
    claims: list[Claim]

    @classmethod
    def from_reply(cls, reply: list[Any], lease_ms: int) -> ClaimBatch:
        """From claim.lua's reply: now, the earliest score left (-1: none), then five fields
        per claim."""
        now, earliest = int(reply[0]), int(reply[1])
        claims = [
            Claim(reply[i], reply[i + 1], int(reply[i + 2]), int(reply[i + 3]), reply[i + 4] == 1)
            for i in range(2, len(reply), 5)
        ]
        return cls(now, now + lease_ms, None if earliest < 0 else earliest, claims)


@dataclass(frozen=True)
class FinishResult:
    #: How many claims were still this beat's (the rest had been taken over).
    finished: int
    now_ms: int
    #: The earliest score left in the schedule (None: the schedule is empty).
    next_due_ms: int | None
    #: Entries set aside because their sends failed too many times in a row.
    quarantined: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """How a beat finished one claim."""

    name: str
    action: Action
    due_ms: int
    next_due_ms: int | None = None
    task_id: str = ""
    #: Why the message was refused for this entry (action ``failed``).
    error: str = ""


@dataclass(frozen=True)
class ConfigMarker:
    """Which ``beat_schedule`` the deployment follows, as the beat that deployed it wrote it."""

    version: str
    at: datetime
    by: str
    #: Entry name -> digest of its configured definition.
    entries: dict[str, str]
    #: The same for the configuration before it (None: there was none, a full sync).
    previous: dict[str, str] | None
    #: False until the beat that wrote it has written its entries.
    applied: bool

    @classmethod
    def from_fields(cls, fields: list[str | None]) -> ConfigMarker | None:
        """From HMGET version, at, by, entries, previous, applied; None when there is none
        (or it is not what a beat wrote: the configuration is then written again)."""
        version, at, by, entries, previous, applied = fields
        try:
            return cls(
                version=str(version),
                at=from_ms(int(str(at))),
                by=str(by),
                entries=_digests(entries),
                previous=_digests(previous) if previous else None,
                applied=applied == "1",
            )
        except (TypeError, ValueError, OverflowError):
            return None


def _digests(raw: str | None) -> dict[str, str]:
    data = json.loads(raw or "")
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError("not a JSON object of digests")
    return data


@dataclass(frozen=True)
class SyncReport:
    """What a source sync changed."""

    added: list[str]
    updated: list[str]
    removed: list[str]
    unchanged: int
    #: Names the source asked for that another source owns (left untouched).
    foreign: list[str]


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def text_or_none(value: bytes | str | None) -> str | None:
    return None if value is None else text(value)


def wire(value: str) -> bytes:
    """Text from a reply as the bytes it came from: a client with ``surrogateescape`` keeps
    bytes that are not UTF-8 as lone surrogates, and hiredis's command packer (unlike
    redis-py's own) refuses to encode them."""
    return value.encode("utf-8", "surrogateescape")
