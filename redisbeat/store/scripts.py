"""The Lua scripts (``lua/*.lua``), each behind one typed wrapper.

A wrapper builds its script's KEYS and ARGV (the headers of the ``.lua`` files say what each
is), decodes the reply into a record and turns return codes into named errors. The
:class:`Runner` is the one place that runs a script: by EVALSHA, loading it again on NOSCRIPT
(a restarted or flushed server, a replica just promoted), with ``WAIT`` for replicas riding in
the same round trip.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any, Literal

import redis
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from ..errors import EntryNotFound
from ..schedule.clock import MAX_MS
from .client import Connection
from .errors import LayoutChanged
from .keys import Keys
from .records import ClaimBatch, FinishResult, Heartbeat, Outcome, wire
from .replication import Replicas
from .shards import Layout

#: How many times a script is loaded again when the server answers NOSCRIPT, per call: a
#: ``SCRIPT FLUSH`` may land between a load and the EVALSHA after it.
MAX_RELOADS = 3
#: How many times a pipeline of scripts runs again while replies say it did not run
#: (NOSCRIPT, a cluster's MOVED, ASK or TRYAGAIN while a slot moves).
MAX_ATTEMPTS = 5
#: The pause before running again after TRYAGAIN (a slot between two nodes).
TRY_AGAIN_SECONDS = 0.02

#: ``strict``: WAIT for replicas and raise when too few acknowledge (the editors' writes);
#: ``lenient``: a beat's writes, judged by :class:`Replicas`; ``none``: no WAIT.
Wait = Literal["strict", "lenient", "none"]


@cache
def _read(name: str) -> str:
    return (files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Script:
    """One Lua file after the shared prelude (its key type check, ``wrong_type``)."""

    name: str
    source: str
    sha: str

    @classmethod
    def named(cls, name: str) -> Script:
        source = _read("prelude") + _read(name)
        return cls(name, source, hashlib.sha1(source.encode()).hexdigest())


CLAIM = Script.named("claim")
FINISH = Script.named("finish")
RENEW = Script.named("renew")
EXPIRE_LOST = Script.named("expire_lost")
QUARANTINE = Script.named("quarantine")
HEARTBEAT = Script.named("heartbeat")
REPAIR = Script.named("repair")
CONFIG = Script.named("config")
UPSERT = Script.named("upsert")
REMOVE = Script.named("remove")
RUN_NOW = Script.named("run_now")
LAYOUT = Script.named("layout")


#: Replies that say a script did not run, so running it again is safe.
_NOT_RUN = (NoScriptError, AskError, TryAgainError)


@dataclass(frozen=True)
class Call:
    script: Script
    keys: Sequence[str]
    args: Sequence[Any]


class Runner:
    """Runs scripts by EVALSHA, loading them on NOSCRIPT, following a cluster's MOVED and ASK,
    with WAIT where asked.

    A reply of NOSCRIPT, MOVED, ASK or TRYAGAIN means the script did not run, so running it
    again (loaded, or on the node named) is safe; any other failure is raised.
    """

    def __init__(self, connection: Connection, replicas: Replicas) -> None:
        self.connection = connection
        self.replicas = replicas

    def run(self, call: Call, wait: Wait) -> Any:
        """One script's reply (an error reply is raised)."""
        if (wait == "none" or not self.replicas.count) and not self.connection.is_cluster:
            for _ in range(MAX_RELOADS - 1):
                try:
                    return self._evalsha(self.connection.client, call)
                except NoScriptError:
                    self._load(self.connection.client, call.script)
            return self._evalsha(self.connection.client, call)
        (reply,), acked, waited, node = self._execute([call], wait)
        if isinstance(reply, Exception):
            raise reply
        if waited is not None:
            self.replicas.acknowledged(acked, wait == "strict", waited, node)
        return reply

    def run_many(self, calls: list[Call]) -> list[Any]:
        """Strict writes in one pipeline; each reply in order, error replies among them."""
        replies, acked, waited, node = self._execute(calls, "strict")
        if waited is not None:
            self.replicas.acknowledged(acked, True, waited, node)
        return replies

    def _execute(
        self, calls: list[Call], wait: Wait
    ) -> tuple[list[Any], Any, int | None, redis.Redis]:
        """Every call on the server that serves their keys (one slot), then WAIT there."""
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        node = self.connection.node(calls[0].keys[0]) if calls else self.connection.client
        asking = False
        for attempt in range(MAX_ATTEMPTS):
            pipe = node.pipeline(transaction=False)
            for i in todo:
                if asking:
                    pipe.execute_command("ASKING")  # type: ignore[no-untyped-call]
                self._evalsha(pipe, calls[i])
            waited = None if wait == "none" else self.replicas.add_wait(pipe, wait == "strict")
            try:
                out = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError):
                self.connection.refresh()  # a failover: the next call finds the new master
                raise
            acked = out.pop() if waited is not None else None
            if asking:
                out = out[1::2]  # the ASKINGs' OKs
            again = [i for i, r in zip(todo, out, strict=True) if isinstance(r, _NOT_RUN)]
            for i, reply in zip(todo, out, strict=True):
                replies[i] = reply
            if not again or attempt == MAX_ATTEMPTS - 1:
                return replies, acked, waited, node
            node, asking = self._before_again([replies[i] for i in again], calls, again, node)
            todo = again
        raise AssertionError("unreachable")  # pragma: no cover

    def _before_again(
        self, errors: list[Any], calls: list[Call], again: list[int], node: redis.Redis
    ) -> tuple[redis.Redis, bool]:
        """Make the calls that did not run ready to run again: where, and whether ASKING."""
        redirect = next((e for e in errors if isinstance(e, AskError)), None)
        if redirect is not None:
            node = self.connection.redirected(redirect)
        elif any(isinstance(e, TryAgainError) for e in errors):
            time.sleep(TRY_AGAIN_SECONDS)  # a slot is half migrated: it settles in ms
        for script in {
            calls[i].script
            for i, e in zip(again, errors, strict=True)
            if isinstance(e, NoScriptError)
        }:
            self._load(node, script)
        asking = redirect is not None and not isinstance(redirect, MovedError)
        return node, asking

    @staticmethod
    def _evalsha(target: Any, call: Call) -> Any:
        return target.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)

    @staticmethod
    def _load(node: Any, script: Script) -> None:
        node.script_load(script.source)


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


