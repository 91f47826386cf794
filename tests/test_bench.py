"""The benchmark harness: its matching of arrivals to occurrences on known histories, then a
toy-sized run of real beats of every scheduler through the whole pipeline to the docs page.

No timing is asserted here: `make bench` measures, the tests only check the harness works.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from benchmarks.bench.adapters import Spec, available
from benchmarks.bench.harness import Rig, loud_lines
from benchmarks.bench.judging import Arrival, judge
from benchmarks.bench.report import BEGIN, END, SECTIONS, versus, write
from benchmarks.bench.scenarios import SMOKE, Table, run
from benchmarks.bench.targets import targets

T0 = 1_800_000_000_000
A = Spec("a", 1, T0)
B = Spec("b", 2, T0 + 500)


def at(spec: Spec, k: int, late: int, header: bool = True) -> Arrival:
    due = spec.anchor_ms + k * spec.every_ms
    return Arrival(due + late, spec.name, f"{spec.name}-{k}", due if header else None)


def test_every_occurrence_on_time_is_delivered_once_with_its_lateness() -> None:
    arrivals = [at(A, k, 3) for k in range(10)] + [at(B, k, 7) for k in range(5)]
    fires = judge([A, B], arrivals, (T0, T0 + 10_000))
    assert (fires.due, fires.delivered, fires.missed, fires.doubles) == (15, 15, 0, 0)
    assert fires.arrived_in_window == 15 and fires.fires_per_s == 1.5
    assert sorted(set(fires.lateness_ms)) == [3, 7]
    assert fires.drift_ratio == 1.0


def test_a_gap_a_double_and_an_off_grid_header_are_each_counted() -> None:
    arrivals = [at(A, k, 2) for k in (0, 1, 3, 4)] + [at(A, 1, 900)]
    arrivals.append(Arrival(T0 + 2_500, "a", "x", T0 + 2_499))  # not on a's grid
    fires = judge([A], arrivals, (T0, T0 + 5_000))
    assert (fires.due, fires.delivered, fires.missed, fires.doubles, fires.off_grid) == (
        5,
        4,
        1,
        1,
        1,
    )
    assert max(fires.lateness_ms) == 2  # a double's lateness is not the occurrence's


def test_without_a_due_header_the_grid_point_before_the_arrival_is_the_due_time() -> None:
    # celery-redbeat and django-celery-beat reschedule from the send: 100 ms drift per run.
    arrivals = [Arrival(T0 + k * 1100 + 5, "a", f"a-{k}", None) for k in range(12)]
    fires = judge([A], arrivals, (T0, T0 + 12_000))
    assert (fires.due, fires.missed) == (12, 1)  # the drift skipped T0 + 10 s
    assert math.isclose(fires.drift_ratio, 1.1)
    assert fires.lateness_ms[:3] == [5, 105, 205]


def test_a_toy_run_of_every_scheduler_writes_tables_charts_and_the_docs(tmp_path: Path) -> None:
    assert available() == {name: None for name in available()}, "make test installs them all"
    schedulers = list(available())
    with Rig(tmp_path / "rig") as rig:
        tables = run(rig, SMOKE, schedulers, ["capacity", "edit-latency"])
    capacity, edits = tables
    assert [r["scheduler"] for r in capacity.rows] == schedulers
    for row in capacity.rows:
        assert row["sustained/s"] > 0 and row["doubles"] == 0 and row["off grid"] == 0
    paths = {(r["scheduler"], r["path"]) for r in edits.rows}
    assert ("redisbeat", "Django admin save") in paths and ("celery-redbeat", "API") in paths
    assert all(r["edits"] == SMOKE.edits[r["scheduler"]] for r in edits.rows)

    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    page.write_text(f"# Benchmarks\n\n{BEGIN}\nSTALE-TABLES\n{END}\n")
    written = write(tables, tmp_path / "results", "2026-01-01", "smoke", page)
    names = {p.name for p in written}
    assert {"2026-01-01-capacity.json", "2026-01-01-capacity.png"} <= names
    assert {"2026-01-01-summary.md", "2026-01-01-targets.md"} <= names
    saved = json.loads((tmp_path / "results" / "2026-01-01-capacity.json").read_text())
    assert saved["rows"] == capacity.rows and saved["machine"]["cores"]
    text = page.read_text()
    assert "STALE-TABLES" not in text and "### Summary" in text
    assert "(img/bench/capacity.png)" in text
    assert (page.parent / "img" / "bench" / "capacity.png").read_bytes()[:4] == b"\x89PNG"


def test_a_toy_cluster_run_measures_redisbeat_on_one_redis_and_on_a_cluster_into_its_section(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        (table,) = run(rig, SMOKE, ["redisbeat"], ["cluster"])
    assert [(r["store"], r["shards"], r["beats"]) for r in table.rows] == [
        (store, shards, beats)
        for store in ("one Redis", "cluster, 3 masters")
        for shards in SMOKE.cluster_shards
        for beats in SMOKE.cluster_beats
    ]
    ceilings = [n for n in table.notes if n.startswith("Projected ceiling")]
    assert len(ceilings) == 2 * len(SMOKE.cluster_shards)
    assert "x 3 master(s)" in ceilings[-1]
    for row in table.rows:
        assert row["sustained/s"] > 0 and row["doubles"] == 0 and row["off grid"] == 0
        assert row["Redis cmds / fire"] > 0 and row["Redis CPU ms / 1000 fires"] > 0
    assert not list((tmp_path / "rig").glob("redis-cluster-*")), "the cluster was stopped"

    begin, end = SECTIONS["cluster"]
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    page.write_text(
        f"# Benchmarks\n\n{BEGIN}\nSTALE-TABLES\n{END}\n\n"
        f"## Cluster\n\n{begin}\nSTALE-TABLES\n{end}\n"
    )
    write([table], tmp_path / "results", "2026-01-01", "smoke", page)
    text = page.read_text()
    latest, section = text.split("## Cluster")
    # A run of the cluster scenario alone leaves the latest results of the others as they are.
    assert "STALE-TABLES" in latest and "Redis Cluster" not in latest
    assert "STALE-TABLES" not in section
    assert "### Redis Cluster and shards" in section and "(img/bench/cluster.png)" in section


def test_the_summary_says_how_redisbeat_compares_whichever_way_it_goes() -> None:
    assert versus(5000, 100, higher_is_better=True) == "50.0x better"
    assert versus(4, 4703, higher_is_better=False) == "1,175.8x better"
    assert versus(0.42, 0.02, higher_is_better=False) == "21.0x worse"
    assert versus(0, 27.04, higher_is_better=False) == "better (0 vs 27.04)"
    assert versus(2, 2, higher_is_better=False) == "even"


def test_toy_round_trip_and_cold_start_runs_count_claims_and_time_from_the_first_send(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        cold, table = run(rig, SMOKE, ["redisbeat"], ["cold-start", "round-trips"])
    (started,) = cold.rows
    assert started["steady after s"] == 0 and started["sustained/s"] > 0
    assert started["missed"] == 0 and started["doubles"] == 0
    (row,) = table.rows
    assert row["fires"] > 0 and row["claims"] > 0
    # A claim batch and its finish: two requests (a claim finding nothing due: one);
    # heartbeats add a few in all.
    assert 1 <= row["round trips / claim batch"] <= 3


def test_a_toy_delayed_run_sends_every_due_task_once_and_measures_celerys_countdown(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        delayed, countdown = run(rig, SMOKE, ["redisbeat"], ["delayed", "countdown"])
    due = SMOKE.delayed_rate * (SMOKE.window + 8)  # every due task is loaded at the start
    assert [r["pending at start"] for r in delayed.rows] == [
        max(n, due) for n in SMOKE.delayed_pending
    ]
    for row in delayed.rows:
        assert row["sustained/s"] > 0 and row["missed"] == 0 and row["doubles"] == 0
        assert row["Redis bytes / pending"] > row["of which arguments"] > 0
        assert row["pending(owner) p99 ms"] > 0 and row["beat RSS MiB"] > 0
    assert any(n.startswith("Target, p99 at 3,000 pending") for n in delayed.notes), delayed.notes
    (row,) = countdown.rows
    assert row["pending"] == 200 and row["worker RSS MiB"] > 0
    assert row["broker bytes / pending"] > 0
    assert row["worker restart"].startswith("all 200 handed back and taken again")
    assert row["kill -9"].startswith("200 held by the dead worker, 0 back in the queue")

    begin, end = SECTIONS["delayed"]
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    page.write_text(f"{BEGIN}\nLATEST\n{END}\n\n## Section\n\n{begin}\nSTALE\n{end}\n")
    write([delayed, countdown], tmp_path / "results", "2026-01-01", "smoke", page)
    latest, section = page.read_text().split("## Section")
    assert "LATEST" in latest and "STALE" not in section
    assert "### Delayed tasks" in section and "### Celery's countdown" in section


def test_a_toy_scale_run_measures_each_beat_count_on_one_redis_and_on_a_cluster(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        (table,) = run(rig, SMOKE, ["redisbeat"], ["scale"])
    keep_up, *rows = table.rows
    assert (keep_up["run"], keep_up["beats"], keep_up["every s"]) == ("keep-up", 1, 1)
    assert keep_up["offered/s"] == SMOKE.scale_keep_up and keep_up["sustained/s"] > 0
    assert [(r["store"], r["shards"], r["every s"], r["beats"]) for r in rows] == [
        (store, shards, every, beats)
        for store, shards in (("one Redis", 1), ("cluster, 3 masters", 12))
        for every in SMOKE.scale_periods
        for beats in SMOKE.scale_beats
    ]
    for row in table.rows:
        assert row["sustained/s"] > 0 and row["doubles"] == 0
        assert row["beat CPU ms / message"] > 0 and row["Redis CPU µs / fire"] > 0
        assert row["bottleneck"] in {"kept up", "redis", "beats", "machine", "—"}
    for row in rows:
        assert row["projected/s"] > 0 and row["vs one beat"] > 0
    projected = [n for n in table.notes if n.startswith("Projected")]
    assert len(projected) == 2 and "x 3 master(s)" in projected[-1]
    assert not list((tmp_path / "rig").glob("redis-cluster-*")), "the cluster was stopped"

    begin, end = SECTIONS["scale"]
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    page.write_text(f"{BEGIN}\nLATEST\n{END}\n\n## Section\n\n{begin}\nSTALE\n{end}\n")
    write([table], tmp_path / "results", "2026-01-01", "smoke", page)
    latest, section = page.read_text().split("## Section")
    assert "LATEST" in latest and "STALE" not in section
    assert "### Scale:" in section and "(img/bench/scale.png)" in section


def test_a_toy_overload_run_compares_one_beat_far_behind_at_its_limit_and_keeping_up(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        (table,) = run(rig, SMOKE, ["redisbeat"], ["overload"])
    far, limit, keeping = table.rows
    assert [far["run"], limit["run"], keeping["run"]] == [
        "far behind",
        "at its limit",
        "keeping up",
    ]
    assert far["offered/s"] == 4 * max(SMOKE.rates["redisbeat"])
    assert keeping["offered/s"] == max(far["sustained/s"], limit["sustained/s"]) // 2
    assert keeping["vs keeping up"] == 1 and max(r["vs peak"] for r in table.rows) == 1
    for row in table.rows:
        assert row["sustained/s"] > 0 and row["doubles"] == 0
        assert row["beat CPU ms / message"] > 0 and row["log lines"] >= 0


def test_a_toy_backlog_sends_each_delayed_task_once_and_each_periodic_entry_once_for_all_missed(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        (table,) = run(rig, SMOKE, ["redisbeat"], ["backlog"])
    (row,) = table.rows
    assert (row["delayed"], row["periodic"]) == (SMOKE.backlog_delayed, SMOKE.backlog_periodic)
    assert (row["delayed missed"], row["delayed doubled"]) == (0, 0)
    assert row["periodic coalesced"] == SMOKE.backlog_periodic
    assert (row["periodic sent more than once"], row["periodic unsent"]) == (0, 0)
    assert row["drain s"] > 0 and row["drain/s"] > 0 and row["peak/s"] > 0
    assert row["beat peak RSS MiB"] > 0 and row["log lines"] >= 0
    # The chart: one point per whole second of the drain, its best second the peak.
    seconds = [x for x, _ in table.series["drain"]]
    assert seconds == [float(s) for s in range(len(seconds))]
    assert max((y for _, y in table.series["drain"]), default=row["peak/s"]) == row["peak/s"]


def test_a_toy_instrumented_run_measures_the_cold_start_without_and_with_a_traceparent_receiver(
    tmp_path: Path,
) -> None:
    with Rig(tmp_path / "rig") as rig:
        (table,) = run(rig, SMOKE, ["redisbeat"], ["instrumented"])
    bare, traced = table.rows
    assert (bare["receiver"], bare["with traceparent"]) == ("none", 0)
    assert traced["receiver"] == "traceparent" and traced["with traceparent"] > 0
    assert bare["vs none"] == bare["CPU vs none"] == 1
    for row in table.rows:
        assert row["sustained/s"] > 0 and row["missed"] == 0 and row["doubles"] == 0


def test_only_log_records_at_warning_and_above_count_as_loud_lines(tmp_path: Path) -> None:
    log = tmp_path / "beat.log"
    log.write_bytes(
        b"celery beat v5.7.0 (collider) is starting.\n"
        b"    . maxinterval -> 5.00 seconds (5.0s)\n"
        b"[2026-01-01 12:00:00,000: INFO/MainProcess] beat: Starting...\n"
        b"[2026-01-01 12:00:01,000: WARNING/MainProcess] redisbeat: Redis is unavailable\n"
        b"[2026-01-01 12:00:02,000: ERROR/MainProcess] redisbeat: could not send\n"
        b"Traceback (most recent call last):\n"
        b"ConnectionError: refused\n"
        b"[2026-01-01 12:00:03,000: INFO/MainProcess] redisbeat: summary\n"
    )
    assert loud_lines(log) == 4
    second = log.read_bytes().index(b"[2026-01-01 12:00:02")
    assert loud_lines(log, 0, second) == 1 and loud_lines(log, second) == 3


def test_scaling_is_judged_up_to_the_cores_and_a_saturated_redis_excuses_a_beat_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("benchmarks.bench.targets.os.cpu_count", lambda: 4)

    def row(beats: int, every: int, vs_one: float, bottleneck: str) -> dict[str, object]:
        return {
            "run": "overload",
            "store": "one Redis",
            "every s": every,
            "beats": beats,
            "vs one beat": vs_one,
            "bottleneck": bottleneck,
            "Redis CPU µs / fire": 9 if beats == 1 else 12,
            "beat CPU ms / message": 0.1 if beats == 1 else 0.12,
            "sustained/s": 1_000 * vs_one,
        }

    rows = [row(1, 1, 1, "beats"), row(2, 1, 1.1, "redis"), row(4, 1, 3.3, "machine")]
    rows.append(row(8, 1, 2.0, "machine"))  # more beats than cores: not judged
    # One beat kept up: the offer, not the beats, set the ratio.
    rows += [row(1, 10, 1, "kept up"), row(2, 10, 1.2, "machine")]
    scaling = "N beats >= 0.8 x N x one beat until Redis CPU saturates (N <= 4 cores)"
    cost = "Redis CPU per fire <= 15 µs at the beats' limit (the most of any scale row behind)"

    def verdicts(table_rows: list[dict[str, object]]) -> dict[str, str]:
        table = Table("scale", "", [], table_rows)
        return {r["target"]: r["met"] for r in targets({"scale": table}).rows}

    per_message = (
        "N beats: beat CPU per message <= 1.25 x one beat's, so N beats with a core each "
        "sustain >= 0.8 x N (N <= 4 cores)"
    )
    met = verdicts(rows)
    assert (met[scaling], met[cost], met[per_message]) == ("yes", "yes", "yes")
    slow = [row(1, 60, 1, "beats"), row(2, 60, 1.5, "machine")]
    assert verdicts([*rows, *slow])[scaling] == "NO"
    dearer = [row(1, 60, 1, "beats"), {**row(2, 60, 1.7, "machine"), "beat CPU ms / message": 0.13}]
    assert verdicts([*rows, *dearer])[per_message] == "NO"
    # Eight beats on four cores cost more each: not judged.
    crowded = [{**r, "beat CPU ms / message": 0.5} if r["beats"] == 8 else r for r in rows]
    assert verdicts(crowded)[per_message] == "yes"


@pytest.mark.parametrize(
    ("cores", "redis", "cluster", "met"),
    [
        (16, 30_000, 60_000, "yes"),
        (16, 28_020, 61_000, "NO"),
        (32, 31_000, 37_420, "NO"),
        (2, 30_000, 60_000, "n/a"),
    ],
)
def test_eight_beats_are_held_to_the_rates_of_a_16_core_machine_there_only(
    monkeypatch: pytest.MonkeyPatch, cores: int, redis: int, cluster: int, met: str
) -> None:
    monkeypatch.setattr("benchmarks.bench.targets.os.cpu_count", lambda: cores)
    rows = [
        {**SCALE_ROW, "store": store, "beats": beats, "sustained/s": rate}
        for store, top in (("one Redis", redis), ("cluster, 3 masters", cluster))
        for beats, rate in ((1, top // 6), (8, top))
    ]
    table = targets({"scale": Table("scale", "", [], rows)})
    [row] = [r for r in table.rows if r["target"].startswith("8 beats on 16 cores")]
    assert row["met"] == met
    assert f"one Redis: {redis:,}/s; cluster, 3 masters: {cluster:,}/s" in row["measured"]
    assert ("not judged" in row["measured"]) == (cores < 16)


#: A scale row behind schedule, the fields the targets read.
SCALE_ROW = {
    "run": "overload",
    "every s": 1,
    "vs one beat": 1,
    "bottleneck": "beats",
    "Redis CPU µs / fire": 12,
    "beat CPU ms / message": 0.1,
}


def test_the_idle_and_failover_targets_are_the_issues() -> None:
    idle = Table("idle", "", [], [{"scheduler": "redisbeat", "store commands / s / beat": 0.4}])
    killed = {"scheduler": "redisbeat", "sends resume after s": 0.01, "late max after kill s": 5.2}
    table = targets({"idle": idle, "failover": Table("failover", "", [], [killed])})
    met = {r["target"]: r["met"] for r in table.rows}
    assert met["idle <= 0.1 commands/s per beat"] == "NO"
    assert met["failover after kill -9 <= 5 s"] == "NO"
    assert met["backlog: every delayed task sent exactly once"] == "n/a"


def test_the_scripts_profile_measures_the_claim_and_the_finish_of_full_batches(capsys) -> None:
    from benchmarks import profile_scripts

    assert profile_scripts.main(["--entries", "300", "--batch", "20", "--batches", "10"]) == 0
    out = capsys.readouterr().out
    assert "200 fires in batches of 20, 300 entries stored" in out
    for phase in profile_scripts.PHASES:
        assert re.search(rf"^{phase} +Redis CPU +[\d.]+ µs per fire$", out, re.M), out


@pytest.mark.parametrize(
    ("late", "said"),
    [
        (["--missed", "3"], "each late with 3 missed"),
        (["--skipped"], "each skipped for being late"),
    ],
)
def test_the_scripts_profile_measures_late_sends_too(
    capsys: pytest.CaptureFixture[str], late: list[str], said: str
) -> None:
    from benchmarks import profile_scripts

    argv = ["--entries", "300", "--batch", "20", "--batches", "10", *late]
    assert profile_scripts.main(argv) == 0
    out = capsys.readouterr().out
    assert f"200 fires in batches of 20, 300 entries stored, {said}" in out
    assert re.search(r"^finish +Redis CPU +[\d.]+ µs per fire$", out, re.M), out


def test_the_scripts_profile_refuses_batches_it_could_not_fill() -> None:
    from benchmarks import profile_scripts

    with pytest.raises(SystemExit, match="every claim is a full batch"):
        profile_scripts.main(["--entries", "100", "--batch", "20", "--batches", "10"])
