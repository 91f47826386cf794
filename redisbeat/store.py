"""ScheduleStore: the only module that talks to Redis.

It owns every key (spelled in :mod:`redisbeat.keys`) and every Lua script. The public methods
are the schedule API (add, change, remove, enable, run now, read state); the ``claim``/
``finish``/``heartbeat`` family is what a beat uses.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from itertools import islice
from typing import Any, cast

import redis
from redis.sentinel import Sentinel

from .config import Config
from .connection import Replicas, connect, describe
from .entry import Entry
from .errors import (
    ConfigurationError,
    CorruptEntry,
    EntryNotFound,
    OwnershipError,
    RedisBeatError,
)
from .keys import Keys
from .records import (
    BeatInfo,
    ClaimBatch,
    ConfigMarker,
    EntryState,
    FinishResult,
    Heartbeat,
    Outcome,
    Quarantined,
    SyncReport,
    text,
    text_or_none,
    wire,
)
from .scripts import Scripts
from .timing import MAX_MS, from_ms, valid_ms

log = logging.getLogger(__name__)

CHUNK = 1000
MAX_CAS_ATTEMPTS = 10


class ScheduleStore:
    """Periodic entries in Redis: CRUD for people and programs, claims for beats."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = "redisbeat",
        timezone: str = "UTC",
        beat_ttl: float = 30.0,
        wait_replicas: int = 0,
        wait_timeout: float = 0.5,
    ) -> None:
        if not client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ConfigurationError(
                "ScheduleStore needs a Redis client made with decode_responses=True"
            )
        self.client = client
        self.keys = Keys(prefix)
        self.timezone = timezone
        self.beat_ttl_ms = int(beat_ttl * 1000)
        self.scripts = Scripts(client)
        self._pubsub: Any = None
        #: WAIT for this many replicas after each write of a claim, finish or API call.
        self.replicas = Replicas(
            client, wait_replicas, wait_timeout, self.describe, self._drop_subscription
        )
        #: The Sentinel client from_config made (closed with the store).
        self._sentinel: Sentinel | None = None

    def describe(self) -> str:
        """Where the store lives, for log lines (no password)."""
        return f"{describe(self.client)} prefix={self.keys.prefix}"

    @classmethod
    def from_config(cls, config: Config) -> ScheduleStore:
        client, sentinel = connect(config)
        store = cls(
            client,
            prefix=config.key_prefix,
            timezone=config.timezone,
            beat_ttl=3 * config.heartbeat_seconds,
            wait_replicas=config.wait_replicas,
            wait_timeout=config.wait_timeout,
        )
        store._sentinel = sentinel
        return store

    @classmethod
    def from_app(cls, app: Any) -> ScheduleStore:
        """A store with the same settings as ``celery beat -S redisbeat.RedisScheduler``."""
        return cls.from_config(Config.from_app(app))

    def close(self) -> None:
        self._drop_subscription()
        self.client.close()
        if self._sentinel is not None:
            self._sentinel.close()
            self._sentinel = None

    def _drop_subscription(self) -> None:
        if self._pubsub is not None:
            self._pubsub.close()
            self._pubsub = None

    # -- writing ------------------------------------------------------------------------------

    def upsert(self, entry: Entry, *, force: bool = False) -> bool:
        """Add or replace an entry; True when something changed.

        An edit that leaves the timing alone (schedule, start/end, enabled) keeps the next due
        time; any other change reschedules from now. ``force`` takes over an entry that
        another source owns (otherwise :class:`OwnershipError`).
        """
        return bool(self.upsert_many([entry], force=force))

    def upsert_many(self, entries: Iterable[Entry], *, force: bool = False) -> int:
        """Add or replace many entries, pipelined; returns how many changed."""
        written = 0
        for chunk in _chunks(entries, CHUNK):
            results = self._write(chunk, force=force).values()
            written += sum(1 for r in results if r in ("added", "updated"))
        if written:
            self.client.publish(self.keys.events, "*")
        return written

    def _write(self, chunk: list[Entry], *, force: bool, foreign: str = "raise") -> dict[str, str]:
        """Write a chunk with compare-and-set.

        Result per name: ``added``, ``updated``, ``unchanged`` or ``foreign``.
        """
        pending = {e.name: e.with_default_tz(self.timezone) for e in chunk}
        results: dict[str, str] = {}
        for _ in range(MAX_CAS_ATTEMPTS):
            names = list(pending)
            pipe = self.client.pipeline(transaction=False)
            pipe.time()
            pipe.hmget(self.keys.entries, names)
            for name in names:
                pipe.zscore(self.keys.schedule, name)
            now_reply, olds, *scores = pipe.execute(raise_on_error=False)
            for reply in (now_reply, olds):
                if isinstance(reply, Exception):
                    raise reply
            # A schedule key of the wrong type: the upsert script names it.
            scores = [None if isinstance(s, Exception) else s for s in scores]
            now_ms = int(now_reply[0]) * 1000 + int(now_reply[1]) // 1000
            pipe = self.client.pipeline(transaction=False)
            sent = []
            for name, old_raw, score in zip(names, olds, scores, strict=False):
                entry = pending[name]
                new_raw = entry.dumps()
                broken = score is not None and not valid_ms(score)
                if old_raw == new_raw:
                    results[name] = self._mend(name, score) if broken else "unchanged"
                    continue
                old = _load_or_none(old_raw, name)
                if old is not None and old.source != entry.source and not force:
                    if foreign == "skip":
                        results[name] = "foreign"
                        continue
                    raise OwnershipError(name, old.source, entry.source)
                due = entry.first_due_ms(now_ms, self.timezone)
                keep = old is not None and old.timing_key() == entry.timing_key() and not broken
                self.scripts.upsert(
                    keys=[
                        self.keys.entries,
                        self.keys.schedule,
                        self.keys.quarantine,
                        self.keys.source(entry.source),
                        self.keys.source(old.source if old else entry.source),
                    ],
                    args=[
                        name,
                        old_raw or "",
                        new_raw,
                        "" if due is None else due,
                        "1" if keep else "0",
                        "",
                    ],
                    client=pipe,
                )
                sent.append((name, "updated" if old_raw else "added"))
            replies = self.replicas.execute(pipe, raise_on_error=False)
            for (name, written), reply in zip(sent, replies, strict=False):
                if isinstance(reply, redis.exceptions.NoScriptError):
                    # SCRIPT FLUSH between the pipeline's script check and its EVALSHAs:
                    # this one did not run; the next round loads the script again.
                    continue
                if isinstance(reply, Exception):
                    raise reply
                if reply != -1:
                    results[name] = written if reply == 1 else "unchanged"
                    del pending[name]
            pending = {n: e for n, e in pending.items() if n not in results}
            if not pending:
                return results
        raise RedisBeatError(f"entries changed concurrently too often: {sorted(pending)[:5]}")

    def _mend(self, name: str, score: float) -> str:
        """An unchanged entry whose due time is not a valid time: put it back on its
        schedule (an "update" of its timing), and say so."""
        what = self.repair(name, repr(score), "api")
        log.warning(
            "redisbeat: entry %r had a due time in Redis that is not a valid time (%s); %s",
            name,
            score,
            what,
        )
        return "updated"

    def upsert_owned(self, entries: Iterable[Entry]) -> dict[str, str]:
        """Add or replace entries, leaving alone names that another source owns.

        Returns, per name, ``"added"``, ``"updated"``, ``"unchanged"`` or ``"foreign"``.
        """
        results: dict[str, str] = {}
        for chunk in _chunks(entries, CHUNK):
            results.update(self._write(chunk, force=False, foreign="skip"))
        if {"added", "updated"} & set(results.values()):
            self.client.publish(self.keys.events, "*")
        return results

    def remove(self, name: str, *, source: str | None = None) -> bool:
        """Remove an entry, its state and any claim on it; False when there was none.

        With ``source``, the entry is removed only when that source owns it.
        """
        owner = source
        if owner is None:
            raw = self.client.hget(self.keys.entries, name)
            old = _load_or_none(text_or_none(raw), name)
            owner = old.source if old is not None else "api"
        k = self.keys
        return bool(
            self.replicas.eval(
                self.scripts.remove,
                keys=[k.entries, k.schedule, k.state, k.inflight, k.quarantine, k.source(owner)],
                args=[name, k.events, "1" if source is not None else "0"],
            )
        )

    def enable(self, name: str) -> bool:
        return self._set_enabled(name, True)

    def disable(self, name: str) -> bool:
        return self._set_enabled(name, False)

    def _set_enabled(self, name: str, enabled: bool) -> bool:
        entry = self.get(name)
        # Written even when unchanged, so that wait_replicas confirms what was read.
        return self.upsert(replace(entry, enabled=enabled), force=True)

    def run_now(self, name: str) -> None:
        """Make an entry due at once (its schedule continues afterwards)."""
        if not self.replicas.eval(
            self.scripts.run_now,
            keys=[self.keys.entries, self.keys.schedule],
            args=[name, self.keys.events],
        ):
            raise EntryNotFound(name)

    def sync_source(self, source: str, entries: Iterable[Entry]) -> SyncReport:
        """Make the entries owned by ``source`` exactly ``entries``.

        Entries of that source not given are removed; names owned by another source are left
        alone and reported in ``foreign``.
        """
        wanted = {e.name: e for e in entries}
        for entry in wanted.values():
            if entry.source != source:
                raise ValueError(
                    f"entry {entry.name!r} has source {entry.source!r}, not {source!r}"
                )
        owned = self.names(source)
        results: dict[str, str] = {}
        for chunk in _chunks(wanted.values(), CHUNK):
            results.update(self._write(chunk, force=False, foreign="skip"))
        removed = [n for n in sorted(owned - set(wanted)) if self.remove(n, source=source)]
        report = SyncReport(
            added=sorted(n for n, r in results.items() if r == "added"),
            updated=sorted(n for n, r in results.items() if r == "updated"),
            removed=removed,
            unchanged=sum(1 for r in results.values() if r == "unchanged"),
            foreign=sorted(n for n, r in results.items() if r == "foreign"),
        )
        if report.added or report.updated:
            self.client.publish(self.keys.events, "*")
        return report

    # -- reading ------------------------------------------------------------------------------

    def get(self, name: str) -> Entry:
        raw = self.client.hget(self.keys.entries, name)
        if raw is None:
            raise EntryNotFound(name)
        return Entry.loads(raw, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self.client.hexists(self.keys.entries, name))

    def __len__(self) -> int:
        return int(self.client.hlen(self.keys.entries))

    def __iter__(self) -> Iterator[Entry]:
        """Every loadable entry (corrupt ones are logged and skipped), scanned in pages."""
        for name, raw in self.client.hscan_iter(self.keys.entries, count=CHUNK):
            try:
                yield Entry.loads(raw, name)
            except CorruptEntry as exc:
                log.warning("redisbeat: skipping corrupt entry: %s", exc)

    def names(self, source: str) -> set[str]:
        """Names of the entries a source owns."""
        return {text(n) for n in self.client.smembers(self.keys.source(source))}

    def state(self, name: str) -> EntryState:
        states = self.states([name])
        if not states[0].next_run_at and not states[0].quarantined and name not in self:
            raise EntryNotFound(name)
        return states[0]

    def states(self, names: list[str]) -> list[EntryState]:
        """Run state of many entries in one round trip."""
        if not names:
            return []
        pipe = self.client.pipeline(transaction=False)
        pipe.zmscore(self.keys.schedule, names)
        pipe.hmget(self.keys.state, names)
        pipe.hmget(self.keys.inflight, names)
        pipe.hmget(self.keys.quarantine, names)
        scores, states, claims, set_aside = pipe.execute()
        return [
            EntryState.from_redis(n, sc, st, cl, Quarantined.from_redis(n, q) if q else None)
            for n, sc, st, cl, q in zip(names, scores, states, claims, set_aside, strict=False)
        ]

    def beats(self) -> list[BeatInfo]:
        """Beats whose last heartbeat is recent enough to count as alive."""
        now = self.now_ms()
        # Up to the latest valid time: a score past it was not written by a beat.
        rows = self.client.zrangebyscore(
            self.keys.beats, now - self.beat_ttl_ms, MAX_MS, withscores=True
        )
        pairs = cast("list[tuple[Any, Any]]", rows)  # redis-py types this loosely
        return [BeatInfo.from_heartbeat(text(beat_id), int(score)) for beat_id, score in pairs]

    def quarantined(self) -> dict[str, Quarantined]:
        """Every definition set aside, with why (a record redisbeat did not write says so)."""
        return {
            text(key): Quarantined.from_redis(text(key), text(raw))
            for key, raw in self.client.hgetall(self.keys.quarantine).items()
        }

    def now_ms(self) -> int:
        """The Redis server's clock, the one clock every beat shares."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # -- what beats use -----------------------------------------------------------------------

    def claim(self, beat_id: str, lease_ms: int, batch_size: int) -> ClaimBatch:
        k = self.keys
        reply = self.replicas.eval(
            strict=False,
            script=self.scripts.claim,
            keys=[k.schedule, k.entries, k.inflight, k.state],
            args=[beat_id, lease_ms, batch_size, MAX_MS],
        )
        return ClaimBatch.from_reply(reply, lease_ms)

    def finish(
        self,
        beat_id: str,
        lease_until_ms: int,
        outcomes: list[Outcome],
        quarantine_after: int = 0,
    ) -> FinishResult:
        """Reschedule, record or hand back claimed entries (only those still this beat's).

        An entry whose sends failed ``quarantine_after`` times in a row is set aside.
        """
        args: list[Any] = [beat_id, lease_until_ms, self.keys.events, quarantine_after, MAX_MS]
        for o in outcomes:
            nxt = "" if o.next_due_ms is None else o.next_due_ms
            args += [wire(o.name), o.action, nxt, o.task_id, o.due_ms, o.error]
        k = self.keys
        finished, now, earliest, quarantined, garbled = self.replicas.eval(
            strict=False,
            script=self.scripts.finish,
            keys=[k.schedule, k.inflight, k.state, k.entries, k.quarantine],
            args=args,
        )
        return FinishResult(
            int(finished),
            int(now),
            None if earliest < 0 else int(earliest),
            tuple(text(n) for n in quarantined),
            {text(garbled[i]): text(garbled[i + 1]) for i in range(0, len(garbled), 2)},
        )

    def renew(self, beat_id: str, lease_until_ms: int, names: list[str], lease_ms: int) -> int:
        """Extend the claims on ``names`` this beat holds under ``lease_until_ms``; returns
        the new lease_until (from now, by the Redis clock)."""
        k = self.keys
        lease_until, _ = self.replicas.eval(
            strict=False,
            script=self.scripts.renew,
            keys=[k.schedule, k.inflight],
            args=[beat_id, lease_until_ms, lease_ms, *(wire(n) for n in names)],
        )
        return int(lease_until)

    def expire_lost(self, beat_id: str, since_ms: int, lease_ms: int) -> int:
        """End now the leases of this beat's claims taken since ``since_ms`` whose reply it
        never got; returns how many. The beat must hold no claim it knows of."""
        k = self.keys
        return int(
            self.replicas.eval(
                strict=False,
                script=self.scripts.expire_lost,
                keys=[k.schedule, k.inflight],
                args=[beat_id, since_ms + lease_ms, lease_ms, k.events],
            )
        )

    def quarantine(self, name: str, definition: str, error: str, by: str) -> bool:
        k = self.keys
        return bool(
            self.replicas.eval(
                strict=False,
                script=self.scripts.quarantine,
                keys=[k.entries, k.schedule, k.inflight, k.quarantine],
                args=[wire(name), wire(definition), error, by],
            )
        )

    def heartbeat(self, beat_id: str) -> Heartbeat:
        """Refresh a beat's heartbeat; says which ``beat_schedule`` the deployment follows
        and which schedule members have a score past any valid time."""
        k = self.keys
        reply = self.scripts.heartbeat(
            keys=[k.beats, k.config, k.schedule], args=[beat_id, self.beat_ttl_ms, MAX_MS]
        )
        beyond = [(text(reply[i]), text(reply[i + 1])) for i in range(3, len(reply), 2)]
        return Heartbeat(text(reply[2]) or None, beyond)

    def repair(self, name: str, score: str, by: str) -> str:
        """Put an entry whose score is not a valid time back on its schedule, from its
        definition (a corrupt one is set aside); returns what was done, for the log."""
        raw = text_or_none(self.client.hget(self.keys.entries, name))
        due: int | None = None
        if raw is not None:
            try:
                entry = Entry.loads(raw, name).with_default_tz(self.timezone)
            except CorruptEntry as exc:
                self.quarantine(name, raw, str(exc), by)
                return f"its definition is corrupt and was set aside: {exc}"
            due = entry.first_due_ms(self.now_ms(), self.timezone)
        repaired = self.replicas.eval(
            strict=False,
            script=self.scripts.repair,
            keys=[self.keys.schedule],
            args=[wire(name), score, "" if due is None else due],
        )
        if not repaired:
            return "its score changed meanwhile; left as it is"
        if raw is None:
            return "it has no definition: taken off the schedule"
        if due is None:
            return "taken off the schedule (nothing left to run)"
        return f"rescheduled from its definition to {from_ms(due).isoformat()}"

    def config_marker(self) -> ConfigMarker | None:
        """Which ``beat_schedule`` the deployment follows, or None."""
        fields = ("version", "at", "by", "entries", "previous", "applied")
        values = self.client.hmget(self.keys.config, fields)
        return ConfigMarker.from_fields([text_or_none(v) for v in values])

    def config_version(self) -> str | None:
        """The version the record names, even a record :meth:`config_marker` cannot read."""
        return text_or_none(self.client.hget(self.keys.config, "version"))

    def claim_config(
        self,
        read: str,
        version: str,
        beat_id: str,
        entries: dict[str, str],
        previous: dict[str, str] | None,
    ) -> bool:
        """Record a new ``beat_schedule`` (not yet applied) unless the version is no longer
        ``read`` ('' for none); True when recorded."""
        args = [
            "claim",
            read,
            version,
            beat_id,
            json.dumps(entries, sort_keys=True),
            "" if previous is None else json.dumps(previous, sort_keys=True),
        ]
        return bool(self.replicas.eval(self.scripts.config, keys=[self.keys.config], args=args))

    def config_applied(self, version: str) -> bool:
        """Record that the entries of ``version`` are written; False if it was replaced."""
        return bool(
            self.replicas.eval(
                self.scripts.config, keys=[self.keys.config], args=["applied", version]
            )
        )

    def deregister(self, beat_id: str) -> None:
        self.client.zrem(self.keys.beats, beat_id)

    def subscribe(self) -> None:
        """Start listening for changes (before the first claim, so none is missed)."""
        if self._pubsub is None:
            # Subscribe confirmations are kept: a read that returns None then means that
            # nothing is waiting, which draining relies on.
            pubsub = self.client.pubsub(ignore_subscribe_messages=False)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self.keys.events)
            except redis.RedisError:
                pubsub.close()
                raise
            self._pubsub = pubsub

    def changes_pending(self) -> bool:
        """Subscribe if not subscribed, and take every change published since the last look,
        without waiting. True when one was, or may have been missed: the subscription is
        new (a lost connection drops it), so a change published before it was not heard."""
        try:
            return self._look()
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            # The listening connection alone may have been lost: one fresh try.
            self._drop_subscription()
        try:
            return self._look()
        except (redis.RedisError, OSError):
            self._drop_subscription()
            raise

    def _look(self) -> bool:
        fresh = self._pubsub is None
        self.subscribe()
        return self._drain() or fresh

    def _drain(self) -> bool:
        """Read what the subscription holds without blocking; True if a change was in it."""
        changed = False
        while (message := self._pubsub.get_message(timeout=0)) is not None:
            changed = changed or message.get("type") == "message"
        return changed

    def wait_for_change(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a change; True when one arrived."""
        self.subscribe()
        deadline = time.monotonic() + timeout
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                message = self._pubsub.get_message(timeout=remaining)
                if message is not None and message.get("type") == "message":
                    # A burst of changes needs one claim, not one per message.
                    self._drain()
                    return True
        except (redis.RedisError, OSError):
            self._drop_subscription()
            raise
        return False


def _chunks(items: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _load_or_none(raw: str | None, name: str) -> Entry | None:
    if raw is None:
        return None
    try:
        return Entry.loads(raw, name)
    except CorruptEntry:
        return None
