"""The scenarios and how one runs: a workload, faults (.faults) injected at random moments, and
the checker's verdict held to the rules (.rules)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from redisbeat import ScheduleStore
from redisbeat.config import DEFAULTS
from redisbeat_testkit.proxy import TcpProxy

from .checker import Delivery, QueueReader, Timeline, Verdict, judge, lost_writes
from .cluster import Cluster, Settings
from .contention import RunQueueWait
from .faults import (
    Fault,
    broker_stall,
    cluster_failover_or_migration,
    kill9,
    mixed,
    partition_drop,
    partition_slow,
    partition_stall,
    redis_restart,
    reshard,
    sentinel_failover,
    sigterm,
)
from .rules import FAULT_LATE_MARGIN_MS, quiet_bound, rules
from .worker import QUEUE, ChaosWorker
from .workload import Workload


@dataclass(frozen=True)
class Profile:
    name: str
    entries: int
    one_offs: int
    beats: int
    seconds: float
    edits_per_second: float
    fault_every: float


#: The bounded form the test suite runs.
CI = Profile("ci", 300, 30, 3, 10, 2, 3)
QUICK = Profile("quick", 500, 50, 3, 20, 2, 5)
FULL = Profile("full", 2000, 200, 5, 60, 5, 6)
PROFILES = {p.name: p for p in (CI, QUICK, FULL)}

#: The cluster scenario's shards: with the default prefix, the slots of shards 0 and 1 fall
#: to the first of three masters, 3 to the second and 2 to the third.
CLUSTER_SHARDS = 4


@dataclass(frozen=True)
class Scenario:
    name: str
    #: Injects one fault (blocking for its duration) and says what it did; None: no faults.
    fault: Fault | None = None
    #: Whether a repeat with the same task id is allowed (kill -9, partition, Redis kill -9).
    may_repeat: bool = False
    #: Put beat 0 behind a TCP proxy to the store.
    proxied: bool = False
    #: Put beat 0 behind a TCP proxy to the broker.
    broker_proxied: bool = False
    #: Run beat 0 (and, for "mixed", beat 1) with its clock shifted, libfaketime style.
    skew: str | None = None
    #: Keep the schedule in a Sentinel group; with wait_replicas, writes wait for a replica.
    sentinel: bool = False
    wait_replicas: int = 0
    #: Keep the schedule in a Redis Cluster (three masters, a replica each), split into
    #: ``shards`` shards: hash tags whose slots the masters share.
    cluster: bool = False
    shards: int = 1
    #: A measurement of what asynchronous replication loses in a failover rather than a
    #: test of the guarantees: only "none early" and "no beat crashed" are enforced. An
    #: undone edit makes the checker's expectations wrong for its entry, and only the last
    #: write of each entry can be checked afterwards, so misses and sends under another id
    #: are counted as what the lost writes cost.
    measure_only: bool = False
    #: Run a worker with the hook on what the broker got (.worker): no occurrence may run
    #: twice there, however many were sent twice.
    worker: bool = False
    #: Delayed tasks pending besides the entries (ten per one-off of the profile), due over
    #: the run, rescheduled and cancelled by the editor: each must be sent once, at its time.
    delayed: bool = False


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("no faults"),
        Scenario("kill -9 beat", kill9, may_repeat=True, worker=True),
        Scenario("SIGTERM beat", sigterm),
        Scenario("redis restart", redis_restart, may_repeat=True),
        Scenario("partition drop", partition_drop, may_repeat=True, proxied=True),
        Scenario("partition stall", partition_stall, proxied=True),
        Scenario("partition slow", partition_slow, may_repeat=True, proxied=True),
        Scenario("broker stall", broker_stall, broker_proxied=True),
        Scenario("reshard", reshard, delayed=True),
        Scenario("clock +90 s", skew="+90s"),
        Scenario("clock -90 s", skew="-90s"),
        Scenario("mixed", mixed, may_repeat=True, proxied=True, skew="+90s"),
        Scenario(
            "sentinel failover",
            sentinel_failover,
            may_repeat=True,
            sentinel=True,
            measure_only=True,
        ),
        Scenario(
            "sentinel failover, WAIT 1",
            sentinel_failover,
            may_repeat=True,
            sentinel=True,
            wait_replicas=1,
        ),
        Scenario(
            "cluster failover and slot migration",
            cluster_failover_or_migration,
            may_repeat=True,
            wait_replicas=1,
            cluster=True,
            shards=CLUSTER_SHARDS,
        ),
    )
}


@dataclass
class Outcome:
    verdict: Verdict
    violations: list[str]
    faults: list[str] = field(default_factory=list)
    edits: int = 0
    measure_only: bool = False
    #: The host's 1-minute load average when the scenario started and ended: lateness on a
    #: host whose cores are oversubscribed is the host's, and the table says so.
    load: tuple[float, float] = (0.0, 0.0)
    #: The most (ms) the run's own processes waited for a core within any two seconds: a
    #: send is late by at most the quiet bound plus that wait (see contention).
    waited_ms: int = 0


@dataclass
class Injected:
    """The faults one run injected: what each did, when each ran (ms), widened by a lease
    either side (where a late claim may coalesce occurrences into the last one due), and
    the beat slots they left empty."""

    faults: list[str] = field(default_factory=list)
    outages: list[tuple[int, int]] = field(default_factory=list)
    #: When each fault began (ms).
    starts: list[int] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)


def run(
    scenario: Scenario,
    profile: Profile,
    directory: Path,
    seed: int = 1,
    settings: Settings | None = None,
) -> Outcome:
    """Run one scenario with real processes in ``directory``; the checker's verdict and rules."""
    rng = random.Random(f"{seed}:{scenario.name}")
    load_before = os.getloadavg()[0]
    settings = settings or _settings(scenario)
    cluster = Cluster(directory, settings)
    reader: QueueReader | None = None
    worker: ChaosWorker | None = None
    contention = RunQueueWait()
    try:
        _start(cluster, scenario, profile)
        broker = cluster.broker_server.url(0)
        if scenario.worker:
            worker = ChaosWorker(directory, cluster.beats.env, broker).start()
        reader = QueueReader(broker, forward_to=QUEUE if worker else None).start()
        cluster.start_beats(profile.beats)
        contention.start()
        store = cluster.store()
        timeline = Timeline()
        workload = Workload(store, timeline, rng)
        first = store.now_ms() + 3000
        end = first + int(profile.seconds * 1000)
        workload.load(profile.entries, profile.one_offs, first, end)
        if scenario.delayed:
            workload.load_delayed(10 * profile.one_offs, first, end)
        injected = _inject(scenario, profile, cluster, workload, rng, end)
        for proxy in cluster.proxies.values():
            proxy.heal()
        verdict = _judging(scenario, settings, store, timeline, (first, store.now_ms()), injected)
        # Give what fell due before the end its time to arrive (a lease and a wake-up), and
        # each fault its lease: a beat killed after sending a batch it had not recorded holds
        # its claims until then, and the copies sent after it are part of the verdict.
        settled = max((outage[1] for outage in injected.outages), default=0)
        _wait_while_missing(verdict, reader, settings.lease_seconds + 12, settled)
        waited_ms = contention.worst_ms()
        store.close()
        cluster.beats.stop_all()
        codes = cluster.exit_codes()
        deliveries = reader.stop()
        reader = None
        result = _ran(worker, deliveries, verdict(deliveries))
        load = (load_before, os.getloadavg()[0])
        quiet_ms = quiet_bound(max(load), waited_ms=waited_ms)
        problems = rules(result, scenario, settings, quiet_ms)
        problems += _crashed(cluster, codes, injected.killed)
        if problems:
            (directory / "beats.log").write_text(cluster.beat_logs())
            (directory / "worker.log").write_text(worker.output() if worker else "")
        return Outcome(
            result,
            problems,
            injected.faults,
            workload.edits,
            scenario.measure_only,
            load,
            waited_ms,
        )
    finally:
        # Each step whatever the one before raised: a failed scenario leaves nothing running.
        contention.stop()
        try:
            if reader is not None:
                reader.stop_popping()
        finally:
            try:
                if worker is not None:
                    worker.stop()
            finally:
                cluster.stop()