class Scripts:
    """One method per Lua script: arguments in, a record out."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self.runner = runner
        self.keys = keys

    # -- a beat's ----------------------------------------------------------------------------

    def claim(self, beat_id: str, lease_ms: int, batch_size: int, ahead_ms: int) -> ClaimBatch:
        k = self.keys
        keys = [k.schedule, k.entries, k.inflight, k.state]
        call = Call(CLAIM, keys, [beat_id, lease_ms, batch_size, MAX_MS, ahead_ms])
        return ClaimBatch.from_reply(self.runner.run(call, "lenient"), lease_ms)

    def finish(
        self, beat_id: str, lease_until_ms: int, outcomes: list[Outcome], quarantine_after: int
    ) -> FinishResult:
        k = self.keys
        args: list[Any] = [beat_id, lease_until_ms, k.events, quarantine_after, MAX_MS]
        for o in outcomes:
            nxt = "" if o.next_due_ms is None else o.next_due_ms
            args += [wire(o.name), o.action, nxt, o.task_id, o.due_ms, o.error]
        keys = [k.schedule, k.inflight, k.state, k.entries, k.quarantine]
        reply = self.runner.run(Call(FINISH, keys, args), "lenient")
        return FinishResult.from_reply(reply)

    def renew(self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int) -> int:
        args = [beat_id, lease_until_ms, lease_ms, *(wire(n) for n in names)]
        call = Call(RENEW, [self.keys.schedule, self.keys.inflight], args)
        lease_until, _renewed = self.runner.run(call, "lenient")
        return int(lease_until)

    def expire_lost(self, beat_id: str, earliest_lease_until: int, lease_ms: int) -> int:
        k = self.keys
        args = [beat_id, earliest_lease_until, lease_ms, k.events]
        return int(self.runner.run(Call(EXPIRE_LOST, [k.schedule, k.inflight], args), "lenient"))

    def quarantine(self, name: str, definition: str, error: str, by: str) -> bool:
        k = self.keys
        keys = [k.entries, k.schedule, k.inflight, k.quarantine]
        args = [wire(name), wire(definition), error, by]
        return bool(self.runner.run(Call(QUARANTINE, keys, args), "lenient"))

    def heartbeat(self, beat_id: str, ttl_ms: int) -> Heartbeat:
        k = self.keys
        keys = [k.beats, k.config, k.schedule, k.layout]
        call = Call(HEARTBEAT, keys, [beat_id, ttl_ms, MAX_MS])
        return Heartbeat.from_reply(self.runner.run(call, "none"))

    def repair(self, name: str, score: str, due_ms: int | None) -> bool:
        args = [wire(name), score, "" if due_ms is None else due_ms, self.keys.events]
        return bool(self.runner.run(Call(REPAIR, [self.keys.schedule], args), "lenient"))

    def layout(self, op: str, shards: int) -> Layout:
        """The layout the deployment records after ``op``: ``read`` (``shards`` recorded when
        none was), ``begin`` or ``end`` a reshard to ``shards``.

        No WAIT for a read: a record lost with a failover is written again by the next process.
        """
        call = Call(LAYOUT, [self.keys.layout, self.keys.schedule], [op, shards])
        count, moving_to = self.runner.run(call, "none" if op == "read" else "strict")
        return Layout.from_fields(count, moving_to)

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
                ],
                [
                    w.name,
                    w.read,
                    w.definition,
                    "" if w.due_ms is None else w.due_ms,
                    "1" if w.keep_schedule else "0",
                    k.events,
                    layout,
                ],
            )
            for w in writes
        ]
        return self.runner.run_many(calls)

    def remove(self, name: str, owner: str, only_if_owned: bool, layout: str) -> bool:
        """Raises :class:`LayoutChanged` when ``layout`` is no longer the shard's."""
        k = self.keys
        keys = [k.entries, k.schedule, k.state, k.inflight, k.quarantine, k.source(owner)]
        keys.append(k.shard_layout)
        args = [name, k.events, "1" if only_if_owned else "0", layout]
        return bool(_settled(self.runner.run(Call(REMOVE, keys, args), "strict")))

    def run_now(self, name: str, layout: str) -> None:
        """Raises :class:`EntryNotFound` when no entry of that name exists, and
        :class:`LayoutChanged` when ``layout`` is no longer the shard's."""
        k = self.keys
        call = Call(RUN_NOW, [k.entries, k.schedule, k.shard_layout], [name, k.events, layout])
        if not _settled(self.runner.run(call, "strict")):
            raise EntryNotFound(name)


def _settled(reply: Any) -> Any:
    """A write script's reply, unless it says the writer followed an old layout."""
    if reply == -2:
        raise LayoutChanged()
    return reply
