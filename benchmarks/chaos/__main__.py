"""`python -m benchmarks.chaos`: run the fault-injection scenarios and print the checker's table.

    python -m benchmarks.chaos                       # the quick profile, every scenario
    python -m benchmarks.chaos --profile full        # thousands of entries, 5 beats, 60 s each
    python -m benchmarks.chaos -s "kill -9 beat" -s "redis restart"

Writes ``build/bench-results/<date>-chaos-<profile>.json`` and ``.md`` and, with
``--update-docs``, the table in docs/guarantees.md. Exits 1 if any rule is broken.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
from datetime import date
from pathlib import Path

from ..common import RESULTS, ROOT, unwind_on_sigterm
from .report import markdown_table, update_docs
from .scenarios import PROFILES, SCENARIOS, Outcome, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument(
        "-s", "--scenario", action="append", choices=sorted(SCENARIOS), help="repeatable"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    unwind_on_sigterm()
    profile = PROFILES[args.profile]
    names = args.scenario or list(SCENARIOS)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="redisbeat-chaos-") as tmp:
        for i, name in enumerate(names):
            print(
                f"[{i + 1}/{len(names)}] {name}: {profile.entries} entries, "
                f"{profile.beats} beats, {profile.seconds:.0f} s",
                flush=True,
            )
            outcome = run(SCENARIOS[name], profile, Path(tmp) / f"s{i}", seed=args.seed)
            outcomes.append(outcome)
            for problem in outcome.violations:
                print(f"    FAIL: {problem}", flush=True)
    table = markdown_table(outcomes)
    print()
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{date.today().isoformat()}-chaos-{profile.name}"
    stem.with_suffix(".md").write_text(table + "\n")
    stem.with_suffix(".json").write_text(
        json.dumps(
            {
                "profile": profile.__dict__,
                "machine": {
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                    "cores": os.cpu_count(),
                },
                "scenarios": [
                    {
                        **o.verdict.as_dict(),
                        "faults_injected": o.faults,
                        "edits": o.edits,
                        "load_1min": list(o.load),
                        "run_queue_wait_ms": o.waited_ms,
                        "violations": o.violations,
                    }
                    for o in outcomes
                ],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {stem}.md and .json")
    if args.update_docs:
        update_docs(ROOT / "docs" / "guarantees.md", table, profile.name)
    return 1 if any(o.violations for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
