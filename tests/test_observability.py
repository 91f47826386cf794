"""What a beat tells operators: its signals (in-process, against real Redis) and the
Prometheus metrics a real ``celery beat`` serves on ``redisbeat_metrics_port``."""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from test_dispatcher import Recorder, Unbuffered, dispatcher, every, make_due

from redisbeat import ScheduleStore, occurrence_id, signals
from redisbeat.beat.activity import Activity
from redisbeat.beat.loop import Dispatcher
from redisbeat.beat.metrics import Metrics
from redisbeat.beat.observe import Observer
from redisbeat.config import Config
from redisbeat.errors import ConfigurationError, MessageRefused
from redisbeat_testkit.ports import free_port, wait_until
from redisbeat_testkit.redis_server import RedisServer


@pytest.fixture
def heard() -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Every signal received during the test, by signal name (receivers disconnected after)."""
    found: dict[str, list[dict[str, Any]]] = {}
    receivers = []
    for name in signals.__all__:
        signal = getattr(signals, name)

        def receive(sender: str, _name: str = name, **kwargs: Any) -> None:
            kwargs.pop("signal", None)
            found.setdefault(_name, []).append({"sender": sender, **kwargs})

        signal.connect(receive, weak=False)
        receivers.append((signal, receive))
    yield found
    for signal, receive in receivers:
        signal.disconnect(receive)


def test_a_send_signals_entry_sent_with_its_occurrence(store, client, heard):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 5)
    d = dispatcher(store, Recorder())
    d.tick()
    [sent] = heard["entry_sent"]
    assert sent["sender"] == d.beat_id and sent["name"] == "e" and sent["task"] == "proj.ping"
    assert sent["task_id"] == occurrence_id(store.keys.prefix, "e", due)
    assert sent["due"].timestamp() * 1000 == due and sent["late"] >= 0.005
    assert sent["recovered"] is False and "entry_recovered" not in heard


def test_a_claim_of_a_dead_beat_signals_entry_recovered(store, client, heard):
    store.upsert(every("e"))
    due = make_due(client, store, "e", 5)
    dead = store.claim("dead-beat", 300, 10)
    d = dispatcher(store, Recorder())
    wait_until(lambda: store.now_ms() > dead.lease_until_ms, 5, "the lease to expire")
    d.tick()
    [recovered] = heard["entry_recovered"]
    assert recovered["name"] == "e" and recovered["due"].timestamp() * 1000 == due
    assert heard["entry_sent"][0]["recovered"] is True


def test_a_corrupt_definition_and_repeated_failures_signal_entry_quarantined(store, client, heard):
    client.hset(store.keys.entries, "bad", '{"name": "bad"')
    make_due(client, store, "bad", 5)
    d = dispatcher(store, Recorder(), quarantine_after=1)
    d.tick()
    store.upsert(every("refused"))
    make_due(client, store, "refused", 5)

    def refuse(entry: Any, task_id: str, due_ms: int, now_ms: int) -> None:
        raise MessageRefused(entry.name, "takes 1 positional argument")

    dispatcher(store, refuse, quarantine_after=1).tick()
    quarantined = {q["name"]: q["error"] for q in heard["entry_quarantined"]}
    assert "not valid JSON" in quarantined["bad"]
    assert "takes 1 positional argument" in quarantined["refused"]
    assert set(store.quarantined()) == {"bad", "refused"}


def test_beats_joining_and_leaving_are_signalled_to_the_beats_that_see_them(
    redis_server: RedisServer, prefix: str, heard
):
    def a_store() -> ScheduleStore:
        client = redis.Redis.from_url(redis_server.url(), decode_responses=True)
        return ScheduleStore(client, prefix=prefix)

    first, second = dispatcher(a_store(), Recorder()), dispatcher(a_store(), Recorder())
    first.tick()
    second.tick()
    first.heartbeats.next_at = 0.0  # its next tick heartbeats again
    first.tick()
    joined = [(h["sender"], h["beat"].id) for h in heard["beat_joined"]]
    assert (first.beat_id, first.beat_id) in joined
    assert (first.beat_id, second.beat_id) in joined
    assert (second.beat_id, first.beat_id) in joined
    second.close()
    first.heartbeats.next_at = 0.0
    first.tick()
    left = [(h["sender"], h["beat_id"]) for h in heard["beat_left"]]
    assert left == [(second.beat_id, second.beat_id), (first.beat_id, second.beat_id)]
    first.close()


def test_a_receiver_garbage_collected_leaves_nobody_watching(store):
    # A weakly connected receiver stays in Signal.receivers, dead, until the signal is next
    # sent: it must not keep the beat reading the beats alive every 15 s.
    def joined(sender: str, **kwargs: Any) -> None:
        pass

    d = dispatcher(store, Recorder(), heartbeat_seconds=100)
    assert not d.observer.watching
    signals.beat_joined.connect(joined)
    assert d.observer.watching
    del joined
    assert signals.beat_joined.receivers and not d.observer.watching
    wait = d.tick()
    assert 99 < wait <= 100


def test_a_receiver_that_raises_does_not_stop_the_beat(store, client, caplog):
    def broken(sender: str, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    signals.entry_sent.connect(broken, weak=False)
    try:
        store.upsert(every("e"))
        due = make_due(client, store, "e", 5)
        rec = Recorder()
        dispatcher(store, rec).tick()
        assert [s[1] for s in rec.sent] == [due]
        assert store.state("e").total_run_count == 1
    finally:
        signals.entry_sent.disconnect(broken)


# -- metrics ----------------------------------------------------------------------------------


def scrape(port: int) -> dict[str, float]:
    """Every sample on /metrics: ``name{labels}`` -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    samples = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            samples[match[1]] = float(match[2])
    return samples


