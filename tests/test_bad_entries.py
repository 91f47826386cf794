"""One misbehaving entry, under real beats: it fails alone and never holds up the others."""

from __future__ import annotations

from collections import Counter

from test_beats import SECOND, broker, expected

from redisbeat import Entry, Interval
from redisbeat.schedule.timing import from_ms
from redisbeat_testkit.messages import read_queue
from redisbeat_testkit.ports import wait_until


def test_an_entry_celery_refuses_is_recorded_failed_then_set_aside_and_never_delays_others(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    beats = beats_for(redis_server, prefix)
    beats.start(2)
    wait_until(lambda: len(store.beats()) == 2, 30, "two beats to register")
    start = store.now_ms() + 1 * SECOND
    good = [Entry(f"good{i}", "proj.ping", Interval(1), start_at=from_ms(start)) for i in range(5)]
    # proj.strict takes x only: Celery refuses these kwargs in the beat, on every send.
    bad = Entry("bad", "proj.strict", Interval(1), kwargs={"y": 1}, start_at=from_ms(start))
    store.upsert_many([*good, bad])
    wait_until(lambda: "bad" in store.quarantined(), 30, "the failing entry to be set aside")
    [after] = store.states(["bad"])
    end = store.now_ms() + 3 * SECOND
    wait_until(lambda: store.now_ms() > end + SECOND, 20, "the window to pass")
    beats.stop_all()

    sent = [s for s in read_queue(broker(redis_server)) if start <= s.due_ms < end]
    assert {s.entry for s in sent} == {e.name for e in good}
    # Every occurrence of every good entry went out once: had the refused sends made the
    # beats back off (for up to 10 s), occurrences due meanwhile would have coalesced.
    counts = Counter((s.entry, s.due_ms) for s in sent)
    want = expected({e.name: (start, SECOND) for e in good}, start, end)
    assert set(counts) == want and max(counts.values()) == 1
    assert store.state("good0").failures == 0

    quarantined = store.quarantined()["bad"]
    assert "TypeError" in quarantined.error and "its last 3 sends failed" in quarantined.error
    assert "bad" not in store and after.last_error and "TypeError" in after.last_error
    logs = "".join(b.output() for b in beats.beats)
    assert logs.count("entry 'bad' could not be sent: TypeError") == 3
    assert logs.count("entry 'bad' was set aside after 3 failed sends in a row") == 1
    assert "handing it back" not in logs

    # Saving the entry again (fixed) releases it.
    store.upsert(Entry("bad", "proj.strict", Interval(3600), kwargs={"x": 1}))
    assert "bad" in store and "bad" not in store.quarantined()
