"""What a newcomer sees of one real beat: its banner, and ids that agree everywhere."""

from __future__ import annotations

import re

import pytest
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


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"TEST_STORE_URL": "http://127.0.0.1:1/0"}, "redisbeat_redis_url"),
        ({"TEST_SHARDS": "5000"}, "redisbeat_shards"),
    ],
)
def test_a_setting_the_beat_cannot_use_stops_it_in_one_line_without_a_traceback(
    redis_server, prefix, beats_for, env, said
):
    beats = beats_for(redis_server, prefix, **env)
    [beat] = beats.start(1)
    wait_until(lambda: beat.process.poll() is not None, 30, "the beat to stop")
    output = beat.output()
    assert beat.process.returncode == 1, output
    # Said before Celery sets up its logging (its banner makes the scheduler): the bare line.
    [line] = [line for line in output.splitlines() if said in line]
    assert line.startswith("redisbeat: ") and "Traceback" not in output