def test_a_beat_serves_its_metrics_with_few_series_for_many_entries(
    redis_server, prefix, store, beats_for
):
    store.upsert_many([every(f"e{i}", 0.5) for i in range(200)])
    port = free_port()
    beats = beats_for(redis_server, prefix, TEST_METRICS_PORT=str(port), TEST_HEARTBEAT="0.5")
    beats.start(1)

    def sent_enough() -> dict[str, float] | None:
        try:
            samples = scrape(port)
        except OSError:
            return None
        sent = samples.get('redisbeat_sent_total{source="api",task="proj.ping"}', 0)
        return samples if sent >= 600 and samples.get("redisbeat_beats_alive") else None

    samples = wait_until(sent_enough, 60, "600 sends on /metrics")
    assert samples["redisbeat_entries"] == len(store)
    assert samples["redisbeat_beats_alive"] == 1 and samples["redisbeat_quarantined"] == 0
    assert samples["redisbeat_overdue"] == 0
    assert samples["redisbeat_send_lateness_seconds_count"] >= 600
    assert samples["redisbeat_claim_batch_size_count"] >= 1
    assert samples["redisbeat_recovered_total"] == 0
    assert samples["redisbeat_expired_messages_total"] == 0
    # No per-entry label: 200 entries of one task make one series.
    assert len([k for k in samples if k.startswith("redisbeat_sent_total")]) == 1


@pytest.mark.parametrize("port", [-1, 70000, "9100", True])
def test_a_metrics_port_that_is_not_a_port_is_refused_naming_the_setting(port: Any):
    with pytest.raises(ConfigurationError, match="redisbeat_metrics_port"):
        Config(redis_url="redis://localhost", metrics_port=port)


