"""The fault-injection suite: its checker's rules on known histories, then every scenario for real.

The scenarios (benchmarks/chaos) run real beats, a real store redis-server with an AOF and a
real broker; here in the bounded CI profile, `make chaos` runs them longer and bigger.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from benchmarks.chaos.checker import Delivery, Timeline, decode, judge, occurrences
from benchmarks.chaos.cluster import Settings
from benchmarks.chaos.contention import RunQueueWait, family
from benchmarks.chaos.report import markdown_table
from benchmarks.chaos.rules import quiet_bound, rules
from benchmarks.chaos.scenarios import CI, SCENARIOS, Outcome, run
from redisbeat import Entry
from redisbeat.schedule.ids import occurrence_id
from redisbeat.schedule.kinds import Clocked, Cron, Interval
from redisbeat.schedule.timing import from_ms
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.redis_server import RedisServer
from redisbeat_testkit.sentinel import SentinelGroup

T0 = 1_800_000_000_000  # a whole second, ms
PREFIX = "p"
SETTINGS = Settings()


def every(name: str, seconds: int, anchor: int = T0, **kw: object) -> Entry:
    return Entry(
        name,
        "proj.ping",
        Interval(seconds),
        kwargs={"entry": name},
        start_at=from_ms(anchor),
        **kw,  # type: ignore[arg-type]
    )


def sent(name: str, due: int, arrived: int, expires: str | None = None) -> Delivery:
    return Delivery(occurrence_id(PREFIX, name, due), name, arrived, expires)


def history(*entries: Entry) -> Timeline:
    timeline = Timeline()
    for entry in entries:
        timeline.record(entry, entry.name, T0 - 1000, T0 - 990)
    return timeline


def verdict(
    timeline: Timeline,
    deliveries: list[Delivery],
    end: int = T0 + 4000,
    outages: tuple[tuple[int, int], ...] = (),
) -> Any:
    return judge("t", PREFIX, timeline, deliveries, window=(T0, end), slack_ms=500, outages=outages)


def test_a_message_no_scenario_entry_sent_is_not_judged() -> None:
    # Celery's celery.backend_cleanup, which the beats' app sends daily at 04:00.
    body = base64.b64encode(json.dumps([[], {}, {}]).encode()).decode()
    properties = {"body_encoding": "base64"}
    cleanup = {"body": body, "headers": {"id": "c"}, "properties": properties}
    assert decode(json.dumps(cleanup).encode(), 1) is None
    body = base64.b64encode(json.dumps([[], {"entry": "a"}, {}]).encode()).decode()
    ours = {"body": body, "headers": {"id": "t"}, "properties": properties}
    assert decode(json.dumps(ours).encode(), 1) == Delivery("t", "a", 1, None)


def test_occurrences_come_from_the_definition_alone() -> None:
    assert list(occurrences(every("a", 2, T0 + 500), T0, T0 + 5000)) == [
        T0 + 500,
        T0 + 2500,
        T0 + 4500,
    ]
    cron = Entry("c", "proj.ping", Cron("*/2 * * * * *", tz="Asia/Kathmandu"))
    assert list(occurrences(cron, T0 + 1, T0 + 6000)) == [T0 + 2000, T0 + 4000, T0 + 6000]
    at = datetime.fromtimestamp((T0 + 1234) / 1000, timezone.utc)
    assert list(occurrences(Entry("o", "proj.ping", Clocked(at)), T0, T0 + 5000)) == [T0 + 1234]
    assert list(occurrences(every("d", 1, enabled=False), T0, T0 + 5000)) == []


def test_every_occurrence_sent_once_on_time_is_clean() -> None:
    v = verdict(
        history(every("a", 1)), [sent("a", T0 + i * 1000, T0 + i * 1000 + 3) for i in range(5)]
    )
    assert (v.due, v.delivered, v.missed, v.repeated_same_id, v.repeated_other_id) == (
        5,
        5,
        0,
        0,
        0,
    )
    assert (v.early_ms, v.late_max_ms) == (0, 3)
    assert rules(v, SCENARIOS["no faults"], SETTINGS) == []


def test_a_missing_occurrence_a_repeat_and_an_invented_one_are_each_reported() -> None:
    deliveries = [sent("a", T0 + i * 1000, T0 + i * 1000 + 5) for i in (0, 1, 3, 4)]
    deliveries += [sent("a", T0 + 1000, T0 + 2100), sent("a", T0 + 1500, T0 + 1600)]
    v = verdict(history(every("a", 1)), deliveries)
    assert v.missed_examples == [f"a@{T0 + 2000}"]
    assert (v.missed, v.repeated_same_id, v.repeated_other_id) == (1, 1, 1)
    problems = rules(v, SCENARIOS["no faults"], SETTINGS)
    assert len(problems) == 3
    assert rules(v, SCENARIOS["kill -9 beat"], SETTINGS) == problems[:2]
    assert rules(v, SCENARIOS["sentinel failover"], SETTINGS) == []  # a measurement


def test_a_late_send_of_the_last_occurrence_coalesces_those_due_during_an_outage() -> None:
    # Claimed at T0+2.5 s: the T0+2 s occurrence is sent, the two before it coalesce into it.
    deliveries = [sent("a", T0 + 2000, T0 + 2500), sent("a", T0 + 3000, T0 + 3001)]
    outage = ((T0 - 100, T0 + 2400),)
    v = verdict(history(every("a", 1)), deliveries, T0 + 3000, outage)
    assert (v.delivered, v.coalesced, v.missed, v.late_max_ms) == (2, 2, 0, 500)
    assert rules(v, SCENARIOS["kill -9 beat"], SETTINGS) == []
    # Outside an outage, an occurrence skipped for a later one is missed.
    v = verdict(history(every("a", 1)), deliveries, T0 + 3000)
    assert (v.coalesced, v.missed, v.missed_examples) == (0, 2, [f"a@{T0}", f"a@{T0 + 1000}"])
    # An earlier occurrence sent late stands for nothing after it.
    deliveries = [sent("a", T0 + 1000, T0 + 2500)]
    v = verdict(history(every("a", 1)), deliveries, T0 + 2000, outage)
    assert (v.coalesced, v.missed, v.missed_examples) == (1, 1, [f"a@{T0 + 2000}"])


def test_an_early_send_and_a_wrong_expiry_break_the_rules() -> None:
    entry = every("a", 1, options={"expires": 30})
    good = from_ms(T0 + 30_000).isoformat()
    wrong = from_ms(T0 - 60_000).isoformat()  # 30 s added to a clock 90 s behind
    v = verdict(
        history(entry),
        [sent("a", T0, T0 - 50, good), sent("a", T0 + 1000, T0 + 1000, wrong)],
        T0 + 1000,
    )
    assert (v.early_ms, v.bad_expiry) == (-50, 1)
    assert len(rules(v, SCENARIOS["clock -90 s"], SETTINGS)) == 2


def test_around_an_edit_either_version_may_fire_and_after_it_only_the_new_one() -> None:
    timeline = history(every("a", 1))
    edit_at = T0 + 2000
    timeline.record(every("a", 2, T0 + 3500), "a", edit_at, edit_at + 10)
    deliveries = [sent("a", T0, T0 + 1), sent("a", T0 + 1000, T0 + 1001)]
    deliveries += [sent("a", T0 + 3500, T0 + 3501)]
    v = verdict(timeline, [*deliveries, sent("a", T0 + 5500, T0 + 5501)], T0 + 6000)
    assert (v.due, v.missed, v.repeated_other_id) == (4, 0, 0)  # T0+2000 was optional
    v = verdict(timeline, [*deliveries, sent("a", T0 + 4000, T0 + 4001)], T0 + 6000)
    assert (v.missed, v.repeated_other_id) == (1, 1)  # the old grid after the edit
    timeline.record(None, "a", T0 + 4000, T0 + 4010)  # removed
    v = verdict(timeline, [*deliveries, sent("a", T0 + 5500, T0 + 5501)], T0 + 6000)
    assert (v.missed, v.repeated_other_id) == (0, 1)


def test_an_occurrence_claimed_ahead_of_an_edit_may_still_be_sent_after_it() -> None:
    # Disabled 5 ms before an occurrence due at T0+2000: a beat that claimed it up to 20 ms
    # ahead, before the write, sends it all the same; the next one may not go.
    timeline = history(every("a", 1))
    timeline.record(replace(every("a", 1), enabled=False), "a", T0 + 1990, T0 + 1995)
    deliveries = [sent("a", T0, T0 + 1), sent("a", T0 + 1000, T0 + 1001)]
    late = [*deliveries, sent("a", T0 + 2000, T0 + 2003)]
    assert verdict(timeline, late).repeated_other_id == 1
    window = (T0, T0 + 4000)
    ahead = judge("t", PREFIX, timeline, late, window=window, slack_ms=500, claim_ahead_ms=20)
    assert (ahead.repeated_other_id, ahead.missed) == (0, 0)
    later = [*late, sent("a", T0 + 3000, T0 + 3001)]
    v = judge("t", PREFIX, timeline, later, window=window, slack_ms=500, claim_ahead_ms=20)
    assert v.repeated_other_id == 1  # due a second after the write: not an old occurrence


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str, tmp_path: Path) -> None:
    outcome = run(SCENARIOS[name], CI, tmp_path)
    v = outcome.verdict
    assert outcome.violations == [], (outcome.faults, v)
    assert v.due > 500
    if not SCENARIOS[name].measure_only:
        assert v.delivered + v.coalesced == v.due
    if SCENARIOS[name].fault is not None:
        assert v.faults >= 1, outcome.faults
    if SCENARIOS[name].worker:
        # A beat killed after sending a batch: sent again, run once.
        assert "after sending" in outcome.faults[0] and v.repeated_same_id > 0, outcome.faults
        assert v.worker_ran and (v.worker_ran_twice, v.worker_not_run) == (0, 0), v


def test_a_duplicate_run_at_the_worker_breaks_the_rules_a_duplicate_send_does_not() -> None:
    deliveries = [sent("a", T0 + i * 1000, T0 + i * 1000 + 5) for i in range(5)]
    deliveries.append(sent("a", T0 + 1000, T0 + 6000))  # a killed beat's batch, sent again
    v = verdict(history(every("a", 1)), deliveries)
    ran = replace(v, worker_ran=5)
    assert v.repeated_same_id == 1 and rules(ran, SCENARIOS["kill -9 beat"], SETTINGS) == []
    twice = replace(ran, worker_ran_twice=1)
    assert rules(twice, SCENARIOS["kill -9 beat"], SETTINGS) == ["1 duplicate runs at the worker"]
    lost = replace(ran, worker_ran=4, worker_not_run=1)
    assert rules(lost, SCENARIOS["kill -9 beat"], SETTINGS) == [
        "1 occurrences delivered and never run at the worker"
    ]
    table = markdown_table([Outcome(twice, []), Outcome(v, [])])
    assert (
        "| 1 of 5 | 0.0 to 0.0, 0 ms | pass |" in table
        and "| — | 0.0 to 0.0, 0 ms | pass |" in table
    )


class _GroupWithAStubbornReplica(SentinelGroup):
    """A group whose second replica is never promoted (priority 0)."""

    def _server(self, name: str, extra_args: list[str]) -> RedisServer:
        stubborn = ["--replica-priority", "0"] if name == "server-2" else []
        return super()._server(name, [*extra_args, *stubborn])


def _failing_over(group: SentinelGroup) -> bool:
    """Whether any sentinel of the group says a failover of its master is in progress."""
    for sentinel in group.sentinels:
        client = sentinel.client()
        try:
            if "failover_in_progress" in str(client.sentinel_master(group.master_name)["flags"]):
                return True
        finally:
            client.close()
    return False


def test_a_failover_asked_for_while_the_sentinels_run_their_own_waits_for_its_end(
    tmp_path: Path,
) -> None:
    group = _GroupWithAStubbornReplica(tmp_path, replica_count=2, failover_timeout_ms=4000)
    group.start()
    try:
        # The second replica refuses to follow the new master, so the sentinels' failover
        # stays in progress (its new master already reported) until its timeout: the moment
        # a loaded machine's own failover, started when the master missed its pings, leaves.
        stubborn = group.servers[2]
        admin = redis.Redis(port=stubborn.port)
        admin.acl_setuser("default", reset=False, commands=["-slaveof", "-replicaof"])
        admin.close()
        old = group.master()
        client = group.sentinels[0].client()
        client.sentinel_failover(group.master_name)
        client.close()
        wait_until(
            lambda: group.master() is not old and _failing_over(group),
            20,
            "the sentinels' failover to promote a replica",
        )
        assert group.failover(timeout=20) is group.servers[1]
        assert not _failing_over(group)
    finally:
        group.stop()


def test_the_quiet_lateness_bound_grows_as_the_hosts_cores_are_oversubscribed() -> None:
    assert quiet_bound(0.5, cores=2) == quiet_bound(2.0, cores=2) == 500
    assert quiet_bound(6.0, cores=2) == 1500
    # A burst the load average missed: what the run's processes waited is allowed on top.
    assert quiet_bound(0.5, cores=2, waited_ms=900) == 1400
    assert quiet_bound(6.0, cores=2, waited_ms=900) == 1500
    late = [sent("a", T0 + i * 1000, T0 + i * 1000 + 900) for i in range(5)]
    v = verdict(history(every("a", 1)), late)
    assert rules(v, SCENARIOS["no faults"], SETTINGS) == [
        "an occurrence arrived 900 ms late (bound 500 ms)"
    ]
    assert rules(v, SCENARIOS["no faults"], SETTINGS, quiet_bound(6.0, cores=2)) == []
    # The table says how loaded the host was, so a figure from a busy host reads as one.
    table = markdown_table([Outcome(v, [], load=(1.25, 6.5), waited_ms=1234)])
    assert "| 1.2 to 6.5, 1,234 ms | pass |" in table


def test_the_run_queue_wait_counts_what_the_runs_processes_waited_for_a_core() -> None:
    # Two busy children on one core (the rest of the host left alone): each waits for it
    # about as long as it runs.
    core = min(os.sched_getaffinity(0))
    spin = (
        f"import os, time\nos.sched_setaffinity(0, {{{core}}})\n"
        "end = time.time() + 1.5\nwhile time.time() < end: pass"
    )
    contention = RunQueueWait(window=1.0, every=0.1).start()
    children = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
    try:
        assert {c.pid for c in children} <= family(os.getpid())
    finally:
        for child in children:
            child.wait(timeout=30)
    # In a second when both spin, a second of waiting between them; at least half of that
    # whatever else the host runs.
    assert contention.worst_ms() >= 500


def test_a_takeover_caught_by_the_next_fault_may_be_a_lease_later_and_no_more() -> None:
    """A beat killed holding a claim: another takes it over a lease later. When a second
    fault catches that beat holding the takeover before it sends, the occurrence waits out a
    second lease; a fault that began after it arrived, or alone, allows no such thing."""
    lease = int(SETTINGS.lease_seconds * 1000)
    timeline = history(every("a", 30))
    late = [sent("a", T0, T0 + 2 * lease + 3000)]

    def problems(fault_starts: list[int]) -> list[str]:
        v = judge(
            "t",
            PREFIX,
            timeline,
            late,
            window=(T0, T0 + 4000),
            slack_ms=500,
            fault_starts=fault_starts,
            lease_ms=lease,
        )
        return rules(v, SCENARIOS["kill -9 beat"], SETTINGS)

    assert problems([T0 - 100, T0 + lease + 20]) == []
    bound = lease + 4000
    too_late = (
        f"an occurrence arrived {2 * lease + 3000} ms late, less a lease for each further "
        f"fault it waited through (bound {bound} ms)"
    )
    assert problems([T0 - 100]) == [too_late]
    assert problems([T0 - 100, T0 + 2 * lease + 3001]) == [too_late]
    assert problems([T0 - lease - 1, T0 + lease]) == [too_late]
