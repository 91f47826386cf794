"""What a benchmark run is sized by: the schedulers' names, the profiles (smoke, quick, full,
cores), the constants every scenario shares, and the :class:`Table` each scenario returns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

REDISBEAT = "redisbeat"
REDBEAT = "celery-redbeat"
DCB = "django-celery-beat"
#: Entries each scheduler's loader writes per second, at worst: how far ahead a workload's
#: first occurrence is placed, so that every entry is still ahead when its beat starts.
LOAD_RATE = {REDISBEAT: 3_500, REDBEAT: 2_500, DCB: 1_500}
#: The most entries a capacity step stores: above that, the period shortens instead.
MAX_ENTRIES = 50_000
#: Seconds for beats to start (imports, connecting, first tick) before the first occurrence.
START_S = 4.0
#: redisbeat's default lease (redisbeat_lease_seconds).
LEASE_S = 30
#: Celery's default beat_max_loop_interval, used by the idle scenario.
IDLE_MAX_INTERVAL = 300
#: Edit latency: a new entry is due this long after the call that stores it.
DUE_AFTER_MS = 250


@dataclass(frozen=True)
class Profile:
    name: str
    #: Capacity: entries' period and the measuring window, seconds.
    period: float
    window: float
    #: Offered rates tried per scheduler, in order, until one falls behind.
    rates: dict[str, tuple[int, ...]]
    #: Scale: beat counts (the full profile adds doublings up to the machine's cores).
    scale_beats: tuple[int, ...]
    #: Stored entries per scheduler for the size scenario.
    sizes: dict[str, tuple[int, ...]]
    edits: dict[str, int]
    idle_seconds: float
    #: Redis Cluster: redisbeat's offered rates and beat counts, on one Redis and on a cluster.
    cluster_rates: tuple[int, ...]
    cluster_beats: tuple[int, ...]
    #: redisbeat_shards counts tried on each store.
    cluster_shards: tuple[int, ...] = (1, 6)
    #: Cold start: the offered rate, and the seconds measured from the first occurrence.
    cold_rate: int = 5_000
    cold_seconds: float = 40
    #: Delayed tasks: pending counts tried, and how many fall due each second.
    delayed_pending: tuple[int, ...] = (1_000, 1_000_000)
    delayed_rate: int = 1_000
    #: Celery's countdown: ETA tasks a worker is given.
    countdown_pending: tuple[int, ...] = (100_000,)
    #: How long a worker started after a kill -9 is watched for the dead one's tasks.
    countdown_watch_s: float = 10
    #: Scale: the entries' periods, the most entries one run stores (the offer is capped at
    #: that many per period), and the entries due every second that one beat must keep up with.
    scale_periods: tuple[float, ...] = (1, 10)
    scale_max_entries: int = 200_000
    scale_keep_up: int = 10_000
    #: Add beat counts, doubling, while the machine has as many cores.
    scale_to_cores: bool = False
    #: The measuring window of the redisbeat-only rate scenarios (scale, overload), seconds;
    #: None: the profile's window.
    own_window: float | None = None
    #: Backlog: delayed tasks and periodic entries that fell due while the beats were stopped.
    backlog_delayed: int = 100_000
    backlog_periodic: int = 10_000


QUICK = Profile(
    "quick",
    period=10,
    window=10,
    rates={
        REDISBEAT: (100, 1_000, 5_000, 10_000),
        REDBEAT: (100, 1_000),
        DCB: (100, 1_000),
    },
    scale_beats=(1, 2, 4),
    sizes={REDISBEAT: (10_000, 100_000), REDBEAT: (10_000, 100_000), DCB: (10_000,)},
    edits={REDISBEAT: 30, REDBEAT: 5, DCB: 5},
    idle_seconds=15,
    cluster_rates=(500, 1_000),
    cluster_beats=(1, 2),
)
FULL = Profile(
    "full",
    period=10,
    window=30,
    rates={
        REDISBEAT: (100, 1_000, 2_000, 5_000, 10_000, 15_000, 20_000, 30_000),
        REDBEAT: (100, 500, 1_000, 5_000),
        DCB: (100, 500, 1_000),
    },
    scale_beats=(1, 2, 4, 8),
    sizes={
        REDISBEAT: (10_000, 100_000, 1_000_000),
        REDBEAT: (10_000, 100_000),
        DCB: (10_000, 100_000),
    },
    edits={REDISBEAT: 200, REDBEAT: 30, DCB: 30},
    idle_seconds=60,
    cluster_rates=(500, 1_000, 5_000),
    cluster_beats=(1, 2),
    scale_max_entries=500_000,
    scale_to_cores=True,
    backlog_delayed=1_000_000,
)
#: The scale scenario on a machine with cores to spare (16, say): 1, 2, 4 and 8 beats, entries
#: due every second, on one Redis and a cluster, in about seven minutes (other scenarios as
#: the quick profile).
CORES = replace(QUICK, name="cores", scale_beats=(1, 2, 4, 8), scale_periods=(1,))
#: Every scenario at a toy size: what the test suite runs to check the harness works.
SMOKE = Profile(
    "smoke",
    period=2,
    # Longer than celery-redbeat's 5 s loop interval: its beat sends in bursts, one tick
    # apart, and a shorter window may fall between two of them and see nothing arrive.
    window=6,
    rates={REDISBEAT: (50,), REDBEAT: (50,), DCB: (20,)},
    scale_beats=(1, 2),
    sizes={REDISBEAT: (1_000,), REDBEAT: (1_000,), DCB: (1_000,)},
    edits={REDISBEAT: 3, REDBEAT: 2, DCB: 2},
    idle_seconds=3,
    cluster_rates=(50,),
    cluster_beats=(2,),
    cluster_shards=(1, 3),
    cold_rate=50,
    cold_seconds=3,
    delayed_pending=(1_000, 3_000),
    delayed_rate=50,
    countdown_pending=(200,),
    countdown_watch_s=2,
    scale_periods=(1,),
    scale_max_entries=2_000,
    scale_keep_up=200,
    own_window=3,
    backlog_delayed=3_000,
    backlog_periodic=300,
)
PROFILES = {p.name: p for p in (SMOKE, QUICK, FULL, CORES)}


@dataclass
class Table:
    """One scenario's results."""

    scenario: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: What the chart draws: series name -> [(x, y)], with its axis labels.
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    axes: tuple[str, str] = ("", "")
    log_axes: bool = False
