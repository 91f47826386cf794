"""The benchmark's outputs: JSON, markdown and a chart per scenario, a summary with ratios
(and the targets, from :mod:`.targets`), and the docs page that shows the latest run."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..common import replace_block
from .scenarios.profiles import DCB, REDBEAT, REDISBEAT, Table
from .targets import kept_up, rows_of, targets

__all__ = ["markdown", "summary", "targets", "versus", "write"]

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
#: Scenarios whose table has a section of its own on the docs page, between these markers
#: (every other table goes between BEGIN and END).
SECTIONS = {
    "cluster": ("<!-- bench-cluster:begin -->", "<!-- bench-cluster:end -->"),
    "delayed": ("<!-- bench-delayed:begin -->", "<!-- bench-delayed:end -->"),
    "countdown": ("<!-- bench-delayed:begin -->", "<!-- bench-delayed:end -->"),
    **dict.fromkeys(
        ("scale", "overload", "backlog"),
        ("<!-- bench-scaling:begin -->", "<!-- bench-scaling:end -->"),
    ),
}


def machine() -> dict[str, Any]:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True, check=False
    ).stdout.split()
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "redis": next((w.split("=", 1)[1] for w in version if w.startswith("v=")), "?"),
    }


def markdown(table: Table) -> str:
    lines = [f"### {table.title}", ""]
    lines.append("| " + " | ".join(table.columns) + " |")
    lines.append("|" + " --- |" * len(table.columns))
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(row.get(c, "")) for c in table.columns) + " |")
    lines += ["", *(f"- {note}" for note in table.notes)]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def chart(table: Table, path: Path) -> bool:
    """A line chart of the table's series; False when it has none."""
    if not table.series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for name, points in table.series.items():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label=name)
    if table.scenario == "capacity":
        top = max(x for points in table.series.values() for x, _ in points)
        ax.plot([100, top], [100, top], linestyle=":", color="grey", label="offered")
    if table.log_axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(table.axes[0])
    ax.set_ylabel(table.axes[1])
    ax.set_title(table.title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _best(rows: list[dict[str, Any]], name: str, key: str, pick: Callable[..., Any]) -> Any:
    values = [r[key] for r in rows if r["scheduler"] == name and isinstance(r[key], (int, float))]
    return pick(values) if values else None


def versus(ours: float, best: float, higher_is_better: bool) -> str:
    """How redisbeat's number compares with the best other: "3.2x better", "even", ..."""
    if ours == best:
        return "even"
    won = ours > best if higher_is_better else ours < best
    verdict = "better" if won else "worse"
    low, high = sorted((ours, best))
    return f"{high / low:,.1f}x {verdict}" if low > 0 else f"{verdict} ({ours:g} vs {best:g})"


def summary(tables: dict[str, Table]) -> Table:
    """The headline numbers side by side, with redisbeat's ratio to the best other."""
    names = [REDISBEAT, REDBEAT, DCB]
    out = Table("summary", "Summary", ["metric", *names, "redisbeat vs best other"])

    def add(metric: str, values: dict[str, Any], higher_is_better: bool) -> None:
        row: dict[str, Any] = {"metric": metric, **{n: values.get(n, "") for n in names}}
        ours = values.get(REDISBEAT)
        others = [v for n, v in values.items() if n != REDISBEAT and isinstance(v, (int, float))]
        if isinstance(ours, (int, float)) and others:
            best = max(others) if higher_is_better else min(others)
            row["redisbeat vs best other"] = versus(ours, best, higher_is_better)
        out.rows.append(row)

    cap = [r for r in rows_of(tables, "capacity") if kept_up(r)]
    add(
        "highest rate kept up with, one beat (fires/s; nothing missed)",
        {n: _best(cap, n, "sustained/s", max) for n in names},
        True,
    )
    at_1000 = [r for r in rows_of(tables, "capacity") if r["offered/s"] == 1000]
    add(
        "late p99 at 1,000 fires/s offered (ms)",
        {n: _best(at_1000, n, "late p99 ms", min) for n in names},
        False,
    )
    at_100 = [r for r in rows_of(tables, "capacity") if r["offered/s"] == 100]
    add(
        "beat CPU s per 1,000 fires at 100 fires/s",
        {n: _best(at_100, n, "beat CPU s / 1000", min) for n in names},
        False,
    )
    add(
        "store round trips per fire at 100 fires/s",
        {n: _best(rows_of(tables, "round-trips"), n, "round trips / fire", min) for n in names},
        False,
    )
    api = [r for r in rows_of(tables, "edit-latency") if r["path"] == "API"]
    add("edit latency p99, API (ms)", {n: _best(api, n, "late p99 ms", min) for n in names}, False)
    add(
        "idle store commands / s / beat",
        {n: _best(rows_of(tables, "idle"), n, "store commands / s / beat", min) for n in names},
        False,
    )
    add(
        "sends resume after kill -9 of a working beat (s)",
        {n: _best(rows_of(tables, "failover"), n, "sends resume after s", min) for n in names},
        False,
    )
    return out


def write(
    tables: list[Table], out: Path, stamp: str, profile: str, docs: Path | None
) -> list[Path]:
    """Write each scenario's JSON, markdown and chart, and the summary; update the docs page."""
    out.mkdir(parents=True, exist_ok=True)
    info = machine()
    by_name = {t.scenario: t for t in tables}
    extra = [summary(by_name), targets(by_name)]
    written: list[Path] = []
    charts: dict[str, Path] = {}
    for table in [*tables, *extra]:
        stem = out / f"{stamp}-{table.scenario}"
        payload = {"profile": profile, "machine": info, **asdict(table)}
        stem.with_suffix(".json").write_text(
            json.dumps(payload, indent=2, default=str, allow_nan=False) + "\n"
        )
        stem.with_suffix(".md").write_text(markdown(table) + "\n")
        written += [stem.with_suffix(".json"), stem.with_suffix(".md")]
        if chart(table, stem.with_suffix(".png")):
            charts[table.scenario] = stem.with_suffix(".png")
            written.append(stem.with_suffix(".png"))
    if docs is not None:
        header = (
            f"_Profile: {profile}; {stamp}; {info['cores']} cores ({info['cpu']}), "
            f"Python {info['python']}, redis-server {info['redis']}._"
        )
        main = [t for t in tables if t.scenario not in SECTIONS]
        # A run of sectioned scenarios alone leaves the latest results as they are.
        update_docs(docs, [*(extra if main else []), *tables], charts, header)
    return written


def update_docs(docs: Path, tables: list[Table], charts: dict[str, Path], header: str) -> None:
    """Each table, under ``header`` and with its chart, in its block of the docs page: the
    latest results, or a scenario's own section (:data:`SECTIONS`), which must be there."""
    images = docs.parent / "img" / "bench"
    images.mkdir(parents=True, exist_ok=True)
    blocks: dict[tuple[str, str], list[str]] = {}
    for table in tables:
        parts = blocks.setdefault(SECTIONS.get(table.scenario, (BEGIN, END)), [header])
        parts.append(markdown(table))
        if table.scenario in charts:
            shutil.copyfile(charts[table.scenario], images / f"{table.scenario}.png")
            parts.append(f"![{table.title}](img/bench/{table.scenario}.png)")
    for (begin, end), parts in blocks.items():
        replace_block(docs, begin, end, "\n\n".join(parts))
