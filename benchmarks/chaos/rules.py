"""The guarantees a chaos run must keep, as checks on the checker's verdict, and the lateness
each kind of run is allowed."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .checker import Verdict
from .cluster import Settings

if TYPE_CHECKING:
    from .scenarios import Scenario

#: How far (ms) an occurrence may arrive before its due time: the clocks are the same host's,
#: so only rounding to whole milliseconds is allowed.
EARLY_TOLERANCE_MS = 2
#: How much later than the lease a fault may make an occurrence (ms): the beat that takes
#: over has to wake up (it sleeps at most one heartbeat) and catch up.
FAULT_LATE_MARGIN_MS = 4000
#: The most an occurrence may be late when nothing goes wrong (ms), on a host with a core
#: for every process that wants one; QUIET_LATE_MS times the oversubscription otherwise
#: (see quiet_bound). Measured on 2 cores running three beats, two redis-servers, the
#: workload and the checker: the latest arrival is 56-97 ms on an otherwise idle host, all
#: of it one burst of up to 190 occurrences due at the same millisecond (cron entries on a
#: whole second); the beats send a burst at the pace the CPU they get allows.
QUIET_LATE_MS = 500


def quiet_bound(load: float, cores: int | None = None, waited_ms: int = 0) -> int:
    """The lateness allowed without faults (ms) on a host with this 1-minute load average:
    sending is CPU work, so a host whose runnable processes outnumber its cores k to 1 makes
    it k times slower (measured beside `stress-ng --cpu 2`, load 5 to 9 on 2 cores: 241 to
    1,035 ms). A burst the load average misses shows in ``waited_ms``, the most the run's
    processes waited for a core within two seconds (see contention): it is allowed on top."""
    oversubscribed = load / (cores or os.cpu_count() or 1)
    return max(int(QUIET_LATE_MS * max(1.0, oversubscribed)), QUIET_LATE_MS + waited_ms)


def rules(
    v: Verdict, scenario: Scenario, settings: Settings, quiet_ms: int = QUIET_LATE_MS
) -> list[str]:
    """The guarantees, as checks on the checker's verdict; ``quiet_ms`` is the lateness
    allowed without faults (see quiet_bound)."""
    problems = []
    if v.early_ms < -EARLY_TOLERANCE_MS:
        problems.append(f"an occurrence arrived {-v.early_ms} ms early")
    if v.worker_ran_twice:
        problems.append(f"{v.worker_ran_twice} duplicate runs at the worker")
    if v.worker_not_run:
        problems.append(f"{v.worker_not_run} occurrences delivered and never run at the worker")
    if scenario.measure_only:
        return problems
    if v.repeated_other_id:
        problems.append(
            f"{v.repeated_other_id} sends under another task id, e.g. {v.other_id_examples}"
        )
    if v.writes_lost:
        problems.append(f"{v.writes_lost} acknowledged writes lost")
    if v.missed:
        problems.append(f"{v.missed} occurrences missed, e.g. {v.missed_examples}")
    if v.bad_expiry:
        problems.append(f"{v.bad_expiry} messages with an expiry off the shared clock")
    if not scenario.may_repeat and v.repeated_same_id:
        problems.append(
            f"{v.repeated_same_id} repeats with the same task id, e.g. {v.repeat_examples}"
        )
    if scenario.may_repeat and v.repeated_same_id > settings.batch_size * max(1, v.faults):
        problems.append(f"{v.repeated_same_id} repeats: more than one batch per fault")
    if scenario.fault is None:
        if v.late_max_ms > quiet_ms:
            problems.append(f"an occurrence arrived {v.late_max_ms} ms late (bound {quiet_ms} ms)")
        return problems
    # A fault costs an occurrence it holds up at most a lease and a wake-up; a second fault
    # that catches the takeover before it sends costs another lease (see checker.judge).
    bound = int(settings.lease_seconds * 1000) + FAULT_LATE_MARGIN_MS
    if v.late_after_faults_ms > bound:
        problems.append(
            f"an occurrence arrived {v.late_after_faults_ms} ms late, less a lease for each "
            f"further fault it waited through (bound {bound} ms)"
        )
    return problems
