"""catch_up="all": which missed occurrence a late claim sends first, for every kind."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from redisbeat import Clocked, Cron, Entry, Interval
from redisbeat.schedule.catch_up import oldest_missed
from redisbeat.schedule.timing import to_ms

T0 = to_ms(datetime(2026, 5, 5, 12, 0, tzinfo=timezone.utc))
MINUTE = 60_000


def entry(schedule: object, **kw: object) -> Entry:
    return Entry("e", "proj.ping", schedule, catch_up="all", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule", [Interval(60), Cron("* * * * *")])
@pytest.mark.parametrize(
    ("late_minutes", "grace", "limit", "expected"),
    [
        (0, None, 100, 0),  # on time: itself
        (10, None, 100, 0),  # ten missed: the oldest
        (10, None, 3, 8),  # the newest three: 8, 9, 10
        (10, 150.0, 100, 8),  # within 2.5 minutes of the claim: 8, 9, 10
        (10, 150.0, 2, 9),  # both bounds: the tighter wins
        (300, None, 100, 201),  # 301 missed, cron bisects for the newest hundred
    ],
)
def test_the_oldest_occurrence_within_the_grace_and_the_limit_comes_first(
    schedule: object, late_minutes: int, grace: float | None, limit: int, expected: int
) -> None:
    e = entry(schedule, grace=grace)
    claimed = T0 + late_minutes * MINUTE + 1_000
    assert oldest_missed(e, T0, claimed, "UTC", limit) == T0 + expected * MINUTE


def test_nothing_within_the_grace_is_none() -> None:
    e = entry(Interval(3600), grace=60.0)
    assert oldest_missed(e, T0, T0 + 30 * MINUTE, "UTC", 100) is None


def test_a_one_off_and_a_clocked_entry_send_their_one_occurrence() -> None:
    at = datetime(2026, 5, 5, 12, 0, tzinfo=timezone.utc)
    assert oldest_missed(entry(Clocked(at)), T0, T0 + 99 * MINUTE, "UTC", 1) == T0
    assert oldest_missed(entry(Interval(60), one_off=True), T0, T0 + 9 * MINUTE, "UTC", 1) == T0


def test_an_end_bounds_the_catch_up() -> None:
    end = datetime(2026, 5, 5, 12, 5, tzinfo=timezone.utc)
    e = entry(Interval(60), end_at=end)
    assert oldest_missed(e, T0, T0 + 60 * MINUTE, "UTC", 3) == T0 + 3 * MINUTE
    assert oldest_missed(e, T0, T0 + 60 * MINUTE, "UTC", 100) == T0
    assert e.next_due_ms(T0 + 5 * MINUTE, T0 + 5 * MINUTE) is None
