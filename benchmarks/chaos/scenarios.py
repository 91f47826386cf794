"""The scenarios: a workload, faults injected at random moments, and the checker's rules."""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from redisbeat_testkit.proxy import TcpProxy

from .checker import Delivery, QueueReader, Timeline, Verdict, judge, lost_writes
from .cluster import Cluster, Settings
from .workload import Workload

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

Fault = Callable[[Cluster, random.Random], str]


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
    #: A measurement of what asynchronous replication loses in a failover rather than a
    #: test of the guarantees: only "none early" and "no beat crashed" are enforced. An
    #: undone edit makes the checker's expectations wrong for its entry, and only the last
    #: write of each entry can be checked afterwards, so misses and sends under another id
    #: are counted as what the lost writes cost.
    measure_only: bool = False


def kill9(c: Cluster, rng: random.Random) -> str:
    # Caught holding claims, whenever possible: the case that tests recovery.
    slot = c.random_slot(rng)
    holding = c.freeze_holding_claims(slot, rng)
    c.kill(slot, signal.SIGKILL)
    c.start_beat(slot)
    return f"kill -9 beat {slot}{' holding claims' if holding else ''}, restarted"


def sigterm(c: Cluster, rng: random.Random) -> str:
    slot = c.random_slot(rng)
    c.kill(slot, signal.SIGTERM)
    c.start_beat(slot)
    return f"SIGTERM beat {slot}, restarted"


def redis_restart(c: Cluster, rng: random.Random) -> str:
    c.restart_store()
    return "kill -9 redis-server, restarted from the AOF"


def _proxy(c: Cluster) -> TcpProxy:
    return c.proxies[0]


def partition_drop(c: Cluster, rng: random.Random) -> str:
    # Longer than the lease, so the other beats take the cut-off beat's claims over.
    seconds = c.settings.lease_seconds + rng.uniform(1, 3)
    _proxy(c).drop()
    time.sleep(seconds)
    _proxy(c).heal()
    return f"partition beat 0 (drop) {seconds:.1f} s"


def partition_stall(c: Cluster, rng: random.Random) -> str:
    # Redis runs the next claim but its reply is held past the lease (yet within the socket
    # timeout): the beat must not send what other beats have taken over meanwhile.
    seconds = c.settings.lease_seconds * rng.uniform(1.1, 1.6)
    k = c.keys
    # The claim script is the one called with the schedule key and then the entries key.
    claim = re.compile(
        re.escape(k.schedule.encode()) + rb"\r\n\$\d+\r\n" + re.escape(k.entries.encode())
    )
    _proxy(c).stall_replies(lambda request: claim.search(request) is not None)
    time.sleep(seconds)
    _proxy(c).heal()
    return f"partition beat 0 (claim reply held) {seconds:.1f} s"


def broker_stall(c: Cluster, rng: random.Random) -> str:
    # The broker takes beat 0's messages but its replies are held for longer than a lease:
    # the beat is stuck mid-batch, still alive. It renews its claims meanwhile, so no other
    # beat takes over and sends them a second time.
    seconds = c.settings.lease_seconds * rng.uniform(1.3, 1.6)
    c.broker_proxies[0].stall_replies()
    time.sleep(seconds)
    c.broker_proxies[0].heal()
    return f"broker replies to beat 0 held {seconds:.1f} s"


def partition_slow(c: Cluster, rng: random.Random) -> str:
    latency = rng.uniform(0.1, 0.4)
    _proxy(c).slow(latency)
    time.sleep(4)
    _proxy(c).heal()
    return f"slow link to beat 0 (+{latency * 1000:.0f} ms per chunk) 4 s"


def sentinel_failover(c: Cluster, rng: random.Random) -> str:
    group = c.sentinel
    assert group is not None
    if rng.random() < 0.5:
        # Sentinel refuses (NOGOODSLAVE) until its last look at the replica restored by the
        # previous fault is recent enough: ask again until it accepts.
        deadline = time.monotonic() + 30
        while True:
            try:
                group.failover()
                break
            except redis.ResponseError as exc:
                if "NOGOODSLAVE" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        what = "SENTINEL FAILOVER"
    else:
        group.kill_master()
        what = "kill -9 the master"
    group.restore(60)  # the old master back as a replica, every sentinel in agreement
    return what