def test_messages_sent_expired_are_counted_in_the_metrics_and_the_summary_line(caplog):
    port = free_port()
    metrics = Metrics(port, "127.0.0.1")
    observer = Observer("b", Activity(period=0))
    observer.serve(metrics)
    try:
        observer.expired(3)
        observer.expired(2)
        assert scrape(port)["redisbeat_expired_messages_total"] == 5
    finally:
        metrics.close()
    with caplog.at_level(logging.INFO, logger="redisbeat"):
        summary = observer.activity.report()
    assert summary is not None and summary["expired"] == 5
    [line] = [r for r in caplog.records if "in the last" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert "5 message(s) sent after their expiry had passed" in line.getMessage()


def test_the_dashboard_and_alert_rules_use_only_metrics_a_beat_serves():
    metrics = Metrics(free_port(), "127.0.0.1")
    try:
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}
        served = {
            family.name + suffix
            for family in metrics.registry.collect()
            for suffix in suffixes.get(family.type, [""])
        }
    finally:
        metrics.close()
    examples = Path(__file__).parent.parent / "docs" / "examples"
    dashboard = json.loads((examples / "grafana-dashboard.json").read_text())
    rules = yaml.safe_load((examples / "alerts.yml").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert len(exprs) >= 10
    for expr in exprs:
        for name in re.findall(r"\bredisbeat_\w+", expr):
            assert name in served, (name, expr)


def test_several_beats_on_one_host_serve_their_metrics_on_one_port(
    redis_server, prefix, store, beats_for, tmp_path
):
    # prometheus-client's multiprocess mode: both beats count into one directory; the one
    # that holds the port serves both, and when it stops the other takes the port over.
    store.upsert_many([every(f"e{i}", 0.5) for i in range(100)])
    port, shared = free_port(), tmp_path / "prometheus"
    shared.mkdir()
    beats = beats_for(
        redis_server,
        prefix,
        TEST_METRICS_PORT=str(port),
        TEST_HEARTBEAT="0.5",
        PROMETHEUS_MULTIPROC_DIR=str(shared),
    )
    first, second = beats.start(2)
    key = 'redisbeat_sent_total{source="api",task="proj.ping"}'

    def sends_of_both() -> dict[str, float] | None:
        try:
            samples = scrape(port)
        except OSError:
            return None
        outputs = first.output() + second.output()
        both = outputs.count("Scheduler: Sending due task") >= 400
        return samples if both and samples.get(key, 0) >= 400 else None

    samples = wait_until(sends_of_both, 60, "both beats' sends on one port")
    assert samples["redisbeat_entries"] == len(store)
    serving, other = (first, second) if "serving metrics" in first.output() else (second, first)
    assert "another process serves this host's beats' metrics" in other.output()
    counted = samples[key]
    serving.process.terminate()
    serving.process.wait(30)

    def taken_over() -> dict[str, float] | None:
        try:
            now = scrape(port)
        except OSError:
            return None
        return now if now.get(key, 0) > counted else None

    wait_until(taken_over, 60, "the other beat to serve the metrics of both")
    # Logged once its server is up, which a scrape can reach a moment before.
    wait_until(lambda: "serving metrics" in other.output(), 10, "the takeover's log line")


def test_messages_the_broker_did_not_take_are_counted_as_handed_back_not_sent(store, client, heard):
    """Buffered, then refused by the broker at the flush: the summary, the metrics and the
    signals count hand-backs (and no missed occurrences: the next claim counts those)."""
    store.upsert_many([every(n, 1) for n in ("a", "b", "c")])
    for n in ("a", "b", "c"):
        make_due(client, store, n, 3_500)  # three missed before the one it sends
    buffered: list[str] = []
    broker_down = True

    def flush() -> dict[str, str | None]:
        failed = {task_id: None for task_id in buffered} if broker_down else {}
        buffered.clear()
        return failed

    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
    d = Dispatcher(store, config, Unbuffered(lambda e, t, due, now: buffered.append(t), flush))
    assert d.tick() > 0  # backs off
    d.activity.period = 0
    summary = d.activity.report()
    assert summary is not None
    assert (summary["sent"], summary["handed_back"], summary["missed"]) == (0, 3, 0)
    assert "entry_sent" not in heard and "occurrence_missed" not in heard
    broker_down = False
    d.tick()
    assert sorted(s["name"] for s in heard["entry_sent"]) == ["a", "b", "c"]
    assert sorted((m["name"], m["count"]) for m in heard["occurrence_missed"]) == [
        ("a", 3),
        ("b", 3),
        ("c", 3),
    ]
