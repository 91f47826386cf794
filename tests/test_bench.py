"""The benchmark harness: its matching of arrivals to occurrences on known histories, then a
toy-sized run of real beats of every scheduler through the whole pipeline to the docs page.

No timing is asserted here: `make bench` measures, the tests only check the harness works.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks.bench.adapters import Spec, available
from benchmarks.bench.harness import Rig
from benchmarks.bench.judging import Arrival, judge
from benchmarks.bench.report import BEGIN, END, SECTIONS, versus, write
from benchmarks.bench.scenarios import SMOKE, run

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
