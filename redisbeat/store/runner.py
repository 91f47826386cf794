"""Running the Lua scripts: the one place that does, by EVALSHA.

A script is loaded again on NOSCRIPT (a restarted or flushed server, a replica just
promoted), a cluster's MOVED, ASK and TRYAGAIN are followed, and ``WAIT`` for replicas rides
in the same round trip. Calls on several shards run as one pipeline per server.
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

from .client import Connection
from .replication import Replicas

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
    """One Lua file after the shared prelude (its key type check, ``wrong_type``) and the
    parts it shares with other scripts (``with_parts``: Lua files of local functions)."""

    name: str
    source: str
    sha: str

    @classmethod
    def named(cls, name: str, *with_parts: str) -> Script:
        source = "".join(_read(part) for part in ("prelude", *with_parts, name))
        return cls(name, source, hashlib.sha1(source.encode()).hexdigest())


#: Replies that say a script did not run, so running it again is safe.
_NOT_RUN = (NoScriptError, AskError, TryAgainError)


@dataclass(frozen=True)
class Call:
    script: Script
    #: The first names the slot (always a key of redisbeat's own); the others may be bytes,
    #: an entry's own key made of a name that is not UTF-8.
    keys: Sequence[str | bytes]
    args: Sequence[Any]

    @property
    def slot_key(self) -> str:
        key = self.keys[0]
        return key if isinstance(key, str) else key.decode("utf-8", "surrogateescape")


class Runner:
    """Runs scripts by EVALSHA, loading them on NOSCRIPT, following a cluster's MOVED and ASK,
    with WAIT where asked.

    A reply of NOSCRIPT, MOVED, ASK or TRYAGAIN means the script did not run, so running it
    again (loaded, or on the node named) is safe; any other failure is raised.
    """

    def __init__(self, connection: Connection, replicas: Replicas) -> None:
        self.connection = connection
        self.replicas = replicas
        #: (server, script sha) loaded by this runner: a pipeline loads the others first.
        self._loaded: set[tuple[int, str]] = set()

    def run(self, call: Call, wait: Wait) -> Any:
        """One script's reply (an error reply is raised)."""
        if (wait == "none" or not self.replicas.count) and not self.connection.is_cluster:
            if self._not_loaded(self.connection.client, [call.script]):
                self._load(self.connection.client, call.script)
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

    def run_spread(self, calls: list[Call], wait: Wait) -> list[Any]:
        """Calls on several shards: one pipeline per server that serves them (one round trip
        on one Redis); each reply in order, error replies among them."""
        if len(calls) == 1:  # one shard: no pipeline to build
            try:
                return [self.run(calls[0], wait)]
            except redis.ResponseError as exc:
                return [exc]
        groups: dict[int, list[int]] = {}
        for i, call in enumerate(calls):
            groups.setdefault(id(self.connection.node(call.slot_key)), []).append(i)
        replies: list[Any] = [None] * len(calls)
        for indices in groups.values():
            out, acked, waited, node = self._execute([calls[i] for i in indices], wait)
            if waited is not None:
                self.replicas.acknowledged(acked, wait == "strict", waited, node)
            for i, reply in zip(indices, out, strict=True):
                replies[i] = reply
        return replies

    def _execute(
        self, calls: list[Call], wait: Wait
    ) -> tuple[list[Any], Any, int | None, redis.Redis]:
        """Every call on the server that serves their keys (one slot), then WAIT there."""
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        node = self.connection.node(calls[0].slot_key) if calls else self.connection.client
        asking = False
        for attempt in range(MAX_ATTEMPTS):
            pipe = node.pipeline(transaction=False)
            loads = self._not_loaded(node, [calls[i].script for i in todo])
            for script in loads:
                pipe.script_load(script.source)
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
            out = out[len(loads) :]
            self._loaded.update((id(node), script.sha) for script in loads)
            if asking:
                out = out[1::2]  # the ASKINGs' OKs
            again = [i for i, r in zip(todo, out, strict=True) if isinstance(r, _NOT_RUN)]
            for i, reply in zip(todo, out, strict=True):
                replies[i] = reply
            if not again or attempt == MAX_ATTEMPTS - 1:
                return replies, acked, waited, node
            node, asking = self._before_again(
                [replies[i] for i in again], calls, again, node, asking
            )
            todo = again
        raise AssertionError("unreachable")  # pragma: no cover

    def _before_again(
        self,
        errors: list[Any],
        calls: list[Call],
        again: list[int],
        node: redis.Redis,
        asking: bool,
    ) -> tuple[redis.Redis, bool]:
        """Make the calls that did not run ready to run again: where, and whether ASKING.

        After TRYAGAIN or NOSCRIPT they run again where they were, ASKING as they were: a
        node importing a slot answers a script whose keys are not all there yet TRYAGAIN
        when asked, and MOVED back to the slot's owner when not.
        """
        redirect = next((e for e in errors if isinstance(e, AskError)), None)
        if redirect is not None:
            node = self.connection.redirected(redirect)
            asking = not isinstance(redirect, MovedError)
        elif any(isinstance(e, TryAgainError) for e in errors):
            time.sleep(TRY_AGAIN_SECONDS)  # a slot is half migrated: it settles in ms
        for script in {
            calls[i].script
            for i, e in zip(again, errors, strict=True)
            if isinstance(e, NoScriptError)
        }:
            self._load(node, script)
        return node, asking

    def _not_loaded(self, node: redis.Redis, scripts: list[Script]) -> list[Script]:
        """The scripts this runner has not loaded on ``node``, to load in front of a
        pipeline: a fresh server would otherwise answer every EVALSHA of it NOSCRIPT (1,000
        error replies for a pipeline of 1,000 entries, each in the server's error stats)."""
        return [s for s in dict.fromkeys(scripts) if (id(node), s.sha) not in self._loaded]

    @staticmethod
    def _evalsha(target: Any, call: Call) -> Any:
        return target.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)

    def _load(self, node: Any, script: Script) -> None:
        node.script_load(script.source)
        self._loaded.add((id(node), script.sha))
