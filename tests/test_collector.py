"""A beat process runs its full garbage collections itself, at quiet moments."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from redisbeat.beat.collector import MOST_EVERY, NEVER, QUIET_EVERY, Collector


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    """The generations of the collections run while the test runs (2: a full one)."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    thresholds, started_in = gc.get_threshold(), Collector._started_in
    # An in-process beat of an earlier test may have started this process's already.
    Collector._started_in = None
    yield seen
    gc.callbacks.remove(note)
    gc.set_threshold(*thresholds)
    Collector._started_in = started_in


def test_start_freezes_what_start_up_made_and_takes_full_collections_over(full_collections):
    before = gc.get_freeze_count()
    Collector().start()
    assert gc.get_freeze_count() > before
    assert gc.get_threshold()[2] == NEVER
    # The freeze count may fall as other threads free frozen objects: a second start is
    # seen by what it would freeze, an object made after the first.
    made_after: list[list[int]] = [[]]
    Collector().start()  # once per process
    assert any(o is made_after for o in gc.get_objects())


def test_a_full_collection_runs_before_a_long_enough_wait_at_most_every_quiet_period(
    full_collections,
):
    clock = Clock()
    collector = Collector(clock)
    collector.took = 0.05
    clock.now += QUIET_EVERY / 2
    assert collector.before_wait(1.0) == 1.0 and 2 not in full_collections  # too soon
    clock.now += QUIET_EVERY
    assert collector.before_wait(0.01) == 0.01 and 2 not in full_collections  # too short
    assert collector.before_wait(1.0) <= 1.0 and full_collections.count(2) == 1
    assert collector.before_wait(1.0) == 1.0 and full_collections.count(2) == 1  # just ran


def test_a_beat_that_never_waits_still_collects_every_most_period(full_collections):
    clock = Clock()
    collector = Collector(clock)
    collector.took = 0.05
    clock.now += MOST_EVERY - 1
    assert collector.before_wait(0.0) == 0.0 and 2 not in full_collections
    clock.now += 1
    assert collector.before_wait(0.0) == 0.0 and full_collections.count(2) == 1
