"""Redis trouble as one beat lives through it: how long to wait, what to log, once, and
when to stop.

An outage (no connection, or a failed TLS handshake) is probed every :data:`PROBE_INTERVAL`,
so the beats are back within a fraction of a second of Redis; a refusal (out of memory, an
ACL denial, a read-only replica) or a failing broker backs off, doubling. Each kind of trouble is
logged once per episode, and the end of the episode once. Trouble no wait mends (a login
refused, a database the server lacks: :data:`FATAL_KINDS`) is tried again a few times, in
case a password rotation or an ACL reload is under way, and then stops the beat
(:class:`GaveUp`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from ..errors import RedisBeatError
from ..store.errors import RedisTrouble, StoreError
from ..store.records import Outcome

log = logging.getLogger(__name__)

MIN_BACKOFF = 0.5
MAX_BACKOFF = 10.0
#: While Redis cannot be reached, try it this often (seconds): a refused connection costs
#: nothing, and the beats must be back within a fraction of a second of Redis.
PROBE_INTERVAL = 0.2
#: The trouble probed that often: no connection, and a TLS handshake that failed (a CA file
#: fixed in place is read at the next connection, so the beat is back at once).
PROBED = frozenset({"unavailable", "tls"})
#: The trouble a beat stops on: no password given, a login refused (a wrong user or
#: password, a disabled user), a database index the server does not have. Each is tried
#: FATAL_ATTEMPTS times in all, FATAL_RETRY_SECONDS apart (8 s), then the beat stops with
#: the exit status the command line gives the same trouble. An ACL denial is not among them:
#: ``ACL SETUSER`` mends it in a running beat, which carries on.
FATAL_KINDS = frozenset({"noauth", "auth", "db"})
FATAL_ATTEMPTS = 5
FATAL_RETRY_SECONDS = 2.0


class GaveUp(RedisBeatError):
    """Trouble no wait mends outlasted its attempts: the beat stops with ``exit_code``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Outage:
    """The current episode of trouble, if any; ``where`` names the Redis for log lines."""

    def __init__(self, where: Callable[[], str]) -> None:
        self._where = where
        #: Refusals (or broker failures) in a row: the backoff doubles with each.
        self.failures = 0
        self.down_since: float | None = None
        #: The latest trouble of the current episode, and every kind logged in it (once each).
        self._trouble: RedisTrouble | None = None
        self._logged: set[tuple[str, str | None]] = set()
        #: Attempts in a row met by trouble of FATAL_KINDS, and when the first was.
        self.fatal = 0
        self._fatal_since = 0.0
        #: Set once the beat gave up (its last calls to Redis, on the way out, would fail too).
        self.gave_up = False

    @property
    def troubled(self) -> bool:
        return self.down_since is not None or self.failures > 0

    def delay(self, exc: StoreError | None) -> float:
        """Seconds to wait after ``exc`` (None: the broker failed); logs it once per kind."""
        trouble = None if exc is None else exc.trouble
        if trouble is not None and trouble.kind in PROBED:
            delay = PROBE_INTERVAL
        elif trouble is not None and trouble.kind in FATAL_KINDS:
            if not self.fatal:
                self._fatal_since = time.monotonic()
            self.fatal += 1
            delay = FATAL_RETRY_SECONDS
        else:
            # Redis answers but refuses (or the broker fails): back off, doubling.
            self.failures += 1
            delay = min(MAX_BACKOFF, MIN_BACKOFF * 2.0 ** (self.failures - 1))
        if trouble is not None:
            if self.down_since is None:
                self.down_since = time.monotonic()
            # One line per kind of trouble for the whole episode, however many ticks it lasts.
            if (trouble.kind, trouble.key) not in self._logged:
                self._logged.add((trouble.kind, trouble.key))
                log.error("redisbeat: %s; %s", trouble.describe(self._where()), _plan(trouble))
            self._trouble = trouble
        return delay

    def give_up(self) -> None:
        """Stop the beat (:class:`GaveUp`) once trouble no wait mends has met
        FATAL_ATTEMPTS attempts in a row."""
        trouble = self._trouble
        if trouble is None or trouble.kind not in FATAL_KINDS or self.fatal < FATAL_ATTEMPTS:
            return
        self.gave_up = True
        seconds = time.monotonic() - self._fatal_since
        raise GaveUp(
            f"{trouble.describe(self._where())}; still so after {self.fatal} attempts over "
            f"{seconds:.0f} s: this beat stops",
            trouble.exit_code,
        )

    def over(self) -> None:
        """Redis answered normally: end the episode (said once)."""
        if self.down_since is None:
            return
        seconds = time.monotonic() - self.down_since
        if self._trouble is None or self._trouble.kind == "unavailable":
            log.warning("redisbeat: Redis is available again after %.1f s", seconds)
        else:
            log.warning(
                "redisbeat: Redis at %s answers normally again after %.1f s (it was %s)",
                self._where(),
                seconds,
                self._trouble.was,
            )
        self.down_since = None
        self._trouble = None
        self._logged.clear()
        self.fatal = 0


class BrokerOutage:
    """A broker that failed a send, as one beat lives through it. Until a probe reaches it
    the beat claims nothing (a beat whose own link to the broker is down would only hold
    occurrences another beat could send), probing every :data:`PROBE_INTERVAL`; a broker
    that answers but refuses the sends (out of memory, a read-only replica) is retried with
    backoff. Said once when it cannot be reached, and once when it takes messages again."""

    def __init__(self, probe: Callable[[], None]) -> None:
        self._probe = probe
        self.down_since: float | None = None
        self._said = False

    def settled(self, failed: bool, outcomes: Sequence[Outcome]) -> None:
        """After a batch: the broker failed a send of it, or (when it had failed before)
        took one, which ends the episode (said once)."""
        if failed:
            self.down_since = self.down_since or time.monotonic()
        elif self.down_since is not None and any(o.action == "sent" for o in outcomes):
            seconds = time.monotonic() - self.down_since
            log.warning(
                "redisbeat: the broker takes this beat's messages again after %.1f s", seconds
            )
            self.down_since, self._said = None, False

    def reachable(self) -> bool:
        """Whether the beat may claim: the broker has not failed, or a probe reaches it."""
        if self.down_since is None:
            return True
        try:
            self._probe()
        except Exception as exc:
            if not self._said:
                self._said = True
                log.error(
                    "redisbeat: this beat cannot reach the broker (%s: %s); it claims nothing "
                    "until it can (any beat that reaches it sends), trying every %g s",
                    type(exc).__name__,
                    exc,
                    PROBE_INTERVAL,
                )
            return False
        return True


def _plan(trouble: RedisTrouble) -> str:
    """What the beat does next about ``trouble``, for its line."""
    if trouble.kind in PROBED:
        return f"trying again every {PROBE_INTERVAL} s"
    if trouble.kind in FATAL_KINDS:
        return (
            f"trying again every {FATAL_RETRY_SECONDS:g} s, {FATAL_ATTEMPTS} attempts in all, "
            "then this beat stops"
        )
    return "retrying with backoff"