def _settings(scenario: Scenario) -> Settings:
    return Settings(
        sentinel=scenario.sentinel,
        wait_replicas=scenario.wait_replicas,
        cluster=scenario.cluster,
        shards=scenario.shards,
    )


def _ran(worker: ChaosWorker | None, deliveries: list[Delivery], verdict: Verdict) -> Verdict:
    """The verdict with what the worker, if any, ran of the deliveries once it has them all."""
    if worker is None:
        return verdict
    worker.drain(deliveries, 60)
    return worker.tally(verdict, deliveries)


def _start(cluster: Cluster, scenario: Scenario, profile: Profile) -> None:
    """The servers, with the proxies and clock skews the scenario puts its beats behind."""
    cluster.start_servers()
    if scenario.proxied:
        cluster.proxies[0] = TcpProxy(cluster.store_port).start()
    if scenario.broker_proxied:
        cluster.broker_proxies[0] = TcpProxy(cluster.broker_server.port).start()
    if scenario.skew:
        cluster.skews[0] = scenario.skew
        if scenario.name == "mixed" and profile.beats > 2:
            cluster.skews[1] = "-90s"


def _inject(
    scenario: Scenario,
    profile: Profile,
    cluster: Cluster,
    workload: Workload,
    rng: random.Random,
    end: int,
) -> Injected:
    """Edit the schedule and inject faults at random moments until shortly before ``end``."""
    stop_edits = threading.Event()
    editor = threading.Thread(
        target=_edit_loop, args=(workload, profile, stop_edits), name="chaos-edits"
    )
    editor.start()
    injected = Injected()
    lease_ms = int(cluster.settings.lease_seconds * 1000)
    try:
        while time.time() * 1000 < end - profile.fault_every * 500:
            time.sleep(rng.uniform(0.5, 1.5) * profile.fault_every)
            if scenario.fault is not None and time.time() * 1000 < end:
                slots_before = list(cluster.slots)
                began = time.time_ns() // 1_000_000
                injected.faults.append(scenario.fault(cluster, rng))
                ended = time.time_ns() // 1_000_000
                outage = (began - lease_ms, ended + lease_ms + FAULT_LATE_MARGIN_MS)
                injected.outages.append(outage)
                injected.starts.append(began)
                injected.killed |= {i for i in slots_before if i not in cluster.slots}
    finally:
        stop_edits.set()
        editor.join()
    return injected


