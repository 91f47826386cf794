"""The checker's table, as markdown, and its place in the docs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..common import replace_block

if TYPE_CHECKING:
    from .checker import Verdict
    from .scenarios import Outcome

BEGIN = "<!-- chaos-table:begin -->"
END = "<!-- chaos-table:end -->"

HEADER = (
    "| scenario | entries | faults | due | delivered | coalesced | missed "
    "| repeated, same id | repeated, other id | writes lost | earliest (ms) "
    "| late p50 / p99 / max (ms) | ran twice at the worker | host load | rules |"
)


def markdown_table(outcomes: list[Outcome]) -> str:
    rows = [HEADER, "|" + " --- |" * (HEADER.count("|") - 1)]
    for o in outcomes:
        v = o.verdict
        rows.append(
            f"| {v.scenario} | {v.entries:,} | {v.faults} | {v.due:,} | {v.delivered:,} "
            f"| {v.coalesced:,} | {v.missed} | {v.repeated_same_id} | {v.repeated_other_id} "
            f"| {v.writes_lost} "
            f"| {v.early_ms} | {v.late_p50_ms} / {v.late_p99_ms} / {v.late_max_ms} "
            f"| {_worker_column(v)} | {o.load[0]:.1f} to {o.load[1]:.1f}, {o.waited_ms:,} ms "
            f"| {_rules_column(o)} |"
        )
    return "\n".join(rows)


def update_docs(page: Path, table: str, profile: str) -> None:
    """Replace the table between the markers on ``page``."""
    replace_block(page, BEGIN, END, f"_Profile: {profile}._\n\n{table}")


def _worker_column(v: Verdict) -> str:
    """Extra runs at the worker, of how many task ids it ran; — without a worker."""
    return "—" if v.worker_ran is None else f"{v.worker_ran_twice} of {v.worker_ran:,}"


def _rules_column(o: Outcome) -> str:
    if o.violations:
        return "FAIL"
    return "measured" if o.measure_only else "pass"
