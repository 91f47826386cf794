"""The Lua scripts (``lua/*.lua``), each behind one typed wrapper.

A wrapper builds its script's KEYS and ARGV (the headers of the ``.lua`` files say what each
is), decodes the reply into a record and turns return codes into named errors; the
:class:`~.runner.Runner` runs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import EntryNotFound, EntryPaused
from ..schedule.clock import MAX_MS
from .errors import LayoutChanged
from .formats import FORMAT, incompatible, refusal
from .keys import Keys
from .records import ClaimBatch, FinishResult, Heartbeat, Outcome, wire
from .runner import Call, Runner, Script
from .shards import Layout

CLAIM = Script.named("claim", "spelled")
FINISH = Script.named("finish", "spelled")
RENEW = Script.named("renew")
EXPIRE_LOST = Script.named("expire_lost")
QUARANTINE = Script.named("quarantine")
QUARANTINE_ITEM = Script.named("quarantine_item")
HEARTBEAT = Script.named("heartbeat")
REPAIR = Script.named("repair")
CONFIG = Script.named("config")
UPSERT = Script.named("upsert")
REMOVE = Script.named("remove")
SWEEP_SPENT = Script.named("sweep_spent")
RUN_NOW = Script.named("run_now")
PAUSE = Script.named("pause")
LAYOUT = Script.named("layout")


#: A task id JSON takes as it is (finish.lua's ``json_string``): a beat's are UUIDs.
_PLAIN_ID = re.compile(r"[\w\-.:@]*", re.ASCII).fullmatch


def _plain(o: Outcome) -> bool:
    """Whether finish.lua may spell the outcome's task id and times without checking them:
    on a busy beat those checks cost Redis more than the rest of a send's string work."""
    nxt = o.next_due_ms
    return (
        type(o.due_ms) is int
        and o.due_ms >= 0
        and (nxt is None or (type(nxt) is int and nxt >= 0))
        and type(o.missed) is int
        and o.missed >= 0
        and _PLAIN_ID(o.task_id) is not None
    )


@dataclass(frozen=True)
class Upsert:
    """One definition to write, compare-and-set against the one read (upsert.lua)."""

    name: str
    read: str
    definition: str
    due_ms: int | None
    keep_schedule: bool
    source: str
    previous_source: str
    #: The pause the due time was worked out for (:attr:`.pausing.Hold.token`).
    pause: str = ""
    #: The schedule score it was worked out with ('' none), as Python spells a float.
    score: str = ""