def _judging(
    scenario: Scenario,
    settings: Settings,
    store: ScheduleStore,
    timeline: Timeline,
    window: tuple[int, int],
    injected: Injected,
) -> Callable[[list[Delivery]], Verdict]:
    """The checker's verdict on a list of deliveries, for this run's window and faults."""
    # An acknowledged write the store no longer holds (an asynchronous failover) makes
    # the timeline wrong for that entry: it is counted, and the entry is not judged.
    lost = frozenset(lost_writes(store, timeline))

    def verdict(deliveries: list[Delivery]) -> Verdict:
        return judge(
            scenario.name,
            settings.prefix,
            timeline,
            deliveries,
            window=window,
            slack_ms=int(settings.lease_seconds * 1000 + 2000),
            faults=len(injected.faults),
            ignore=lost,
            outages=injected.outages,
            claim_ahead_ms=int(DEFAULTS["claim_ahead_seconds"] * 1000),
            fault_starts=injected.starts,
            lease_ms=int(settings.lease_seconds * 1000),
        )

    return verdict


def _wait_while_missing(
    verdict: Callable[[list[Delivery]], Verdict],
    reader: QueueReader,
    seconds: float,
    settled_ms: int,
) -> None:
    """Wait while occurrences are missing, or until ``settled_ms`` (wall clock), at most
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (
        time.time() * 1000 < settled_ms or verdict(reader.snapshot()).missed
    ):
        time.sleep(0.5)


def _crashed(cluster: Cluster, codes: list[int | None], killed: set[int]) -> list[str]:
    """A problem for each beat that exited on its own with an error, with its log's tail."""
    problems = []
    crashed = [i for i, code in enumerate(codes) if code not in (0, None) and i not in killed]
    for i in crashed:
        tail = cluster.beats.beats[i].output().splitlines()[-15:]
        problems.append(f"beat process {i} exited with {codes[i]}: " + "\n".join(tail))
    return problems


def _edit_loop(workload: Workload, profile: Profile, stop: threading.Event) -> None:
    while not stop.wait(1 / profile.edits_per_second):
        workload.edit()
