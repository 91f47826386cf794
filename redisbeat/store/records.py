"""Plain records the store returns (beats, claims, outcomes, the deployed configuration), and
the text of replies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..schedule.clock import from_ms

Action = Literal["sent", "skipped", "failed", "release", "defer"]


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
    #: True when the entry's due time in Redis was not a valid time (-inf, say): the beat
    #: puts it back on its schedule instead of sending it.
    impossible: bool = False
    #: True when a finish deferred this occurrence (its jitter, or a run still going): it
    #: was decided (and counted) then, and is sent now.
    deferred: bool = False


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
            Claim(
                reply[i],
                reply[i + 1],
                int(reply[i + 2]),
                int(reply[i + 3]),
                recovered=reply[i + 4] == 1,
                impossible=reply[i + 4] == 2,
                deferred=reply[i + 4] == 3,
            )
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
    #: Entry name -> what was wrong with its run state in Redis (replaced, keeping what
    #: could be kept).
    garbled: dict[str, str] = field(default_factory=dict)
    #: Entry name -> occurrences a pause that ended held back, counted as missed now.
    paused_missed: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, reply: list[Any]) -> FinishResult:
        """From finish.lua's reply: finished, now, earliest score (-1: none), the names set
        aside, then name, what was wrong, ... for garbled run states, and (periodic entries
        only) name, count, ... of occurrences a pause held back."""
        finished, now, earliest, quarantined, garbled, *rest = reply
        paused = rest[0] if rest else []
        return cls(
            int(finished),
            int(now),
            None if earliest < 0 else int(earliest),
            tuple(text(n) for n in quarantined),
            {text(garbled[i]): text(garbled[i + 1]) for i in range(0, len(garbled), 2)},
            {text(paused[i]): int(paused[i + 1]) for i in range(0, len(paused), 2)},
        )


@dataclass(frozen=True)
class Heartbeat:
    """What a beat learns at its heartbeat."""

    #: The version of the beat_schedule the deployment follows (None: none recorded).
    config_version: str | None
    #: Schedule members whose score is past any valid time: (name, score as Redis spells it).
    beyond: list[tuple[str, str]]
    #: The layout record's ``shards`` and ``moving_to`` ('' where not recorded).
    layout: tuple[str, str] = ("", "")

    @classmethod
    def from_reply(cls, reply: list[Any]) -> Heartbeat:
        """From heartbeat.lua's reply: now, new, version ('' none), shards, moving_to, then
        name, score, ..."""
        beyond = [(text(reply[i]), text(reply[i + 1])) for i in range(5, len(reply), 2)]
        return cls(text(reply[2]) or None, beyond, (text(reply[3]), text(reply[4])))


@dataclass(frozen=True)
class Outcome:
    """How a beat finished one claim."""

    name: str
    action: Action
    due_ms: int
    next_due_ms: int | None = None
    task_id: str = ""
    #: Why: the message was refused for this entry (``failed``), the occurrence was skipped
    #: or deferred, or (``sent``) the occurrences before it were missed.
    error: str = ""
    #: The entry's ``max_runs``: a send that reaches it takes the entry off the schedule.
    max_runs: int | None = None
    #: How many occurrences before this one were missed (not sent within their grace).
    missed: int = 0


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
