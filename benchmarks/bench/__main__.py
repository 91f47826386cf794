"""`python -m benchmarks.bench`: redisbeat, celery-redbeat and django-celery-beat, measured in
turn on the same machine, workload and run.

    python -m benchmarks.bench                         # the quick profile (about 30 minutes)
    python -m benchmarks.bench --profile full          # every rate, size and beat count
    python -m benchmarks.bench -s capacity -S redisbeat

Writes ``build/bench-results/<date>-<scenario>.{json,md,png}`` and, with ``--update-docs``,
the tables and charts in docs/benchmarks.md. The incumbents come with the ``bench`` extra
(``pip install -e '.[bench]'``); a scheduler that is not installed is left out, with why.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from ..common import RESULTS, ROOT, unwind_on_sigterm
from .adapters import ADAPTERS, available
from .harness import Rig
from .report import markdown, summary, targets, write
from .scenarios import PROFILES, SCENARIOS, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("-s", "--scenario", action="append", choices=SCENARIOS, default=[])
    parser.add_argument("-S", "--scheduler", action="append", choices=list(ADAPTERS), default=[])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    unwind_on_sigterm()
    schedulers = []
    for name, missing in available().items():
        if args.scheduler and name not in args.scheduler:
            continue
        if missing:
            print(f"{name}: left out ({missing})", flush=True)
        else:
            schedulers.append(name)
    profile = PROFILES[args.profile]
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="redisbeat-bench-") as tmp, Rig(Path(tmp)) as rig:
        tables = run(rig, profile, schedulers, args.scenario)
    by_name = {t.scenario: t for t in tables}
    for table in [*tables, summary(by_name), targets(by_name)]:
        print()
        print(markdown(table))
    docs = ROOT / "docs" / "benchmarks.md" if args.update_docs else None
    written = write(tables, args.out, date.today().isoformat(), profile.name, docs)
    print(f"\n{len(written)} files in {args.out}; {time.monotonic() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