def mixed(c: Cluster, rng: random.Random) -> str:
    fault = rng.choice([kill9, sigterm, redis_restart, partition_drop, partition_stall])
    return fault(c, rng)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("no faults"),
        Scenario("kill -9 beat", kill9, may_repeat=True),
        Scenario("SIGTERM beat", sigterm),
        Scenario("redis restart", redis_restart, may_repeat=True),
        Scenario("partition drop", partition_drop, may_repeat=True, proxied=True),
        Scenario("partition stall", partition_stall, proxied=True),
        Scenario("partition slow", partition_slow, may_repeat=True, proxied=True),
        Scenario("broker stall", broker_stall, broker_proxied=True),
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
    settings = settings or Settings(
        sentinel=scenario.sentinel, wait_replicas=scenario.wait_replicas
    )
    cluster = Cluster(directory, settings)
    reader: QueueReader | None = None
    try:
        cluster.start_servers()
        if scenario.proxied:
            cluster.proxies[0] = TcpProxy(cluster.store_server.port).start()
        if scenario.broker_proxied:
            cluster.broker_proxies[0] = TcpProxy(cluster.broker_server.port).start()
        if scenario.skew:
            cluster.skews[0] = scenario.skew
            if scenario.name == "mixed" and profile.beats > 2:
                cluster.skews[1] = "-90s"
        reader = QueueReader(cluster.broker_server.url(0)).start()
        cluster.start_beats(profile.beats)
        store = cluster.store()
        timeline = Timeline()
        workload = Workload(store, timeline, rng)
        first = store.now_ms() + 3000
        end = first + int(profile.seconds * 1000)
        workload.load(profile.entries, profile.one_offs, first, end)
        stop_edits = threading.Event()
        editor = threading.Thread(
            target=_edit_loop, args=(workload, profile, stop_edits), name="chaos-edits"
        )
        editor.start()
        faults: list[str] = []
        #: When each fault ran (ms), widened by a lease either side: where a late claim may
        #: coalesce occurrences into the last one due.
        outages: list[tuple[int, int]] = []
        lease_ms = int(settings.lease_seconds * 1000)
        killed: set[int] = set()
        try:
            while time.time() * 1000 < end - profile.fault_every * 500:
                time.sleep(rng.uniform(0.5, 1.5) * profile.fault_every)
                if scenario.fault is not None and time.time() * 1000 < end:
                    slots_before = list(cluster.slots)
                    began = time.time_ns() // 1_000_000
                    faults.append(scenario.fault(cluster, rng))
                    ended = time.time_ns() // 1_000_000
                    outages.append((began - lease_ms, ended + lease_ms + FAULT_LATE_MARGIN_MS))
                    killed |= {i for i in slots_before if i not in cluster.slots}
        finally:
            stop_edits.set()
            editor.join()
        for proxy in cluster.proxies.values():
            proxy.heal()
        window = (first, store.now_ms())
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
                faults=len(faults),
                ignore=lost,
                outages=outages,
            )

        # Give what fell due before the end its time to arrive (a lease and a wake-up).
        deadline = time.monotonic() + settings.lease_seconds + 12
        while verdict(reader.snapshot()).missed and time.monotonic() < deadline:
            time.sleep(0.5)
        store.close()
        cluster.beats.stop_all()
        codes = cluster.exit_codes()
        result = verdict(reader.stop())
        reader = None
        load = (load_before, os.getloadavg()[0])
        problems = rules(result, scenario, settings, quiet_bound(max(load)))
        crashed = [i for i, code in enumerate(codes) if code not in (0, None) and i not in killed]
        for i in crashed:
            tail = cluster.beats.beats[i].output().splitlines()[-15:]
            problems.append(f"beat process {i} exited with {codes[i]}: " + "\n".join(tail))
        if problems:
            (directory / "beats.log").write_text(cluster.beat_logs())
        return Outcome(result, problems, faults, workload.edits, scenario.measure_only, load)
    finally:
        if reader is not None:
            reader.stop()
        cluster.stop()


def _edit_loop(workload: Workload, profile: Profile, stop: threading.Event) -> None:
    while not stop.wait(1 / profile.edits_per_second):
        workload.edit()


def quiet_bound(load: float, cores: int | None = None) -> int:
    """The lateness allowed without faults (ms) on a host with this 1-minute load average:
    sending is CPU work, so a host whose runnable processes outnumber its cores k to 1 makes
    it k times slower (measured beside `stress-ng --cpu 2`, load 5 to 9 on 2 cores: 241 to
    1,035 ms)."""
    oversubscribed = load / (cores or os.cpu_count() or 1)
    return int(QUIET_LATE_MS * max(1.0, oversubscribed))


def rules(
    v: Verdict, scenario: Scenario, settings: Settings, quiet_ms: int = QUIET_LATE_MS
) -> list[str]:
    """The guarantees, as checks on the checker's verdict; ``quiet_ms`` is the lateness
    allowed without faults (see quiet_bound)."""
    problems = []
    if v.early_ms < -EARLY_TOLERANCE_MS:
        problems.append(f"an occurrence arrived {-v.early_ms} ms early")
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
        problems.append(f"{v.repeated_same_id} repeats with the same task id")
    if scenario.may_repeat and v.repeated_same_id > settings.batch_size * max(1, v.faults):
        problems.append(f"{v.repeated_same_id} repeats: more than one batch per fault")
    bound = quiet_ms
    if scenario.fault is not None:
        bound = int(settings.lease_seconds * 1000) + FAULT_LATE_MARGIN_MS
    if v.late_max_ms > bound:
        problems.append(f"an occurrence arrived {v.late_max_ms} ms late (bound {bound} ms)")
    return problems
