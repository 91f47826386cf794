"""BeatSchedule: how a beat keeps the deployment's ``beat_schedule`` in Redis.

Rolling deploys run old and new beats side by side, and people change config entries at
runtime (disable one from the admin). The rule: the configuration in Redis carries a
version (a digest of its entries, who wrote it, when). A beat that starts with a
configuration other than the recorded one is the newest: it applies the differences (only
the entries whose configured definition changed, so runtime changes to the others stand),
records its version, and says which entries differ. A running beat whose configuration is
no longer the recorded one says so once and leaves Redis alone. A beat that restarts with
the recorded configuration writes nothing. When the record is gone (Redis lost its data),
the first beat to notice writes its whole configuration again; a beat whose configuration
was superseded first gives the newer one's beats a heartbeat's time to live to do so.

An item of ``beat_schedule`` that makes no entry (a :class:`BadItem`) stops nothing: it
counts in the version by a digest of its own, is never written, and is set aside in the
quarantine by the beat that applies the configuration; what is stored under its name stays
(an operator's typo in a deploy does not remove the entry that was running).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from .. import signals
from ..schedule.bad_items import BadItem
from ..schedule.entry import Entry
from ..schedule.from_celery import CONFIG_SOURCE, differences, digests, version
from ..store import ScheduleStore
from ..store.records import ConfigMarker

log = logging.getLogger(__name__)

#: Tries when other beats write the configuration at the same moment.
ATTEMPTS = 5
#: The digest of an entry whose definition in Redis is not known: equal to none.
UNKNOWN = "?"


class BeatSchedule:
    """One beat's ``beat_schedule``, kept in Redis by the rule above."""

    def __init__(
        self,
        store: ScheduleStore,
        beat_id: str,
        entries: list[Entry],
        *,
        grace: float = 0.0,
        bad: Sequence[BadItem] = (),
    ) -> None:
        self.store = store
        self.beat_id = beat_id
        #: Seconds a beat whose configuration was superseded waits, once the record is gone,
        #: before it writes its own (the beats' heartbeat time to live).
        self.grace = grace
        #: When this beat first saw the record gone while it was superseded (monotonic).
        self._gone_since: float | None = None
        self.entries = {e.name: e for e in entries}
        #: The items that make no entry: never written, and what is stored under their
        #: names is left as it is (neither written nor removed).
        self.bad = {b.name: b for b in bad}
        self.digests = {**digests(entries), **{b.name: b.digest for b in bad}}
        self.version = version(self.digests)
        #: Whether this beat has settled the configuration once: a different record seen
        #: after that is a newer deploy, not something for this beat to write over.
        self._started = False
        #: Whether the record this beat last saw is written; until then every heartbeat
        #: (and the next tick after a failure) tries again.
        self._settled = False
        #: The newer version this beat said it leaves alone.
        self._deferred_to: str | None = None

    def heartbeat(self, recorded: str | None) -> None:
        """Act on the version Redis records (None: none): at start, and at each heartbeat."""
        if recorded is None and self._settled and self._superseded():
            return
        self._gone_since = None
        if recorded is None and self._settled:
            log.warning("redisbeat: the beat_schedule record is gone from Redis (lost data?)")
            self._settled = False
        if not self._settled:
            # Raises on Redis trouble, leaving it unsettled: a rewrite cut short by an error
            # is finished later even though the record already names this beat's version.
            settled = self._sync()
            if settled and not self._started:
                self._report()  # once, with what Redis holds under their names
            self._settled = settled
            self._started = self._started or settled
        elif recorded != self.version and recorded != self._deferred_to:
            marker = self.store.config_marker()
            if marker is not None and marker.version != self.version:
                self._defer(marker)

    def _superseded(self) -> bool:
        """Whether to leave lost data to the beats of a newer configuration for now.

        Every live beat hears of the loss within a heartbeat; waiting longer than that lets a
        beat of the newest release write first, so lost data does not undo a deploy. Without
        such a beat, this one writes its configuration once the grace is over.
        """
        if self._deferred_to is None:
            return False
        now = time.monotonic()
        if self._gone_since is None:
            self._gone_since = now
        return now - self._gone_since < self.grace

    def _sync(self) -> bool:
        """Write this beat's configuration if it stands; True once the record is settled."""
        for _ in range(ATTEMPTS):
            marker = self.store.config_marker()
            if marker is not None and marker.version == self.version:
                if not marker.applied:  # its writer stopped halfway: finish its work
                    self._apply(marker.previous)
                    self.store.config_applied(self.version)
                return True
            if marker is not None and self._started:
                self._defer(marker)  # a newer configuration was deployed meanwhile
                return True
            # A record no beat could have written reads as none, and is replaced.
            read = marker.version if marker else self.store.config_version() or ""
            previous = None if marker is None else written(marker)
            if self.store.claim_config(read, self.version, self.beat_id, self.digests, previous):
                if marker is not None:
                    log.warning(
                        "redisbeat: this beat's beat_schedule differs from the one in Redis "
                        "(written by beat %s at %s): it %s; this configuration now stands",
                        marker.by,
                        marker.at.isoformat(),
                        differences(marker.entries, self.digests),
                    )
                self._apply(previous)
                self.store.config_applied(self.version)
                self._deferred_to = None
                return True
        log.warning("redisbeat: other beats kept writing beat_schedule; will try again")
        return False

    def _apply(self, previous: dict[str, str] | None) -> None:
        """Write what changed since ``previous`` (None: everything, and remove the rest)."""
        if previous is None:
            report = self.store.sync_source(CONFIG_SOURCE, self.entries.values(), keep=self.bad)
            foreign, written = report.foreign, [*report.added, *report.updated]
            removed = report.removed
        else:
            changed = [e for n, e in self.entries.items() if previous.get(n) != self.digests[n]]
            results = self.store.upsert_owned(changed)
            for name, result in results.items():  # fixed, if to the stored definition
                if previous.get(name, "").startswith("!") and result != "foreign":
                    self.store.release_item(name)
            foreign = sorted(n for n, r in results.items() if r == "foreign")
            written = sorted(n for n, r in results.items() if r in ("added", "updated"))
            gone = sorted(set(previous) - set(self.entries) - set(self.bad))
            removed = [n for n in gone if self.store.remove(n, source=CONFIG_SOURCE)]
            for name in gone:  # a bad item that left: its record, where nothing was stored
                if previous[name].startswith("!"):
                    self.store.release_item(name)
        for name in foreign:
            log.warning(
                "redisbeat: beat_schedule entry %r is owned by another source; left as it is", name
            )
        if written or removed:
            log.info("redisbeat: beat_schedule synced: wrote %s, removed %s", written, removed)
        self._set_aside()

    def _set_aside(self) -> None:
        """Record each bad item in the quarantine, as a corrupt definition is set aside (the
        entry_quarantined signal when its record is new or changed)."""
        for name, bad in self.bad.items():
            error = bad.describe(self._fate(name))
            if self.store.quarantine_item(name, bad.shown, error, self.beat_id):
                signals.entry_quarantined.send_robust(self.beat_id, name=name, error=error)

    def _report(self) -> None:
        """One line per bad item: the entry, the field, what to fix, and what runs meanwhile."""
        for name, bad in self.bad.items():
            log.error("redisbeat: %s (quarantine list shows it)", bad.describe(self._fate(name)))

    def _fate(self, name: str) -> str:
        if name in self.store:
            return "the stored definition keeps running"
        return "it is not stored and not sent"

    def _defer(self, marker: ConfigMarker) -> None:
        self._deferred_to = marker.version
        log.warning(
            "redisbeat: a newer beat_schedule was deployed by beat %s at %s; relative to this "
            "beat's it %s; this beat sends what is in Redis and does not re-assert its own",
            marker.by,
            marker.at.isoformat(),
            differences(self.digests, marker.entries),
        )


def written(marker: ConfigMarker) -> dict[str, str] | None:
    """The digests the entries in Redis are known to follow (None: nothing is known).

    A record whose writer stopped halfway leaves each entry its two configurations define
    differently as either; such names get a digest no entry has, so they are written again.
    """
    if marker.applied:
        return marker.entries
    if marker.previous is None:
        return None
    before, after = marker.previous, marker.entries
    return {
        name: before[name] if before.get(name) == after.get(name) else UNKNOWN
        for name in before.keys() | after.keys()
    }