class Scripts:
    """One method per Lua script: arguments in, a record out."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self.runner = runner
        self.keys = keys

    # -- a beat's ----------------------------------------------------------------------------

    def claim(self, beat_id: str, lease_ms: int, batch_size: int, ahead_ms: int) -> ClaimBatch:
        call = self.claim_call(beat_id, lease_ms, batch_size, ahead_ms)
        return ClaimBatch.from_reply(self.runner.run(call, "lenient"), lease_ms)

    def claim_call(self, beat_id: str, lease_ms: int, batch_size: int, ahead_ms: int) -> Call:
        """The claim, to run with other shards' (its reply: :meth:`ClaimBatch.from_reply`)."""
        k = self.keys
        keys = [k.schedule, k.entries, k.inflight, k.state]
        return Call(CLAIM, keys, [beat_id, lease_ms, batch_size, MAX_MS, ahead_ms])

    def finish(
        self,
        beat_id: str,
        lease_until_ms: int,
        outcomes: list[Outcome],
        quarantine_after: int,
        history_size: int = 0,
    ) -> FinishResult:
        call = self.finish_call(beat_id, lease_until_ms, outcomes, quarantine_after, history_size)
        return FinishResult.from_reply(self.runner.run(call, "lenient"))

    def finish_call(
        self,
        beat_id: str,
        lease_until_ms: int,
        outcomes: list[Outcome],
        quarantine_after: int,
        history_size: int = 0,
    ) -> Call:
        """The finish, to run with other shards' (its reply: :meth:`FinishResult.from_reply`)."""
        k = self.keys
        args: list[Any] = [beat_id, lease_until_ms, k.events, quarantine_after, MAX_MS]
        args += [history_size, k.history_prefix, "1" if all(map(_plain, outcomes)) else ""]
        for o in outcomes:
            nxt = "" if o.next_due_ms is None else o.next_due_ms
            limit = "" if o.max_runs is None else o.max_runs
            missed = o.missed or ""
            args += [wire(o.name), o.action, nxt, o.task_id, o.due_ms, o.error, limit, missed]
        keys = [k.schedule, k.inflight, k.state, k.entries, k.quarantine, k.spent]
        return Call(FINISH, keys, args)

    def renew(self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int) -> int:
        call = self.renew_call(beat_id, lease_until_ms, names, lease_ms)
        return renewed_until(self.runner.run(call, "lenient"))

    def renew_call(
        self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int
    ) -> Call:
        """The renewal, to run with other shards' (its reply: :func:`renewed_until`)."""
        args = [beat_id, lease_until_ms, lease_ms, *(wire(n) for n in names)]
        return Call(RENEW, [self.keys.schedule, self.keys.inflight], args)

    def expire_lost(self, beat_id: str, earliest_lease_until: int, lease_ms: int) -> int:
        k = self.keys
        args = [beat_id, earliest_lease_until, lease_ms, k.events]
        return int(self.runner.run(Call(EXPIRE_LOST, [k.schedule, k.inflight], args), "lenient"))

    def sweep_spent(self, retention_ms: int, limit: int) -> int:
        """Forget up to ``limit`` of the ``api`` entries that left the schedule for good
        longer than ``retention_ms`` ago; returns how many."""
        k = self.keys
        keys = [k.spent, k.schedule, k.entries, k.state, k.inflight, k.source("api")]
        return int(self.runner.run(Call(SWEEP_SPENT, keys, [retention_ms, limit]), "lenient"))

    def quarantine(self, name: str, definition: str, error: str, by: str) -> bool:
        k = self.keys
        keys = [k.entries, k.schedule, k.inflight, k.quarantine]
        args = [wire(name), wire(definition), error, by]
        return bool(self.runner.run(Call(QUARANTINE, keys, args), "lenient"))

    def quarantine_item(self, name: str, item: str, error: str, by: str, layout: str) -> bool:
        """Set aside a beat_schedule item ('' as ``item``: forget its record). Raises
        :class:`LayoutChanged` when ``layout`` is no longer the shard's."""
        keys = [self.keys.quarantine, self.keys.shard_layout]
        args = [wire(name), wire(item), wire(error), by, layout]
        return bool(_settled(self.runner.run(Call(QUARANTINE_ITEM, keys, args), "strict")))

    def heartbeat(self, beat_id: str, ttl_ms: int, housekeeping: bool) -> Heartbeat:
        """Raises :class:`~.errors.StoreIncompatible` when the deployment's stored format is
        newer than this release reads (the beat is not registered then)."""
        k = self.keys
        keys = [k.beats, k.config, k.schedule, k.layout]
        args = [beat_id, ttl_ms, MAX_MS, FORMAT, "1" if housekeeping else ""]
        call = Call(HEARTBEAT, keys, args)
        return Heartbeat.from_reply(self._format_read(self.runner.run(call, "none")))

    def repair(self, name: str, score: str, due_ms: int | None) -> bool:
        args = [wire(name), score, "" if due_ms is None else due_ms, self.keys.events]
        return bool(self.runner.run(Call(REPAIR, [self.keys.schedule], args), "lenient"))

    def layout(self, op: str, shards: int) -> Layout:
        """The layout the deployment records after ``op``: ``read`` (``shards`` recorded when
        none was), ``begin`` or ``end`` a reshard to ``shards``.

        No WAIT for a read: a record lost with a failover is written again by the next process.
        Raises :class:`~.errors.StoreIncompatible` when the deployment's stored format is newer
        than this release reads (nothing is written then).
        """
        call = Call(LAYOUT, [self.keys.layout, self.keys.schedule], [op, shards, FORMAT])
        reply = self.runner.run(call, "none" if op == "read" else "strict")
        count, moving_to = self._format_read(reply)
        return Layout.from_fields(count, moving_to)

    def _format_read(self, reply: Any) -> Any:
        """A reply of a script that checks the stored format, unless it refused it."""
        recorded = refusal(reply)
        if recorded is not None:
            raise incompatible(recorded, self.runner.connection.describe(), self.keys.prefix)
        return reply

    def claim_config(
        self, read: str, version: str, beat_id: str, entries: str, previous: str
    ) -> bool:
        args = ["claim", read, version, beat_id, entries, previous]
        return bool(self.runner.run(Call(CONFIG, [self.keys.config], args), "strict"))

    def config_applied(self, version: str) -> bool:
        call = Call(CONFIG, [self.keys.config], ["applied", version])
        return bool(self.runner.run(call, "strict"))

    # -- the editors' ------------------------------------------------------------------------

    def upsert(self, writes: list[Upsert], layout: str) -> list[Any]:
        """Per write: 1 written, 0 identical, -1 changed since it was read, -2 ``layout``
        (as :attr:`Layout.spelled`) is no longer the shard's (or an error)."""
        k = self.keys
        calls = [
            Call(
                UPSERT,
                [
                    k.entries,
                    k.schedule,
                    k.quarantine,
                    k.source(w.source),
                    k.source(w.previous_source),
                    k.shard_layout,
                    k.state,
                ],
                [
                    w.name,
                    w.read,
                    w.definition,
                    "" if w.due_ms is None else w.due_ms,
                    "1" if w.keep_schedule else "0",
                    k.events,
                    layout,
                    w.pause,
                    w.score,
                ],
            )
            for w in writes
        ]
        return self.runner.run_many(calls)

    def remove(self, name: str, owner: str, only_if_owned: bool, layout: str) -> bool:
        """Raises :class:`LayoutChanged` when ``layout`` is no longer the shard's."""
        k = self.keys
        keys: list[str | bytes] = [k.entries, k.schedule, k.state, k.inflight, k.quarantine]
        keys += [k.source(owner), k.shard_layout, wire(k.history(name)), k.running]
        args = [wire(name), k.events, "1" if only_if_owned else "0", layout]
        return bool(_settled(self.runner.run(Call(REMOVE, keys, args), "strict")))

    def run_now(self, name: str, layout: str) -> None:
        """Raises :class:`EntryNotFound` when no entry of that name exists,
        :class:`EntryPaused` when it is paused, and :class:`LayoutChanged` when ``layout`` is
        no longer the shard's."""
        k = self.keys
        keys = [k.entries, k.schedule, k.shard_layout, k.state]
        reply = _settled(
            self.runner.run(Call(RUN_NOW, keys, [wire(name), k.events, layout]), "strict")
        )
        if reply == -3:
            raise EntryPaused(name)
        if not reply:
            raise EntryNotFound(name)

    def pause(
        self,
        name: str,
        read: float | None,
        due_ms: int | None,
        record: str,
        held: int,
        layout: str,
    ) -> int:
        """1 done, 0 no such entry, -1 its due time is no longer ``read``; raises
        :class:`LayoutChanged` when ``layout`` is no longer the shard's. ``held``: on a
        resume, the occurrences the pause held back."""
        k = self.keys
        keys = [k.entries, k.schedule, k.state, k.shard_layout]
        args = [wire(name), "" if read is None else read, "" if due_ms is None else due_ms]
        args += [record, k.events, layout, held]
        return int(_settled(self.runner.run(Call(PAUSE, keys, args), "strict")))


def renewed_until(reply: Any) -> int:
    """The lease_until a renewal set, from renew.lua's reply."""
    lease_until, _renewed = reply
    return int(lease_until)


def _settled(reply: Any) -> Any:
    """A write script's reply, unless it says the writer followed an old layout."""
    if reply == -2:
        raise LayoutChanged()
    return reply
