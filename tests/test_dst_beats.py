"""A real beat across DST changes: the policies decide what it sends.

A beat reads the time from Redis, which cannot be moved; instead the zones move. ``zic``
(the time zone compiler every Debian system has) builds two zones whose clocks change a
few seconds from now, one forward (a gap) and one back (a fold), into a directory the test
and the beat read zones from (``PYTHONTZPATH``).
"""

from __future__ import annotations

import itertools
import subprocess
import zoneinfo
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from test_beats import broker

from redisbeat import Cron, Entry
from redisbeat.schedule.kinds import get_zone
from redisbeat.schedule.timing import from_ms, to_ms
from redisbeat_testkit.messages import Sent, read_queue
from redisbeat_testkit.ports import wait_until

#: How far ahead of the moment the zones are written their clocks change.
LEAD_S = 6


@pytest.fixture
def zones(tmp_path: Path) -> Iterator[Path]:
    """A directory for zones of the test's own, read before the system's, by this process
    (and by beats given ``PYTHONTZPATH``)."""
    directory = tmp_path / "zoneinfo"
    directory.mkdir()
    before = zoneinfo.TZPATH
    zoneinfo.reset_tzpath([str(directory), *before])
    yield directory
    zoneinfo.reset_tzpath(list(before))
    zoneinfo.ZoneInfo.clear_cache()
    get_zone.cache_clear()


def compile_zones(directory: Path, change: datetime) -> None:
    """Test/Fold goes from +01:00 back to +00:00 at ``change``, Test/Gap from +00:00 forward
    to +01:00: an hour of wall times happens twice in one, and not at all in the other."""
    until = f"{change:%Y %b %d %H:%M:%S}u"
    source = directory / "zones.txt"
    source.write_text(
        f"Zone Test/Fold 1:00 - PLUS1 {until}\n"
        "               0:00 - ZERO\n"
        f"Zone Test/Gap  0:00 - ZERO {until}\n"
        "               1:00 - PLUS1\n"
    )
    subprocess.run(["zic", "-d", str(directory), str(source)], check=True)


def sends(queue: object, got: list[Sent], entry: str) -> list[int]:
    got.extend(read_queue(queue))  # type: ignore[arg-type]
    return sorted(s.due_ms for s in got if s.entry == entry)


def test_a_running_beat_follows_the_dst_policies_of_its_entries(
    zones: Path, redis_server, prefix, beats_for, stores
) -> None:
    store = stores(redis_server, prefix)
    queue = broker(redis_server)
    beats_for(redis_server, prefix, PYTHONTZPATH=str(zones)).start(1)
    wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register")
    change = from_ms((store.now_ms() // 2000 * 2 + LEAD_S) * 1000)  # an even second: a run
    compile_zones(zones, change)
    # Test/Gap skips the wall times from `change` on for an hour: one half an hour in.
    skipped = change + timedelta(minutes=30)
    daily = f"{skipped.second} {skipped.minute} {skipped.hour} * * *"
    every_2s = "*/2 * * * * *"
    # catch_up="all": a beat slowed down by a loaded machine still sends each occurrence.
    store.upsert_many(
        [
            Entry(
                "twice", "proj.ping", Cron(every_2s, "Test/Fold", dst_fold="twice"), catch_up="all"
            ),
            Entry(
                "once", "proj.ping", Cron(every_2s, "Test/Fold", dst_fold="once"), catch_up="all"
            ),
            Entry("shift", "proj.ping", Cron(daily, tz="Test/Gap", dst_gap="shift")),
            Entry("skip", "proj.ping", Cron(daily, tz="Test/Gap", dst_gap="skip")),
        ]
    )
    at = to_ms(change)
    assert store.state("shift").next_run_at == change  # at the change, as the clocks jump
    # The next day's, at +01:00 by then.
    assert store.state("skip").next_run_at == skipped + timedelta(days=1, hours=-1)
    got: list[Sent] = []
    wait_until(
        lambda: any(d >= at + 4_000 for d in sends(queue, got, "twice")),
        30,
        "three sends of the repeated hour's second pass",
    )
    twice = sends(queue, got, "twice")
    assert {at, at + 2_000, at + 4_000} <= set(twice)
    assert [b - a for a, b in itertools.pairwise(twice)] == [2_000] * (len(twice) - 1)
    once = sends(queue, got, "once")
    assert once and max(once) == at - 2_000  # the first pass's last
    assert store.state("once").next_run_at == change + timedelta(hours=1)
    assert sends(queue, got, "shift") == [at]
    assert sends(queue, got, "skip") == []
    assert len({s.task_id for s in got}) == len(got)
