"""What a newcomer sees of one real beat: its banner, and ids that agree everywhere."""

from __future__ import annotations

import re

from test_beats import broker

from redisbeat import Entry, Interval
from redisbeat_testkit.messages import read_queue
from redisbeat_testkit.ports import wait_until


def test_the_banner_names_the_beat_id_the_beat_uses_and_says_a_worker_runs_the_tasks(
    redis_server, prefix, beats_for, stores
):
    store = stores(redis_server, prefix)
    store.upsert(Entry("often", "proj.ping", Interval(1)))
    beats = beats_for(redis_server, prefix)
    [beat] = beats.start(1)
    queue = broker(redis_server)
    queue.delete("celery")
    wait_until(lambda: len(store.beats()) == 1, 30, "the beat to register")
    [registered] = store.beats()
    sent: list = []
    wait_until(lambda: sent.extend(read_queue(queue)) or sent, 30, "a send")
    beats.stop_all()
    output = beat.output()
    [banner_id] = re.findall(r"\. beat id -> (\S+)", output)
    assert banner_id == registered.id == sent[0].beat
    assert "a Celery worker runs them" in output and "--loglevel=INFO" in output
    assert f"redisbeat: beat {banner_id} stopped and deregistered" in output
